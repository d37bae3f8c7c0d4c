//! `tpusim run --json`: one workload simulated, its summary in the CLI's schema.

use std::path::{Path, PathBuf};

use anyhow::Context;
pub use reports::{ReportPaths, REPORT_FILES};
use serde_json::Value;
pub use sim_core::summary::RuntimeVerdict;
pub use workloads::sensitivity::Sensitivity;
pub use workloads::spec::RunBounds;
pub use workloads::{Pipelining, RunOptions, RunResult, Workload};

/// Which workload to run and the command line's overrides of it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunRequest {
    /// Workload file (TOML or JSON); exclusive with `preset`.
    pub workload: Option<PathBuf>,
    /// A built-in workload.
    pub preset: Option<String>,
    /// Chip preset.
    pub chip: Option<String>,
    /// Number of chips.
    pub chips: Option<u32>,
    /// Global batch.
    pub batch: Option<u64>,
    /// Steps to simulate.
    pub steps: Option<u32>,
    /// Sequential or pipelined.
    pub pipelining: Option<Pipelining>,
    /// `KEY=VALUE` what-if overrides (`--set`), applied last.
    pub set: Vec<String>,
}

/// A commented starting workload (`tpusim init`): runs as is, every optional field written out at its
/// default.
pub fn starter_workload() -> &'static str {
    workloads::spec::STARTER_WORKLOAD
}

/// Reads a workload file; relative id and limits paths in it are taken from the file's directory.
pub fn read_workload(path: &Path) -> crate::Result<Workload> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut w = Workload::parse(&text).with_context(|| path.display().to_string())?;
    w.resolve_paths(path.parent().unwrap_or(Path::new(".")));
    Ok(w)
}

/// The workload a request describes (file or preset, with overrides), validated.
pub fn load_workload(req: &RunRequest) -> crate::Result<Workload> {
    Ok(load_inner(req)?)
}

fn load_inner(req: &RunRequest) -> anyhow::Result<Workload> {
    let mut w = match (&req.workload, &req.preset) {
        (Some(_), Some(_)) => anyhow::bail!("give a workload file or a preset, not both"),
        (Some(p), None) => read_workload(p)?,
        (None, Some(name)) => Workload::preset(name)?,
        (None, None) => anyhow::bail!(
            "give a workload file or --preset NAME ({})",
            Workload::preset_names().join(", ")
        ),
    };
    if let Some(c) = &req.chip {
        sim_tpu::chips::preset_name(c)?;
        w.chip = c.clone();
    } else if let Some(p) = &req.workload {
        sim_tpu::chips::preset_name(&w.chip).with_context(|| format!("{}: chip", p.display()))?;
    }
    if let Some(n) = req.chips {
        // Another chip count takes that count's default slice unless --set topology names one.
        if n != w.chips {
            w.topology = None;
        }
        w.chips = n;
    }
    if let Some(b) = req.batch {
        w.global_batch = b;
    }
    if let Some(s) = req.steps {
        w.steps = s;
    }
    if let Some(p) = req.pipelining {
        w.pipelining = p;
    }
    let (sets, _) = split_sets(&req.set)?;
    let w = apply_overrides(&w, &sets)?;
    w.validate()?;
    Ok(w)
}

/// Splits `--set` values into workload overrides and chip overrides (`chip.FIELD=VALUE`).
pub fn split_sets(sets: &[String]) -> anyhow::Result<(Vec<String>, serde_json::Map<String, Value>)> {
    let mut workload = Vec::new();
    let mut chip = serde_json::Map::new();
    for s in sets {
        match s.strip_prefix("chip.") {
            Some(rest) => {
                let (k, v) = rest
                    .split_once('=')
                    .ok_or_else(|| anyhow::anyhow!("--set {s}: expected chip.FIELD=VALUE"))?;
                let value: Value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_string()));
                chip.insert(k.to_string(), value);
            }
            None => workload.push(s.clone()),
        }
    }
    Ok((workload, chip))
}

/// The run options of a request: a chip file's overrides (`--chip-file`), then the request's
/// `chip.FIELD=VALUE` sets.
pub fn run_options(req: &RunRequest, chip_file: Option<&Path>, functional: bool) -> crate::Result<RunOptions> {
    Ok(run_options_inner(req, chip_file, functional)?)
}

