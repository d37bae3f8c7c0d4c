//! Limits files: jax-tpu-embedding's FDO stats (NPZ and CSV) and tpusim's own limits file (JSON or
//! TOML, by extension), which records where its numbers came from.

use std::collections::BTreeMap;
use std::path::Path;

use npyz::WriterBuilder;
use serde::{Deserialize, Serialize};

/// Errors reading or writing limits files.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// I/O on a path.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The content is not what the format says.
    #[error("{path}: {message}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong, naming the key or line.
        message: String,
    },
}

fn io(path: &Path, e: impl std::fmt::Display) -> FileError {
    FileError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

fn format_err(path: &Path, m: impl Into<String>) -> FileError {
    FileError::Format {
        path: path.display().to_string(),
        message: m.into(),
    }
}

/// The limits of one stack.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StackLimit {
    /// max_ids_per_partition.
    pub max_ids_per_partition: u64,
    /// max_unique_ids_per_partition.
    pub max_unique_ids_per_partition: u64,
    /// Suggested COO buffer size per device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggested_coo_buffer_size_per_device: Option<u64>,
}

/// tpusim's limits file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsFile {
    /// Where the numbers came from (free-form facts: command, inputs, percentile, headroom).
    #[serde(default)]
    pub source: BTreeMap<String, String>,
    /// Limits by stack name.
    pub stacks: BTreeMap<String, StackLimit>,
}

impl LimitsFile {
    /// Reads a JSON or TOML limits file (by extension; JSON otherwise).
    /// Limits must be in 1..=2^31-1 (jax-tpu-embedding holds them as int32).
    pub fn read(path: &Path) -> Result<Self, FileError> {
        let text = std::fs::read_to_string(path).map_err(|e| io(path, e))?;
        Self::parse(&text, path.extension().is_some_and(|e| e == "toml")).map_err(|e| format_err(path, e))
    }

    /// Parses the text of a limits file (TOML when `toml`, else JSON) and checks every limit's range.
    pub fn parse(text: &str, toml: bool) -> Result<Self, String> {
        let file: Self = if toml {
            sim_core::de::toml(text)?
        } else {
            sim_core::de::json(text)?
        };
        const MAX: u64 = i32::MAX as u64;
        for (stack, l) in &file.stacks {
            for (field, v) in [
                ("max_ids_per_partition", Some(l.max_ids_per_partition)),
                ("max_unique_ids_per_partition", Some(l.max_unique_ids_per_partition)),
                (
                    "suggested_coo_buffer_size_per_device",
                    l.suggested_coo_buffer_size_per_device,
                ),
            ] {
                if let Some(v) = v.filter(|&v| v == 0 || v > MAX) {
                    return Err(format!(
                        "stacks.{stack}.{field} = {v}: must be in 1..={MAX} (an int32 in jax-tpu-embedding)"
                    ));
                }
            }
        }
        Ok(file)
    }

    /// Writes JSON or TOML (by extension).
    pub fn write(&self, path: &Path) -> Result<(), FileError> {
        let text = if path.extension().is_some_and(|e| e == "toml") {
            toml::to_string_pretty(self).map_err(|e| format_err(path, e.to_string()))?
        } else {
            serde_json::to_string_pretty(self).map_err(|e| format_err(path, e.to_string()))? + "\n"
        };
        sim_core::output::write_atomic(path, text).map_err(|e| io(path, e))
    }
}

/// FDO statistics of one stack: one row per recorded step.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FdoStack {
    /// `<stack>_max_ids`: per step, per partition.
    pub max_ids: Vec<Vec<i64>>,
    /// `<stack>_max_unique_ids`.
    pub max_unique_ids: Vec<Vec<i64>>,
    /// `<stack>_required_buffer_size`: per step, per SparseCore.
    pub required_buffer_size: Vec<Vec<i64>>,
    /// `<stack>_id_drop_counters`.
    pub id_drop_counters: Vec<Vec<i64>>,
}

/// FDO statistics by stack.
pub type FdoStats = BTreeMap<String, FdoStack>;

const SUFFIXES: [&str; 4] = [
    "_max_ids",
    "_max_unique_ids",
    "_required_buffer_size",
    "_id_drop_counters",
];

