//! Systolic-array compute cycles compatible with SCALE-Sim: its config (.cfg, INI) and topology
//! (.csv, conv layers or GEMM M,N,K) files, and its COMPUTE_REPORT columns.
//!
//! Mapping of a layer to operand matrices (SCALE-Sim's): for a conv, T = output pixels,
//! K = filter height x width x channels, N = filters; a GEMM gives T = M, K = K, N = N.
//! - weight stationary: Sr = K, Sc = N, streamed T;   - input stationary: Sr = K, Sc = T, streamed N;
//! - output stationary: Sr = T, Sc = N, streamed K.
//!
//! Folds = ceil(Sr / rows) x ceil(Sc / cols). Each fold costs 2R + C + T' - 2 cycles (R cycles to load
//! the stationary operand, then T' streamed vectors with R + C - 2 cycles of skew fill and drain), and
//! the total counts the last cycle's index, hence the final -1. This reproduces SCALE-Sim's weight-
//! stationary counts exactly (256^3 GEMM on 128x128: 2,551; 1024^3: 89,983). For output stationary the
//! same 2R + C + T - 2 per fold is used: SCALE-Sim's own output-stationary count omits the drain of
//! the accumulated outputs and is low, as its maintainers agree.

use serde::Serialize;

/// Dataflow of the array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dataflow {
    /// Output stationary.
    Os,
    /// Weight stationary.
    Ws,
    /// Input stationary.
    Is,
}

/// The array configuration (from SCALE-Sim's .cfg).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArrayConfig {
    /// run_name of [general].
    pub run_name: String,
    /// Rows of PEs.
    pub rows: u64,
    /// Columns of PEs.
    pub cols: u64,
    /// Dataflow.
    pub dataflow: Dataflow,
}

/// One layer as operand dimensions.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Layer {
    /// Layer name.
    pub name: String,
    /// Output pixels (GEMM M).
    pub t: u64,
    /// Reduction (filter h x w x channels; GEMM K).
    pub k: u64,
    /// Filters (GEMM N).
    pub n: u64,
}

/// The COMPUTE_REPORT row of one layer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ComputeReport {
    /// Layer index.
    pub layer_id: usize,
    /// Total compute cycles.
    pub total_cycles: u64,
    /// Stall cycles (0: no memory model in the compute report).
    pub stall_cycles: u64,
    /// MACs / (PEs x total cycles), percent.
    pub overall_util_pct: f64,
    /// Used PEs over all PEs, averaged over folds, percent.
    pub mapping_efficiency_pct: f64,
    /// MACs / (PEs x compute cycles), percent.
    pub compute_util_pct: f64,
}

/// Errors of the SCALE-Sim inputs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SystolicError {
    /// A config key is missing or bad.
    #[error("config: {0}")]
    Config(String),
    /// A layer's counts do not fit in 64 bits.
    #[error("layer {layer} ({name}): {what} overflow 64-bit counts; use smaller dimensions")]
    Overflow {
        /// 0-based layer index.
        layer: usize,
        /// Layer name.
        name: String,
        /// Which count.
        what: String,
    },
    /// A topology line is bad.
    #[error("topology line {line}: {message}")]
    Topology {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// Parses SCALE-Sim's .cfg (INI); keys are matched case-insensitively.
pub fn parse_config(text: &str) -> Result<ArrayConfig, SystolicError> {
    // Lower-cased key -> (the key as written, value, 1-based line).
    let mut kv = std::collections::BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split(['#', ';']).next().unwrap_or("").trim();
        if line.is_empty() || line.starts_with('[') {
            continue;
        }
        if let Some((k, v)) = line.split_once([':', '=']) {
            kv.insert(
                k.trim().to_ascii_lowercase(),
                (k.trim().to_string(), v.trim().to_string(), n + 1),
            );
        }
    }
    let num = |k: &str| -> Result<u64, SystolicError> {
        let (key, v, line) = kv
            .get(&k.to_ascii_lowercase())
            .ok_or_else(|| SystolicError::Config(format!("missing {k}")))?;
        v.parse::<u64>()
            .ok()
            .filter(|&x| x > 0)
            .ok_or_else(|| SystolicError::Config(format!("line {line}: {key} must be a positive integer, got '{v}'")))
    };
    let dataflow = match kv.get("dataflow").map(|s| s.1.to_ascii_lowercase()).as_deref() {
        Some("os") => Dataflow::Os,
        Some("ws") => Dataflow::Ws,
        Some("is") => Dataflow::Is,
        other => {
            return Err(SystolicError::Config(format!(
                "Dataflow must be os, ws or is, got {other:?}"
            )))
        }
    };
    Ok(ArrayConfig {
        run_name: kv.get("run_name").map(|s| s.1.clone()).unwrap_or_default(),
        rows: num("ArrayHeight")?,
        cols: num("ArrayWidth")?,
        dataflow,
    })
}

