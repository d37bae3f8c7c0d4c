//! The partitioner on hand-worked modules, one per pattern: the per-device shapes and each inserted collective
//! (kind, bytes per device, group size) are derived here from the shapes and shardings, not read back.

use sim_tpu::hlo::collective::CollectiveKind;
use sim_tpu::hlo::partition::build::Rule;
use sim_tpu::hlo::partition::{partition, Partitioned};
use sim_tpu::hlo::HloModule;

const ADD: &str = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n";

fn run(entry: &str, devices: u64) -> Partitioned {
    let text = format!("HloModule m\n\n{ADD}ENTRY main {{\n{entry}\n}}\n");
    let m = HloModule::parse(&text).unwrap();
    partition(&m, devices, None, &text).unwrap()
}

/// (kind, bytes, group size) of each inserted collective, in program order.
fn inserted(p: &Partitioned) -> Vec<(CollectiveKind, u64, u64)> {
    p.info
        .inserted
        .iter()
        .map(|c| (c.kind, c.bytes, c.group_size))
        .collect()
}

fn shape_of(p: &Partitioned, name: &str) -> String {
    let e = p.module.entry_computation();
    e.instructions
        .iter()
        .find(|i| i.name == name)
        .map(|i| i.shape.to_string())
        .unwrap()
}

#[test]
fn data_parallel_gradient_is_all_reduced() {
    // x, dy split 4 ways on the batch; w replicated. dw = x^T dy contracts the split batch: partial sums of
    // a f32[32,16] (2048 bytes) all-reduced over all 4 devices; w - dw stays replicated.
    let p = run(
        "  x = f32[64,32]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}\n  \
         dy = f32[64,16]{1,0} parameter(1), sharding={devices=[4,1]<=[4]}\n  \
         w = f32[32,16]{1,0} parameter(2), sharding={replicated}\n  \
         dw = f32[32,16]{1,0} dot(x, dy), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n  \
         ROOT u = f32[32,16]{1,0} subtract(w, dw), sharding={replicated}",
        4,
    );
    assert_eq!(shape_of(&p, "x"), "f32[16,32]{1,0}");
    assert_eq!(shape_of(&p, "w"), "f32[32,16]{1,0}");
    assert_eq!(inserted(&p), vec![(CollectiveKind::AllReduce, 32 * 16 * 4, 4)]);
    assert_eq!(p.info.inserted[0].rule, Rule::PartialSums);
    assert!(p.info.warnings.is_empty());
}

#[test]
fn fsdp_gathers_weights_and_reduce_scatters_gradients() {
    // w split 4 ways on its first (contracting) dim, like the batch: the forward dot all-gathers w
    // (f32[32,16] = 2048 bytes gathered, group 4); the weight gradient x^T dy, wanted split like w, is
    // reduce-scattered (operand f32[32,16] = 2048 bytes) to f32[8,16].
    let p = run(
        "  x = f32[64,32]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}\n  \
         w = f32[32,16]{1,0} parameter(1), sharding={devices=[4,1]<=[4]}\n  \
         dy = f32[64,16]{1,0} parameter(2), sharding={devices=[4,1]<=[4]}\n  \
         y = f32[64,16]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n  \
         dw = f32[32,16]{1,0} dot(x, dy), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n  \
         ROOT t = (f32[64,16]{1,0}, f32[32,16]{1,0}) tuple(y, dw), sharding={{devices=[4,1]<=[4]}, {devices=[4,1]<=[4]}}",
        4,
    );
    assert_eq!(shape_of(&p, "w"), "f32[8,16]{1,0}");
    assert_eq!(shape_of(&p, "y"), "f32[16,16]{1,0}");
    assert_eq!(
        inserted(&p),
        vec![
            (CollectiveKind::AllGather, 2048, 4),
            (CollectiveKind::ReduceScatter, 2048, 4)
        ]
    );
    assert_eq!(shape_of(&p, &p.info.inserted[1].name), "f32[8,16]{1,0}");
}

#[test]
fn tensor_parallel_contracting_split_all_reduces_or_reduce_scatters() {
    // w1 split on its output dim (non-contracting: no collective), w2 on its input dim (contracting): the
    // second dot's f32[64,32] (8192 bytes) partial sums are all-reduced over 4 devices.
    let body = |out: &str| {
        format!(
            "  x = f32[64,32]{{1,0}} parameter(0), sharding={{replicated}}\n  \
             w1 = f32[32,16]{{1,0}} parameter(1), sharding={{devices=[1,4]<=[4]}}\n  \
             w2 = f32[16,32]{{1,0}} parameter(2), sharding={{devices=[4,1]<=[4]}}\n  \
             h = f32[64,16]{{1,0}} dot(x, w1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n  \
             ROOT y = f32[64,32]{{1,0}} dot(h, w2), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, \
             sharding={out}"
        )
    };
    let p = run(&body("{replicated}"), 4);
    assert_eq!(shape_of(&p, "h"), "f32[64,4]{1,0}");
    assert_eq!(inserted(&p), vec![(CollectiveKind::AllReduce, 64 * 32 * 4, 4)]);
    // The result wanted split on its rows: a reduce-scatter of the same 8192 bytes to f32[16,32].
    let p = run(&body("{devices=[4,1]<=[4]}"), 4);
    assert_eq!(inserted(&p), vec![(CollectiveKind::ReduceScatter, 8192, 4)]);
    assert_eq!(shape_of(&p, &p.info.inserted[0].name), "f32[16,32]{1,0}");
}

