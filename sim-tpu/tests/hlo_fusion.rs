//! Kernel grouping rules checked on small hand-written modules, with the expected kernels worked out by hand.

use sim_tpu::hlo::{cost_module, HloModule, KernelKind};
use sim_tpu::tensorcore::ChipModel;

fn kernels(text: &str) -> Vec<Vec<String>> {
    let m = HloModule::parse(text).unwrap();
    let c = cost_module(&m, &ChipModel::preset("v5p").unwrap()).unwrap();
    c.kernels.iter().map(|k| k.instructions.clone()).collect()
}

const ADD: &str = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n";

/// A normalisation gradient's row sums and column sums of one [4096,768] input: neither needs the other, both
/// walk the same 4096x768 elements, so the compiler emits one multi-output reduce kernel reading x once.
#[test]
fn sibling_reductions_of_one_buffer_share_a_kernel() {
    let text = format!(
        "HloModule m\n\n{ADD}ENTRY main {{\n  x = f32[4096,768]{{1,0}} parameter(0)\n  z = f32[] constant(0)\n  \
         rows = f32[4096]{{0}} reduce(x, z), dimensions={{1}}, to_apply=add\n  \
         cols = f32[768]{{0}} reduce(x, z), dimensions={{0}}, to_apply=add\n  \
         ROOT t = (f32[4096]{{0}}, f32[768]{{0}}) tuple(rows, cols)\n}}\n"
    );
    let ks = kernels(&text);
    assert_eq!(ks.len(), 1, "{ks:?}");
    assert!(ks[0].contains(&"rows".to_string()) && ks[0].contains(&"cols".to_string()));
}

/// The second reduction reads the first one's result (mean, then variance around it): it depends on it, so
/// the two stay separate kernels.
#[test]
fn dependent_reductions_stay_apart() {
    let text = format!(
        "HloModule m\n\n{ADD}ENTRY main {{\n  x = f32[4096,768]{{1,0}} parameter(0)\n  z = f32[] constant(0)\n  \
         s = f32[4096]{{0}} reduce(x, z), dimensions={{1}}, to_apply=add\n  \
         b = f32[4096,768]{{1,0}} broadcast(s), dimensions={{0}}\n  \
         d = f32[4096,768]{{1,0}} subtract(x, b)\n  \
         q = f32[4096,768]{{1,0}} multiply(d, d)\n  \
         ROOT v = f32[4096]{{0}} reduce(q, z), dimensions={{1}}, to_apply=add\n}}\n"
    );
    assert_eq!(kernels(&text).len(), 2);
}

/// Reductions of the same buffer over different iteration spaces (a slice of it) are not merged.
#[test]
fn reductions_over_different_spaces_stay_apart() {
    let text = format!(
        "HloModule m\n\n{ADD}ENTRY main {{\n  x = f32[4096,768]{{1,0}} parameter(0)\n  z = f32[] constant(0)\n  \
         rows = f32[4096]{{0}} reduce(x, z), dimensions={{1}}, to_apply=add\n  \
         h = f32[2048,768]{{1,0}} slice(x), slice={{[0:2048], [0:768]}}\n  \
         e = f32[2048,768]{{1,0}} exponential(h)\n  \
         ROOT t = (f32[4096]{{0}}, f32[2048,768]{{1,0}}) tuple(rows, e)\n}}\n"
    );
    assert_eq!(kernels(&text).len(), 2);
}

fn kernel_of<'a>(ks: &'a [Vec<String>], name: &str) -> Vec<&'a Vec<String>> {
    ks.iter().filter(|k| k.iter().any(|i| i == name)).collect()
}

const MAX: &str = "max {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] maximum(a, b)\n}\n\n";