fn field<'a>(s: &'a mut FdoStack, suffix: &str) -> &'a mut Vec<Vec<i64>> {
    match suffix {
        "_max_ids" => &mut s.max_ids,
        "_max_unique_ids" => &mut s.max_unique_ids,
        "_required_buffer_size" => &mut s.required_buffer_size,
        _ => &mut s.id_drop_counters,
    }
}

/// Splits `<stack><suffix>` into (stack, suffix); the longest suffix wins (`_max_unique_ids` before `_max_ids`... both end differently).
fn split_key(key: &str) -> Option<(&str, &'static str)> {
    SUFFIXES
        .iter()
        .filter_map(|s| key.strip_suffix(s).map(|st| (st, *s)))
        .max_by_key(|(_, s)| s.len())
}

/// Reads one FDO NPZ file.
pub fn read_fdo_npz(path: &Path) -> Result<FdoStats, FileError> {
    let file = std::fs::File::open(path).map_err(|e| io(path, e))?;
    read_fdo_npz_from(std::io::BufReader::new(file)).map_err(|e| format_err(path, e))
}

/// [`read_fdo_npz`] from any seekable reader; arrays are int64 (or int32), 1-D or 2-D [steps, values].
/// Members are read with the same bounds as id files (never beyond what the zip holds).
pub fn read_fdo_npz_from<R: std::io::Read + std::io::Seek>(reader: R) -> Result<FdoStats, String> {
    use crate::preprocess::npy::{read_npy, NpyData};
    let mut npz = zip::ZipArchive::new(reader).map_err(|e| format!("not a valid npz file: {e}"))?;
    let members: Vec<String> = npz.file_names().map(str::to_string).collect();
    let mut stats = FdoStats::new();
    for member in members {
        let Some(name) = member.strip_suffix(".npy") else {
            continue;
        };
        let Some((stack, suffix)) = split_key(name) else {
            return Err(format!(
                "array '{name}' is not <stack>_max_ids/_max_unique_ids/_required_buffer_size/_id_drop_counters"
            ));
        };
        let bytes =
            crate::preprocess::input::read_zip_member(&mut npz, &member).map_err(|e| format!("array '{name}'{e}"))?;
        let arr = read_npy(&bytes).map_err(|e| format!("array '{name}': {e}"))?;
        let data: Vec<i64> = match arr.data {
            NpyData::I64(v) => v,
            NpyData::I32(v) => v.into_iter().map(i64::from).collect(),
            NpyData::F32(_) => return Err(format!("array '{name}': float32, expected int64")),
        };
        let cols = match arr.shape.as_slice() {
            [_] | [] => data.len(),
            [_, c] => usize::try_from(*c).map_err(|_| format!("array '{name}': shape {:?} too wide", arr.shape))?,
            s => {
                return Err(format!(
                    "array '{name}': shape {s:?}, expected 1-D or 2-D [steps, values]"
                ))
            }
        };
        let rows: Vec<Vec<i64>> = if cols == 0 {
            vec![]
        } else {
            data.chunks(cols).map(|c| c.to_vec()).collect()
        };
        *field(stats.entry(stack.to_string()).or_default(), suffix) = rows;
    }
    Ok(stats)
}

/// Writes one FDO NPZ file (int64, one row per step).
pub fn write_fdo_npz(path: &Path, stats: &FdoStats) -> Result<(), FileError> {
    // Written whole or not at all: into a temporary file, renamed into place.
    sim_core::output::write_via_path(path, |tmp| {
        write_fdo_npz_to(tmp, path, stats).map_err(|e| std::io::Error::other(e.to_string()))
    })
    .map_err(|e| io(path, e))
}

fn write_fdo_npz_to(tmp: &Path, path: &Path, stats: &FdoStats) -> Result<(), FileError> {
    let file = std::fs::File::create(tmp).map_err(|e| io(path, e))?;
    let mut npz = npyz::npz::NpzWriter::new(std::io::BufWriter::new(file));
    for (stack, s) in stats {
        for suffix in SUFFIXES {
            let rows = match suffix {
                "_max_ids" => &s.max_ids,
                "_max_unique_ids" => &s.max_unique_ids,
                "_required_buffer_size" => &s.required_buffer_size,
                _ => &s.id_drop_counters,
            };
            let cols = rows.first().map_or(0, |r| r.len());
            let mut w = npz
                .array(&format!("{stack}{suffix}"), Default::default())
                .map_err(|e| io(path, e))?
                .default_dtype()
                .shape(&[rows.len() as u64, cols as u64])
                .begin_nd()
                .map_err(|e| io(path, e))?;
            for r in rows {
                w.extend(r.iter().copied()).map_err(|e| io(path, e))?;
            }
            w.finish().map_err(|e| io(path, e))?;
        }
    }
    Ok(())
}

