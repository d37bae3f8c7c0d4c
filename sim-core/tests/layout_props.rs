//! Property tests: index <-> offset is a bijection onto the non-padding cells; printing round-trips;
//! no input string makes the parser panic.

use proptest::prelude::*;
use sim_core::layout::{parse_shape, ArrayShape, Dim, Layout, PrimitiveType, Shape};

fn arb_array() -> impl Strategy<Value = ArrayShape> {
    (1usize..=4)
        .prop_flat_map(|rank| {
            (
                prop::collection::vec(1i64..=9, rank),
                Just((0..rank as i64).collect::<Vec<_>>()).prop_shuffle(),
                prop::collection::vec(prop::collection::vec(1i64..=4, 1..=3), 0..=2),
                prop_oneof![
                    Just(PrimitiveType::F32),
                    Just(PrimitiveType::BF16),
                    Just(PrimitiveType::S8)
                ],
            )
        })
        .prop_map(|(dims, m2m, tiles, ty)| {
            let mut layout = Layout::new(m2m);
            for t in tiles {
                layout = layout.with_tile(&t);
            }
            ArrayShape {
                element_type: ty,
                dims: dims.into_iter().map(Dim::Static).collect(),
                layout: Some(layout),
            }
        })
}

proptest! {
    #[test]
    fn index_offset_bijection(a in arb_array()) {
        let g = a.geometry().unwrap();
        let count = g.element_count();
        let mut seen = std::collections::HashSet::new();
        let mut idx = vec![0u64; g.dims.len()];
        for _ in 0..count {
            let off = g.linear_index_unchecked(&idx);
            prop_assert!(off < g.tiled_cells());
            prop_assert!(seen.insert(off), "offset {} twice", off);
            prop_assert_eq!(g.logical_index(off), Some(idx.clone()));
            for d in (0..idx.len()).rev() {
                idx[d] += 1;
                if idx[d] < g.dims[d] { break; }
                idx[d] = 0;
            }
        }
        // Every other cell of the tiled storage is padding.
        let padding = (0..g.tiled_cells()).filter(|o| g.logical_index(*o).is_none()).count() as u64;
        prop_assert_eq!(padding + count, g.tiled_cells());
    }

    #[test]
    fn print_parse_round_trip(a in arb_array()) {
        let shape = Shape::Array(a);
        let text = shape.to_string();
        prop_assert_eq!(parse_shape(&text).unwrap(), shape);
    }

    #[test]
    fn random_strings_never_panic(s in "\\PC{0,40}") {
        let _ = parse_shape(&s);
    }

    #[test]
    fn shape_like_strings_never_panic(s in "[fsubp(){}\\[\\]:,0-9TLESMPD*#<=? ]{0,40}") {
        if let Ok(shape) = parse_shape(&s) {
            let _ = shape.padded_bytes();
        }
    }
}
