//! The op model's convolution rules for small batches and result copies (`tensorcore::conv`), read off the
//! corpus op records' optimized HLO (tools/corpus/gen_ops.py seed 25): a batch below 8 gives its input copy's
//! lanes to the image rows, such an input is column-blocked under a kernel wider than one tap and copied back
//! channel-minor under a 1x1 one, and the result is copied into its entry layout exactly when that is not the
//! fusion's (H, W, N, C) order. Element counts are worked by hand from the shapes; cycles and bytes come from
//! the compiler's own records.

mod support;
use sim_tpu::tensorcore::lower::VpuClass;
use sim_tpu::tensorcore::{cost, kernels, ChipModel, OpSpec};
use support::conv::{conv, error, vpu};

fn names(op: &OpSpec, chip: &ChipModel) -> Vec<&'static str> {
    kernels(op, chip).unwrap().iter().map(|k| k.name).collect()
}

#[test]
fn a_batch_of_four_puts_the_image_rows_in_the_input_copys_lanes() {
    // C25.conv2d_nhwc.001: f32[4,56,56,29]{2,1,3,0}, 1x1 -> 256 channels. The compiler bitcasts the input to
    // [56,4,56,29] (H, N, W, C) and copies it to bf16 {0,3,2,1}: H (56, padded to 128) in the lanes, the 29
    // channels on sublanes (padded to 32), for each of 4 x 56 (N, W) rows: 4 x 56 x 32 x 128 = 917,504 elements,
    // 896 blocks of 1024, 1,835,008 bytes of bf16. It then copies that channel-minor (a second copy), runs the
    // fusion, copies its result into (H, W, N, C) and that into the entry layout: five kernels on every chip.
    let v4 = ChipModel::preset("v4").unwrap();
    let op = conv([4, 56, 56, 29], [1, 1, 29, 256], 1, "SAME", "float32");
    assert_eq!(names(&op, &v4), ["copy", "copy", "convolution fusion", "copy", "copy"]);
    let ks = kernels(&op, &v4).unwrap();
    assert_eq!(vpu(&ks[0].work), (VpuClass::ConvInputCopy, 896.0));
    assert_eq!(ks[0].out_bytes, 4 * 56 * 32 * 128 * 2);
    // The second copy moves the channels back into the lanes: the same bytes, a lane relayout.
    assert_eq!(vpu(&ks[1].work), (VpuClass::Relayout, 896.0));
    // C25.conv2d_nhwc.011: bf16[4,224,224,54] under a 1x1 stride-2 kernel has the same five kernels (copy 306,152
    // and 280,952 cycles on v4, fusion 72,250, copies 37,296 and 21,708).
    let op = conv([4, 224, 224, 54], [1, 1, 54, 23], 2, "SAME", "bfloat16");
    assert_eq!(names(&op, &v4), ["copy", "copy", "convolution fusion", "copy", "copy"]);
}

#[test]
fn a_small_batch_with_rows_in_the_lanes_is_column_blocked() {
    // C25.conv2d_nhwc.010: f32[4,112,112,166]{2,1,3,0}, 5x5 stride 2 VALID -> 64 channels. More channels (166)
    // than rows (112), yet the rows take the lanes: bf16[112,4,112,166]{0,3,2,1}, 4 x 112 (N, W) rows of 168
    // channel sublanes (166 padded to 8s) x 128 lanes = 9,633,792 elements, 9,408 blocks. Then the column
    // blocking of a single image: a slice, a pad fusion and a copy before the fusion, a copy and a slice fusion
    // after (the compiler's eighth kernel, a copy retiling the T(4,128) result, is not modelled).
    let v6e = ChipModel::preset("v6e").unwrap();
    let op = conv([4, 112, 112, 166], [5, 5, 166, 64], 2, "VALID", "float32");
    assert_eq!(
        names(&op, &v6e),
        [
            "copy",
            "pad",
            "copy",
            "slice",
            "convolution fusion",
            "copy",
            "slice fusion"
        ]
    );
    let ks = kernels(&op, &v6e).unwrap();
    assert_eq!(vpu(&ks[0].work), (VpuClass::ConvInputCopy, 9408.0));
    // The compiler's totals for this held-out record: before the rule the model read it channel-minor with one
    // copy, 0.64x on v4, 0.72x on v5p and 1.50x on v6e.
    for (chip, compiler) in [("v4", 993_515), ("v5p", 441_883), ("v6e", 312_100)] {
        let c = cost(&op, &ChipModel::preset(chip).unwrap()).unwrap().cycles;
        assert!(error(c, compiler) < 0.3, "{chip}: pred {c} vs compiler {compiler}");
    }
    // A batch of 3 read channel-minor is not blocked (C25.conv2d_nhwc.009, 3x3 stride 2: fusion and copy).
    let op = conv([3, 14, 14, 192], [3, 3, 192, 128], 2, "SAME", "bfloat16");
    assert_eq!(names(&op, &v6e), ["convolution fusion", "copy"]);
}

