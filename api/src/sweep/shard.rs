//! Shards of a sweep for batch schedulers (Slurm arrays, Kubernetes indexed Jobs): shard I of N runs
//! the configurations whose index is I modulo N (round robin, so each shard gets small and large
//! batches alike) and writes them with the plan; merging checks the shards belong to one plan and
//! cover it exactly once, and puts the points back in the plan's order.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::{SweepPlan, SweepPoint};

/// Format tag of a shard file.
pub const SHARD_FORMAT: &str = "tpusim-sweep-shard/1";

/// Shard `index` of `count` (0-based: 0 <= index < count).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// This shard, from 0.
    pub index: usize,
    /// Shards in all.
    pub count: usize,
}

impl Shard {
    /// Parses `I/N` (0 <= I < N).
    pub fn parse(text: &str) -> crate::Result<Shard> {
        let bad = || anyhow::anyhow!("--shard {text}: expected I/N with 0 <= I < N, e.g. 0/4");
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let (index, count): (usize, usize) = (
            i.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if count == 0 || index >= count {
            return Err(bad().into());
        }
        Ok(Shard { index, count })
    }

    /// The configuration indices of this shard out of `configs`.
    pub fn indices(&self, configs: usize) -> Vec<usize> {
        (self.index..configs).step_by(self.count).collect()
    }

    /// The file name of this shard's results.
    pub fn file_name(&self) -> String {
        format!("sweep-shard-{}-of-{}.json", self.index, self.count)
    }
}

/// What a shard writes: the plan, which shard, and its points with their configuration indices.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShardFile {
    /// [`SHARD_FORMAT`].
    pub format: String,
    /// The whole sweep's plan (identical in every shard).
    pub plan: SweepPlan,
    /// Which shard.
    pub shard: Shard,
    /// Configuration index of each point.
    pub indices: Vec<usize>,
    /// The points, aligned with `indices`.
    pub points: Vec<SweepPoint>,
}

/// Writes a shard's points into `dir` (created if missing); returns the file written.
pub fn write_shard(dir: &Path, plan: &SweepPlan, shard: Shard, points: Vec<SweepPoint>) -> crate::Result<PathBuf> {
    let file = ShardFile {
        format: SHARD_FORMAT.into(),
        plan: plan.clone(),
        shard,
        indices: shard.indices(plan.configs.len()),
        points,
    };
    let path = dir.join(shard.file_name());
    let write = || -> anyhow::Result<()> {
        sim_core::output::create_dir_all(dir)?;
        sim_core::output::write_atomic(&path, serde_json::to_string(&file)? + "\n")?;
        Ok(())
    };
    write().with_context(|| path.display().to_string())?;
    Ok(path)
}

/// Reads every `sweep-shard-*-of-*.json` in `dirs` and merges them into the plan and its points in
/// plan order. Errors name the file: shards of different plans or shard counts, a shard given twice,
/// a shard missing.
pub fn merge(dirs: &[PathBuf]) -> crate::Result<(SweepPlan, Vec<SweepPoint>)> {
    Ok(merge_inner(dirs)?)
}

fn merge_inner(dirs: &[PathBuf]) -> anyhow::Result<(SweepPlan, Vec<SweepPoint>)> {
    let mut files = Vec::new();
    for d in dirs {
        let entries = std::fs::read_dir(d).with_context(|| format!("--merge {}", d.display()))?;
        let mut names: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("sweep-shard-") && n.ends_with(".json"))
            })
            .collect();
        names.sort();
        if names.is_empty() {
            anyhow::bail!(
                "--merge {}: no sweep-shard-I-of-N.json in it (written by `tpusim sweep --shard I/N -o DIR`)",
                d.display()
            );
        }
        files.extend(names);
    }
    let mut first: Option<(PathBuf, ShardFile)> = None;
    let mut slots: Vec<Option<SweepPoint>> = Vec::new();
    let mut seen: Vec<Option<PathBuf>> = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
        let f: ShardFile = serde_json::from_str(&text).with_context(|| path.display().to_string())?;
        let here = path.display();
        if f.format != SHARD_FORMAT {
            anyhow::bail!("{here}: format is '{}', expected '{SHARD_FORMAT}'", f.format);
        }
        if f.indices.len() != f.points.len() || f.indices != f.shard.indices(f.plan.configs.len()) {
            anyhow::bail!(
                "{here}: its points are not the configurations of shard {}/{}",
                f.shard.index,
                f.shard.count
            );
        }
        match &first {
            None => {
                slots = vec![None; f.plan.configs.len()];
                seen = vec![None; f.shard.count];
            }
            Some((p0, f0)) => {
                if f.plan != f0.plan {
                    anyhow::bail!(
                        "{here} and {}: shards of different sweeps (workload, chips, batches or prices differ)",
                        p0.display()
                    );
                }
                if f.shard.count != f0.shard.count {
                    anyhow::bail!(
                        "{here} is shard {}/{} but {} is {}/{}: every shard must use the same N",
                        f.shard.index,
                        f.shard.count,
                        p0.display(),
                        f0.shard.index,
                        f0.shard.count
                    );
                }
            }
        }
        if let Some(prev) = &seen[f.shard.index] {
            anyhow::bail!(
                "{here}: shard {}/{} is also in {}",
                f.shard.index,
                f.shard.count,
                prev.display()
            );
        }
        seen[f.shard.index] = Some(path.clone());
        for (i, p) in f.indices.iter().zip(&f.points) {
            slots[*i] = Some(p.clone());
        }
        if first.is_none() {
            first = Some((path, f));
        }
    }
    let Some((_, f0)) = first else {
        anyhow::bail!("--merge: no directory given");
    };
    let missing: Vec<String> = seen
        .iter()
        .enumerate()
        .filter(|(_, s)| s.is_none())
        .map(|(i, _)| format!("{i}/{}", f0.shard.count))
        .collect();
    if !missing.is_empty() {
        anyhow::bail!("--merge: shard(s) {} missing", missing.join(", "));
    }
    let points = slots.into_iter().flatten().collect();
    Ok((f0.plan, points))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_every_configuration_once_round_robin() {
        let shards: Vec<Vec<usize>> = (0..3).map(|i| Shard { index: i, count: 3 }.indices(8)).collect();
        assert_eq!(shards, [vec![0, 3, 6], vec![1, 4, 7], vec![2, 5]]);
        // More shards than configurations: the extra shards are empty, not an error.
        assert_eq!(Shard { index: 4, count: 5 }.indices(3), Vec::<usize>::new());
    }

    #[test]
    fn shard_text_is_i_of_n_from_zero() {
        assert_eq!(Shard::parse("2/8").unwrap(), Shard { index: 2, count: 8 });
        assert_eq!(Shard::parse(" 0 / 1 ").unwrap(), Shard { index: 0, count: 1 });
        for bad in ["8/8", "1/0", "1", "a/2", "-1/2", "1/2/3"] {
            let e = Shard::parse(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("--shard {bad}")), "{bad}: {e}");
        }
    }
}
