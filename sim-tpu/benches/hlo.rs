//! `tpusim hlo` on a 10,000-instruction module: reading it and costing it (target: costing under 100 ms).

use criterion::{criterion_group, criterion_main, Criterion};
use sim_tpu::hlo::{cost_module, HloModule};
use sim_tpu::tensorcore::ChipModel;

/// A deep MLP with layernorms, 20 instructions per layer: dot, bias, gelu-like activation, residual, norm.
fn module(instructions: usize) -> String {
    let mut s = String::from("HloModule big\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\nENTRY main {\n");
    s += "  x0 = bf16[1024,1024]{1,0} parameter(0)\n  zero = f32[] constant(0)\n  n = f32[] constant(1024)\n";
    let layers = instructions / 20;
    for i in 0..layers {
        let p = if i == 0 { "x0".to_string() } else { format!("x{i}") };
        s += &format!(
            "  w{i} = bf16[1024,1024]{{1,0}} parameter({})\n  b{i} = bf16[1024]{{0}} parameter({})\n\
             \x20 d{i} = bf16[1024,1024]{{1,0}} dot({p}, w{i}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n\
             \x20 bb{i} = bf16[1024,1024]{{1,0}} broadcast(b{i}), dimensions={{1}}\n\
             \x20 h{i} = bf16[1024,1024]{{1,0}} add(d{i}, bb{i})\n\
             \x20 t{i} = bf16[1024,1024]{{1,0}} tanh(h{i})\n\
             \x20 g{i} = bf16[1024,1024]{{1,0}} multiply(h{i}, t{i})\n\
             \x20 r{i} = bf16[1024,1024]{{1,0}} add(g{i}, {p})\n\
             \x20 f{i} = f32[1024,1024]{{1,0}} convert(r{i})\n\
             \x20 s{i} = f32[1024]{{0}} reduce(f{i}, zero), dimensions={{1}}, to_apply=add\n\
             \x20 nb{i} = f32[1024]{{0}} broadcast(n), dimensions={{}}\n\
             \x20 m{i} = f32[1024]{{0}} divide(s{i}, nb{i})\n\
             \x20 mb{i} = f32[1024,1024]{{1,0}} broadcast(m{i}), dimensions={{0}}\n\
             \x20 c{i} = f32[1024,1024]{{1,0}} subtract(f{i}, mb{i})\n\
             \x20 q{i} = f32[1024,1024]{{1,0}} multiply(c{i}, c{i})\n\
             \x20 v{i} = f32[1024]{{0}} reduce(q{i}, zero), dimensions={{1}}, to_apply=add\n\
             \x20 rs{i} = f32[1024]{{0}} rsqrt(v{i})\n\
             \x20 rb{i} = f32[1024,1024]{{1,0}} broadcast(rs{i}), dimensions={{0}}\n\
             \x20 o{i} = f32[1024,1024]{{1,0}} multiply(c{i}, rb{i})\n\
             \x20 x{} = bf16[1024,1024]{{1,0}} convert(o{i})\n",
            2 * i + 1,
            2 * i + 2,
            i + 1
        );
    }
    s += &format!("  ROOT out = bf16[1024,1024]{{1,0}} negate(x{layers})\n}}\n");
    s
}

fn bench(c: &mut Criterion) {
    let text = module(10_000);
    let m = HloModule::parse(&text).unwrap();
    assert!(m.instruction_count() >= 10_000, "{}", m.instruction_count());
    let chip = ChipModel::preset("v5e").unwrap();
    c.bench_function("hlo_parse_10k_instructions", |b| {
        b.iter(|| HloModule::parse(&text).unwrap())
    });
    c.bench_function("hlo_cost_10k_instructions", |b| {
        b.iter(|| cost_module(&m, &chip).unwrap())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
