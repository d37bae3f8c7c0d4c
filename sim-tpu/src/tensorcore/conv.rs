//! Lowering of a convolution (`conv2d_nhwc`) into the kernels the XLA TPU compiler emits for it: the copy that
//! relayouts an input whose entry layout is not channel-minor, the column blocking of a single image or of a
//! small batch whose rows take the lanes, the convolution fusion on the MXU, and the copies that move its
//! (H, W, N, C) result into the entry result's layout. Each rule names the records it was read off.

use super::lower::{blocks, logical_bytes, Kernel, MxuWork, VpuClass, Work, VREG_ELEMENTS};
use super::padding::{tpu_padded, PaddedArray};
use super::spec::{ConvPadding, Dtype};

/// The smallest batch the compiler puts in the lanes of a convolution's input copy; a smaller batch gives way to
/// the image rows ([`conv_copy_lanes`]).
const MIN_LANE_BATCH: u64 = 8;

/// Output spatial size of a convolution along one dim.
pub fn conv_out_dim(input: u64, kernel: u64, stride: u64, padding: ConvPadding) -> u64 {
    match padding {
        ConvPadding::Same => input.div_ceil(stride),
        ConvPadding::Valid => (input - kernel) / stride + 1,
    }
}

/// Lowers a validated convolution; also returns its nominal FLOPs.
pub(crate) fn lower_conv(
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
    let flops = 2 * m * kh * kw * cin * cout;
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
    let rows_in_lanes = relayout.is_some() && conv_copy_lanes(input) == CopyLanes::Rows;
    let (fusion_in, in_t) = match &relayout {
        Some(copy) => (copy.out_bytes, copy_dtype(dtype)),
        None => (x.bytes(), dtype),
    };
    kernels.extend(relayout);
    let blocked = conv_w_blocked(input, kernel, rows_in_lanes);
    if blocked {
        for name in ["pad", "copy"] {
            kernels.push(relayout_kernel(name, VpuClass::RowRelayout, in_t, fusion_in));
        }
        let halo = halo_bytes(fusion_in, w, kw);
        kernels.push(relayout_kernel("slice", VpuClass::RowRelayout, in_t, halo));
    } else if rows_in_lanes {
        // A 1x1 kernel needs no halo: the rows-minor copy is copied once more, channels back into the lanes.
        kernels.push(relayout_kernel("copy", VpuClass::Relayout, in_t, fusion_in));
    }
    kernels.push(Kernel {
        name: "convolution fusion",
        work,
        in_bytes: fusion_in + k.bytes(),
        out_bytes: o.bytes(),
        unpadded_bytes: logical_bytes(dtype, &input) + logical_bytes(dtype, &kernel) + logical_bytes(out_t, &out_dims),
    });
    kernels.extend(result_copies(out_t, out_dims, &o, blocked, rows_in_lanes));
    (kernels, flops)
}

/// The kernels after the convolution fusion. A column-blocked fusion's result is copied back out of its blocks
/// and sliced (two kernels), and a rows-in-lanes 1x1 fusion's is copied into (H, W, N, C) order (C25.conv2d_nhwc
/// .001: f32[56,32,7,256]{3,1,2,0} -> {3,0,2,1}, then the entry copy; .011 likewise). Then the result is copied
/// into the entry layout exactly when that differs from the fusion's (H, W, N, C): every corpus and sample
/// convolution whose entry result is laid out otherwise has that copy, however many its output channels
/// (C25.conv2d_nhwc.009, 128 channels: 2,377 cycles on tpu7x; .015, 384 channels: 75,736 on v4), and none whose
/// entry result is `{3,0,2,1}` has (O0x223-226, C25.conv2d_nhwc.012, .013). A blocked result already
/// channel-minor is left as the slice writes it (C25.conv2d_nhwc.005, .008).
fn result_copies(out_t: Dtype, out_dims: [u64; 4], o: &PaddedArray, blocked: bool, rows: bool) -> Vec<Kernel> {
    let mut kernels = Vec::new();
    if blocked {
        kernels.push(relayout_kernel("copy", VpuClass::RowRelayout, out_t, o.bytes()));
        kernels.push(relayout_kernel("slice fusion", VpuClass::RowRelayout, out_t, o.bytes()));
        if o.order.last() != Some(&3) {
            kernels.push(conv_output_copy(out_t, out_dims, o));
        }
        return kernels;
    }
    if rows {
        kernels.push(relayout_kernel("copy", VpuClass::RowRelayout, out_t, o.bytes()));
    }
    if o.order != FUSION_RESULT_ORDER {
        kernels.push(conv_output_copy(out_t, out_dims, o));
    }
    kernels
}

