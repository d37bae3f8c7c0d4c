//! `shard_map` modules (what jax 0.10.2 prints for `jax.jit(shard_map(f, ...)).lower(...).as_text()`, in
//! Shardy's and GSPMD's forms): the manual body is kept per device with its own collectives; operands are
//! moved to the in-specs and results take the out-specs. Expected shapes and collectives are worked here
//! from the specs and shapes, not read back.

use sim_tpu::hlo::collective::CollectiveKind;
use sim_tpu::hlo::partition::build::Rule;
use sim_tpu::hlo::partition::{is_annotated, partition, Partitioned};
use sim_tpu::hlo::{HloError, HloModule};

const MESH_D4: &str = r#"HloModule m, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["d"=4]>}}"#;
const MESH_AB: &str = r#"HloModule m, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["a"=2, "b"=2]>}}"#;

const ADD: &str = "region {\n  a = bf16[] parameter(0)\n  b = bf16[] parameter(1)\n  ROOT s = bf16[] add(a, b)\n}\n\n";

fn spec(key: &str, values: &str) -> String {
    format!(r##"{key}="#sdy.sharding_per_value<[{values}]>""##)
}

fn manual(axes: &str) -> String {
    format!(r##"xla.sdy.manual_axes="#sdy<manual_axes{{{axes}}}>""##)
}

fn try_run(text: &str) -> Result<Partitioned, HloError> {
    let m = HloModule::parse(text).unwrap();
    assert!(is_annotated(&m));
    partition(&m, 4, None, text)
}

fn shape_of(p: &Partitioned, name: &str) -> String {
    p.module
        .entry_computation()
        .instructions
        .iter()
        .find(|i| i.name == name)
        .map(|i| i.shape.to_string())
        .unwrap_or_else(|| panic!("no `{name}` in\n{}", p.module))
}

/// The tensor-parallel matmul of the brief: w [1024,512] split on rows, x [256,1024] on columns, each device
/// multiplies its blocks (x_i [256,256] @ w_i [256,512]) and `psum_scatter`s the [256,512] partial product
/// over the tokens.
fn tp_module(out_spec: &str) -> String {
    let to_local = format!(
        "{}, {}",
        spec(
            "xla.sdy.in_shardings",
            r#"<@mesh, [{\"d\"}, {}]>, <@mesh, [{}, {\"d\"}]>"#
        ),
        manual(r#"\"d\""#)
    );
    let to_global = format!("{}, {}", manual(r#"\"d\""#), spec("xla.sdy.out_shardings", out_spec));
    format!(
        "{MESH_D4}\n\n{ADD}body {{\n  \
         w = bf16[256,512]{{1,0}} parameter(0)\n  \
         x = bf16[256,256]{{1,0}} parameter(1)\n  \
         y = bf16[256,512]{{1,0}} dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n  \
         ROOT rs = bf16[64,512]{{1,0}} reduce-scatter(y), channel_id=1, replica_groups={{{{0,1,2,3}}}}, \
         use_global_device_ids=true, dimensions={{0}}, to_apply=region\n}}\n\n\
         ENTRY main {{\n  \
         w.1 = bf16[1024,512]{{1,0}} parameter(0), sharding={{devices=[4,1]<=[4]}}\n  \
         x.1 = bf16[256,1024]{{1,0}} parameter(1), sharding={{replicated}}\n  \
         in = (bf16[256,512]{{1,0}}, bf16[256,256]{{1,0}}) custom-call(w.1, x.1), \
         custom_call_target=\"xla.sdy.GlobalToLocalShape\", frontend_attributes={{{to_local}}}\n  \
         a = bf16[256,512]{{1,0}} get-tuple-element(in), index=0\n  \
         b = bf16[256,256]{{1,0}} get-tuple-element(in), index=1\n  \
         c = bf16[64,512]{{1,0}} call(a, b), to_apply=body\n  \
         ROOT out = bf16[256,512]{{1,0}} custom-call(c), custom_call_target=\"xla.sdy.LocalToGlobalShape\", \
         frontend_attributes={{{to_global}}}\n}}\n"
    )
}

#[test]
fn a_shard_map_body_keeps_its_collectives_and_operands_meet_the_in_specs() {
    let p = try_run(&tp_module(r#"<@mesh, [{\"d\"}, {}]>"#)).unwrap();
    // w arrives split as the in-spec wants: 1024/4 rows, no collective. x arrives whole but the in-spec
    // splits its columns: each device slices its [256,256] locally, no collective either.
    assert_eq!(shape_of(&p, "w.1"), "bf16[256,512]{1,0}");
    assert!(p.info.inserted.is_empty(), "{:?}", p.info.inserted);
    assert!(p.info.warnings.is_empty(), "{:?}", p.info.warnings);
    // The body's own reduce-scatter is the module's one collective, still inside the called body.
    let rs: Vec<_> = p
        .module
        .computations
        .iter()
        .flat_map(|c| &c.instructions)
        .filter(|i| CollectiveKind::of_opcode(&i.opcode).map(|k| k.0) == Some(CollectiveKind::ReduceScatter))
        .collect();
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0].shape.to_string(), "bf16[64,512]{1,0}");
    // The entry's root is the body's [64,512] block: the out-spec splits the 256 tokens 4 ways.
    let e = p.module.entry_computation();
    assert_eq!(e.instructions[e.root].shape.to_string(), "bf16[64,512]{1,0}");
}

#[test]
fn an_out_spec_that_does_not_give_the_bodys_shape_exits_2() {
    // Out-spec replicated: the global [256,512] per device, but the body returns [64,512].
    let text = tp_module(r#"<@mesh, [{}, {}]>"#);
    let e = try_run(&text).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, HloError::Invalid { .. }), "{msg}");
    assert!(
        msg.contains("`out`") && msg.contains("[64, 512]") && msg.contains("[256, 512]"),
        "{msg}"
    );
    // The line named is the instruction's.
    let line = text.lines().position(|l| l.contains("ROOT out =")).unwrap() + 1;
    assert!(msg.contains(&format!("line {line}")), "{msg}");
}

#[test]
fn a_mesh_axis_the_mesh_does_not_have_exits_2_naming_the_valid_ones() {
    let text = tp_module(r#"<@mesh, [{\"model\"}, {}]>"#);
    let msg = try_run(&text).unwrap_err().to_string();
    assert!(msg.contains("\"model\"") && msg.contains("valid: \"d\""), "{msg}");
}

#[test]
fn gspmds_form_moves_operands_by_their_sharding_calls() {
    // jax with Shardy off: `Sharding` then `SPMDFullToShardShape` ({manual}); the body's ppermute ring.
    // x [256,1024] arrives split on rows [4,1] but the shard_map wants columns [1,4]: an all-to-all moves
    // the split (operand the [64,1024] block = 131072 bytes, group 4).
    let text = "HloModule m\n\nbody {\n  \
         p = bf16[256,256]{1,0} parameter(0)\n  \
         ROOT r = bf16[256,256]{1,0} collective-permute(p), channel_id=1, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}\n}\n\n\
         ENTRY main {\n  \
         x = bf16[256,1024]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}\n  \
         s = bf16[256,1024]{1,0} custom-call(x), custom_call_target=\"Sharding\", sharding={devices=[1,4]<=[4]}\n  \
         l = bf16[256,256]{1,0} custom-call(s), custom_call_target=\"SPMDFullToShardShape\", sharding={manual}\n  \
         c = bf16[256,256]{1,0} call(l), to_apply=body\n  \
         m = bf16[256,256]{1,0} custom-call(c), custom_call_target=\"Sharding\", sharding={manual}\n  \
         ROOT g = bf16[256,1024]{1,0} custom-call(m), custom_call_target=\"SPMDShardToFullShape\", sharding={devices=[1,4]<=[4]}\n}\n".to_string();
    let p = try_run(&text).unwrap();
    let ins: Vec<_> = p
        .info
        .inserted
        .iter()
        .map(|c| (c.kind, c.bytes, c.group_size))
        .collect();
    assert_eq!(ins, vec![(CollectiveKind::AllToAll, 64 * 1024 * 2, 4)]);
    assert_eq!(p.info.inserted[0].rule, Rule::MoveSplit);
    let e = p.module.entry_computation();
    assert_eq!(e.instructions[e.root].shape.to_string(), "bf16[256,256]{1,0}");
    // The manual restatement `m` is gone (an identity): the root is the call's result.
    assert!(
        e.instructions.iter().all(|i| i.attr("custom_call_target").is_none()),
        "{}",
        p.module
    );
}

#[test]
fn a_shard_map_over_some_axes_runs_whole_over_the_others_and_says_so() {
    // Mesh a=2, b=2; manual over a only. x [256,1024] split a x b: the body reads [128,1024], whole over b,
    // so x is all-gathered over b (the [128,512] block -> 128x1024 bf16 = 262144 bytes, group 2).
    let to_local = format!(
        "{}, {}",
        spec("xla.sdy.in_shardings", r#"<@mesh, [{\"a\", ?}, {?}]>"#),
        manual(r#"\"a\""#)
    );
    let to_global = format!(
        "{}, {}",
        manual(r#"\"a\""#),
        spec("xla.sdy.out_shardings", r#"<@mesh, [{\"a\"}, {}]>"#)
    );
    let text = format!(
        "{MESH_AB}\n\nbody {{\n  \
         p = bf16[128,1024]{{1,0}} parameter(0)\n  \
         ROOT r = bf16[128,1024]{{1,0}} all-reduce(p), channel_id=1, replica_groups={{{{0,2}},{{1,3}}}}, \
         use_global_device_ids=true, to_apply=region\n}}\n\n{ADD}\
         ENTRY main {{\n  \
         x = bf16[256,1024]{{1,0}} parameter(0), sharding={{devices=[2,2]<=[4]}}\n  \
         l = bf16[128,1024]{{1,0}} custom-call(x), custom_call_target=\"xla.sdy.GlobalToLocalShape\", \
         frontend_attributes={{{to_local}}}\n  \
         c = bf16[128,1024]{{1,0}} call(l), to_apply=body\n  \
         ROOT g = bf16[256,1024]{{1,0}} custom-call(c), custom_call_target=\"xla.sdy.LocalToGlobalShape\", \
         frontend_attributes={{{to_global}}}\n}}\n"
    );
    let p = try_run(&text).unwrap();
    let ins: Vec<_> = p
        .info
        .inserted
        .iter()
        .map(|c| (c.kind, c.bytes, c.group_size))
        .collect();
    assert_eq!(ins, vec![(CollectiveKind::AllGather, 128 * 1024 * 2, 2)]);
    assert_eq!(p.info.inserted[0].rule, Rule::ManualBoundary);
    assert_eq!(p.info.warnings.len(), 1, "{:?}", p.info.warnings);
    assert!(p.info.warnings[0].contains("some of the mesh axes"));
}