/// A softmax over a [512,32768] parameter: `e = exp(x - max)` is read by the row sum and by the normalised
/// output. Re-reading x (64 MiB) costs no more than writing e out and reading it back (2 x 64 MiB), so the
/// compiler recomputes e in both kernels: three kernels (max, sum, output), e in two of them, and no 64 MiB
/// temporary.
#[test]
fn a_cheap_exp_over_a_parameter_is_recomputed_by_each_consumer() {
    let text = format!(
        "HloModule m\n\n{ADD}{MAX}ENTRY main {{\n  x = f32[512,32768]{{1,0}} parameter(0)\n  \
         ninf = f32[] constant(-inf)\n  z = f32[] constant(0)\n  \
         m = f32[512]{{0}} reduce(x, ninf), dimensions={{1}}, to_apply=max\n  \
         mb = f32[512,32768]{{1,0}} broadcast(m), dimensions={{0}}\n  \
         d = f32[512,32768]{{1,0}} subtract(x, mb)\n  \
         e = f32[512,32768]{{1,0}} exponential(d)\n  \
         s = f32[512]{{0}} reduce(e, z), dimensions={{1}}, to_apply=add\n  \
         sb = f32[512,32768]{{1,0}} broadcast(s), dimensions={{0}}\n  \
         ROOT y = f32[512,32768]{{1,0}} divide(e, sb)\n}}\n"
    );
    let ks = kernels(&text);
    assert_eq!(ks.len(), 3, "{ks:?}");
    assert_eq!(kernel_of(&ks, "e").len(), 2, "{ks:?}");
    let m = HloModule::parse(&text).unwrap();
    let c = cost_module(&m, &ChipModel::preset("v5p").unwrap()).unwrap();
    // Only the two [512] f32 row statistics (2 KiB each) can be temporaries, plus the allocation's fixed
    // overhead (under 64 KiB).
    assert!(c.temp_bytes <= 2 * 2048 + (64 << 10), "temp {}", c.temp_bytes);
}

/// A normalisation's `r = rsqrt(var + eps)` of a per-row statistic feeds two full-size kernels: it is computed
/// once (its own small kernel) rather than in each, as the compiler's `add_rsqrt_fusion` shows.
#[test]
fn a_transcendental_of_a_statistic_is_computed_once() {
    let text = format!(
        "HloModule m\n\n{ADD}ENTRY main {{\n  x = f32[4096,768]{{1,0}} parameter(0)\n  z = f32[] constant(0)\n  \
         q = f32[4096,768]{{1,0}} multiply(x, x)\n  \
         v = f32[4096]{{0}} reduce(q, z), dimensions={{1}}, to_apply=add\n  \
         r = f32[4096]{{0}} rsqrt(v)\n  \
         rb = f32[4096,768]{{1,0}} broadcast(r), dimensions={{0}}\n  \
         y = f32[4096,768]{{1,0}} multiply(x, rb)\n  \
         w = f32[4096,768]{{1,0}} multiply(y, y)\n  \
         t = f32[4096]{{0}} reduce(w, z), dimensions={{1}}, to_apply=add\n  \
         ROOT o = (f32[4096,768]{{1,0}}, f32[4096]{{0}}) tuple(y, t)\n}}\n"
    );
    let ks = kernels(&text);
    assert_eq!(kernel_of(&ks, "r").len(), 1, "{ks:?}");
}

/// The gradient of `take_along_axis`: one scalar per row scattered into zeros of [512,32768] (batching
/// dimension 0). Each row receives exactly one update, so it is `select(iota == label, g, 0)`: an elementwise op
/// fused into its consumer, not a scatter kernel, and no tpusim warning about an unmodelled opcode.
#[test]
fn a_one_hot_scatter_is_an_elementwise_select() {
    let text = format!(
        "HloModule m\n\n{ADD}ENTRY main {{\n  x = f32[512,32768]{{1,0}} parameter(0)\n  \
         idx = s32[512,1,1]{{2,1,0}} parameter(1)\n  g = f32[512,1]{{1,0}} parameter(2)\n  \
         z = f32[] constant(0)\n  zb = f32[512,32768]{{1,0}} broadcast(z), dimensions={{}}\n  \
         sc = f32[512,32768]{{1,0}} scatter(zb, idx, g), update_window_dims={{}}, inserted_window_dims={{1}}, \
         scatter_dims_to_operand_dims={{1}}, input_batching_dims={{0}}, scatter_indices_batching_dims={{0}}, \
         index_vector_dim=2, to_apply=add\n  \
         ROOT y = f32[512,32768]{{1,0}} add(x, sc)\n}}\n"
    );
    let ks = kernels(&text);
    assert_eq!(ks.len(), 1, "{ks:?}");
    assert!(ks[0].contains(&"sc".to_string()) && ks[0].contains(&"y".to_string()));
    let m = HloModule::parse(&text).unwrap();
    let c = cost_module(&m, &ChipModel::preset("v5p").unwrap()).unwrap();
    assert!(c.unmodelled.is_empty(), "{:?}", c.unmodelled);
}