fn run_options_inner(req: &RunRequest, chip_file: Option<&Path>, functional: bool) -> anyhow::Result<RunOptions> {
    let mut chip = match chip_file {
        Some(p) => {
            let v: Value = serde_json::from_str(&std::fs::read_to_string(p).with_context(|| p.display().to_string())?)
                .with_context(|| format!("parsing {}", p.display()))?;
            let m = v
                .as_object()
                .cloned()
                .ok_or_else(|| anyhow::anyhow!("{}: a chip file must be a JSON object", p.display()))?;
            // A "chip"/"base" key names the preset the file starts from: it must be one.
            for key in ["chip", "base"] {
                if let Some(name) = m.get(key) {
                    let name = name
                        .as_str()
                        .ok_or_else(|| anyhow::anyhow!("{}: {key} = {name}: expected a chip name", p.display()))?;
                    sim_tpu::chips::preset_name(name).with_context(|| format!("{}: {key}", p.display()))?;
                }
            }
            m
        }
        None => serde_json::Map::new(),
    };
    let (_, sets) = split_sets(&req.set)?;
    chip.extend(sets);
    Ok(RunOptions {
        functional,
        record: true,
        chip_overrides: if chip.is_empty() {
            None
        } else {
            Some(Value::Object(chip))
        },
        cache: None,
        bounds: Default::default(),
        simulate_every_step: false,
    })
}

/// Applies `KEY=VALUE` overrides: the value is read as JSON (numbers, booleans, arrays, objects) or,
/// failing that, as a string; KEY is a dotted path (array elements by index).
pub fn apply_overrides(w: &Workload, sets: &[String]) -> crate::Result<Workload> {
    Ok(apply_inner(w, sets)?)
}

fn apply_inner(w: &Workload, sets: &[String]) -> anyhow::Result<Workload> {
    if sets.is_empty() {
        return Ok(w.clone());
    }
    let mut v = serde_json::to_value(w)?;
    // Keys a `--set` added that the workload did not have: (the full key, the keys beside it).
    let mut added: Vec<(String, String, Vec<String>)> = Vec::new();
    for s in sets {
        let (key, value) = s
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--set {s}: expected KEY=VALUE"))?;
        let value: serde_json::Value =
            serde_json::from_str(value).unwrap_or_else(|_| serde_json::Value::String(value.to_string()));
        // A documented alias sets the field it stands for (setting both names would be a duplicate).
        let key = workloads::spec::FIELD_ALIASES
            .iter()
            .find(|(alias, _)| *alias == key)
            .map_or(key, |(_, field)| *field);
        let mut cur = &mut v;
        let parts: Vec<&str> = key.split('.').collect();
        for (i, part) in parts.iter().enumerate() {
            let last = i + 1 == parts.len();
            // An optional section the workload leaves out (`quantization`) is created by setting a
            // field in it; the section's defaults fill the rest.
            if cur.is_null() {
                *cur = serde_json::Value::Object(Default::default());
            }
            cur = match cur {
                serde_json::Value::Object(m) => {
                    if !m.contains_key(*part) {
                        added.push((parts[..=i].join("."), part.to_string(), m.keys().cloned().collect()));
                    }
                    if last {
                        m.insert(part.to_string(), value.clone());
                        break;
                    }
                    m.entry(part.to_string())
                        .or_insert_with(|| serde_json::Value::Object(Default::default()))
                }
                serde_json::Value::Array(a) => {
                    let idx: usize = part
                        .parse()
                        .ok()
                        .filter(|&i| i < a.len())
                        .ok_or_else(|| anyhow::anyhow!("--set {s}: '{part}' is not an index below {}", a.len()))?;
                    if last {
                        a[idx] = value.clone();
                        break;
                    }
                    &mut a[idx]
                }
                _ => anyhow::bail!("--set {s}: '{}' is not a table", parts[..i].join(".")),
            };
        }
    }
    let w: Workload = sim_core::de::json_value(v).map_err(|e| {
        let text = e.to_string();
        // serde names the first unknown field; offer the nearest valid key beside it.
        let hint = added
            .iter()
            .find(|(_, k, _)| text.contains(&format!("unknown field `{k}`")))
            .and_then(|(full, k, siblings)| {
                let best = sim_core::suggest::did_you_mean(k, siblings.iter().map(String::as_str))?;
                let prefix = &full[..full.len() - k.len()];
                Some(format!("; did you mean `{prefix}{best}`?"))
            })
            .unwrap_or_default();
        anyhow::anyhow!("--set: {text}{hint}")
    })?;
    w.validate()?;
    Ok(w)
}

