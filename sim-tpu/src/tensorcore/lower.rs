//! Lowering: an op becomes the kernels (fusions) the XLA TPU compiler emits for it, each described by the work it
//! does on padded tiles: HBM bytes in and out, VPU element blocks, MXU passes.

use super::chip::ChipModel;
use super::padding::{tpu_padded, PaddedArray};
use super::spec::{Checked, ConvPadding, Dtype, EwKind, ReduceKind, TransposeKind};

/// Elements in one f32 vreg (8 sublanes x 128 lanes): the unit VPU work is counted in.
pub const VREG_ELEMENTS: u64 = 1024;

/// VPU op classes, each with its own fitted rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VpuClass {
    /// Transcendental/one-input elementwise (exp, tanh, convert).
    Unary,
    /// Two-input elementwise (add, mul).
    Binary,
    /// Reduction over one dim.
    Reduce,
    /// Rank-2 transpose through the transpose unit.
    Transpose,
    /// Layout-changing copy (NCHW <-> NHWC): the compiler picks entry layouts that make most of it a copy.
    Relayout,
    /// Concatenation (copies into one buffer).
    Concat,
    /// Matrix-vector product on the VPU (M = 1): streams the weights once.
    Matvec,
    /// Outer product on the VPU (K = 1): one multiply per output element.
    Outer,
    /// A copy that keeps the lane dim and moves only sublane rows (a convolution's (H, W, N, C) result into the
    /// channel-minor (N, H, W, C) entry layout).
    RowRelayout,
    /// Relayout of a convolution input with very few channels into the lane-dense layout the MXU kernel reads.
    ConvInputCopy,
    /// Relayout of a wider convolution input whose entry layout is not channel-minor into (H, W, N, C).
    ConvInputRelayout,
}

/// The work of one kernel.
#[derive(Clone, Debug, PartialEq)]
pub enum Work {
    /// A VPU kernel.
    Vpu {
        /// Rate class.
        class: VpuClass,
        /// Padded elements of the governing array / 1024.
        blocks: f64,
        /// Bytes per element of the governing array (16-bit factors, matvec weight bytes).
        elem_bytes: u64,
    },
    /// An MXU kernel (convolution fusion) with its epilogue on the VPU: `batch` products of `[m, KH*KW*k] @
    /// [KH*KW*k, n]` (a convolution contracts over KH x KW kernel positions of `k` input channels each).
    Mxu(MxuWork),
}

/// The shape of an MXU kernel's work; the window search in [`super::cost`] tiles it.
#[derive(Clone, Debug, PartialEq)]
pub struct MxuWork {
    /// Independent products (batch dim).
    pub batch: u64,
    /// Output rows.
    pub m: u64,
    /// Contracting elements per tap.
    pub k: u64,
    /// Output columns.
    pub n: u64,
    /// Kernel rows contracted (1 for a matmul, KH for a convolution).
    pub taps_h: u64,
    /// Kernel columns contracted (1 for a matmul, KW for a convolution); with NHWC the KW x C values of one
    /// kernel row are contiguous, so narrow channels pack into one MXU contraction.
    pub taps_w: u64,
    /// Operand element type.
    pub dtype: Dtype,
    /// Bits of the result element.
    pub out_bits: u64,
    /// Whether this is a convolution (input windows with halos).
    pub conv: bool,
}

/// How an MXU kernel's stationary operand (the one whose blocks are loaded into the MXU: the weight, or the
/// activation of a product computed transposed) is laid out. The default is contracting-dim major, as the
/// compiler lays out a `[K, N]` weight whose N fills the lanes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MxuLayout {
    /// Contracting dim minor (`[K, N]{0,1}`, or `[M, K]{1,0}` read as the stationary operand of a transposed
    /// product): each block goes through the transpose unit before it enters the MXU.
    pub stationary_k_minor: bool,
}

/// One kernel of a lowered op.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    /// What the compiler calls it (`convolution fusion`, `add`, `reduce`, `copy`, ...).
    pub name: &'static str,
    /// Its work.
    pub work: Work,
    /// Padded HBM bytes read.
    pub in_bytes: u64,
    /// Padded HBM bytes written.
    pub out_bytes: u64,
    /// Logical (unpadded) bytes read + written.
    pub unpadded_bytes: u64,
}

