//! `tpusim hlo` rules for matmul programs (MLPs, DCN cross layers), read off the compiler corpus's optimized modules
//! (testdata/hlo/corpus/, tools/corpus/): a reduction over a matmul's epilogue is one more output of the matmul's
//! kernel, and a weight only matmuls read is prefetched on chip. Each module is written by hand here, with its
//! expected kernels and cycles worked out in the test.

use sim_tpu::hlo::{KernelKind, ModuleCost};
use sim_tpu::tensorcore::ChipModel;

mod support;
use support::hlo::cost_on;

/// Layer 2 of an MLP trained on `sum(y * y)`: `y = x W` (f32[4096,256] x [256,1024]) feeds the loss and the next
/// matmul `z = y V` ([1024,256]). `body` is what the entry computes besides `y`.
fn layer_module(body: &str, root: &str) -> String {
    format!(
        "HloModule m\n\nadd {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}}\n\n\
         max {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] maximum(a, b)\n}}\n\n\
         ENTRY main {{\n  x = f32[4096,256]{{1,0}} parameter(0)\n  w = f32[256,1024]{{1,0}} parameter(1)\n  \
         v = f32[1024,256]{{1,0}} parameter(2)\n  \
         y = f32[4096,1024]{{1,0}} dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n  \
         z = f32[4096,256]{{1,0}} dot(y, v), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n  \
         zero = f32[] constant(0)\n  ninf = f32[] constant(-inf)\n{body}  ROOT r = {root}\n}}\n"
    )
}

/// The loss `sum(y * y)` over the f32[4096,1024] result of a matmul that also feeds another matmul. The compiler
/// computes it in the matmul's output fusion (mlp.032 on v5e: one kOutput fusion of 57,136 cycles writes the bias
/// gradient, the loss and `y`), so it adds no kernel: the module has the two matmul kernels of the module without
/// the loss, the first computing the reduction too. A kernel of its own would cost at least the chip's whole
/// launch (`launch_cycles`, no loop or reduce kernel is estimated below it) on top of re-reading 4096 x 1024 f32;
/// fused, the reduction runs on result tiles already in registers: 4,096 vregs of 1,024 f32 elements, a multiply
/// and an add each, at most one vreg op per cycle: at most 8,192 cycles added to the matmul kernels.
#[test]
fn a_loss_over_a_matmul_result_is_an_output_of_the_matmuls_kernel() {
    let with = layer_module(
        "  sq = f32[4096,1024]{1,0} multiply(y, y)\n  loss = f32[] reduce(sq, zero), dimensions={0,1}, to_apply=add\n",
        "(f32[], f32[4096,256]{1,0}) tuple(loss, z)",
    );
    let without = layer_module("", "(f32[4096,256]{1,0}) tuple(z)");
    for chip in ["v5e", "v6e"] {
        let c = cost_on(&with, chip);
        let base = cost_on(&without, chip);
        let mxu: Vec<_> = c.kernels.iter().filter(|k| k.kind == KernelKind::Mxu).collect();
        assert_eq!(mxu.len(), 2, "{chip}: {:#?}", c.kernels);
        assert!(
            c.kernels.iter().all(|k| k.kind != KernelKind::Reduce),
            "{chip}: a reduce kernel of its own: {:#?}",
            c.kernels
        );
        let first = mxu.iter().find(|k| k.name == "y").expect("the kernel of y");
        assert!(
            first.instructions.iter().any(|i| i == "loss"),
            "{chip}: {:?}",
            first.instructions
        );
        let mxu_cycles = |m: &ModuleCost| -> u64 {
            m.kernels
                .iter()
                .filter(|k| k.kind == KernelKind::Mxu)
                .map(|k| k.cycles)
                .sum()
        };
        let added = mxu_cycles(&c) as f64 - mxu_cycles(&base) as f64;
        assert!(
            (0.0..=8192.0).contains(&added),
            "{chip}: the loss adds {added} cycles to the matmul kernels, expected 0 to 8,192"
        );
        assert_eq!(c.kernels.len(), base.kernels.len(), "{chip}: {:#?}", c.kernels);
    }
}

