//! `tpusim hlo --slice` on a module annotated with `sharding={...}`: partitioned first, the JSON saying which
//! collectives the partitioner inserted; shardings the slice cannot hold exit 2 naming the instruction.

mod common;

use common::{tpusim, tpusim_json as json};

const FSDP: &str = "testdata/shard/partition/mlp.fsdp.2x2x1.hlo.txt";

#[test]
fn an_annotated_module_is_partitioned_and_says_what_it_inserted() {
    let v = json(&["hlo", FSDP, "--chip", "v5p", "--slice", "2x2x1", "--json"]);
    let p = &v["partition"];
    assert_eq!(p["mesh"], "d=4");
    let inserted = p["inserted"].as_array().unwrap();
    // FSDP of a 1024 -> 4096 -> 1024 bf16 MLP over 4 devices: each weight (8 MiB) all-gathered once for the
    // forward and backward dots, each weight gradient reduce-scattered back to its quarter, the loss
    // all-reduced (one f32, 4 bytes).
    let of = |kind: &str| -> Vec<u64> {
        inserted
            .iter()
            .filter(|c| c["kind"] == kind)
            .map(|c| c["bytes"].as_u64().unwrap())
            .collect()
    };
    let w = 1024 * 4096 * 2;
    assert_eq!(of("all-gather"), vec![w, w]);
    assert_eq!(of("reduce-scatter"), vec![w, w]);
    assert_eq!(of("all-reduce"), vec![4]);
    assert!(inserted.iter().all(|c| c["group_size"] == 4));
    // Every inserted collective is costed on the slice like any other.
    let costed: Vec<&str> = v["collectives"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for c in inserted {
        assert!(costed.contains(&c["name"].as_str().unwrap()), "{c}");
    }
    // Per device: each weight is a quarter (1024x4096 bf16 / 4 = 2 MiB), the batch a quarter (4096x1024 / 4).
    assert_eq!(v["argument_bytes"].as_u64(), Some(2 * (w / 4) + 4096 * 1024 * 2 / 4));
}

#[test]
fn a_module_without_annotations_has_no_partition_object() {
    let v = json(&[
        "hlo",
        "testdata/shard/allreduce_overlap.hlo.txt",
        "--chip",
        "v5p",
        "--slice",
        "2x2x1",
        "--json",
    ]);
    assert!(v.get("partition").is_none());
}

#[test]
fn shardings_the_slice_cannot_hold_exit_2() {
    let dir = common::scratch_dir("hlo-partition-bad");
    for (sharding, slice, want) in [
        ("{devices=[4,1,1]<=[4]}", "2x2x1", "the array has rank 2"),
        (
            "{devices=[8,1]<=[8]}",
            "2x2x1",
            "holds 8 devices but the slice (or mesh) has 4",
        ),
        ("{devices=[4,1]<=[4]}", "2x2x2", "names 4 devices but the slice has 8"),
    ] {
        let p = dir.join(format!("bad{}.hlo", sharding.len() + slice.len()));
        let mesh = if want.contains("names") {
            ", frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"d\"=4]>}}"
        } else {
            ""
        };
        std::fs::write(
            &p,
            format!(
                "HloModule m{mesh}\n\nENTRY main {{\n  x = f32[16,16]{{1,0}} parameter(0), sharding={sharding}\n  \
                 ROOT y = f32[16,16]{{1,0}} negate(x)\n}}\n"
            ),
        )
        .unwrap();
        let (code, _, err) = tpusim(&["hlo", p.to_str().unwrap(), "--chip", "v5p", "--slice", slice]);
        assert_eq!(code, 2, "{sharding}: {err}");
        assert!(err.contains(want) && err.contains("valid"), "{sharding}: {err}");
        if !want.contains("names") {
            assert!(err.contains("line 4") && err.contains("instruction `x`"), "{err}");
        }
    }
}

#[test]
fn a_shard_map_module_is_costed_with_its_own_collectives() {
    // jax's `jax.jit(shard_map(megatron_mlp))` on 4 devices (tools/partition-probe, --shard-map): w1 split on
    // columns, w2 on rows, x [4096,1024] bf16 replicated; the body psums its [4096,1024] bf16 partial output
    // (8 MiB) over all 4 devices. The partitioner inserts nothing: the in-specs are the parameters' shardings.
    let f = "testdata/shard/partition/smap.tp.2x2x1.hlo.txt";
    let v = json(&["hlo", f, "--chip", "v5p", "--slice", "2x2x1", "--json"]);
    assert_eq!(v["partition"]["mesh"], "d=4");
    assert_eq!(v["partition"]["inserted"].as_array().map(Vec::len), Some(0));
    let c = v["collectives"].as_array().unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0]["kind"], "all-reduce");
    assert_eq!(c[0]["bytes"].as_u64(), Some(4096 * 1024 * 2));
    assert_eq!(c[0]["group_size"].as_u64(), Some(4));
    // Per device: w1 [1024,1024] + w2 [1024,1024] + x [4096,1024], bf16.
    assert_eq!(v["argument_bytes"].as_u64(), Some((2 * 1024 * 1024 + 4096 * 1024) * 2));
    // On 8 devices the module's own mesh (d=4) does not fit: exit 2, naming both counts.
    let (code, _, err) = tpusim(&["hlo", f, "--chip", "v5p", "--slice", "2x2x2"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("names 4 devices but the slice has 8"), "{err}");
}