fn blocks(a: &PaddedArray) -> f64 {
    a.elements() as f64 / VREG_ELEMENTS as f64
}

fn logical_bytes(dtype: Dtype, dims: &[u64]) -> u64 {
    (dims.iter().product::<u64>() * dtype.bits()).div_ceil(8)
}

/// Lowers a validated op for `chip`; also returns the op's nominal FLOPs.
pub(crate) fn lower(op: &Checked, chip: &ChipModel) -> (Vec<Kernel>, u64) {
    match op {
        Checked::Matmul { b, m, k, n, dtype, mlp } => lower_matmul(*b, *m, *k, *n, *dtype, *mlp, chip),
        Checked::Elementwise { kind, shape, dtype, to } => {
            let (inputs, class, name) = match kind {
                EwKind::Binary => (2, VpuClass::Binary, "elementwise"),
                EwKind::Unary => (1, VpuClass::Unary, "elementwise"),
                EwKind::Convert => (1, VpuClass::Unary, "convert"),
            };
            let a = tpu_padded(*dtype, shape);
            let out = tpu_padded(*to, shape);
            let flops = shape.iter().product::<u64>();
            let k = Kernel {
                name,
                work: Work::Vpu {
                    class,
                    blocks: blocks(&out),
                    elem_bytes: dtype.bytes(),
                },
                in_bytes: a.bytes() * inputs,
                out_bytes: out.bytes(),
                unpadded_bytes: logical_bytes(*dtype, shape) * inputs + logical_bytes(*to, shape),
            };
            (vec![k], flops)
        }
        Checked::Reduce { kind, shape, dtype } => {
            let a = tpu_padded(*dtype, shape);
            let mut out_dims = shape.clone();
            match kind {
                ReduceKind::Minor => out_dims.pop(),
                ReduceKind::Major => Some(out_dims.remove(0)),
            };
            let out = tpu_padded(*dtype, &out_dims);
            let k = Kernel {
                name: "reduce",
                work: Work::Vpu {
                    class: VpuClass::Reduce,
                    blocks: blocks(&a),
                    elem_bytes: dtype.bytes(),
                },
                in_bytes: a.bytes(),
                out_bytes: out.bytes(),
                unpadded_bytes: logical_bytes(*dtype, shape) + logical_bytes(*dtype, &out_dims),
            };
            (vec![k], shape.iter().product())
        }
        Checked::Transpose { kind, shape, dtype } => {
            let a = tpu_padded(*dtype, shape);
            let (out_dims, class) = match kind {
                TransposeKind::TwoD => (vec![shape[1], shape[0]], VpuClass::Transpose),
                TransposeKind::NchwToNhwc => (vec![shape[0], shape[2], shape[3], shape[1]], VpuClass::Relayout),
                TransposeKind::NhwcToNchw => (vec![shape[0], shape[3], shape[1], shape[2]], VpuClass::Relayout),
            };
            let out = tpu_padded(*dtype, &out_dims);
            let k = Kernel {
                name: "copy",
                work: Work::Vpu {
                    class,
                    blocks: blocks(&a),
                    elem_bytes: dtype.bytes(),
                },
                in_bytes: a.bytes(),
                out_bytes: out.bytes(),
                unpadded_bytes: 2 * logical_bytes(*dtype, shape),
            };
            (vec![k], 0)
        }
        Checked::Concat { shapes, axis, dtype } => {
            let mut out_dims = shapes[0].clone();
            out_dims[*axis] = shapes.iter().map(|s| s[*axis]).sum();
            let out = tpu_padded(*dtype, &out_dims);
            let in_bytes = shapes.iter().map(|s| tpu_padded(*dtype, s).bytes()).sum();
            let mut kernels = Vec::new();
            // An operand whose entry layout has a different dim order than the result's is first copied into the
            // result's order (the compiler emits a copy per such operand before the concatenate fusion).
            for s in shapes {
                let a = tpu_padded(*dtype, s);
                if a.order != out.order {
                    kernels.push(Kernel {
                        name: "copy",
                        work: Work::Vpu {
                            class: VpuClass::Relayout,
                            blocks: blocks(&a),
                            elem_bytes: dtype.bytes(),
                        },
                        in_bytes: a.bytes(),
                        out_bytes: a.bytes(),
                        unpadded_bytes: 2 * logical_bytes(*dtype, s),
                    });
                }
            }
            kernels.push(Kernel {
                name: "concatenate fusion",
                work: Work::Vpu {
                    class: VpuClass::Concat,
                    blocks: blocks(&out),
                    elem_bytes: dtype.bytes(),
                },
                in_bytes,
                out_bytes: out.bytes(),
                unpadded_bytes: 2 * logical_bytes(*dtype, &out_dims),
            });
            (kernels, 0)
        }
        Checked::Conv {
            input,
            kernel,
            stride,
            padding,
            dtype,
        } => lower_conv(*input, *kernel, *stride, *padding, *dtype),
    }
}

