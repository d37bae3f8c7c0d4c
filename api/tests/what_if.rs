//! One chip, one answer: a what-if on a chip field moves the same kernels by the same amount in
//! `tpusim op`, `tpusim hlo` and `tpusim run` (each command's own entry into the libraries).

use serde_json::{json, Value};
use sim_tpu::hlo::{cost_module, HloModule};
use sim_tpu::tensorcore::ChipModel;
use tpusim_api::op::{cost_spec, op_chip};
use workloads::program::{dense::dense_program, resolve::resolve};
use workloads::Workload;

/// A matmul the op model calls HBM-bound on v4: 8 rows against an 8192 x 8192 bf16 weight.
const NARROW: &str = r#"{"op":"matmul","params":{"M":8,"K":8192,"N":8192,"dtype":"bfloat16"}}"#;
/// A matmul the op model calls MXU-bound on v4.
const SQUARE: &str = r#"{"op":"matmul","params":{"M":4096,"K":4096,"N":4096,"dtype":"bfloat16"}}"#;

fn dot_module(m: u64, k: u64, n: u64) -> HloModule {
    let text = format!(
        "HloModule m\n\nENTRY e {{\n  a = bf16[{m},{k}]{{1,0}} parameter(0)\n  b = bf16[{k},{n}]{{1,0}} parameter(1)\n  \
         ROOT d = bf16[{m},{n}]{{1,0}} dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n}}\n"
    );
    HloModule::parse(&text).unwrap()
}

/// `tpusim op --chip v4 --chip-file F` with F = `overrides`: (cycles, time ns).
fn op(spec: &str, overrides: &Value) -> (u64, f64) {
    let (chip, model) = op_chip("v4", Some(overrides)).unwrap();
    let s = cost_spec(spec, &chip, &model).unwrap();
    (s.cycles, s.time_ns)
}

/// `tpusim hlo --chip v4 --set chip.K=V...`: total cycles.
fn hlo(module: &HloModule, overrides: &Value) -> u64 {
    let sets: Vec<String> = overrides
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| format!("chip.{k}={v}"))
        .collect();
    let chip = tpusim_api::hlo::chip("v4", &sets).unwrap();
    cost_module(module, &ChipModel::for_chip(&chip).unwrap())
        .unwrap()
        .total_cycles
}

/// `tpusim run --preset dlrm-criteo --set chip.K=V...`: the built-in bottom MLP's first forward
/// kernel (body cycles on each TensorCore, fixed cycles), the op spec it is and the TensorCores
/// sharing it.
fn run_bottom0(overrides: &Value) -> ((u64, u64), String, u64) {
    let w = Workload::preset("dlrm-criteo").unwrap();
    let plan = resolve(&w, Some(overrides)).unwrap();
    let dense = dense_program(&plan).unwrap();
    let k = dense.forward.iter().find(|k| k.name == "bottom0 fwd").unwrap();
    let spec = json!({"op": "mlp_layer", "params": {"B": w.batch_per_chip(), "Din": w.dense.dense_features,
        "Dout": w.dense.bottom[0], "dtype": "bfloat16"}});
    ((k.cycles, k.fixed_cycles), spec.to_string(), plan.tc_share)
}

fn ratio(a: u64, b: u64) -> f64 {
    a as f64 / b as f64
}

/// `run`'s kernel is `op`'s cost of the same spec, its body split over the chip's TensorCores and its
/// fixed cost (v4's fitted MXU kernel launch, 1,438.4 cycles in `calibration.json` since the refit on the op
/// sample and corpus) paid whole, what-if or not.
fn assert_run_matches_op(overrides: &Value) {
    let ((body, fixed), spec, share) = run_bottom0(overrides);
    assert_eq!(fixed, 1438, "{overrides}");
    assert_eq!(body, (op(&spec, overrides).0 - fixed).div_ceil(share), "{overrides}");
}

#[test]
fn quarter_hbm_bandwidth_moves_hbm_bound_kernels_four_times_everywhere() {
    let base = json!({});
    // By hand: the weight is 8192 x 8192 x 2 B = 128 MiB, read once at v4's fitted window-stream
    // rate of 1174.64 B per cycle: 114,263 cycles. At a quarter of the bandwidth that stream takes
    // 3 x 114,263 = 342,790 cycles more; the launch and the windows' fill are added on top, so
    // the kernel grows by at least that and by a little under 4x.
    for field in ["hbm_bytes_per_s", "model_hbm_bytes_per_s"] {
        let preset = sim_tpu::chips::Chip::preset("v4").unwrap();
        let full = preset.to_json()[field]["value"].as_u64().unwrap();
        let quarter = json!({ field: full / 4 });
        let (c0, _) = op(NARROW, &base);
        let (c1, _) = op(NARROW, &quarter);
        let r_op = ratio(c1, c0);
        assert!(
            c1 - c0 >= 342_790 && (3.4..=4.0).contains(&r_op),
            "{field}: op {c0} -> {c1}"
        );
        let m = dot_module(8, 8192, 8192);
        let r_hlo = ratio(hlo(&m, &quarter), hlo(&m, &base));
        assert!((r_hlo / r_op - 1.0).abs() < 0.02, "{field}: hlo x{r_hlo} vs op x{r_op}");
        // An MXU-bound matmul hardly moves.
        let r_sq = ratio(op(SQUARE, &quarter).0, op(SQUARE, &base).0);
        assert!(r_sq < 1.1, "{field}: square x{r_sq}");
        assert_run_matches_op(&quarter);
    }
}