#[test]
fn the_result_is_copied_whenever_its_entry_layout_is_not_the_fusions_order() {
    // C25.conv2d_nhwc.009: bf16[3,14,14,192], 3x3 stride 2 SAME -> [3,7,7,128], entry layout {3,2,1,0}. 128
    // output channels fill the lanes, yet the compiler copies the fusion's (H, W, N, C) result into (N, H, W, C)
    // on every chip (1,044-2,377 cycles). The copy keeps the lanes: 3 x 7 x 8 (W padded to 8s) x 128 = 21,504
    // elements, 21 blocks, 43,008 bytes (the compiler's output_bytes) in and out.
    let v4 = ChipModel::preset("v4").unwrap();
    let op = conv([3, 14, 14, 192], [3, 3, 192, 128], 2, "SAME", "bfloat16");
    let ks = kernels(&op, &v4).unwrap();
    assert_eq!(ks.len(), 2);
    assert_eq!(vpu(&ks[1].work), (VpuClass::RowRelayout, 21.0));
    assert_eq!((ks[1].in_bytes, ks[1].out_bytes), (43_008, 43_008));
    // C25.conv2d_nhwc.015: f32[9,56,56,64], 7x7 stride 2 -> 384 channels, entry {3,2,1,0}: fusion and copy
    // (243,338 and 75,736 cycles on v4).
    let op = conv([9, 56, 56, 64], [7, 7, 64, 384], 2, "SAME", "float32");
    assert_eq!(names(&op, &v4), ["convolution fusion", "copy"]);
    // O00224: a result laid out {3,0,2,1} (1,024 channels) stays the fusion alone.
    let op = conv([8, 14, 14, 256], [1, 1, 256, 1024], 1, "VALID", "bfloat16");
    assert_eq!(names(&op, &v4), ["convolution fusion"]);
}

#[test]
fn a_column_blocked_slice_moves_only_the_halo() {
    // C25.conv2d_nhwc.008: bf16[1,28,28,303] (3x3 SAME). The compiler cuts the 28 columns (padded to 32) into 8
    // blocks of 4 and slices out the 2 (= kw - 1) columns each of the first 7 blocks shares with the next:
    // [28,1,8,4,303] -> [28,1,7,2,303], 14 of 32 columns. The pad and the copy move the whole input, 28 rows x
    // 32 columns x 384 lanes (303 padded) x 2 bytes = 688,128 bytes; the slice 688,128 x 14 / 32 = 301,056.
    let v5p = ChipModel::preset("v5p").unwrap();
    let op = conv([1, 28, 28, 303], [3, 3, 303, 64], 1, "SAME", "bfloat16");
    let ks = kernels(&op, &v5p).unwrap();
    assert_eq!((ks[0].name, ks[0].in_bytes), ("pad", 688_128));
    assert_eq!((ks[1].name, ks[1].in_bytes), ("copy", 688_128));
    assert_eq!((ks[2].name, ks[2].in_bytes), ("slice", 301_056));
    assert_eq!(vpu(&ks[2].work), (VpuClass::RowRelayout, 301_056.0 / 2.0 / 1024.0));
}