pub(crate) fn matmul_operands(
    b: u64,
    m: u64,
    k: u64,
    n: u64,
    dtype: Dtype,
    mlp: bool,
) -> (PaddedArray, PaddedArray, PaddedArray, u64) {
    let out_t = dtype.matmul_result();
    let (x, w, o) = if b > 1 {
        (
            tpu_padded(dtype, &[b, m, k]),
            tpu_padded(dtype, &[b, k, n]),
            tpu_padded(out_t, &[b, m, n]),
        )
    } else {
        (
            tpu_padded(dtype, &[m, k]),
            tpu_padded(dtype, &[k, n]),
            tpu_padded(out_t, &[m, n]),
        )
    };
    let bias = if mlp { tpu_padded(dtype, &[n]).bytes() } else { 0 };
    (x, w, o, bias)
}

/// Whether the chip's MXU takes a matrix-vector product (M = 1 or N = 1) of `dtype`. tpu7x does for 32-, 16-
/// and 8-bit integer operands (one output fusion in the corpus records C25.matmul.* of tpu7x), but an fp8
/// one is converted to bf16 and multiply-reduced on the VPU: C25.matmul.035@tpu7x (M 4224, K 5822, N 1) is a
/// reduce, a convert, a 120,216-cycle multiply-reduce loop fusion over the matrix and a reshape, about 5
/// cycles per 1024 matrix elements as in the three other fp8 records (M 2048, 1664, 13323).
pub(crate) fn matvec_on_mxu(chip: &ChipModel, dtype: Dtype) -> bool {
    chip.matvec_on_mxu && !dtype.is_fp8()
}

/// Whether a (non-batched) matmul result is laid out transposed, lanes along M: the compiler's entry layout
/// for `[M, N]` with N narrower than M and the lanes (`{0,1}`, as for every corpus matmul with N <= 32 < M on
/// all five chips). It then computes the product transposed, N rows streamed against the larger operand's
/// tiles: C25.matmul.050 (M 5437, K 3968, N 32, f32) on v5e is one output fusion of 16,934 cycles, less than
/// the 5440 rows x 31 K blocks / 4 MXUs = 42,160 MXU cycles of the untransposed product and close to the
/// transposed 32 x 31 x 43 lane blocks / 4 = 10,664.
pub(crate) fn transposed_result(b: u64, o: &PaddedArray) -> bool {
    b == 1 && o.order == [1, 0]
}