#[test]
fn doubled_clock_halves_compute_time_and_doubles_stream_cycles_everywhere() {
    let base = json!({});
    let fast = json!({"tc_clock_mhz": 2100});
    // By hand: the clock is 1045 MHz x 2100 / 1050 = 2090 MHz. An MXU-bound kernel takes the same
    // cycles (to 1%: its windows' HBM fill is twice as many cycles) in half the time; an HBM-bound
    // one the same time in twice the cycles.
    // Since the refit on the op corpus, v4's matmul result leaves at the fitted matmul stream rate (422.9 B
    // per cycle in `calibration.json`), and at most that write (4096 x 4096 x 2 B / 422.9 = 79,340 cycles)
    // is exposed past the MXU passes: only those cycles may double.
    let (c0, t0) = op(SQUARE, &base);
    let (c1, t1) = op(SQUARE, &fast);
    assert!(c1 >= c0 && c1 - c0 <= 79_340, "{c0} -> {c1}");
    assert!((t1 / t0 - 0.5 * ratio(c1, c0)).abs() < 0.001, "{t0} -> {t1}");
    let (n0, u0) = op(NARROW, &base);
    let (n1, u1) = op(NARROW, &fast);
    assert!((1.8..=2.0).contains(&ratio(n1, n0)), "{n0} -> {n1}");
    assert!((u1 / u0 - 1.0).abs() < 0.1, "{u0} -> {u1}");
    let m = dot_module(8, 8192, 8192);
    let r_hlo = ratio(hlo(&m, &fast), hlo(&m, &base));
    assert!((r_hlo / ratio(n1, n0) - 1.0).abs() < 0.02, "hlo x{r_hlo}");
    let sq = dot_module(4096, 4096, 4096);
    // `hlo` keeps the result in the epilogue, hidden under the MXU passes: its kernel moves by no more
    // than the op model's exposed write (the same 79,340-cycle bound).
    let (h0, h1) = (hlo(&sq, &base), hlo(&sq, &fast));
    assert!(h1 >= h0 && h1 - h0 <= 79_340, "hlo {h0} -> {h1}, op {c0} -> {c1}");
    assert_run_matches_op(&fast);
    // The step's TensorCore runs at the same clock as the kernels are costed in.
    let w = Workload::preset("dlrm-criteo").unwrap();
    assert_eq!(resolve(&w, Some(&fast)).unwrap().model.clock_hz, 2.09e9);
}

#[test]
fn doubled_mxus_halve_mxu_bound_kernels_everywhere() {
    let base = json!({});
    let wide = json!({"mxus_per_tensorcore": 8});
    // By hand: 4096^3 MACs over 4 MXUs of 128 x 128 is 1,048,576 passes' worth of cycles; with 8
    // MXUs half that. The launch and the first window's fill do not halve, so a little over 0.5.
    let (o0, o1) = (op(SQUARE, &base).0, op(SQUARE, &wide).0);
    let r_op = ratio(o1, o0);
    assert!((0.5..=0.56).contains(&r_op), "op x{r_op}");
    // The same MXU cycles leave both models: the kernels' fixed parts (launch, epilogue) differ by each
    // model's fitted factors, so the cycles saved, not the ratios, are what must agree. They agree to 3%,
    // not exactly: `hlo` keeps the result's DMA out of the window plan (`mxu_body`), so how much of that
    // 32 MiB write the halved MXU passes still hide differs by a few percent of the saving.
    let sq = dot_module(4096, 4096, 4096);
    let (h0, h1) = (hlo(&sq, &base), hlo(&sq, &wide));
    let (saved_op, saved_hlo) = (o0 - o1, h0 - h1);
    assert!(
        (ratio(saved_hlo, saved_op) - 1.0).abs() < 0.03,
        "hlo saves {saved_hlo} cycles, op {saved_op}"
    );
    assert_run_matches_op(&wide);
}