/// A softmax's sum needs the row max first: `sum(exp(y - max(y)))` is a second pass over `y`. The compiler's
/// output fusion computes the max (softmax_xent.018 on v4: `(bf16[151], bf16[151,4480])` from the dot's kOutput
/// fusion, 14,052 cycles) and a loop fusion of its own the exp and sum (11,548 cycles). So the max joins the
/// matmul's kernel and the sum keeps a reduce kernel: three kernels (y with its max, the sum, z).
#[test]
fn a_reduction_needing_another_of_the_same_kernel_keeps_its_own_kernel() {
    let text = layer_module(
        "  m = f32[4096]{0} reduce(y, ninf), dimensions={1}, to_apply=max\n  \
         mb = f32[4096,1024]{1,0} broadcast(m), dimensions={0}\n  sh = f32[4096,1024]{1,0} subtract(y, mb)\n  \
         e = f32[4096,1024]{1,0} exponential(sh)\n  s = f32[4096]{0} reduce(e, zero), dimensions={1}, to_apply=add\n",
        "(f32[4096]{0}, f32[4096,256]{1,0}) tuple(s, z)",
    );
    let c = cost_on(&text, "v6e");
    let y = c.kernels.iter().find(|k| k.name == "y").expect("the kernel of y");
    assert!(y.instructions.iter().any(|i| i == "m"), "{:?}", y.instructions);
    assert!(!y.instructions.iter().any(|i| i == "s"), "{:?}", y.instructions);
    let sum = c
        .kernels
        .iter()
        .find(|k| k.instructions.iter().any(|i| i == "s"))
        .expect("the sum's kernel");
    assert_eq!(sum.kind, KernelKind::Reduce, "{:#?}", c.kernels);
    assert_eq!(c.kernels.len(), 3, "{:#?}", c.kernels);
}

/// Two decode-style layers, bf16[8,4096] x [4096,4096] x [4096,4096]: each weight is 4096 x 4096 x 2 = 33,554,432
/// B (32 MiB, tile-aligned). The first is the cross-program prefetch (the largest matmul parameter within the
/// budget; on equal sizes the first). On v5e (prefetch budget 112 MiB) the second takes at most half of the 80 MiB
/// left, only matmuls read it and the first kernel does not: the compiler copies it on chip ahead of its kernel
/// (mlp.008 on v5e), which then does the MXU work only: 2 x 8 x 4096^2 = 268 MFLOP, a few thousand cycles, far
/// under streaming 32 MiB from HBM (33,554,432 / the chip's HBM bytes per cycle). On tpu7x (budget 32 MiB) the
/// first weight takes the whole budget, so the second is streamed: at least those bytes at the HBM rate.
#[test]
fn a_weight_only_matmuls_read_is_prefetched_when_half_the_budget_left_holds_it() {
    let text = "HloModule m\n\nENTRY main {\n  x = bf16[8,4096]{1,0} parameter(0)\n  w1 = bf16[4096,4096]{1,0} parameter(1)\n  \
                w2 = bf16[4096,4096]{1,0} parameter(2)\n  \
                h = bf16[8,4096]{1,0} dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n  \
                ROOT y = bf16[8,4096]{1,0} dot(h, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
    let weight = 33_554_432f64;
    for (chip, prefetched) in [("v5e", true), ("tpu7x", false)] {
        let model = ChipModel::preset(chip).unwrap();
        let stream = weight / model.hbm.hlo_stream_bytes_per_cycle;
        let c = cost_on(text, chip);
        let second = c.kernels.iter().find(|k| k.name == "y").expect("the kernel of y");
        if prefetched {
            assert!(
                (second.cycles as f64) < stream / 4.0,
                "{chip}: {} cycles, streaming the weight would take {stream:.0}",
                second.cycles
            );
            assert!(second.hbm_bytes < 1 << 20, "{chip}: {} HBM bytes", second.hbm_bytes);
        } else {
            assert!(
                second.cycles as f64 >= stream,
                "{chip}: {} cycles, streaming the weight takes {stream:.0}",
                second.cycles
            );
        }
    }
}

