//! The SPMD partitioner: a module annotated with `sharding={...}` (what `jax.jit(f, in_shardings=...,
//! out_shardings=...).lower(...).as_text(dialect="hlo")` prints) becomes the per-device module, with the
//! collectives a partitioner inserts, so `tpusim hlo --slice` costs it like a compiler's per-device module.
//!
//! Devices form a row-major mesh (`--mesh`, else the module's Shardy mesh, else one axis of every device),
//! split into prime sub-axes ([`axes`]). Layouts start at the parameters' shardings and flow forward through
//! elementwise ops, broadcasts, transposes, reshapes (where a split maps cleanly), dots and reduces
//! ([`rules`]); annotated instructions and outputs are moved to their annotation ([`build::Builder::reshard`]).
//! Partial sums of a split contracting or reduced dim are all-reduced, or reduce-scattered when the users
//! want the result split there ([`layout::wanted`]). Anything else is the conservative rule: operands
//! gathered whole, computed on every device, with a warning naming the instruction.

pub mod axes;
pub mod build;
pub mod choice;
pub mod layout;
pub mod manual;
pub mod rules;
mod step;
pub mod windowed;

use std::collections::HashSet;

use serde::Serialize;

use super::ir::{Attr, Computation, HloModule, Instruction, Operands};
use super::sharding::Sharding;
use super::HloError;
use axes::Base;
use build::{adder_name, Builder, Inserted};
use layout::{of_sharding, Layout};

/// The per-device module and what the partitioner did.
#[derive(Clone, Debug)]
pub struct Partitioned {
    /// The per-device module.
    pub module: HloModule,
    /// What the partitioner reports: the mesh, the collectives it inserted and its warnings.
    pub info: PartitionInfo,
}

/// The partitioner's account, as `tpusim hlo --slice --json` prints it under `partition`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PartitionInfo {
    /// Mesh axes the devices were laid on, `name=size,...`.
    pub mesh: String,
    /// Each collective inserted.
    pub inserted: Vec<Inserted>,
    /// Instructions outside the patterns and the rule applied to each, and notes on annotations.
    pub warnings: Vec<String>,
}

/// Whether the module needs partitioning: its entry holds a `shard_map` region ([`manual`]), or it carries a
/// tiled sharding, nothing is manual, and it has no collectives yet (a module with collectives already is a
/// per-device program).
pub fn is_annotated(m: &HloModule) -> bool {
    fn tiled(s: &Sharding) -> bool {
        match s {
            Sharding::Tiled(t) => t.array_splits().iter().product::<u64>() > 1,
            Sharding::Tuple(v) => v.iter().any(tiled),
            _ => false,
        }
    }
    fn manual(s: &Sharding) -> bool {
        match s {
            Sharding::Manual => true,
            Sharding::Tuple(v) => v.iter().any(manual),
            _ => false,
        }
    }
    let shardings: Vec<Sharding> = m
        .entry_computation()
        .instructions
        .iter()
        .filter_map(|i| Sharding::of(i).ok().flatten())
        .collect();
    let has_collective = m
        .computations
        .iter()
        .flat_map(|c| &c.instructions)
        .any(|i| super::collective::CollectiveKind::of_opcode(&i.opcode).is_some() || i.opcode.ends_with("-done"));
    let region = m
        .entry_computation()
        .instructions
        .iter()
        .any(|i| manual::boundary(i).is_some());
    region || (shardings.iter().any(tiled) && !shardings.iter().any(manual) && !has_collective)
}

/// The mesh a module's Shardy attributes name (`xla.sdy.meshes={mesh = #sdy.mesh<["data"=2, ...]>}`).
pub fn sdy_mesh(m: &HloModule) -> Option<Vec<(String, u64)>> {
    let fa = m.attrs.iter().find(|a| a.key == "frontend_attributes")?;
    let start = fa.value.find("#sdy.mesh<[")? + "#sdy.mesh<[".len();
    let end = start + fa.value[start..].find(']')?;
    let mut axes = Vec::new();
    for part in fa.value[start..end].split(',').filter(|p| !p.trim().is_empty()) {
        let (n, s) = part.split_once('=')?;
        axes.push((
            n.trim().trim_matches(|c| c == '"' || c == '\\').to_string(),
            s.trim().parse().ok()?,
        ));
    }
    (!axes.is_empty()).then_some(axes)
}

/// The 1-based line of instruction `name` in `text` (0 when not found).
fn line_of(text: &str, name: &str) -> usize {
    text.lines()
        .position(|l| {
            let l = l.trim_start();
            let l = l.strip_prefix("ROOT ").unwrap_or(l).trim_start_matches('%');
            l.strip_prefix(name).is_some_and(|r| r.trim_start().starts_with('='))
        })
        .map_or(0, |p| p + 1)
}

/// Partitions `module` for `devices` devices laid on the module's Shardy mesh, else `mesh` (the `--mesh`
/// axes), else one axis; `text` is the module's source, for line numbers in errors.
pub fn partition(
    module: &HloModule,
    devices: u64,
    mesh: Option<&[(String, u64)]>,
    text: &str,
) -> Result<Partitioned, HloError> {
    partition_with(module, devices, mesh, text, None)
}