#[test]
fn experts_over_an_axis_take_an_all_to_all() {
    // Tokens split on the group dim (1) move to the expert dim (0): one all-to-all of the per-device block
    // f32[8,4,32] (4096 bytes) among 4 devices; the expert dot (batch dim 0 split on both sides) needs none.
    let p = run(
        "  xe = f32[8,16,32]{2,1,0} parameter(0), sharding={devices=[1,4,1]<=[4]}\n  \
         w = f32[8,32,64]{2,1,0} parameter(1), sharding={devices=[4,1,1]<=[4]}\n  \
         c = f32[8,16,32]{2,1,0} custom-call(xe), custom_call_target=\"Sharding\", sharding={devices=[4,1,1]<=[4]}\n  \
         ROOT h = f32[8,16,64]{2,1,0} dot(c, w), lhs_batch_dims={0}, rhs_batch_dims={0}, \
         lhs_contracting_dims={2}, rhs_contracting_dims={1}, sharding={devices=[4,1,1]<=[4]}",
        4,
    );
    assert_eq!(inserted(&p), vec![(CollectiveKind::AllToAll, 8 * 4 * 32 * 4, 4)]);
    assert_eq!(shape_of(&p, "h"), "f32[2,16,64]{2,1,0}");
}

#[test]
fn a_transposed_device_order_is_a_collective_permute() {
    // 2x2 tiles on devices [0,1,2,3] -> the same tiles on [0,2,1,3]: devices 1 and 2 swap their f32[8,8]
    // (256 bytes); 0 and 3 keep theirs.
    let p = run(
        "  x = f32[16,16]{1,0} parameter(0), sharding={devices=[2,2]<=[4]}\n  \
         ROOT c = f32[16,16]{1,0} custom-call(x), custom_call_target=\"Sharding\", sharding={devices=[2,2]<=[2,2]T(1,0)}",
        4,
    );
    assert_eq!(inserted(&p), vec![(CollectiveKind::CollectivePermute, 256, 2)]);
    let e = p.module.entry_computation();
    let perm = e
        .instructions
        .iter()
        .find(|i| i.opcode == "collective-permute")
        .unwrap();
    assert_eq!(perm.attr("source_target_pairs"), Some("{{2,1},{1,2}}"));
}

#[test]
fn an_uneven_split_is_padded_and_an_unknown_op_is_gathered_with_a_warning() {
    // 10 rows over 4 devices: XLA pads to 3 rows each. `sort` is outside the patterns: its operand is
    // all-gathered whole (f32[12,4] gathered = 192 bytes, padding included) and it runs replicated.
    let p = run(
        "  x = f32[10,4]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}\n  \
         ROOT s = f32[10,4]{1,0} sort(x), dimensions={0}, to_apply=add",
        4,
    );
    assert_eq!(shape_of(&p, "x"), "f32[3,4]{1,0}");
    assert_eq!(inserted(&p), vec![(CollectiveKind::AllGather, 12 * 4 * 4, 4)]);
    assert_eq!(p.info.inserted[0].rule, Rule::Conservative);
    assert!(p.info.warnings[0].contains("`s` (sort)"), "{:?}", p.info.warnings);
}

#[test]
fn shardings_the_slice_cannot_hold_are_errors_naming_the_instruction() {
    for (sharding, want) in [
        ("{devices=[2,2,2]<=[8]}", "rank 2"),
        ("{devices=[8,1]<=[8]}", "holds 8 devices but the slice (or mesh) has 4"),
    ] {
        let text = format!(
            "HloModule m\n\nENTRY main {{\n  x = f32[16,16]{{1,0}} parameter(0), sharding={sharding}\n  \
             ROOT y = f32[16,16]{{1,0}} negate(x)\n}}\n"
        );
        let m = HloModule::parse(&text).unwrap();
        let e = partition(&m, 4, None, &text).unwrap_err().to_string();
        assert!(
            e.contains("line 4") && e.contains("instruction `x`") && e.contains(want),
            "{e}"
        );
        assert!(e.contains("valid"), "{e}");
    }
}
