//! `tpusim hlo` rules for mixture-of-experts programs (routing, expert products), read off the compiler corpus's
//! optimized modules (testdata/hlo/corpus/, tools/corpus/). Each module is written by hand here, with its
//! expected kernels and traffic worked out in the test.

mod support;
use support::hlo::cost_on;

const MIB: u64 = 1 << 20;

/// Two products `x w1 -> h`, `h * h`, `(h * h) w2 -> y` on f32: batched over 8 experts (`batched`) of 512 rows,
/// 256 -> 8,192 -> 256, or a dense MLP of 4,096 rows, 2,048 -> 8,192 -> 256 (inputs wide enough that tpusim
/// does not recompute the first product in the second's kernel, [`sim_tpu::hlo::fusion`]).
fn chain(batched: bool) -> String {
    let (x, w1, h, w2, y, dims) = if batched {
        (
            "f32[8,512,256]{2,1,0}",
            "f32[8,256,8192]{2,1,0}",
            "f32[8,512,8192]{2,1,0}",
            "f32[8,8192,256]{2,1,0}",
            "f32[8,512,256]{2,1,0}",
            "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}",
        )
    } else {
        (
            "f32[4096,2048]{1,0}",
            "f32[2048,8192]{1,0}",
            "f32[4096,8192]{1,0}",
            "f32[8192,256]{1,0}",
            "f32[4096,256]{1,0}",
            "lhs_contracting_dims={1}, rhs_contracting_dims={0}",
        )
    };
    format!(
        "HloModule m\n\nENTRY main {{\n  x = {x} parameter(0)\n  w1 = {w1} parameter(1)\n  w2 = {w2} parameter(2)\n  \
         h = {h} dot(x, w1), {dims}\n  a = {h} multiply(h, h)\n  ROOT y = {y} dot(a, w2), {dims}\n}}\n"
    )
}

/// The HBM bytes of the kernels named `h` (the first product) and `y` (the second) of `text` on `chip`.
fn product_traffic(text: &str, chip: &str) -> (u64, u64, u64) {
    let c = cost_on(text, chip);
    let of = |name: &str| {
        c.kernels
            .iter()
            .find(|k| k.name == name)
            .unwrap_or_else(|| panic!("{chip}: no kernel {name} in {:#?}", c.kernels))
            .hbm_bytes
    };
    (of("h"), of("y"), c.temp_bytes)
}

/// An expert's up-projection result, only read (through its activation) by the down-projection over the same
/// experts, never goes through HBM (moe_routing.015: one compiler kernel `fusion.17` of 291,149 cycles on v5e
/// computes both products, the f32[32,455,2048] intermediate never written). By hand: the intermediate is
/// 8 x 512 x 8,192 x 4 B = 128 MiB, more than any chip's on-chip budget. The first kernel reads at most x
/// (4 MiB) and w1 (64 MiB) and writes nothing to HBM; the second reads at most w2 (64 MiB) and writes y (4 MiB):
/// each at most 68 MiB, where writing or reading the intermediate alone would be 128 MiB. The intermediate is no
/// temporary either. A dense MLP's intermediate of the same size (4,096 x 8,192 x 4 B) is written out: each
/// kernel moves at least its 128 MiB.
#[test]
fn an_expert_intermediate_stays_on_chip_between_batched_products() {
    for chip in ["v4", "v5e", "v5p", "v6e", "tpu7x"] {
        let (h, y, temp) = product_traffic(&chain(true), chip);
        assert!(h <= 68 * MIB, "{chip}: first product moves {h} B");
        assert!(y <= 68 * MIB, "{chip}: second product moves {y} B");
        assert!(temp < 128 * MIB, "{chip}: temp {temp} B");
        let (h, y, _) = product_traffic(&chain(false), chip);
        assert!(h >= 128 * MIB, "{chip}: dense first product moves {h} B");
        assert!(y >= 128 * MIB, "{chip}: dense second product moves {y} B");
    }
}

/// Attention's two batched products with a softmax between them (row max and sum): the compiler writes the
/// normalised scores out at sizes beyond VMEM (attention.002, .003, .010 on every chip), so no chain. The
/// corpus's attention.002 (7 x 16 heads, 1,007 positions, bf16, causal): by hand the bf16 scores are
/// 7 x 16 x 1,007 x 1,024 (lanes padded) x 2 B = 231,014,400 B, and the kernels before the second product
/// write at least that much.
#[test]
fn scores_normalised_between_batched_products_go_through_hbm() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = support::records::hlo_text(&root, "corpus/hlo/attention.002.hlo.txt.gz").unwrap();
    for chip in ["v4", "v5e", "v5p", "v6e", "tpu7x"] {
        let c = cost_on(&text, chip);
        let last = c
            .kernels
            .iter()
            .rposition(|k| k.name.starts_with("dot_general"))
            .unwrap();
        let written: u64 = c.kernels[..last].iter().map(|k| k.hbm_bytes).sum();
        assert!(written >= 231_014_400, "{chip}: {:#?}", c.kernels);
    }
}