fn lower_matmul(b: u64, m: u64, k: u64, n: u64, dtype: Dtype, mlp: bool, chip: &ChipModel) -> (Vec<Kernel>, u64) {
    let flops = 2 * b * m * k * n;
    let (x, w, o, bias_bytes) = matmul_operands(b, m, k, n, dtype, mlp);
    let out_t = dtype.matmul_result();
    let unpadded = b * (logical_bytes(dtype, &[m, k]) + logical_bytes(dtype, &[k, n]) + logical_bytes(out_t, &[m, n]))
        + if mlp { logical_bytes(dtype, &[n]) } else { 0 };
    let in_bytes = x.bytes() + w.bytes() + bias_bytes;
    // M = 1 and K = 1 are not MXU work for the compiler (reduce and loop fusions on the VPU); nor is N = 1, the
    // matrix times a vector on the right (a multiply-reduce loop fusion over the matrix rows in every corpus op
    // record of v4-v6e, testdata/ops/corpus_records.jsonl.gz).
    if (m == 1 || n == 1) && b == 1 && !matvec_on_mxu(chip, dtype) {
        let matrix = if m == 1 { &w } else { &x };
        let vector_bytes = if m == 1 { x.bytes() } else { w.bytes() };
        let parts = VpuMatvec {
            len_k: k,
            len_out: m.max(n),
            dtype,
            mlp,
            split_vector: chip.matvec_on_mxu,
        };
        return (parts.kernels(matrix, vector_bytes, &o, bias_bytes, unpadded), flops);
    }
    let work = if k == 1 {
        Work::Vpu {
            class: VpuClass::Outer,
            blocks: blocks(&o),
            elem_bytes: out_t.bytes(),
        }
    } else {
        // A result the compiler lays out transposed is computed transposed: out^T = w^T x^T.
        let (m, n) = if transposed_result(b, &o) { (n, m) } else { (m, n) };
        Work::Mxu(MxuWork {
            batch: b,
            m,
            k,
            n,
            taps_h: 1,
            taps_w: 1,
            dtype,
            out_bits: out_t.bits(),
            conv: false,
        })
    };
    let name = match work {
        Work::Mxu { .. } => "convolution fusion",
        _ => "loop fusion",
    };
    let mut kernels = vec![Kernel {
        name,
        work,
        in_bytes,
        out_bytes: o.bytes(),
        unpadded_bytes: unpadded,
    }];
    // A batched result whose entry layout does not keep the batch dim outermost is written batch-major and then
    // relayouted by a copy (as the compiler does for e.g. bf16[3,5,9]{2,0,1}).
    if b > 1 && o.order.first() != Some(&0) {
        kernels.push(Kernel {
            name: "copy",
            work: Work::Vpu {
                class: VpuClass::Relayout,
                blocks: blocks(&o),
                elem_bytes: out_t.bytes(),
            },
            in_bytes: o.bytes(),
            out_bytes: o.bytes(),
            unpadded_bytes: 2 * b * logical_bytes(out_t, &[m, n]),
        });
    }
    (kernels, flops)
}

/// A matrix-vector product (M = 1 or N = 1) the compiler runs on the VPU, as the kernels it emits around the
/// multiply-reduce loop fusion over the matrix. Evidence, every such op record (corpus C25.matmul.000-049 on
/// v4-v6e, the op sample's O0x043/054/253/260):
/// - the vector is first turned into the 1-D `[K]` the loop reads (a `reduce` over its unit dim, fused with a
///   `convert` for 8-bit types: 600-2,900 cycles, the chip's launch cost), unless it is 32-bit with K a multiple
///   of 1,024, when `[1, K]` and `[K]` have the same tiles and it is a bitcast (O00043: f32 K 4096, one kernel);
///   on tpu7x, whose MXU takes the other types (`matvec_on_mxu`), an fp8 vector's reduce and convert are two
///   kernels (C25.matmul.021/035/038/040@tpu7x);
/// - the 1-D result is reshaped into `[1, N]` or `[M, 1]` by a `reshape` kernel under the same condition on the
///   result (C25.matmul.049, f32 M 13,879: 1,890-2,973 cycles; O00054, s32 N 4,096: none);
/// - an MLP layer's bias and activation are a loop fusion of their own (O00253/O00260).
struct VpuMatvec {
    /// Contracting length.
    len_k: u64,
    /// Result length.
    len_out: u64,
    /// Operand element type.
    dtype: Dtype,
    /// Whether a bias and activation follow.
    mlp: bool,
    /// Whether the vector's reduce and convert are two kernels.
    split_vector: bool,
}

