//! Every reader of user files, fed any bytes: a value or an error, never a panic. Inputs are random
//! bytes, and mutations of valid files (a byte changed, the file cut short), so the fuzzing reaches
//! past the first check of each format.

use std::io::Cursor;

use proptest::prelude::*;
use sim_sparsecore::limits::files::{parse_fdo_csv, read_fdo_npz_from};
use sim_sparsecore::limits::LimitsFile;
use sim_sparsecore::preprocess::input::read_npz_from;
use sim_sparsecore::preprocess::{build_stacks, PreprocessSpec};

const SPEC: &str = include_str!("../../testdata/preprocess/example/spec.json");
const IDS: &[u8] = include_bytes!("../../testdata/preprocess/example/ids.npz");
const FDO: &[u8] = include_bytes!("../../testdata/limits/example/fdo/fdo_stats_0_0.npz");
const FDO_CSV: &str = include_str!("../../testdata/limits/example/fdo/host1.csv");
const LIMITS_JSON: &str = include_str!("../../testdata/limits/example/limits.json");
const LIMITS_TOML: &str = include_str!("../../testdata/limits/example/limits.toml");

/// `valid` with byte `at` set to `to` and cut to `len` bytes (positions taken modulo the length).
fn mutate(valid: &[u8], at: usize, to: u8, len: usize) -> Vec<u8> {
    let mut v = valid.to_vec();
    if !v.is_empty() {
        let i = at % v.len();
        v[i] = to;
        v.truncate(len % (v.len() + 1));
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn npz_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512), at in any::<usize>(), to in any::<u8>(), len in any::<usize>()) {
        let _ = read_npz_from(Cursor::new(&bytes));
        let _ = read_npz_from(Cursor::new(mutate(IDS, at, to, len)));
        let _ = read_npz_from(Cursor::new(mutate(IDS, at, to, usize::MAX)));
    }

    #[test]
    fn fdo_npz_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512), at in any::<usize>(), to in any::<u8>(), len in any::<usize>()) {
        let _ = read_fdo_npz_from(Cursor::new(&bytes));
        let _ = read_fdo_npz_from(Cursor::new(mutate(FDO, at, to, len)));
        let _ = read_fdo_npz_from(Cursor::new(mutate(FDO, at, to, usize::MAX)));
    }

    #[test]
    fn text_readers_never_panic(s in "\\PC{0,200}", at in any::<usize>(), to in 0x20u8..0x7f, len in any::<usize>()) {
        let _ = PreprocessSpec::from_json(&s);
        let _ = parse_fdo_csv(&s);
        let _ = LimitsFile::parse(&s, false);
        let _ = LimitsFile::parse(&s, true);
        let spec = String::from_utf8_lossy(&mutate(SPEC.as_bytes(), at, to, len)).into_owned();
        if let Ok(p) = PreprocessSpec::from_json(&spec) {
            let _ = build_stacks(&p);
        }
        let _ = parse_fdo_csv(&String::from_utf8_lossy(&mutate(FDO_CSV.as_bytes(), at, to, len)));
        let _ = LimitsFile::parse(&String::from_utf8_lossy(&mutate(LIMITS_JSON.as_bytes(), at, to, len)), false);
        let _ = LimitsFile::parse(&String::from_utf8_lossy(&mutate(LIMITS_TOML.as_bytes(), at, to, len)), true);
    }

    #[test]
    fn spec_numbers_anywhere_give_a_spec_or_an_error(n in prop_oneof![Just(-1i128), Just(0), Just(u32::MAX as i128 + 1), Just(u64::MAX as i128 + 1), any::<i64>().prop_map(i128::from)], which in 0usize..6) {
        let field = ["\"num_sc_per_device\": 4", "\"vocabulary_size\": 1000", "\"embedding_dim\": 16", "\"max_ids_per_partition\": 64", "\"input_shape\": [64, 1]", "\"global_device_count\": 1"][which];
        let name = field.split(':').next().unwrap();
        let replaced = if which == 4 { format!("{name}: [{n}, 1]") } else { format!("{name}: {n}") };
        let _ = PreprocessSpec::from_json(&SPEC.replacen(field, &replaced, 1));
    }
}

#[test]
fn the_valid_files_read() {
    assert!(read_npz_from(Cursor::new(IDS)).is_ok());
    assert!(read_fdo_npz_from(Cursor::new(FDO)).is_ok());
    assert!(parse_fdo_csv(FDO_CSV).is_ok());
    assert!(LimitsFile::parse(LIMITS_JSON, false).is_ok());
    assert!(LimitsFile::parse(LIMITS_TOML, true).is_ok());
    assert!(PreprocessSpec::from_json(SPEC).is_ok());
}

#[test]
fn spec_errors_name_the_field_path() {
    let e = PreprocessSpec::from_json(&SPEC.replacen("\"vocabulary_size\": 1000", "\"vocabulary_size\": -1", 1))
        .unwrap_err()
        .to_string();
    assert!(e.contains("tables[0].vocabulary_size"), "{e}");
    let e = PreprocessSpec::from_json(&SPEC.replacen("\"vocabulary_size\": 1000", "\"vocabulary_size\": 0", 1))
        .unwrap_err()
        .to_string();
    assert!(e.contains("tables[0].vocabulary_size"), "{e}");
}