/// Reads an FDO CSV file: header `key,values`, then `key,<space-separated ints>` per line (one step).
pub fn read_fdo_csv(path: &Path) -> Result<FdoStats, FileError> {
    let text = std::fs::read_to_string(path).map_err(|e| io(path, e))?;
    parse_fdo_csv(&text).map_err(|e| format_err(path, e))
}

/// Parses the text of an FDO CSV file (see [`read_fdo_csv`]).
pub fn parse_fdo_csv(text: &str) -> Result<FdoStats, String> {
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("key,values") {
        return Err("line 1: expected the header 'key,values'".into());
    }
    let mut stats = FdoStats::new();
    for (i, line) in lines.enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let (key, values) = line
            .split_once(',')
            .ok_or_else(|| format!("line {}: expected key,values", i + 2))?;
        let (stack, suffix) = split_key(key).ok_or_else(|| format!("line {}: unknown key '{key}'", i + 2))?;
        let row: Vec<i64> = values
            .split_whitespace()
            .map(|v| {
                v.parse()
                    .map_err(|_| format!("line {}: '{v}' is not an integer (int64)", i + 2))
            })
            .collect::<Result<_, _>>()?;
        field(stats.entry(stack.to_string()).or_default(), suffix).push(row);
    }
    Ok(stats)
}

/// Writes an FDO CSV file.
pub fn write_fdo_csv(path: &Path, stats: &FdoStats) -> Result<(), FileError> {
    let mut out = String::from("key,values\n");
    for (stack, s) in stats {
        for (suffix, rows) in [
            ("_max_ids", &s.max_ids),
            ("_max_unique_ids", &s.max_unique_ids),
            ("_required_buffer_size", &s.required_buffer_size),
            ("_id_drop_counters", &s.id_drop_counters),
        ] {
            for r in rows {
                let vals: Vec<String> = r.iter().map(|v| v.to_string()).collect();
                out.push_str(&format!("{stack}{suffix},{}\n", vals.join(" ")));
            }
        }
    }
    sim_core::output::write_atomic(path, out).map_err(|e| io(path, e))
}

/// Loads an FDO directory as jax-tpu-embedding's NPZ client does: the latest `fdo_stats_<process>_<time>.npz`
/// of each process (CSV files `*.csv` are read too), merged by element-wise maximum.
pub fn load_fdo_dir(dir: &Path) -> Result<FdoStats, FileError> {
    let mut latest: BTreeMap<String, (u128, std::path::PathBuf)> = BTreeMap::new();
    let mut csvs = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
        let p = entry.map_err(|e| io(dir, e))?.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("").to_string();
        if let Some(rest) = name.strip_prefix("fdo_stats_").and_then(|r| r.strip_suffix(".npz")) {
            let (process, time) = rest.rsplit_once('_').unwrap_or((rest, "0"));
            let t: u128 = time.parse().unwrap_or(0);
            if latest.get(process).is_none_or(|(old, _)| t >= *old) {
                latest.insert(process.to_string(), (t, p));
            }
        } else if name.ends_with(".csv") {
            csvs.push(p);
        }
    }
    csvs.sort();
    let mut merged = FdoStats::new();
    let files: Vec<FdoStats> = latest
        .values()
        .map(|(_, p)| read_fdo_npz(p))
        .chain(csvs.iter().map(|p| read_fdo_csv(p)))
        .collect::<Result<_, _>>()?;
    if files.is_empty() {
        return Err(format_err(dir, "no fdo_stats_<process>_<time>.npz or .csv files"));
    }
    for f in files {
        for (stack, s) in f {
            let m = merged.entry(stack).or_default();
            for suffix in SUFFIXES {
                let src = match suffix {
                    "_max_ids" => &s.max_ids,
                    "_max_unique_ids" => &s.max_unique_ids,
                    "_required_buffer_size" => &s.required_buffer_size,
                    _ => &s.id_drop_counters,
                };
                field(m, suffix).extend(src.iter().cloned());
            }
        }
    }
    Ok(merged)
}

