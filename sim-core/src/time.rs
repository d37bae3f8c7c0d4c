//! Simulated time: integer picoseconds, never floats, so schedules are exact and deterministic.

use serde::{Deserialize, Serialize};

/// A point or duration in simulated time, in picoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SimTime(pub u64);

impl SimTime {
    /// Time zero.
    pub const ZERO: SimTime = SimTime(0);
    /// Picoseconds per nanosecond.
    pub const PS_PER_NS: u64 = 1_000;
    /// Picoseconds per microsecond.
    pub const PS_PER_US: u64 = 1_000_000;

    /// Picoseconds.
    pub fn ps(self) -> u64 {
        self.0
    }
    /// From nanoseconds.
    pub fn from_ns(ns: u64) -> Self {
        SimTime(ns * Self::PS_PER_NS)
    }
    /// Nanoseconds as a float, for display only.
    pub fn as_ns_f64(self) -> f64 {
        self.0 as f64 / Self::PS_PER_NS as f64
    }
    /// Microseconds as a float, for display only.
    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 / Self::PS_PER_US as f64
    }
    /// Saturating addition.
    pub fn saturating_add(self, other: SimTime) -> SimTime {
        SimTime(self.0.saturating_add(other.0))
    }
}

impl std::ops::Add for SimTime {
    type Output = SimTime;
    fn add(self, rhs: SimTime) -> SimTime {
        SimTime(self.0 + rhs.0)
    }
}

impl std::ops::Sub for SimTime {
    type Output = SimTime;
    fn sub(self, rhs: SimTime) -> SimTime {
        SimTime(self.0 - rhs.0)
    }
}

/// A unit's clock. Converts cycle counts to picoseconds with integer arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clock {
    /// Frequency in hertz.
    pub hz: u64,
}

impl Clock {
    /// A clock of `mhz` megahertz.
    pub fn from_mhz(mhz: u64) -> Self {
        Clock { hz: mhz * 1_000_000 }
    }
    /// Duration of `cycles` cycles, rounded up to whole picoseconds.
    pub fn cycles_to_time(self, cycles: u64) -> SimTime {
        let num = cycles as u128 * 1_000_000_000_000u128;
        SimTime(num.div_ceil(self.hz as u128) as u64)
    }
    /// Whole cycles that fit in `t` (rounded down).
    pub fn time_to_cycles(self, t: SimTime) -> u64 {
        (t.0 as u128 * self.hz as u128 / 1_000_000_000_000u128) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycles_round_trip_at_1ghz() {
        let c = Clock::from_mhz(1000);
        assert_eq!(c.cycles_to_time(7), SimTime(7_000));
        assert_eq!(c.time_to_cycles(SimTime(7_000)), 7);
    }

    #[test]
    fn cycles_round_up_to_whole_ps() {
        // 1 cycle at 1.05 GHz is 952.38 ps: rounded up to 953.
        let c = Clock::from_mhz(1050);
        assert_eq!(c.cycles_to_time(1), SimTime(953));
        assert_eq!(c.cycles_to_time(1050), SimTime(1_000_000));
    }
}

/// Intervals `(start, end)` in ps, merged where they touch or overlap, in time order: the busy time of a
/// unit whose spans may overlap (busy fractions, the Gantt, contention all count time this way).
pub fn merged_intervals(mut v: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (a, b) in v {
        match out.last_mut() {
            Some(l) if a <= l.1 => l.1 = l.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

#[cfg(test)]
mod interval_tests {
    use super::merged_intervals;

    #[test]
    fn touching_and_overlapping_intervals_merge_disjoint_ones_stay() {
        let v = vec![(10, 20), (0, 5), (5, 8), (15, 30), (40, 41)];
        assert_eq!(merged_intervals(v), vec![(0, 8), (10, 30), (40, 41)]);
        assert!(merged_intervals(vec![]).is_empty());
    }
}