impl VpuMatvec {
    fn kernels(
        &self,
        matrix: &PaddedArray,
        vector_bytes: u64,
        o: &PaddedArray,
        bias_bytes: u64,
        unpadded: u64,
    ) -> Vec<Kernel> {
        let out_t = self.dtype.matmul_result();
        // A 1-D array of 32-bit elements and a multiple of 1,024 has the tiles of its unit-dim 2-D form.
        let bitcast = |dtype: Dtype, len: u64| dtype.bits() == 32 && len.is_multiple_of(VREG_ELEMENTS);
        let small =
            |name: &'static str, class: VpuClass, dtype: Dtype, len: u64, in_bytes: u64, out_bytes: u64| Kernel {
                name,
                work: Work::Vpu {
                    class,
                    blocks: tpu_padded(dtype, &[len]).elements() as f64 / VREG_ELEMENTS as f64,
                    elem_bytes: dtype.bytes(),
                },
                in_bytes,
                out_bytes,
                unpadded_bytes: 0,
            };
        let mut kernels = Vec::new();
        if !bitcast(self.dtype, self.len_k) {
            kernels.push(small(
                "reduce",
                VpuClass::Unary,
                self.dtype,
                self.len_k,
                vector_bytes,
                0,
            ));
            if self.split_vector && self.dtype.bits() == 8 {
                kernels.push(small("convert", VpuClass::Unary, self.dtype, self.len_k, 0, 0));
            }
        }
        let reshape = !bitcast(out_t, self.len_out);
        let in_place = reshape || self.mlp;
        let vector_in = if bitcast(self.dtype, self.len_k) {
            vector_bytes
        } else {
            0
        };
        kernels.push(Kernel {
            name: "loop fusion",
            work: Work::Vpu {
                class: VpuClass::Matvec,
                blocks: blocks(matrix),
                elem_bytes: self.dtype.bytes(),
            },
            in_bytes: matrix.bytes() + vector_in,
            out_bytes: if in_place { 0 } else { o.bytes() },
            unpadded_bytes: unpadded,
        });
        if self.mlp {
            let out = if reshape { 0 } else { o.bytes() };
            kernels.push(small(
                "loop fusion",
                VpuClass::Binary,
                out_t,
                self.len_out,
                bias_bytes,
                out,
            ));
        }
        if reshape {
            kernels.push(small("reshape", VpuClass::Relayout, out_t, self.len_out, 0, o.bytes()));
        }
        kernels
    }
}

/// The copy that relays a convolution input out into the order the MXU kernel reads, when the compiler's entry
/// layout for it is not channel-minor (channels that fill the lanes badly: it puts W minor, `{2,1,3,0}` or
/// `{2,3,1,0}`), in bf16 for an f32 input (the DEFAULT-precision kernel reads bf16). Evidence, every corpus
/// convolution with such an input (C25.conv2d_nhwc.000-004, .006): a `copy` of the input precedes the fusion.
/// The copy puts in the lanes the larger of the batch and the channels ([`conv_copy_lanes`]).
/// Fewer than 8 input channels always take it (the op sample's 3-channel stems).
fn conv_input_relayout(input: [u64; 4], dtype: Dtype, x: &PaddedArray) -> Option<Kernel> {
    let [nb, h, w, cin] = input;
    if cin >= 8 && x.order.last() == Some(&3) {
        return None;
    }
    let copy_t = if dtype == Dtype::Float32 {
        Dtype::Bfloat16
    } else {
        dtype
    };
    let (class, elements) = match conv_copy_lanes(input) {
        CopyLanes::Batch { batch } => {
            let rows = nb * h * w / batch;
            // Sublane tile of the channels: 4 rows for at most 4 (the stems' T(4,128)), else 8.
            let tile = if cin <= 4 { 4 } else { 8 };
            (
                VpuClass::ConvInputCopy,
                rows * cin.div_ceil(tile) * tile * batch.div_ceil(128) * 128,
            )
        }
        CopyLanes::Channels => (
            VpuClass::ConvInputRelayout,
            h * w * nb.div_ceil(8) * 8 * cin.div_ceil(128) * 128,
        ),
    };
    Some(Kernel {
        name: "copy",
        work: Work::Vpu {
            class,
            blocks: elements as f64 / VREG_ELEMENTS as f64,
            elem_bytes: dtype.bytes(),
        },
        in_bytes: x.bytes(),
        out_bytes: (elements * copy_t.bits()).div_ceil(8),
        unpadded_bytes: logical_bytes(dtype, &input) + logical_bytes(copy_t, &input),
    })
}

