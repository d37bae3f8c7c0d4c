//! Workload files (TOML and JSON), fed any text and mutations of the presets: a workload or an error,
//! never a panic; what parses passes or fails the run bounds without overflowing.

use proptest::prelude::*;
use workloads::spec::RunBounds;
use workloads::Workload;

const PRESET: &str = include_str!("../presets/dlrm-small.toml");

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_text_gives_a_workload_or_an_error(s in "\\PC{0,300}") {
        if let Ok(w) = Workload::parse(&s) {
            let _ = w.check_bounds(&RunBounds::default());
        }
    }

    #[test]
    fn mutated_presets_give_a_workload_or_an_error(at in any::<usize>(), to in 0x20u8..0x7f, len in any::<usize>()) {
        let mut b = PRESET.as_bytes().to_vec();
        let i = at % b.len();
        b[i] = to;
        b.truncate(len % (b.len() + 1));
        if let Ok(w) = Workload::parse(&String::from_utf8_lossy(&b)) {
            let _ = w.check_bounds(&RunBounds::default());
            let _ = w.max_ids_per_chip_step();
        }
    }

    #[test]
    fn extreme_numbers_are_refused_or_bounded(n in prop_oneof![Just(0u64), Just(u32::MAX as u64), Just(1u64 << 32), Just(u64::MAX), any::<u64>()], which in 0usize..4) {
        let key = ["global_batch", "chips", "steps", "vocab"][which];
        let text: String = PRESET
            .lines()
            .map(|l| if l.trim_start().starts_with(&format!("{key} =")) { format!("{key} = {n}") } else { l.to_string() })
            .collect::<Vec<_>>()
            .join("\n");
        if let Ok(w) = Workload::parse(&text) {
            let _ = w.check_bounds(&RunBounds::default());
        }
    }
}