/// A log-softmax over the logits of a matmul, bf16[256,512] x [512,4096]: the logits (256 x 4096 x 2 = 2 MiB) are
/// not 8 times the operands (256 KiB + 4 MiB), so they are computed once. The compiler makes three passes over
/// them (softmax_xent.018 on v4): its output fusion computes the dot and the row max (14,052 cycles), a loop
/// fusion `exp(logits - max)` and its row sum (11,548), another `logits - max - log(sum)` (17,453). So three
/// kernels: the matmul with the max, a reduce kernel and a loop kernel, each of the latter two at least a loop
/// kernel's whole launch (`launch_cycles`); before the rule one kernel did all three in one pass.
#[test]
fn a_softmax_over_a_matmuls_logits_makes_one_kernel_per_pass() {
    let text = "HloModule m\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n\
                max {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] maximum(a, b)\n}\n\n\
                ENTRY main {\n  h = bf16[256,512]{1,0} parameter(0)\n  w = bf16[512,4096]{1,0} parameter(1)\n  \
                d = bf16[256,4096]{1,0} dot(h, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n  \
                x = f32[256,4096]{1,0} convert(d)\n  ninf = f32[] constant(-inf)\n  zero = f32[] constant(0)\n  \
                m = f32[256]{0} reduce(x, ninf), dimensions={1}, to_apply=max\n  \
                mb = f32[256,4096]{1,0} broadcast(m), dimensions={0}\n  sh = f32[256,4096]{1,0} subtract(x, mb)\n  \
                e = f32[256,4096]{1,0} exponential(sh)\n  s = f32[256]{0} reduce(e, zero), dimensions={1}, to_apply=add\n  \
                l = f32[256]{0} log(s)\n  lb = f32[256,4096]{1,0} broadcast(l), dimensions={0}\n  \
                ROOT ls = f32[256,4096]{1,0} subtract(sh, lb)\n}\n";
    for chip in ["v4", "v6e"] {
        let c = cost_on(text, chip);
        let kinds: Vec<KernelKind> = c.kernels.iter().map(|k| k.kind).collect();
        assert_eq!(
            kinds,
            [KernelKind::Mxu, KernelKind::Reduce, KernelKind::Loop],
            "{chip}: {:#?}",
            c.kernels
        );
        let has = |k: usize, i: &str| c.kernels[k].instructions.iter().any(|x| x == i);
        assert!(
            has(0, "d") && has(0, "m") && !has(0, "s"),
            "{chip}: {:?}",
            c.kernels[0].instructions
        );
        assert!(has(1, "e") && has(1, "s"), "{chip}: {:?}", c.kernels[1].instructions);
        assert!(has(2, "ls"), "{chip}: {:?}", c.kernels[2].instructions);
        let launch = ChipModel::preset(chip).unwrap().params.launch_cycles;
        for k in &c.kernels[1..] {
            assert!(
                k.cycles as f64 >= launch,
                "{chip}: {} {} cycles, launch {launch}",
                k.name,
                k.cycles
            );
        }
    }
}

