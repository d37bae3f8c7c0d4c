//! Lowering: an op becomes the kernels (fusions) the XLA TPU compiler emits for it, each described by the work it
//! does on padded tiles: HBM bytes in and out, VPU element blocks, MXU passes.

use super::chip::ChipModel;
use super::padding::{tpu_padded, PaddedArray};
use super::spec::{Checked, Dtype, EwKind, ReduceKind, TransposeKind};

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
    /// The stationary operand is the activation of a product computed transposed (its left operand), which the
    /// transpose unit takes at `mxu_act_transpose_cycles`, not the weight's rate ([`super::stationary`]).
    pub stationary_is_activation: bool,
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

pub(super) fn blocks(a: &PaddedArray) -> f64 {
    a.elements() as f64 / VREG_ELEMENTS as f64
}

pub(super) fn logical_bytes(dtype: Dtype, dims: &[u64]) -> u64 {
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
        // Convolutions are lowered by `tensorcore::conv` (`tensorcore::lower_op` dispatches them there and never
        // here): a convolution has no kernels of its own in this module.
        Checked::Conv { .. } => (Vec::new(), 0),
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