/// [`partition`], with FSDP dots run as windowed einsums where `windowed` (the chip's side of the
/// compiler's choice) says so.
pub fn partition_with(
    module: &HloModule,
    devices: u64,
    mesh: Option<&[(String, u64)]>,
    text: &str,
    windowed: Option<windowed::WindowedEinsum>,
) -> Result<Partitioned, HloError> {
    // The shardings were written against the module's own mesh when it names one.
    let mesh: Vec<(String, u64)> = sdy_mesh(module)
        .or_else(|| mesh.map(<[_]>::to_vec))
        .unwrap_or_else(|| vec![("devices".into(), devices)]);
    let named: u64 = mesh.iter().map(|a| a.1).product();
    if named != devices {
        let m: Vec<String> = mesh.iter().map(|(n, s)| format!("{n}={s}")).collect();
        return Err(HloError::Unsupported(format!(
            "the mesh {} names {named} devices but the slice has {devices}; valid: a mesh (--mesh, or the \
             module's xla.sdy.meshes) whose sizes multiply to {devices}",
            m.join(",")
        )));
    }
    let base = Base::new(&mesh.iter().map(|a| a.1).collect::<Vec<_>>());
    let comp = module.entry_computation();
    let mut anns: Vec<Option<Layout>> = Vec::with_capacity(comp.instructions.len());
    let mut warnings = Vec::new();
    for ins in &comp.instructions {
        let err = |e: String| {
            let line = line_of(text, &ins.name);
            HloError::Invalid {
                line,
                column: 1,
                message: format!(
                    "instruction `{}`: sharding={} on {}: {e}",
                    ins.name,
                    ins.attr("sharding").unwrap_or(""),
                    ins.shape
                ),
            }
        };
        let s = Sharding::of(ins).map_err(&err)?;
        let mut notes = Vec::new();
        anns.push(match s {
            Some(s) => Some(of_sharding(&s, &ins.shape, &base, &mut notes).map_err(&err)?),
            None => None,
        });
        warnings.extend(notes.into_iter().map(|n| format!("instruction `{}`: {n}", ins.name)));
    }
    let names: HashSet<String> = module
        .computations
        .iter()
        .flat_map(|c| c.instructions.iter().map(|i| i.name.clone()))
        .collect();
    let mut b = Builder::new(&base, names);
    b.windowed = windowed;
    let axes = manual::MeshAxes::new(&mesh, &base.sizes);
    let root = step::run(comp, &anns, &mut b, &mut warnings, &axes).map_err(|r| HloError::Invalid {
        line: line_of(text, &r.name),
        column: 1,
        message: format!("instruction `{}`: {}", r.name, r.message),
    })?;
    let mut out = module.clone();
    // Other computations (shard_map bodies, reducers) keep their per-device shapes; their sharding
    // restatements are identities.
    for (k, c) in out.computations.iter_mut().enumerate() {
        if k != module.entry {
            *c = manual::strip_identities(c);
        }
    }
    let mut entry: Computation = comp.clone();
    entry.instructions = std::mem::take(&mut b.ins);
    entry.root = root;
    entry.signature = None;
    out.computations[module.entry] = entry;
    out.attrs
        .retain(|a| a.key != "entry_computation_layout" && a.key != "frontend_attributes");
    for ty in &b.adders {
        out.computations.insert(0, adder(ty));
        out.entry += 1;
    }
    // The printed module must read back: a check that every reference the partitioner wrote resolves.
    let module = HloModule::parse(&out.to_string())
        .map_err(|e| HloError::Unsupported(format!("the partitioned module does not read back: {e}")))?;
    Ok(Partitioned {
        module,
        info: PartitionInfo {
            mesh: mesh
                .iter()
                .map(|(n, s)| format!("{n}={s}"))
                .collect::<Vec<_>>()
                .join(","),
            inserted: b.inserted,
            warnings,
        },
    })
}

/// `add` of two scalars of element type `ty`: the reduction of partial sums.
fn adder(ty: &str) -> Computation {
    let shape = sim_core::layout::parse_shape(&format!("{ty}[]")).unwrap_or(sim_core::layout::Shape::Token);
    let p = |n: u64| Instruction {
        name: format!("{}.p{n}", adder_name(ty)),
        shape: shape.clone(),
        opcode: "parameter".into(),
        operands: Operands::Parameter(n),
        attrs: Vec::<Attr>::new(),
    };
    Computation {
        name: adder_name(ty),
        is_entry: false,
        signature: None,
        instructions: vec![
            p(0),
            p(1),
            Instruction {
                name: format!("{}.sum", adder_name(ty)),
                shape: shape.clone(),
                opcode: "add".into(),
                operands: Operands::Refs(vec![0, 1]),
                attrs: Vec::new(),
            },
        ],
        root: 2,
        attrs: Vec::new(),
    }
}