/// Two DCN cross layers `h = x * (x W1) + x`, `e = x * (h W2) + h` (f32[4096,256], weights [256,256]) and their
/// backward pass on the loss `sum(e * e)`: `dx = x * (c e)`, its bias gradient `sum(dx)` over the rows, `dh = dx
/// W2^T`, `dx2 = x * (c e + dh)` with its own bias gradient and `dz = dx2 W1^T`. `e` is recomputed by each kernel
/// reading it (cheap elementwise ops), so the kernel summing the loss and the first bias gradient reads the second
/// matmul's result and the first's (`h = x * y1 + x` recomputed), both written before it runs. The compiler
/// computes such sums and `dx` in the later matmul's output fusion (dcn_cross.016 on tpu7x, f32[17408,102]: its
/// `fusion.8` writes `(f32[102], f32[], f32[102], f32[17408,102])`, 9,992 cycles, where tpusim's reduce kernel
/// re-read the matmul's result for 9,874 cycles beside it). So the module has only its four matmul kernels, the
/// second computing the loss and `bg`. Fused, these run on tiles in registers: `m2`, `e`, `g`, `dx`, `sq`, the
/// loss and the row sum over f32[4096,256] (1,024 vregs of 1,024 elements), seven vreg ops per vreg at one per
/// cycle, 7,168 cycles, plus writing `dx` (4 MiB) out, at most 4,194,304 / 469.9 = 8,926 cycles at v4's HBM rate:
/// the second kernel costs at most 16,094 cycles more than in the module without the sums (where it computes
/// `y2` alone).
#[test]
fn a_reduction_reading_two_matmul_kernels_is_an_output_of_the_later_one() {
    let module = |sums: &str, root: &str| {
        format!(
            "HloModule m\n\nadd {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}}\n\n\
             ENTRY main {{\n  x = f32[4096,256]{{1,0}} parameter(0)\n  w1 = f32[256,256]{{1,0}} parameter(1)\n  \
             w2 = f32[256,256]{{1,0}} parameter(2)\n  \
             y1 = f32[4096,256]{{1,0}} dot(x, w1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n  \
             m1 = f32[4096,256]{{1,0}} multiply(x, y1)\n  h = f32[4096,256]{{1,0}} add(m1, x)\n  \
             y2 = f32[4096,256]{{1,0}} dot(h, w2), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n  \
             m2 = f32[4096,256]{{1,0}} multiply(x, y2)\n  e = f32[4096,256]{{1,0}} add(m2, h)\n  \
             zero = f32[] constant(0)\n  c = f32[] constant(1.9e-06)\n  \
             cb = f32[4096,256]{{1,0}} broadcast(c), dimensions={{}}\n  \
             g = f32[4096,256]{{1,0}} multiply(e, cb)\n  dx = f32[4096,256]{{1,0}} multiply(x, g)\n{sums}  \
             dh = f32[4096,256]{{1,0}} dot(dx, w2), lhs_contracting_dims={{1}}, rhs_contracting_dims={{1}}\n  \
             s2 = f32[4096,256]{{1,0}} add(g, dh)\n  dx2 = f32[4096,256]{{1,0}} multiply(x, s2)\n  \
             bg2 = f32[256]{{0}} reduce(dx2, zero), dimensions={{0}}, to_apply=add\n  \
             dz = f32[4096,256]{{1,0}} dot(dx2, w1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{1}}\n  \
             ROOT r = {root}\n}}\n"
        )
    };
    let with = module(
        "  sq = f32[4096,256]{1,0} multiply(e, e)\n  loss = f32[] reduce(sq, zero), dimensions={0,1}, to_apply=add\n  \
         bg = f32[256]{0} reduce(dx, zero), dimensions={0}, to_apply=add\n",
        "(f32[], f32[256]{0}, f32[256]{0}, f32[4096,256]{1,0}) tuple(loss, bg, bg2, dz)",
    );
    let without = module("", "(f32[256]{0}, f32[4096,256]{1,0}) tuple(bg2, dz)");
    let y2 = |c: &ModuleCost| {
        c.kernels
            .iter()
            .find(|k| k.name == "y2")
            .expect("the kernel of y2")
            .clone()
    };
    for chip in ["v4", "tpu7x"] {
        let c = cost_on(&with, chip);
        assert!(
            c.kernels.iter().all(|k| k.kind == KernelKind::Mxu),
            "{chip}: a kernel besides the matmuls': {:#?}",
            c.kernels
        );
        assert_eq!(c.kernels.len(), 4, "{chip}: {:#?}", c.kernels);
        let second = y2(&c);
        for sum in ["loss", "bg"] {
            assert!(
                second.instructions.iter().any(|i| i == sum),
                "{chip}: {:?}",
                second.instructions
            );
        }
    }
    let added = y2(&cost_on(&with, "v4")).cycles as f64 - y2(&cost_on(&without, "v4")).cycles as f64;
    assert!(
        (0.0..=16_094.0).contains(&added),
        "v4: the sums add {added} cycles to y2's kernel, expected 0 to 16,094"
    );
}

