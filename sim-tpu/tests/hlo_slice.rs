//! Collectives on a slice, costed by hand from the chip's numbers (v5p: 90 GB/s per link one way, 1 us per hop,
//! 3.55 us to launch, calibrated on a published v5p permute sweep; the compiler-model clock 1503 MHz that cycles
//! are counted in).

use sim_tpu::chips::Chip;
use sim_tpu::hlo::collective::CollectiveKind;
use sim_tpu::hlo::spmd::report::report_on_slice;
use sim_tpu::hlo::HloModule;
use sim_tpu::topology::SliceShape;

const LINK: f64 = 90e9;
const CLOCK: f64 = 1503e6;

fn module(shape: &str, op: &str, attrs: &str) -> HloModule {
    let text = format!(
        "HloModule m\n\nadd {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}}\n\n\
         ENTRY main {{\n  x = f32[1024,1024]{{1,0}} parameter(0)\n  ROOT c = {shape} {op}(x), {attrs}\n}}\n"
    );
    HloModule::parse(&text).unwrap()
}

fn cycles(us: f64) -> u64 {
    (us * 1e-6 * CLOCK).round() as u64
}

fn one(m: &HloModule, slice: &str) -> sim_tpu::hlo::spmd::CollectiveCost {
    let chip = Chip::preset("v5p").unwrap();
    let s = SliceShape::from_text(&chip.spec, slice).unwrap();
    let r = report_on_slice(m, &chip, &s, None).unwrap();
    assert_eq!(r.collectives.len(), 1);
    r.collectives[0].clone()
}

const B: f64 = 4.0 * 1024.0 * 1024.0;

#[test]
fn all_reduce_on_a_pair_and_on_2x2x1() {
    // A pair (devices 0, 1 along x of 2x2x1, no wraparound): reduce-scatter then all-gather, each moving half
    // the bytes one way over the one link: B / link. Hops: one per phase.
    let m = module(
        "f32[1024,1024]{1,0}",
        "all-reduce",
        "replica_groups={{0,1},{2,3}}, to_apply=add",
    );
    let c = one(&m, "2x2x1");
    assert_eq!(c.kind, CollectiveKind::AllReduce);
    assert_eq!((c.group_size, c.groups, c.chips, c.hops), (2, 2, 2, 2));
    assert_eq!(c.bandwidth_cycles, cycles(B / LINK * 1e6));
    assert_eq!(c.latency_cycles, cycles(2.0 + 3.55));
    // All four chips (2x2 grid): two chunks of B/2, one taking x then y, the other y then x. On its first axis
    // a chunk moves 2 x 1/2 x B/2 = B/2, on its second (already halved) B/4: each axis carries 3B/4, over both
    // directions of its two links (a dimension of two chips has two links): 3B/8 one way per link.
    // Hops: 2 per axis.
    let m = module(
        "f32[1024,1024]{1,0}",
        "all-reduce",
        "replica_groups={{0,1,2,3}}, to_apply=add",
    );
    let c = one(&m, "2x2x1");
    assert_eq!(c.bandwidth_cycles, cycles(0.375 * B / LINK * 1e6));
    assert_eq!(c.hops, 4);
    assert_eq!(c.latency_cycles, cycles(4.0 + 3.55));
    assert_eq!(c.cycles, c.bandwidth_cycles + c.latency_cycles);
}

#[test]
fn ring_with_wraparound_and_iota_groups() {
    // 4x4x4 (whole cubes: wraparound). [16,4]<=[64] groups 4 consecutive ids: the 4 chips along x.
    // Bidirectional ring of 4: 2 x 3/4 x B over 2 directions = 3B/4; hops 2 x 3.
    let m = module(
        "f32[1024,1024]{1,0}",
        "all-reduce",
        "replica_groups=[16,4]<=[64], to_apply=add",
    );
    let c = one(&m, "4x4x4");
    assert_eq!((c.group_size, c.groups, c.hops), (4, 16, 6));
    assert_eq!(c.bandwidth_cycles, cycles(0.75 * B / LINK * 1e6));
    // [16,4]<=[4,16]T(1,0): groups {0,16,32,48}, ... : 4 chips along z, stride 1 in z: same cost.
    let m = module(
        "f32[1024,1024]{1,0}",
        "all-reduce",
        "replica_groups=[16,4]<=[4,16]T(1,0), to_apply=add",
    );
    let c = one(&m, "4x4x4");
    assert_eq!(c.rings.len(), 1);
    assert_eq!(c.bandwidth_cycles, cycles(0.75 * B / LINK * 1e6));
}

