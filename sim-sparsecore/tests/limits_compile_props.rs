//! Invariants of the compile-time verdict over any input: no panic, a verdict consistent with its
//! class, and monotone limits (lowering a limit never breaks a configuration that compiles).

mod common;

use common::params;
use proptest::prelude::*;
use sim_sparsecore::limits::{compile_check, CompileCase, ProgramKind, ScCompileParams, VerdictClass};

fn chip() -> impl Strategy<Value = ScCompileParams> {
    prop_oneof![
        Just(params("v5p")),
        Just(params("v6e")),
        Just(params("tpu7x")),
        (0u64..8, 0u64..64, any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(n, t, s, o, l)| ScCompileParams {
            num_sc_per_device: n,
            tilespmem_bytes: t,
            scratchpad_bytes: s,
            spmem_fixed_overhead_bytes: o,
            simd_lanes_f32: l
        }),
    ]
}

fn kind() -> impl Strategy<Value = ProgramKind> {
    prop_oneof![Just(ProgramKind::Fwd), Just(ProgramKind::GradSgd)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, rng_algorithm: proptest::test_runner::RngAlgorithm::ChaCha, ..ProptestConfig::default() })]

    #[test]
    fn any_input_gets_a_consistent_verdict(
        p in chip(), kind in kind(), vocab in any::<u64>(), dim in any::<u64>(), batch in any::<u64>(),
        max_ids in any::<u64>(), max_unique in any::<u64>()
    ) {
        let v = compile_check(&CompileCase { kind, vocab, dim, batch, max_ids, max_unique }, &p);
        prop_assert_eq!(v.compiles, v.class == VerdictClass::Ok);
        prop_assert!(!v.message.is_empty());
    }

    #[test]
    fn lowering_limits_keeps_a_compiling_case_compiling(
        kind in kind(), dim_8ths in 1u64..2048, max_ids in 1u64..200_000, unique_frac in 1u64..=8,
        shrink in 1u64..=16
    ) {
        let p = params("v6e");
        let max_unique = (max_ids * unique_frac / 8).max(1);
        let case = CompileCase { kind, vocab: 100_000, dim: dim_8ths * 8, batch: 256, max_ids, max_unique };
        if compile_check(&case, &p).compiles {
            let lower = CompileCase { max_ids: (max_ids / shrink).max(1), max_unique: (max_unique / shrink).max(1), ..case };
            prop_assert!(compile_check(&lower, &p).compiles);
        }
    }
}
