//! Windowed einsums (FSDP over more than 4 devices, as the XLA TPU compiler runs them): a weight split on its
//! contracting dim and read by one dot is not all-gathered but passed round the ring, one block per hop, each
//! block multiplied as it arrives; a weight gradient wanted split is summed round the ring instead of
//! reduce-scattered. Collectives and shapes are worked by hand here.

use sim_tpu::hlo::collective::CollectiveKind;
use sim_tpu::hlo::partition::build::Rule;
use sim_tpu::hlo::partition::windowed::WindowedEinsum;
use sim_tpu::hlo::partition::{partition_with, Partitioned};
use sim_tpu::hlo::HloModule;

/// x [8*16, 64] f32 split on the batch over `n` devices, w [64,32] split on its first (contracting) dim,
/// dy [8*16, 32] split on the batch: y = x @ w, dw = x^T @ dy (wanted split like w). `second_use` adds a
/// second dot reading w (the backward's dx = dy @ w^T).
fn fsdp(n: u64, second_use: bool) -> String {
    let rows = 16 * n;
    let dx = if second_use {
        format!(
            "  dx = f32[{rows},64]{{1,0}} dot(dy, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{1}}\n  \
             ROOT t = (f32[{rows},32]{{1,0}}, f32[64,32]{{1,0}}, f32[{rows},64]{{1,0}}) tuple(y, dw, dx), \
             sharding={{{{devices=[{n},1]<=[{n}]}}, {{devices=[{n},1]<=[{n}]}}, {{devices=[{n},1]<=[{n}]}}}}"
        )
    } else {
        format!(
            "  ROOT t = (f32[{rows},32]{{1,0}}, f32[64,32]{{1,0}}) tuple(y, dw), \
             sharding={{{{devices=[{n},1]<=[{n}]}}, {{devices=[{n},1]<=[{n}]}}}}"
        )
    };
    format!(
        "HloModule m\n\nENTRY main {{\n  \
         x = f32[{rows},64]{{1,0}} parameter(0), sharding={{devices=[{n},1]<=[{n}]}}\n  \
         w = f32[64,32]{{1,0}} parameter(1), sharding={{devices=[{n},1]<=[{n}]}}\n  \
         dy = f32[{rows},32]{{1,0}} parameter(2), sharding={{devices=[{n},1]<=[{n}]}}\n  \
         y = f32[{rows},32]{{1,0}} dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n  \
         dw = f32[64,32]{{1,0}} dot(x, dy), lhs_contracting_dims={{0}}, rhs_contracting_dims={{0}}\n\
         {dx}\n}}\n"
    )
}

fn run(text: &str, n: u64, min_rows: u64) -> Partitioned {
    let m = HloModule::parse(text).unwrap();
    partition_with(&m, n, None, text, Some(WindowedEinsum { min_rows })).unwrap()
}

fn kinds(p: &Partitioned) -> Vec<(CollectiveKind, u64, u64)> {
    p.info
        .inserted
        .iter()
        .map(|c| (c.kind, c.bytes, c.group_size))
        .collect()
}

#[test]
fn fsdp_over_8_devices_runs_windowed_when_rows_cover_the_blocks() {
    // 16 rows per device >= 16: windowed. Gather side: w's block [8,32] f32 = 1024 bytes passes 7 hops;
    // 8 partial dots [16,8] @ [8,32]. Scatter side: the running sum of one output block [8,32] f32 = 1024
    // bytes passes 7 hops. No all-gather, no reduce-scatter.
    let p = run(&fsdp(8, false), 8, 16);
    let permute = (CollectiveKind::CollectivePermute, 1024, 8);
    assert_eq!(kinds(&p), vec![permute; 14]);
    assert!(p.info.inserted.iter().all(|c| c.rule == Rule::WindowedEinsum));
    let e = p.module.entry_computation();
    let dots: Vec<String> = e
        .instructions
        .iter()
        .filter(|i| i.opcode == "dot")
        .map(|i| i.shape.to_string())
        .collect();
    // 8 forward parts of the whole [16,32] result, 8 gradient parts of one [8,32] block each.
    assert_eq!(dots.len(), 16);
    assert_eq!(dots.iter().filter(|s| *s == "f32[16,32]{1,0}").count(), 8);
    assert_eq!(dots.iter().filter(|s| *s == "f32[8,32]{1,0}").count(), 8);
    // Each hop passes to the next device of the ring.
    let pairs = e
        .instructions
        .iter()
        .find(|i| i.opcode == "collective-permute")
        .and_then(|i| i.attr("source_target_pairs"))
        .unwrap();
    assert_eq!(pairs, "{{0,1},{1,2},{2,3},{3,4},{4,5},{5,6},{6,7},{7,0}}");
}

#[test]
fn too_few_rows_too_few_devices_or_a_shared_weight_take_one_collective() {
    // Rows per device (16) under the chip's threshold (17): one all-gather of w (64x32 f32 = 8192 bytes
    // gathered) and one reduce-scatter of dw (its 8192-byte operand).
    let plain = vec![
        (CollectiveKind::AllGather, 8192, 8),
        (CollectiveKind::ReduceScatter, 8192, 8),
    ];
    assert_eq!(kinds(&run(&fsdp(8, false), 8, 17)), plain);
    // Four devices never run windowed.
    let four = vec![
        (CollectiveKind::AllGather, 8192, 4),
        (CollectiveKind::ReduceScatter, 8192, 4),
    ];
    assert_eq!(kinds(&run(&fsdp(4, false), 4, 1)), four);
    // w read by two dots: gathered once for both; the gradient is still summed round the ring.
    let k = kinds(&run(&fsdp(8, true), 8, 16));
    assert_eq!(k[0], (CollectiveKind::AllGather, 8192, 8));
    assert_eq!(k.iter().filter(|c| c.0 == CollectiveKind::AllGather).count(), 1);
    assert_eq!(k.iter().filter(|c| c.0 == CollectiveKind::CollectivePermute).count(), 7);
}