/// The copy that relays a convolution input out into the order the MXU kernel reads, when the compiler's entry
/// layout for it is not channel-minor (channels that fill the lanes badly: it puts W minor, `{2,1,3,0}` or
/// `{2,3,1,0}`), in bf16 for an f32 input (the DEFAULT-precision kernel reads bf16). Evidence, every corpus
/// convolution with such an input (C25.conv2d_nhwc.000-004, .006, .010, .011): a `copy` of the input precedes the
/// fusion. The copy puts in the lanes the batch, the image rows or the channels ([`conv_copy_lanes`]).
/// Fewer than 8 input channels always take it (the op sample's 3-channel stems).
fn conv_input_relayout(input: [u64; 4], dtype: Dtype, x: &PaddedArray) -> Option<Kernel> {
    let [nb, h, w, cin] = input;
    if cin >= 8 && x.order.last() == Some(&3) {
        return None;
    }
    let copy_t = copy_dtype(dtype);
    // Sublane tile of the channels when the lanes hold another dim: 4 rows for at most 4 (the stems'
    // T(4,128)), else 8.
    let tile = if cin <= 4 { 4 } else { 8 };
    let lane_copy = |lanes: u64| -> (VpuClass, u64) {
        let rows = nb * h * w / lanes;
        (
            VpuClass::ConvInputCopy,
            rows * cin.div_ceil(tile) * tile * lanes.div_ceil(128) * 128,
        )
    };
    let (class, elements) = match conv_copy_lanes(input) {
        CopyLanes::Batch => lane_copy(nb),
        CopyLanes::Rows => lane_copy(h),
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

/// The element type of a convolution's input copy: bf16 for an f32 input (the DEFAULT-precision fusion reads
/// bf16: C25.conv2d_nhwc.001's f32[4,56,56,29] is copied to bf16[56,4,56,29]), else the input's.
fn copy_dtype(dtype: Dtype) -> Dtype {
    if dtype == Dtype::Float32 {
        Dtype::Bfloat16
    } else {
        dtype
    }
}

/// Which dim a convolution's input copy puts in the 128 lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CopyLanes {
    /// The batch: the copy writes (H, W, C, N) with C on sublanes.
    Batch,
    /// The image rows, for a batch below [`MIN_LANE_BATCH`]: the copy writes (H, N, W, C) with H minor.
    Rows,
    /// The channels: the copy writes (H, W, N, C) with N on sublanes.
    Channels,
}

/// The lanes of a convolution's input copy hold the larger of the batch and the channels, the one that pads
/// less, when the batch is at least 8. Evidence, the copies' result layouts in the optimized HLO: batch-minor
/// `{0,3,2,1}` when C < N (O0x220, bf16[8,224,224,3] with T(4,128) tiles of (C, N); C25.conv2d_nhwc.004,
/// f32[28,112,112,19] -> bf16, T(8,128)); channel-minor `{3,0,2,1}` when C > N (C25.conv2d_nhwc.000, N 21 C 91;
/// .002, N 9 C 440; .003, N 9 C 39; .006, N 19 C 399). A smaller batch gives way to the image rows, whatever the
/// channels: O0x228 bitcasts bf16[1,64,64,3] to [64,1,64,3] and copies it H-minor, and so do the batches of 4 of
/// C25.conv2d_nhwc.001 (f32[4,56,56,29] -> bf16[56,4,56,29]{0,3,2,1}), .011 (C 54) and .010 (C 166, more
/// channels than its 112 rows).
fn conv_copy_lanes(input: [u64; 4]) -> CopyLanes {
    let [nb, _, _, cin] = input;
    if nb < MIN_LANE_BATCH {
        CopyLanes::Rows
    } else if cin < nb {
        CopyLanes::Batch
    } else {
        CopyLanes::Channels
    }
}

/// Whether the compiler windows a convolution over blocks of image columns: under a kernel wider than one tap,
/// a single image, or a small batch whose input copy put the rows in the lanes. It pads the input, copies it
/// into (H, N, W / 8, 8, C) blocks and slices the window out (three kernels before the fusion), then copies the
/// result back and slices it (two after). Evidence: O0x228, bf16[1,64,64,3] (3x3): copy, pad, copy, slice,
/// fusion, copy, loop fusion (the slice), copy, eight kernels of 1,730-14,349 cycles on v4;
/// C25.conv2d_nhwc.005, bf16[1,56,56,64] (7x7, stride 2, channel-minor in and out): fusion (the pad), copy,
/// slice, fusion, copy, fusion (the slice), 3,606-9,128 on v5e; C25.conv2d_nhwc.010, f32[4,112,112,166] (5x5,
/// stride 2): the rows-minor copy, slice, pad fusion, copy, fusion, copy, slice fusion and a retiling copy on
/// every chip. A small batch read channel-minor is not blocked (C25.conv2d_nhwc.009, bf16[3,14,14,192] 3x3:
/// the fusion and the result copy).
fn conv_w_blocked(input: [u64; 4], kernel: [u64; 4], rows_in_lanes: bool) -> bool {
    kernel[1] > 1 && (input[0] == 1 || rows_in_lanes)
}

/// Whether the compiler windows this convolution over blocks of image columns ([`conv_w_blocked`]), from the op
/// alone: its input copy (if any) decides whether the rows take the lanes.
pub(crate) fn column_blocked(input: [u64; 4], kernel: [u64; 4], dtype: Dtype) -> bool {
    let x = tpu_padded(dtype, &input);
    let rows_in_lanes = conv_input_relayout(input, dtype, &x).is_some() && conv_copy_lanes(input) == CopyLanes::Rows;
    conv_w_blocked(input, kernel, rows_in_lanes)
}

/// Column blocks of a column-blocked convolution: the compiler cuts the image columns into this many blocks.
const COLUMN_BLOCKS: u64 = 8;

/// The bytes a column-blocked convolution's slice moves: the halo, the `kw - 1` columns each block but the last
/// shares with the next, out of `input_bytes` over `w` columns in [`COLUMN_BLOCKS`] blocks. Evidence, the slices'
/// shapes: O0x228 (W 64 padded to 72, 3x3) bf16[64,1,8,9,3] -> [64,1,7,2,3]; C25.conv2d_nhwc.008 (W 28, 3x3)
/// [28,1,8,4,303] -> [28,1,7,2,303]; .005 (W 56, 7x7) [56,1,8,8,64] -> [56,1,7,6,64]; .010 (W 112, 5x5)
/// [112,4,8,14,166] -> [112,4,7,4,166].
fn halo_bytes(input_bytes: u64, w: u64, kw: u64) -> u64 {
    let block = w.div_ceil(COLUMN_BLOCKS).max(1);
    let halo_columns = (COLUMN_BLOCKS - 1) * (kw - 1);
    (input_bytes * halo_columns / (COLUMN_BLOCKS * block)).min(input_bytes)
}

/// A relayout kernel of `bytes` in and out (the copies and slices around a column-blocked convolution, the
/// second copy of a rows-minor input). The blocking copies keep the lane dim (C25.conv2d_nhwc.005's blocks
/// bf16[56,1,8,8,64]{4,3,2,0,1} -> {4,2,3,0,1}: C stays minor), so they move rows (`VpuClass::RowRelayout`);
/// the copy of a rows-minor input into channel-minor order changes the lanes (`VpuClass::Relayout`).
fn relayout_kernel(name: &'static str, class: VpuClass, dtype: Dtype, bytes: u64) -> Kernel {
    let elements = bytes * 8 / dtype.bits().max(1);
    Kernel {
        name,
        work: Work::Vpu {
            class,
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