/// Which dim a convolution's input copy puts in the 128 lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CopyLanes {
    /// The batch (`batch` images; a batch of 1 is replaced by the image rows): the copy writes (H, W, C, N)
    /// with C on sublanes.
    Batch { batch: u64 },
    /// The channels: the copy writes (H, W, N, C) with N on sublanes.
    Channels,
}

/// The lanes of a convolution's input copy hold the larger of the batch and the channels, the one that pads
/// less. Evidence, the copies' result layouts in the optimized HLO: batch-minor `{0,3,2,1}` when C < N (O0x220,
/// bf16[8,224,224,3] with T(4,128) tiles of (C, N); C25.conv2d_nhwc.004, f32[28,112,112,19] -> bf16, T(8,128));
/// channel-minor `{3,0,2,1}` when C > N (C25.conv2d_nhwc.000, N 21 C 91; .002, N 9 C 440; .003, N 9 C 39; .006,
/// N 19 C 399). A batch of 1 gives way to the image rows: O0x228 bitcasts bf16[1,64,64,3] to [64,1,64,3] and
/// copies it H-minor.
fn conv_copy_lanes(input: [u64; 4]) -> CopyLanes {
    let [nb, h, _, cin] = input;
    let batch = if nb == 1 { h } else { nb };
    if cin < batch {
        CopyLanes::Batch { batch }
    } else {
        CopyLanes::Channels
    }
}

/// Output spatial size of a convolution along one dim.
pub fn conv_out_dim(input: u64, kernel: u64, stride: u64, padding: ConvPadding) -> u64 {
    match padding {
        ConvPadding::Same => input.div_ceil(stride),
        ConvPadding::Valid => (input - kernel) / stride + 1,
    }
}

fn lower_conv(
    input: [u64; 4],
    kernel: [u64; 4],
    stride: u64,
    padding: ConvPadding,
    dtype: Dtype,
) -> (Vec<Kernel>, u64) {
    let [nb, h, w, cin] = input;
    let [kh, kw, _, cout] = kernel;
    let ho = conv_out_dim(h, kh, stride, padding);
    let wo = conv_out_dim(w, kw, stride, padding);
    let out_t = dtype.matmul_result();
    let x = tpu_padded(dtype, &input);
    let k = tpu_padded(dtype, &kernel);
    let out_dims = [nb, ho, wo, cout];
    let o = tpu_padded(out_t, &out_dims);
    let m = nb * ho * wo;
    let taps = kh * kw;
    let flops = 2 * m * taps * cin * cout;
    let work = Work::Mxu(MxuWork {
        batch: 1,
        m,
        k: cin,
        n: cout,
        taps_h: kh,
        taps_w: kw,
        dtype,
        out_bits: out_t.bits(),
        conv: true,
    });
    let mut kernels = Vec::new();
    let relayout = conv_input_relayout(input, dtype, &x);
    let fusion_in = match &relayout {
        Some(copy) => copy.out_bytes,
        None => x.bytes(),
    };
    kernels.extend(relayout.clone());
    let blocked = conv_w_blocked(input, kernel);
    if blocked {
        let bytes = relayout.as_ref().map_or(x.bytes(), |c| c.out_bytes);
        for name in ["pad", "copy", "slice"] {
            kernels.push(small_relayout(name, dtype, bytes));
        }
    }
    kernels.push(Kernel {
        name: "convolution fusion",
        work,
        in_bytes: fusion_in + k.bytes(),
        out_bytes: o.bytes(),
        unpadded_bytes: logical_bytes(dtype, &input) + logical_bytes(dtype, &kernel) + logical_bytes(out_t, &out_dims),
    });
    // Output channels that do not fill the 128 lanes: the kernel writes a lane-padded result that a copy relayouts.
    // So does a convolution that read a relayouted input: its result is in the copy's (H, W, N, C) order, and
    // the entry result's is (N, H, W, C) (C25.conv2d_nhwc.001, 256 output channels: two copies after the fusion).
    if blocked {
        kernels.push(small_relayout("copy", out_t, o.bytes()));
        kernels.push(small_relayout("slice fusion", out_t, o.bytes()));
        if o.order.last() != Some(&3) {
            kernels.push(conv_output_copy(out_t, out_dims, &o));
        }
    } else if (cout % 128 != 0 || relayout.is_some()) && o.order != FUSION_RESULT_ORDER {
        kernels.push(conv_output_copy(out_t, out_dims, &o));
    }
    (kernels, flops)
}