/// Simulates a workload (the library's `simulate`, errors as [`crate::ApiError`]).
pub fn simulate(w: &Workload, opts: &RunOptions) -> crate::Result<RunResult> {
    Ok(workloads::simulate(w, opts).map_err(anyhow::Error::from)?)
}

/// The `run --json` summary of a run.
pub fn summary_json(r: &RunResult) -> crate::Result<Value> {
    Ok(serde_json::to_value(&r.summary).map_err(anyhow::Error::from)?)
}

/// Runs a workload again with each assumed constant halved and doubled (`run --sensitivity`).
pub fn sensitivity(w: &Workload, opts: &RunOptions) -> crate::Result<Sensitivity> {
    Ok(workloads::sensitivity::sensitivity(w, opts).map_err(anyhow::Error::from)?)
}

/// The share of a run's critical path held by fixed costs that rest on assumptions.
pub fn assumed_share(r: &RunResult) -> f64 {
    workloads::sensitivity::assumed_share(r)
}

/// The step time with every assumed constant halved, and with every one doubled (µs).
pub fn assumption_range(w: &Workload, opts: &RunOptions) -> crate::Result<[f64; 2]> {
    Ok(workloads::sensitivity::assumption_range(w, opts).map_err(anyhow::Error::from)?)
}

/// The report of runs of `w` (one Gantt panel per run given; `main`'s summary and advice).
fn report_input(w: &Workload, runs: &[(&str, &RunResult)], main: &RunResult) -> reports::ReportInput {
    reports::ReportInput {
        title: format!("tpusim: {} on {} x {}", w.name, w.chips, w.chip),
        summary: main.summary.clone(),
        gantt: runs
            .iter()
            .map(|(l, r)| (l.to_string(), r.recorder.clone(), r.summary.step_time_us))
            .collect(),
        bottleneck: main.bottleneck.clone(),
        chip_constants: main.chip_constants.clone(),
        padding_per_buffer: main.padding_per_buffer.clone(),
        knobs: main.knobs.clone(),
        warnings: main.warnings.clone(),
        memory_breakdown: main.memory_breakdown.clone(),
    }
}

/// Writes the report (`REPORT_FILES`) of runs of `w` into `dir`, all of it or none.
pub fn write_report(
    dir: &Path,
    w: &Workload,
    runs: &[(&str, &RunResult)],
    main: &RunResult,
) -> crate::Result<ReportPaths> {
    Ok(reports::write_report(dir, &report_input(w, runs, main)).map_err(anyhow::Error::from)?)
}

/// Writes a run's recording as a Chrome trace, whole or not at all; errors name the file.
pub fn write_trace(r: &RunResult, path: &Path) -> crate::Result<()> {
    sim_core::output::write_with(path, |out| -> anyhow::Result<()> {
        traces::write_chrome_trace(&r.recorder, out)?;
        Ok(())
    })
    .with_context(|| path.display().to_string())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_suggests_creates_sections_and_takes_aliases() {
        let w = Workload::preset("dlrm-small").unwrap();
        let e = apply_overrides(&w, &["shuffle_id=true".into()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown field `shuffle_id`") && e.contains("did you mean `shuffle_ids`?"),
            "{e}"
        );
        let e = apply_overrides(&w, &["host.thread=2".into()]).unwrap_err().to_string();
        assert!(e.contains("did you mean `host.threads`?"), "{e}");
        assert!(w.quantization.is_none());
        let q = apply_overrides(&w, &["quantization.quantization_config_num_buckets=16".into()]).unwrap();
        let q = q.quantization.unwrap();
        assert_eq!(q.quantization_config_num_buckets, 16);
        assert_eq!((q.quantization_config_low, q.quantization_config_high), (-1.0, 1.0));
        let h = apply_overrides(&w, &["host.maximum_parallel_iterations=8".into()]).unwrap();
        assert_eq!(h.host.prefetch, 8);
    }
}