/// Parses a topology CSV: conv rows (name, ifmap h, ifmap w, filter h, filter w, channels, filters,
/// stride) or GEMM rows (name, M, N, K). A header line is skipped.
pub fn parse_topology(text: &str) -> Result<Vec<Layer>, SystolicError> {
    let mut layers = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let cells: Vec<&str> = line.split(',').map(str::trim).filter(|c| !c.is_empty()).collect();
        if cells.is_empty() || (i == 0 && cells.get(1).is_some_and(|c| c.parse::<u64>().is_err())) {
            continue;
        }
        let bad = |m: String| SystolicError::Topology {
            line: i + 1,
            message: m,
        };
        let nums: Vec<u64> = cells[1..]
            .iter()
            .map(|c| {
                c.parse::<u64>()
                    .ok()
                    .filter(|&x| x > 0)
                    .ok_or_else(|| bad(format!("'{c}' is not a positive integer")))
            })
            .collect::<Result<_, _>>()?;
        let layer = match nums.len() {
            3 => Layer {
                name: cells[0].into(),
                t: nums[0],
                n: nums[1],
                k: nums[2],
            },
            6 | 7 => {
                let (ih, iw, fh, fw, ch, nf) = (nums[0], nums[1], nums[2], nums[3], nums[4], nums[5]);
                let stride = nums.get(6).copied().unwrap_or(1);
                if fh > ih || fw > iw {
                    return Err(bad(format!("filter {fh}x{fw} is larger than the ifmap {ih}x{iw}")));
                }
                let (oh, ow) = ((ih - fh) / stride + 1, (iw - fw) / stride + 1);
                let too_big = |what: &str| bad(format!("{what} does not fit in 64 bits"));
                Layer {
                    name: cells[0].into(),
                    t: oh.checked_mul(ow).ok_or_else(|| too_big("ofmap height x width"))?,
                    k: fh
                        .checked_mul(fw)
                        .and_then(|x| x.checked_mul(ch))
                        .ok_or_else(|| too_big("filter height x width x channels"))?,
                    n: nf,
                }
            }
            n => return Err(bad(format!("expected 3 (GEMM M,N,K) or 6-7 (conv) numbers, got {n}"))),
        };
        layers.push(layer);
    }
    if layers.is_empty() {
        return Err(SystolicError::Topology {
            line: text.lines().count().max(1),
            message: "no layers: a topology lists at least one layer (GEMM: name, M, N, K; conv: name, ifmap height, width, filter height, width, channels, filters[, stride])".into(),
        });
    }
    Ok(layers)
}

/// Compute cycles and utilisation of one layer; counts beyond 64 bits are an error, never wrapped.
pub fn compute(cfg: &ArrayConfig, layer: &Layer, layer_id: usize) -> Result<ComputeReport, SystolicError> {
    let (r, c) = (cfg.rows as u128, cfg.cols as u128);
    let (sr, sc, t) = match cfg.dataflow {
        Dataflow::Ws => (layer.k, layer.n, layer.t),
        Dataflow::Is => (layer.k, layer.t, layer.n),
        Dataflow::Os => (layer.t, layer.n, layer.k),
    };
    let (sr, sc, t) = (sr as u128, sc as u128, t as u128);
    let overflow = |what: &str| SystolicError::Overflow {
        layer: layer_id,
        name: layer.name.clone(),
        what: what.into(),
    };
    // Every factor is below 2^64, so these u128 products cannot wrap; the result must fit u64.
    let folds = sr.div_ceil(r.max(1)) * sc.div_ceil(c.max(1));
    let total = (folds * (2 * r + c + t - 2)).saturating_sub(1);
    let total = u64::try_from(total).map_err(|_| overflow("total cycles"))?;
    let macs = layer.t as f64 * layer.k as f64 * layer.n as f64;
    let util = macs / (total as f64 * (r * c) as f64) * 100.0;
    Ok(ComputeReport {
        layer_id,
        total_cycles: total,
        stall_cycles: 0,
        overall_util_pct: util,
        mapping_efficiency_pct: (sr * sc) as f64 / (folds * r * c) as f64 * 100.0,
        compute_util_pct: util,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(df: Dataflow) -> ArrayConfig {
        ArrayConfig {
            run_name: "t".into(),
            rows: 128,
            cols: 128,
            dataflow: df,
        }
    }

    #[test]
    fn scale_sim_weight_stationary_counts() {
        let l = |m| Layer {
            name: "g".into(),
            t: m,
            k: m,
            n: m,
        };
        assert_eq!(compute(&cfg(Dataflow::Ws), &l(256), 0).unwrap().total_cycles, 2_551);
        assert_eq!(compute(&cfg(Dataflow::Ws), &l(1024), 0).unwrap().total_cycles, 89_983);
        assert_eq!(compute(&cfg(Dataflow::Os), &l(256), 0).unwrap().total_cycles, 2_551);
        let r = compute(&cfg(Dataflow::Ws), &l(1024), 0).unwrap();
        // Counts past 64 bits are an error, not a wrapped number.
        let huge = Layer {
            name: "big".into(),
            t: u64::MAX,
            k: u64::MAX,
            n: u64::MAX,
        };
        assert!(matches!(
            compute(&cfg(Dataflow::Ws), &huge, 3),
            Err(SystolicError::Overflow { layer: 3, .. })
        ));
        assert!((r.mapping_efficiency_pct - 100.0).abs() < 1e-9);
        assert!(r.overall_util_pct < 100.0 && r.overall_util_pct > 70.0);
    }

    #[test]
    fn parses_scale_sim_files() {
        let c = parse_config("[general]\nrun_name = test\n[architecture_presets]\nArrayHeight : 32\nArrayWidth : 16\nIfmapSramSzkB: 64\nDataflow : os\n").unwrap();
        assert_eq!((c.rows, c.cols, c.dataflow), (32, 16, Dataflow::Os));
        let t = parse_topology("Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\nConv1, 224, 224, 7, 7, 3, 64, 2,\n").unwrap();
        assert_eq!(
            t[0],
            Layer {
                name: "Conv1".into(),
                t: 109 * 109,
                k: 147,
                n: 64
            }
        );
        let g = parse_topology("Layer, M, N, K\nfc, 8, 16, 32\n").unwrap();
        assert_eq!(
            g[0],
            Layer {
                name: "fc".into(),
                t: 8,
                n: 16,
                k: 32
            }
        );
        assert!(parse_topology("a, 1, x, 3\n")
            .unwrap_err()
            .to_string()
            .contains("line 1"));
        assert!(parse_config("ArrayHeight: 8\n").is_err());
    }
}