/// Whether the compiler windows a convolution over blocks of image columns: a single image (batch 1) under a
/// kernel wider than one tap. It pads the input, copies it into (H, N, W / 8, 8, C) blocks and slices the window
/// out (three kernels before the fusion), then copies the result back and slices it (two after). Evidence:
/// O0x228, bf16[1,64,64,3] (3x3): copy, pad, copy, slice, fusion, copy, loop fusion (the slice), copy, eight
/// kernels of 1,730-14,349 cycles on v4; C25.conv2d_nhwc.005, bf16[1,56,56,64] (7x7, stride 2, channel-minor
/// in and out): fusion (the pad), copy, slice, fusion, copy, fusion (the slice), 3,606-9,128 on v5e.
fn conv_w_blocked(input: [u64; 4], kernel: [u64; 4]) -> bool {
    input[0] == 1 && kernel[1] > 1
}

/// A relayout kernel of `bytes` in and out (the copies and slices around a column-blocked convolution). They keep
/// the lane dim (C25.conv2d_nhwc.005's blocks bf16[56,1,8,8,64]{4,3,2,0,1} -> {4,2,3,0,1}: C stays minor), so
/// they move rows (`VpuClass::RowRelayout`).
fn small_relayout(name: &'static str, dtype: Dtype, bytes: u64) -> Kernel {
    let elements = bytes * 8 / dtype.bits().max(1);
    Kernel {
        name,
        work: Work::Vpu {
            class: VpuClass::RowRelayout,
            blocks: elements as f64 / VREG_ELEMENTS as f64,
            elem_bytes: dtype.bytes(),
        },
        in_bytes: bytes,
        out_bytes: bytes,
        unpadded_bytes: 2 * bytes,
    }
}

/// The physical order (H, W, N, C) of a convolution fusion's result, `{3,0,2,1}`. An entry result the compiler
/// lays out so needs no copy, however narrow its channels: C25.conv2d_nhwc.012, bf16[31,26,26,320]{3,0,2,1}, and
/// .013, bf16[7,17,17,419]{3,0,2,1}, are one fusion each on every chip.
const FUSION_RESULT_ORDER: [usize; 4] = [1, 2, 0, 3];

/// The copy of a convolution's result from the fusion's (H, W, N, C) order, C lane-padded, into the entry
/// result's layout. When that layout is channel-minor the lanes stay as they are and only sublane rows move
/// (`VpuClass::RowRelayout`): O0x219 and C25.conv2d_nhwc.001, f32 with 3,136 blocks each, cost the same on every
/// chip (61,224 cycles on v4, 17,407 on v6e) and less than the bf16 O0x218's 3,136 (60,440, 25,053), which no
/// lane-changing copy would. A result the compiler lays out W-minor (the 3-channel stems' `{2,3,1,0}`) moves C
/// out of the lanes: a `VpuClass::Relayout` at the transposes' rate (O0x220: 81,760-208,012 cycles for 12,544).
fn conv_output_copy(out_t: Dtype, out_dims: [u64; 4], o: &PaddedArray) -> Kernel {
    let [nb, ho, wo, cout] = out_dims;
    let internal = [nb, ho, wo, cout.div_ceil(128) * 128];
    let class = if o.order.last() == Some(&3) {
        VpuClass::RowRelayout
    } else {
        VpuClass::Relayout
    };
    Kernel {
        name: "copy",
        work: Work::Vpu {
            class,
            blocks: blocks(&tpu_padded(out_t, &internal)),
            elem_bytes: out_t.bytes(),
        },
        in_bytes: o.bytes(),
        out_bytes: o.bytes(),
        unpadded_bytes: 2 * logical_bytes(out_t, &out_dims),
    }
}
