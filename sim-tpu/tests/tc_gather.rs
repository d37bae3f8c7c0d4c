//! The TensorCore gather model against the compiler's own estimates of `jnp.take` and scatter-add
//! (`testdata/tensorcore/gather.jsonl`, from `tools/tc-gather-probe/probe.py`). The constants were
//! fitted on the fit split only; the held-out records check them.

use sim_tpu::tensorcore::gather::{gather_params, tc_gather, GatherOp};
use sim_tpu::tensorcore::ChipModel;

struct Rec {
    chip: String,
    op: GatherOp,
    vocab: u64,
    dim: u64,
    elem: u64,
    ids: u64,
    cycles: u64,
}

fn records() -> Vec<Rec> {
    let text = include_str!("../../testdata/tensorcore/gather.jsonl");
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v.get("error").is_none())
        .map(|v| Rec {
            chip: v["chip"].as_str().unwrap().into(),
            op: if v["op"] == "take" {
                GatherOp::Take
            } else {
                GatherOp::ScatterAdd
            },
            vocab: v["vocab"].as_u64().unwrap(),
            dim: v["dim"].as_u64().unwrap(),
            elem: if v["dtype"] == "bfloat16" { 2 } else { 4 },
            ids: v["ids"].as_u64().unwrap(),
            cycles: v["total_estimated_cycles"].as_u64().unwrap(),
        })
        .collect()
}

fn held_out(r: &Rec) -> bool {
    !(r.vocab == 5120 || r.vocab == 1_000_000 || r.dim == 2048)
}

#[test]
fn held_out_records_within_a_quarter() {
    let mut checked = 0;
    for r in records().iter().filter(|r| held_out(r) && r.dim * r.elem >= 256) {
        let model = ChipModel::preset(&r.chip).unwrap();
        let c = tc_gather(&model, r.op, r.ids, r.dim * r.elem, r.vocab * r.dim).unwrap();
        let err = c.cycles as f64 / r.cycles as f64;
        assert!(
            (0.75..=1.25).contains(&err),
            "{} {:?} {}x{} ids {}: {} vs {}",
            r.chip,
            r.op,
            r.vocab,
            r.dim,
            r.ids,
            c.cycles,
            r.cycles
        );
        checked += 1;
    }
    assert!(checked >= 10, "{checked}");
}

#[test]
fn compiler_facts_the_model_keeps() {
    let recs = records();
    let find = |chip: &str, op: GatherOp, vocab: u64, ids: u64| {
        recs.iter()
            .find(|r| r.chip == chip && r.op == op && r.vocab == vocab && r.ids == ids && r.dim == 128 && r.elem == 4)
            .unwrap()
            .cycles
    };
    // A take does not depend on the table's size; a scatter-add into a dense gradient does not
    // depend on the ids but grows with the table.
    assert_eq!(
        find("v4", GatherOp::Take, 5120, 4752),
        find("v4", GatherOp::Take, 1_000_000, 4752)
    );
    let small = find("v4", GatherOp::ScatterAdd, 5120, 4752);
    assert!(small.abs_diff(find("v4", GatherOp::ScatterAdd, 5120, 512)) * 50 < small);
    assert!(find("v4", GatherOp::ScatterAdd, 1_000_000, 4752) > 100 * small);
    let v4 = ChipModel::preset("v4").unwrap();
    let take = |vocab: u64| tc_gather(&v4, GatherOp::Take, 4752, 512, vocab * 128).unwrap().cycles;
    assert_eq!(take(5120), take(1_000_000));
    let scatter = |ids| {
        tc_gather(&v4, GatherOp::ScatterAdd, ids, 512, 5120 * 128)
            .unwrap()
            .cycles
    };
    assert_eq!(scatter(512), scatter(4752));
}

#[test]
fn scatter_add_by_hand_and_hbm_what_if() {
    let v4 = ChipModel::preset("v4").unwrap();
    let g = gather_params(&v4).unwrap();
    // The MLPerf DLRM TensorCore table, 5,120 x 128 f32: written and read once in f32 at
    // 491 GB/s / 1.045 GHz = 469.86 B per cycle times the fitted efficiency, plus the launch.
    let bytes = 5120.0 * 128.0 * 4.0 * 2.0;
    let want = g.launch_cycles + bytes / (491e9 / 1.045e9 * g.scatter_hbm_efficiency);
    let c = tc_gather(&v4, GatherOp::ScatterAdd, 4752, 512, 5120 * 128).unwrap();
    assert!((c.cycles as f64 - want).abs() <= 1.0, "{} vs {want}", c.cycles);
    // A quarter of the HBM bandwidth: the table pass takes four times as long.
    let chip = sim_tpu::chips::Chip::preset("v4")
        .unwrap()
        .with_overrides(&serde_json::json!({"hbm_bytes_per_s": 300_000_000_000u64}))
        .unwrap();
    let slow = ChipModel::for_chip(&chip).unwrap();
    let s = tc_gather(&slow, GatherOp::ScatterAdd, 4752, 512, 5120 * 128).unwrap();
    let body = |x: u64| x as f64 - g.launch_cycles;
    assert!((body(s.cycles) / body(c.cycles) - 4.0).abs() < 1e-3);
}