/// A DCN cross layer `e = x * (x W) + x` and a second matmul `z = x V` on the same input x f32[63104,94]
/// (weights [94,94]) on v5e. The cross-program prefetch takes a parameter only matmuls read: a weight, not `x`,
/// which the cross layer also multiplies and adds (dcn_cross.001 on v5e: the 94 x 94 weight is prefetched). `x`
/// is copied on chip for its later reader while the first kernel reading it streams it from HBM: that kernel
/// moves at least x's padded bytes, 63,104 rows of 128 lanes of 4 bytes = 32,309,248 B, at least 32,309,248 /
/// 491.018 = 65,800 cycles at v5e's HBM rate; the later one moves less than that (its weight and result only:
/// 94 x 128 x 4 + 63,104 x 128 x 4 bytes at most).
#[test]
fn a_parameter_read_by_a_matmul_and_elementwise_ops_is_streamed_by_its_first_kernel_only() {
    let text =
        "HloModule m\n\nENTRY main {\n  x = f32[63104,94]{1,0} parameter(0)\n  w = f32[94,94]{1,0} parameter(1)\n  \
        v = f32[94,94]{1,0} parameter(2)\n  \
        y = f32[63104,94]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n  \
        m = f32[63104,94]{1,0} multiply(x, y)\n  e = f32[63104,94]{1,0} add(m, x)\n  \
        z = f32[63104,94]{1,0} dot(x, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n  \
        ROOT r = (f32[63104,94]{1,0}, f32[63104,94]{1,0}) tuple(e, z)\n}\n";
    let c = cost_on(text, "v5e");
    let x_bytes = 63_104u64 * 128 * 4;
    let mut mxu: Vec<_> = c.kernels.iter().filter(|k| k.kind == KernelKind::Mxu).collect();
    assert_eq!(mxu.len(), 2, "{:#?}", c.kernels);
    mxu.sort_by_key(|k| k.start_cycle);
    assert!(
        mxu[0].hbm_bytes >= x_bytes,
        "first reader moves {} B: {:#?}",
        mxu[0].hbm_bytes,
        mxu[0]
    );
    assert!(mxu[0].cycles >= 65_800, "first reader {} cycles", mxu[0].cycles);
    assert!(
        mxu[1].hbm_bytes < x_bytes + 94 * 128 * 4,
        "later reader moves {} B",
        mxu[1].hbm_bytes
    );
    assert!(
        mxu[1].hbm_bytes <= x_bytes,
        "later reader moves {} B: {:#?}",
        mxu[1].hbm_bytes,
        mxu[1]
    );
}

/// Two reductions of one matmul result, the loss `sum(y * y)` and `sum(y)`, both in the matmul's kernel: they
/// share one sweep of the result tiles (`epilogue_sweep`, mlp.024@v6e: `(f32[4736], f32[], f32[1124,4736])` in
/// 13,707 cycles, where two sweeps were 32,190). So the second reduction adds no vector work: the kernel of `y`
/// costs what it costs with the loss alone, except the second scalar result's bytes written out (one f32 tile,
/// at most 4 KiB: under 10 cycles at any chip's HBM rate, 400 B per cycle and more). Before the rule it added one
/// sweep: 4,096 x 1,024 f32 elements are 4,096 vreg blocks at `mxu_fused_op_cycles` (2.5 to 6 cycles each), over
/// 10,000 cycles, which the kernel (then vector-bound) paid.
#[test]
fn a_second_reduction_of_a_matmul_result_shares_its_sweep() {
    let loss =
        "  sq = f32[4096,1024]{1,0} multiply(y, y)\n  loss = f32[] reduce(sq, zero), dimensions={0,1}, to_apply=add\n";
    let one = layer_module(loss, "(f32[], f32[4096,256]{1,0}) tuple(loss, z)");
    let two = layer_module(
        &format!("{loss}  total = f32[] reduce(y, zero), dimensions={{0,1}}, to_apply=add\n"),
        "(f32[], f32[], f32[4096,256]{1,0}) tuple(loss, total, z)",
    );
    for chip in ["v5e", "v6e", "tpu7x"] {
        let kernel_of_y = |text: &str| {
            let c = cost_on(text, chip);
            let y = c
                .kernels
                .iter()
                .find(|k| k.name == "y")
                .expect("the kernel of y")
                .clone();
            (y, c.kernels.len())
        };
        let (a, na) = kernel_of_y(&one);
        let (b, nb) = kernel_of_y(&two);
        assert!(
            b.instructions.iter().any(|i| i == "total"),
            "{chip}: {:?}",
            b.instructions
        );
        assert_eq!(na, nb, "{chip}: the second reduction is no kernel of its own");
        let added = b.cycles as i64 - a.cycles as i64;
        assert!(
            (0..10).contains(&added),
            "{chip}: the second reduction adds {added} cycles, expected under 10"
        );
    }
}