#[test]
fn all_gather_and_permute_by_hand() {
    // All-gather of a B operand over 4 chips along x of 4x4x4 (ring): the result is 4B; half an all-reduce of
    // 4B: 3/4 x 4B over 2 directions = 1.5 B / link; hops 3.
    let m = module(
        "f32[4096,1024]{1,0}",
        "all-gather",
        "dimensions={0}, replica_groups=[16,4]<=[64]",
    );
    let c = one(&m, "4x4x4");
    assert_eq!(c.bytes as f64, 4.0 * B);
    assert_eq!(c.bandwidth_cycles, cycles(1.5 * B / LINK * 1e6));
    assert_eq!(c.hops, 3);
    // A shift by one along z of 2x2x4 (a line, no wraparound): 3 -> 0 walks back 3 hops; every link carries
    // one message one way: B / link.
    let pairs = "source_target_pairs={{0,4},{4,8},{8,12},{12,0}}";
    let m = module("f32[1024,1024]{1,0}", "collective-permute", pairs);
    let c = one(&m, "2x2x4");
    assert_eq!(c.bandwidth_cycles, cycles(B / LINK * 1e6));
    assert_eq!(c.hops, 3);
}

#[test]
fn collectives_overlap_independent_kernels() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/shard/allreduce_overlap.hlo.txt"
    ))
    .unwrap();
    let m = HloModule::parse(&text).unwrap();
    let chip = Chip::preset("v5p").unwrap();
    let s = SliceShape::from_text(&chip.spec, "2x2x1").unwrap();
    let r = report_on_slice(&m, &chip, &s, None).unwrap();
    let ar = &r.collectives[0];
    let k = |n: &str| r.device.cost.kernels.iter().find(|k| k.name == n).unwrap().cycles;
    // The all-reduce starts at 0 (its operand is a parameter); the dot does not read it and runs meanwhile;
    // the multiply waits for both. Step = max(dot, all-reduce) + multiply.
    assert_eq!(ar.start_cycle, 0);
    let step = k("d").max(ar.cycles) + k("e");
    assert_eq!(r.step.step_cycles, step);
    assert_eq!(r.step.compute_cycles, k("d") + k("e"));
    assert_eq!(r.step.exposed_communication_cycles, step - k("d") - k("e"));
    // The collective left the per-device kernels and the unmodelled opcodes.
    assert!(r.device.cost.kernels.iter().all(|k| k.name != "r"));
    assert!(r.device.cost.unmodelled.is_empty(), "{:?}", r.device.cost.unmodelled);
}

#[test]
fn async_pairs_wait_at_done() {
    let text =
        "HloModule m\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n\
        ENTRY main {\n  x = f32[1024,1024]{1,0} parameter(0)\n  \
        s = f32[1024,1024]{1,0} all-reduce-start(x), replica_groups={{0,1}}, to_apply=add\n  \
        d = f32[1024,1024]{1,0} all-reduce-done(s)\n  ROOT e = f32[1024,1024]{1,0} multiply(d, d)\n}\n";
    let m = HloModule::parse(text).unwrap();
    let chip = Chip::preset("v5p").unwrap();
    let s = SliceShape::from_text(&chip.spec, "2x2x1").unwrap();
    let r = report_on_slice(&m, &chip, &s, None).unwrap();
    assert_eq!(r.collectives.len(), 1);
    assert!(r.collectives[0].is_async);
    let e = r.device.cost.kernels.iter().find(|k| k.name == "e").unwrap();
    // The multiply reads the done, so it starts when the transfer ends.
    assert_eq!(e.start_cycle, r.collectives[0].end_cycle);
    assert_eq!(r.step.step_cycles, r.collectives[0].cycles + e.cycles);
}

/// Temp bytes of a module on v5p: `a` (f32[32768,1024], 128 MiB: more than v5p's 95 MiB of VMEM, so in HBM
/// whatever on-chip budget for temporaries is fitted) feeds an all-reduce, then `tail` follows.
fn temp_with(tail: &str) -> u64 {
    let text = format!(
        "HloModule m\n\nadd {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}}\n\n\
         ENTRY main {{\n  p = f32[32768,1024]{{1,0}} parameter(0)\n  a = f32[32768,1024]{{1,0}} exponential(p)\n  \
         r = f32[32768,1024]{{1,0}} all-reduce(a), replica_groups={{{{0,1,2,3}}}}, to_apply=add\n{tail}\n}}\n"
    );
    let m = HloModule::parse(&text).unwrap();
    let chip = sim_tpu::tensorcore::ChipModel::for_chip(&Chip::preset("v5p").unwrap()).unwrap();
    sim_tpu::hlo::cost_module(&m, &chip).unwrap().temp_bytes
}

#[test]
fn all_reduce_reduces_in_place() {
    // The all-reduce's result takes over `a`'s 128 MiB buffer when nothing reads `a` after it; when `a` is read
    // afterwards, the result needs a second 128 MiB buffer (the compiler's memory_analysis of the data-parallel
    // MLP counts one buffer for its gradient all-reduce).
    let in_place = temp_with("  ROOT o = f32[32768,1024]{1,0} exponential(r)");
    let kept = temp_with("  ROOT o = f32[32768,1024]{1,0} add(r, a)");
    assert_eq!(kept - in_place, 128 << 20, "{kept} {in_place}");
}