/// Limits from FDO stats as jax-tpu-embedding's update_preprocessing_parameters sets them: the maxima,
/// and a suggested buffer of max(required buffer per SparseCore) x SparseCores per device.
pub fn limits_from_fdo(stats: &FdoStats, sc_per_device: u64) -> BTreeMap<String, StackLimit> {
    // Recorded stats are int64; limits are int32 in jax-tpu-embedding, so values are capped there.
    let max = |rows: &Vec<Vec<i64>>| {
        rows.iter()
            .flatten()
            .copied()
            .max()
            .unwrap_or(0)
            .clamp(0, i32::MAX as i64) as u64
    };
    stats
        .iter()
        .map(|(k, s)| {
            let req = max(&s.required_buffer_size);
            (
                k.clone(),
                StackLimit {
                    max_ids_per_partition: max(&s.max_ids),
                    max_unique_ids_per_partition: max(&s.max_unique_ids),
                    suggested_coo_buffer_size_per_device: (req > 0)
                        .then_some(req.saturating_mul(sc_per_device).min(i32::MAX as u64)),
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fdo_round_trips_in_both_formats_and_merges() {
        let dir = std::env::temp_dir().join(format!("fdo-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut stats = FdoStats::new();
        stats.insert(
            "t_a".into(),
            FdoStack {
                max_ids: vec![vec![3, 9], vec![4, 2]],
                max_unique_ids: vec![vec![1, 2], vec![2, 2]],
                required_buffer_size: vec![vec![16, 24], vec![8, 8]],
                id_drop_counters: vec![vec![0], vec![5]],
            },
        );
        write_fdo_npz(&dir.join("fdo_stats_0_100.npz"), &stats).unwrap();
        assert_eq!(read_fdo_npz(&dir.join("fdo_stats_0_100.npz")).unwrap(), stats);
        write_fdo_csv(&dir.join("stats.csv"), &stats).unwrap();
        assert_eq!(read_fdo_csv(&dir.join("stats.csv")).unwrap(), stats);
        let merged = load_fdo_dir(&dir).unwrap();
        let limits = limits_from_fdo(&merged, 4);
        assert_eq!(limits["t_a"].max_ids_per_partition, 9);
        assert_eq!(limits["t_a"].max_unique_ids_per_partition, 2);
        assert_eq!(limits["t_a"].suggested_coo_buffer_size_per_device, Some(96));
        let bad = dir.join("bad.csv");
        sim_core::output::write_atomic(&bad, "key,values\nt_max_ids,1 x\n").unwrap();
        assert!(read_fdo_csv(&bad)
            .unwrap_err()
            .to_string()
            .contains("line 2: 'x' is not an integer (int64)"));
    }

    #[test]
    fn limits_file_json_and_toml() {
        let dir = std::env::temp_dir().join(format!("limits-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut f = LimitsFile::default();
        f.source.insert("command".into(), "tpusim limits estimate".into());
        f.stacks.insert(
            "t".into(),
            StackLimit {
                max_ids_per_partition: 64,
                max_unique_ids_per_partition: 32,
                suggested_coo_buffer_size_per_device: None,
            },
        );
        for ext in ["json", "toml"] {
            let p = dir.join(format!("limits.{ext}"));
            f.write(&p).unwrap();
            assert_eq!(LimitsFile::read(&p).unwrap(), f);
        }
    }

    #[test]
    fn limits_file_rejects_limits_outside_int32() {
        let dir = std::env::temp_dir().join(format!("tpusim-limits-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text, field) in [
            (
                "a.json",
                r#"{"stacks": {"s": {"max_ids_per_partition": 2147483648, "max_unique_ids_per_partition": 8}}}"#,
                "stacks.s.max_ids_per_partition = 2147483648",
            ),
            (
                "b.toml",
                "[stacks.s]\nmax_ids_per_partition = 8\nmax_unique_ids_per_partition = 0\n",
                "stacks.s.max_unique_ids_per_partition = 0",
            ),
        ] {
            let p = dir.join(name);
            sim_core::output::write_atomic(&p, text).unwrap();
            let err = LimitsFile::read(&p).unwrap_err().to_string();
            assert!(err.contains(field), "{err}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