/// The same scatter with two updates per row (indices [512,2,1]) may collide within a row: it stays a scatter.
#[test]
fn a_scatter_with_several_updates_per_row_stays_a_scatter() {
    let text = format!(
        "HloModule m\n\n{ADD}ENTRY main {{\n  x = f32[512,32768]{{1,0}} parameter(0)\n  \
         idx = s32[512,2,1]{{2,1,0}} parameter(1)\n  g = f32[512,2]{{1,0}} parameter(2)\n  \
         z = f32[] constant(0)\n  zb = f32[512,32768]{{1,0}} broadcast(z), dimensions={{}}\n  \
         sc = f32[512,32768]{{1,0}} scatter(zb, idx, g), update_window_dims={{}}, inserted_window_dims={{1}}, \
         scatter_dims_to_operand_dims={{1}}, input_batching_dims={{0}}, scatter_indices_batching_dims={{0}}, \
         index_vector_dim=2, to_apply=add\n  \
         ROOT y = f32[512,32768]{{1,0}} add(x, sc)\n}}\n"
    );
    let m = HloModule::parse(&text).unwrap();
    let c = cost_module(&m, &ChipModel::preset("v5p").unwrap()).unwrap();
    assert_eq!(c.unmodelled.get("scatter"), Some(&1), "{:?}", c.unmodelled);
}

/// The kernels of the f32 transformer block's forward and backward pass (testdata).
fn transformer_backward_kernels() -> Vec<Vec<String>> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/hlo/transformer_block.b16_s128_d512_h8_fwdbwd_f32.hlo.txt"
    );
    kernels(&std::fs::read_to_string(path).unwrap())
}

/// In the transformer block's backward pass (testdata), the MLP's bias gradient `reduce_sum.183` sums the
/// gradient `dot_general.25`'s epilogue computes; the compiler's `fusion.110` (convolution, reduce, tanh) is
/// that one multi-output kernel. Grouping this module first closes a dependency cycle between multi-output
/// kernels; undoing only the joins on the cycle must keep this one.
#[test]
fn a_dependency_cycle_undoes_only_the_joins_on_it() {
    let ks = transformer_backward_kernels();
    let k = kernel_of(&ks, "reduce_sum.183");
    assert_eq!(k.len(), 1);
    assert!(k[0].contains(&"dot_general.25".to_string()), "{:?}", k[0]);
}

/// In the same module the attention scores `dot_general.19` feed the softmax's row max `reduce_max.7` and,
/// through the max, its exp and sum. Merging every consumer kernel into the dot's closes a cycle; the dot then
/// takes its earliest consumer, the max, as a second output and writes the scores out for the rest, as the
/// compiler's `fusion.108` (`(f32[16,8,128], f32[16,8,128,128])`: convolution, reduce) does; before, the
/// scores and the max were two kernels.
#[test]
fn a_dot_whose_consumers_close_a_cycle_joins_the_earliest() {
    let ks = transformer_backward_kernels();
    let k = kernel_of(&ks, "dot_general.19");
    assert_eq!(k.len(), 1);
    assert!(k[0].contains(&"reduce_max.7".to_string()), "{:?}", k[0]);
    assert!(!k[0].iter().any(|i| i.starts_with("reduce_sum")), "{:?}", k[0]);
}

/// A narrow first layer (K = 13: its result is 32 times its operands' bytes) feeding one matmul is computed in that
/// matmul's prologue, as the compiler's forward-only bottom MLPs show (two kernels for three dots). Feeding two
/// matmuls (the next layer and its weight gradient), it is computed once and written out: the compiler's
/// forward+backward bottom MLPs have a kernel of their own for it on every chip.
#[test]
fn a_narrow_layer_is_recomputed_for_one_matmul_only() {
    let head = "HloModule m\n\nENTRY main {\n  x = bf16[8192,13]{1,0} parameter(0)\n  \
                w0 = bf16[13,512]{1,0} parameter(1)\n  w1 = bf16[512,256]{1,0} parameter(2)\n  \
                g = bf16[8192,256]{1,0} parameter(3)\n  \
                h = bf16[8192,512]{1,0} dot(x, w0), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n  \
                y = bf16[8192,256]{1,0} dot(h, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n";
    let one = format!("{head}  ROOT r = bf16[8192,256]{{1,0}} negate(y)\n}}\n");
    let ks = kernels(&one);
    assert_eq!(ks.len(), 1, "{ks:?}");
    assert!(ks[0].contains(&"h".to_string()) && ks[0].contains(&"y".to_string()));

    let two = format!(
        "{head}  dw = bf16[512,256]{{1,0}} dot(h, g), lhs_contracting_dims={{0}}, rhs_contracting_dims={{0}}\n  \
         ROOT t = (bf16[8192,256]{{1,0}}, bf16[512,256]{{1,0}}) tuple(y, dw)\n}}\n"
    );
    let ks = kernels(&two);
    assert_eq!(kernel_of(&ks, "h").len(), 1, "{ks:?}");
    assert_eq!(ks.len(), 3, "{ks:?}");
}

