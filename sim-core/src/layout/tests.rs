//! The vectors of reference/xla-layout.md.

use super::*;

fn arr(text: &str) -> ArrayShape {
    match parse_shape(text).unwrap_or_else(|e| panic!("{text}: {e}")) {
        Shape::Array(a) => a,
        other => panic!("not an array: {other}"),
    }
}

fn sizes(text: &str) -> (u64, u64, u64) {
    let g = arr(text).geometry().unwrap();
    (
        g.padded_bytes().unwrap(),
        g.data_bytes().unwrap(),
        g.unpadded_bytes().unwrap(),
    )
}

#[test]
fn size_vectors() {
    assert_eq!(sizes("f32[3,5]{1,0:T(2,2)}"), (96, 84, 60));
    assert_eq!(sizes("bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}").0, 335_544_320);
    assert_eq!(sizes("f32[2,3]{1,0:T(8,128)}").0, 4096);
    assert_eq!(sizes("bf16[2,3]{1,0:T(8,128)(2,1)}").0, 2048);
    assert_eq!(sizes("f32[3,5]{1,0:T(2,2)L(7)}").0, 112);
    let (p, d, _) = sizes("f32[1000]{0:T(1024)}");
    assert_eq!((p, d), (4096, 4000));
    assert_eq!(sizes("s4[9216,6144]{1,0:T(64,128)(8,1)E(4)}").0, 28_311_552);
}

fn lin(text: &str, idx: &[i64]) -> u64 {
    arr(text).geometry().unwrap().linear_index(idx).unwrap()
}

#[test]
fn index_vectors() {
    assert_eq!(lin("f32[3,5]{1,0:T(2,2)}", &[2, 3]), 17);
    assert_eq!(lin("f32[8,4]{1,0:T(2,2)}", &[3, 1]), 11);
    assert_eq!(lin("f32[8,4]{1,0}", &[3, 1]), 13);
    let s = "bf16[2048]{0:T(1024)(128)(2,1)}";
    assert_eq!((lin(s, &[0]), lin(s, &[128]), lin(s, &[1])), (0, 1, 2));
    assert_eq!(lin("bf16[2,8,128]{2,1,0:T(8,128)(2,1)}", &[0, 0, 0]), 0);
    assert_eq!(lin("bf16[2,8,128]{2,1,0:T(8,128)(2,1)}", &[0, 2, 0]), 256);
    assert_eq!(lin("f32[8,8]{1,0:T(2,4)(2,1,1,1)}", &[6, 5]), 51);
    let b = "bf16[16,256]{1,0:T(8,128)(2,1)}";
    assert_eq!(lin(b, &[1, 0]), 1);
    assert_eq!(lin(b, &[0, 1]), 2);
    assert_eq!(lin(b, &[2, 0]), 256);
    assert_eq!(lin(b, &[8, 0]), 2048);
    assert_eq!(lin(b, &[0, 128]), 1024);
    assert_eq!(lin("f32[10,20]{0,1}", &[3, 5]), 53);
    assert_eq!(lin("f32[10,20]{0,1}", &[9, 19]), 199);
    assert_eq!(lin("f32[10,20]{1,0}", &[3, 5]), 65);
    assert_eq!(lin("f32[10,20,30]{2,1,0}", &[3, 5, 7]), 1957);
    assert_eq!(lin("f32[10,20,30]{1,2,0}", &[3, 5, 7]), 1945);
    assert_eq!(lin("f32[10,20,30,40]{3,2,1,0}", &[3, 5, 7, 9]), 78289);
}

#[test]
fn inverse_of_vectors() {
    let g = arr("f32[3,5]{1,0:T(2,2)}").geometry().unwrap();
    assert_eq!(g.logical_index(17), Some(vec![2, 3]));
    // (3,0) does not exist: the padding row of the last tile row.
    assert_eq!(g.logical_index(22), None);
}

#[test]
fn print_canonical_text() {
    for text in [
        "f32[]",
        "f32[]{:T(256)}",
        "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}",
        "s4[9216,6144]{1,0:T(64,128)(8,1)E(4)}",
        "f32[3,5]{1,0:T(2,2)L(7)}",
        "f32[<=4,?]{1,0}",
        "(f32[1]{0}, s32[2]{0:T(128)S(1)}, token[], opaque[])",
        "(s32[1], s32[1], s32[1], s32[1], s32[1], /*index=5*/s32[1])",
        "f32[4,8]{1,0:T(2,*,128)}",
        "f32[4,8]{1,0:T(8,128)SC(0:2,4)(1:3)}",
        "f32[4,8]{1,0:T(8,128)M(8)}",
        "f32[4,8]{1,0:#(s32)*(s64)}",
        "s32[131]{0:T(1)S(11)}",
        "()",
    ] {
        assert_eq!(parse_shape(text).unwrap().to_string(), text);
    }
    assert_eq!(
        parse_shape("f32[2,3]{1,0:T(2, * , 128)}").unwrap().to_string(),
        "f32[2,3]{1,0:T(2,*,128)}"
    );
    assert_eq!(
        parse_shape("f32[2,3]{1,0:D(D,C)T(8,128)}").unwrap().to_string(),
        "f32[2,3]{1,0:T(8,128)}"
    );
    assert_eq!(parse_shape("f32[]{}").unwrap().to_string(), "f32[]");
}

fn err(text: &str) -> String {
    parse_shape(text).unwrap_err().to_string()
}

#[test]
fn malformed_shapes_say_where() {
    assert_eq!(
        err("f32[3,5]{0}"),
        "invalid shape: Dimensions size is 2, but minor to major size is 1."
    );
    assert!(err("f33[3]").contains("at byte 0"), "{}", err("f33[3]"));
    assert!(err("f32[3,5").contains("at byte 7"), "{}", err("f32[3,5"));
    assert!(err("f32[3]{0:T(0)}").contains("tile dimension size must be positive"));
    assert!(err("f32[3,5]{0,0}").contains("not a permutation"));
    assert!(err("f32[99999999999999999999]").contains("fits in 64 bits"));
    assert!(err("f32[4294967296,4294967296]").contains("does not fit"));
    assert!(err("f32[3]{0:L(0)}").contains("tail_padding"));
    assert!(err("(f32[3]").contains("expected"));
}

#[test]
fn combined_tile_dims_merge_into_the_next_minor_dim() {
    // T(*,128) on [4,8] behaves as T(128) on the merged [32].
    let a = arr("f32[4,8]{1,0:T(*,128)}").geometry().unwrap();
    let b = arr("f32[32]{0:T(128)}").geometry().unwrap();
    assert_eq!(a.padded_bytes().unwrap(), b.padded_bytes().unwrap());
    assert_eq!(a.linear_index(&[3, 7]).unwrap(), b.linear_index(&[31]).unwrap());
}
