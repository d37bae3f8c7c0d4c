//! A TensorCore kernel's fixed cost per chip against the compiler's estimates of tiny kernels
//! (`testdata/tensorcore/launch.jsonl`, from `tools/tc-launch-probe/probe.py`: adds, reduces,
//! three-op fusions and matmuls of 8 to 64 rows). The op model was fitted on other programs
//! (`reference/tpu-compiler/ops.jsonl`), so these records are held out. The step charges each kernel
//! this fixed cost whole on every TensorCore (`workloads` dense kernels).

use sim_tpu::chips::Chip;
use sim_tpu::tensorcore::{cost, ChipModel, OpSpec};

struct Rec {
    chip: String,
    kind: String,
    rows: u64,
    cycles: f64,
}

fn records() -> Vec<Rec> {
    include_str!("../../testdata/tensorcore/launch.jsonl")
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v.get("error").is_none())
        .map(|v| Rec {
            chip: v["chip"].as_str().unwrap().into(),
            kind: v["kind"].as_str().unwrap().into(),
            rows: v["rows"].as_u64().unwrap(),
            cycles: v["total_estimated_cycles"].as_f64().unwrap(),
        })
        .collect()
}

/// Least-squares intercept at zero rows.
fn intercept(pts: &[(f64, f64)]) -> f64 {
    let n = pts.len() as f64;
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    my - sxy / sxx * mx
}

fn model(chip: &str) -> ChipModel {
    ChipModel::for_chip(&Chip::preset(chip).unwrap()).unwrap()
}

#[test]
fn vpu_kernel_fixed_cost_matches_tiny_kernels_on_every_chip() {
    let recs = records();
    for chip in ["v4", "v5e", "v5p", "v6e", "tpu7x"] {
        let per_kind: Vec<f64> = ["add", "reduce", "fusion"]
            .iter()
            .map(|k| {
                let pts: Vec<(f64, f64)> = recs
                    .iter()
                    .filter(|r| r.chip == chip && r.kind == *k)
                    .map(|r| (r.rows as f64, r.cycles))
                    .collect();
                assert_eq!(pts.len(), 4, "{chip} {k}");
                intercept(&pts)
            })
            .collect();
        let fixed = per_kind.iter().sum::<f64>() / 3.0;
        let launch = model(chip).params.launch_cycles;
        assert!(
            (launch / fixed - 1.0).abs() < 0.03,
            "{chip}: op model's VPU launch {launch:.0} vs tiny kernels' {fixed:.0} cycles"
        );
    }
    // By hand from the v4 records: adds 628, 657, 715, 832 at 8, 16, 32, 64 rows fall on about
    // 600 + 3.6 cycles per row; a kernel's fixed cost on v4 is about 0.57 us at 1.045 GHz.
    let v4_add: Vec<(f64, f64)> = recs
        .iter()
        .filter(|r| r.chip == "v4" && r.kind == "add")
        .map(|r| (r.rows as f64, r.cycles))
        .collect();
    assert!((intercept(&v4_add) - 600.0).abs() < 5.0);
}

#[test]
fn tiny_kernels_whole_cost_within_a_fifth() {
    for r in records() {
        let spec = match r.kind.as_str() {
            "add" => serde_json::json!({"op": "add", "params": {"shape": [r.rows, 128], "dtype": "float32"}}),
            "reduce" => {
                serde_json::json!({"op": "reduce_sum_minor", "params": {"shape": [r.rows, 128], "dtype": "float32"}})
            }
            "matmul" => {
                serde_json::json!({"op": "matmul", "params": {"M": r.rows, "K": 128, "N": 128, "dtype": "float32"}})
            }
            _ => continue,
        };
        let c = cost(&OpSpec::from_value(&spec).unwrap(), &model(&r.chip)).unwrap();
        let ratio = c.cycles as f64 / r.cycles;
        assert!(
            (0.8..1.25).contains(&ratio),
            "{} {} {} rows: model {} vs compiler {}",
            r.chip,
            r.kind,
            r.rows,
            c.cycles,
            r.cycles
        );
    }
}