/// A GELU's `tanh` of a matmul result `h = x W` (bf16[512,1024] x [1024,1024]) read by two matmul kernels (the next
/// layer `h2 = g V` and its weight gradient `dV = g^T d`) and by the activation's gradient: the compiler recomputes
/// it in each consumer from `h`, which the first matmul writes out (no mlp, transformer_block or moe_routing record
/// of the corpus has a loop fusion computing `tanh`; mlp.019@v6e nests the GELU in its consumers' fusions). So
/// the module's kernels are its four matmuls (`h`, `h2`, `dV`, `dh`, the last with the activation's gradient) and
/// no loop kernel; `tanh` is a member of every kernel that consumes the activation, and the first writes `h`.
/// Over a batched matmul (attention scores) the rule does not apply: the same activation there is computed once,
/// by one kernel that writes it out.
#[test]
fn an_activation_of_a_matmul_result_is_recomputed_by_its_consumers() {
    let module = |batch: &str, dims: &str| {
        format!(
            "HloModule m\n\nENTRY main {{\n  x = bf16[{batch}512,1024]{{{dims}}} parameter(0)\n  \
             w = bf16[{batch}1024,1024]{{{dims}}} parameter(1)\n  v = bf16[{batch}1024,1024]{{{dims}}} parameter(2)\n  \
             d = bf16[{batch}512,1024]{{{dims}}} parameter(3)\n  \
             h = bf16[{batch}512,1024]{{{dims}}} dot(x, w), {bd}lhs_contracting_dims={{{c}}}, rhs_contracting_dims={{{r}}}\n  \
             g = bf16[{batch}512,1024]{{{dims}}} tanh(h)\n  \
             h2 = bf16[{batch}512,1024]{{{dims}}} dot(g, v), {bd}lhs_contracting_dims={{{c}}}, rhs_contracting_dims={{{r}}}\n  \
             dv = bf16[{batch}1024,1024]{{{dims}}} dot(g, d), {bd}lhs_contracting_dims={{{r}}}, rhs_contracting_dims={{{r}}}\n  \
             one = bf16[] constant(1)\n  ones = bf16[{batch}512,1024]{{{dims}}} broadcast(one), dimensions={{}}\n  \
             gg = bf16[{batch}512,1024]{{{dims}}} multiply(g, g)\n  dg = bf16[{batch}512,1024]{{{dims}}} subtract(ones, gg)\n  \
             dd = bf16[{batch}512,1024]{{{dims}}} multiply(d, dg)\n  \
             dh = bf16[{batch}512,1024]{{{dims}}} dot(dd, w), {bd}lhs_contracting_dims={{{c}}}, rhs_contracting_dims={{{c}}}\n  \
             ROOT t = (bf16[{batch}512,1024]{{{dims}}}, bf16[{batch}1024,1024]{{{dims}}}, bf16[{batch}512,1024]{{{dims}}}) tuple(h2, dv, dh)\n}}\n",
            bd = if batch.is_empty() { "" } else { "lhs_batch_dims={0}, rhs_batch_dims={0}, " },
            c = if batch.is_empty() { "1" } else { "2" },
            r = if batch.is_empty() { "0" } else { "1" },
        )
    };
    let cost_on = |text: &str, chip: &str| {
        cost_module(&HloModule::parse(text).unwrap(), &ChipModel::preset(chip).unwrap()).unwrap()
    };
    for chip in ["v5e", "v6e"] {
        let c = cost_on(&module("", "1,0"), chip);
        let names: Vec<&str> = c.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(c.kernels.len(), 4, "{chip}: {names:?}");
        assert!(
            c.kernels.iter().all(|k| k.kind == KernelKind::Mxu),
            "{chip}: {:#?}",
            c.kernels
        );
        for name in ["h2", "dv", "dh"] {
            let k = c.kernels.iter().find(|k| k.name == name).expect("a consumer's kernel");
            assert!(
                k.instructions.iter().any(|i| i == "g"),
                "{chip}: {name}: {:?}",
                k.instructions
            );
        }
        let b = cost_on(&module("2,", "2,1,0"), chip);
        let computing = b
            .kernels
            .iter()
            .filter(|k| k.instructions.iter().any(|i| i == "g"))
            .count();
        assert_eq!(
            computing, 1,
            "{chip}: over batched matmuls the tanh is computed once: {:#?}",
            b.kernels
        );
    }
}
