//! The step model's parameters that no datasheet gives: launch costs, latencies, calibrated rates.
//! One set for every chip (`chips/params.json`, each value with its source or the word `assumed`),
//! loaded with the chip preset, overridable from a chip file or `--set chip.FIELD=VALUE`, listed by
//! `tpusim chips --json` and varied by `tpusim run --sensitivity`.

use serde::{Deserialize, Serialize};

/// The parameter file: every field with its value and source.
pub const PARAMS_JSON: &str = include_str!("../chips/params.json");

/// Step-model parameters. Units are in the names; `_milli` fields are thousandths.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepParams {
    /// Sequencer cycles to start one SparseCore pass (one minibatch of one stack).
    pub sc_pass_launch_cycles: u64,
    /// Sequencer and sort/dedup cycles per id per SparseCore tile.
    pub sc_cycles_per_id: u64,
    /// Bytes per cycle one SparseCore tile's DMA moves, x 1000.
    pub sc_tile_dma_bytes_per_cycle_milli: u64,
    /// Cycles of a barrier between serialised table groups.
    pub sc_serial_barrier_cycles: u64,
    /// Latency of one ICI hop, ns.
    pub ici_hop_latency_ns: u64,
    /// Fixed cost to start one collective, ns.
    pub ici_collective_launch_ns: u64,
    /// Host time to bound-check one id, ps per thread.
    pub host_id_bound_check_ps_per_id: u64,
    /// Bytes per second one host thread initialises.
    pub host_init_bytes_per_s_per_thread: u64,
}

impl StepParams {
    /// The tile DMA rate in bytes per cycle.
    pub fn sc_tile_dma_bytes_per_cycle(&self) -> f64 {
        self.sc_tile_dma_bytes_per_cycle_milli as f64 / 1000.0
    }

    /// The names of the parameters, in file order.
    pub fn field_names() -> Vec<String> {
        match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(PARAMS_JSON) {
            Ok(m) => m.keys().cloned().collect(),
            Err(_) => Vec::new(),
        }
    }

    /// A parameter's value by name.
    pub fn get(&self, name: &str) -> Option<u64> {
        serde_json::to_value(self).ok()?.get(name)?.as_u64()
    }

    /// The parameters with one value replaced (`None` for an unknown name).
    pub fn with(&self, name: &str, value: u64) -> Option<StepParams> {
        let mut v = serde_json::to_value(self).ok()?;
        let slot = v.as_object_mut()?.get_mut(name)?;
        *slot = serde_json::Value::from(value);
        serde_json::from_value(v).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_has_every_field_with_a_source() {
        let m: serde_json::Map<String, serde_json::Value> = serde_json::from_str(PARAMS_JSON).unwrap();
        let names = StepParams::field_names();
        assert_eq!(names.len(), 8);
        for (k, v) in &m {
            assert!(
                crate::source::Source::from_json(&v["source"])
                    .is_some_and(|s| !matches!(s, crate::source::Source::Given(_))),
                "{k} needs a typed source: {}",
                v["source"]
            );
        }
    }
}
