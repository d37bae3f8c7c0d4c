//! Fluid max-min fair sharing of one bandwidth resource among its active transfers.
//!
//! Progress is kept exactly in integers: a transfer's remaining work is `bytes * 10^12` in
//! byte-picoseconds-per-second units, and `rate` bytes/s for `dt` ps removes `rate * dt` of it, so
//! a finish time is `ceil(remaining / rate)` picoseconds away with no rounding drift.

/// Picoseconds per second: scale of the remaining-work counters.
pub(crate) const PS_PER_S: u128 = 1_000_000_000_000;

/// One transfer in flight.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Active {
    /// Dense task index.
    pub task: u32,
    /// Remaining bytes times [`PS_PER_S`].
    pub remaining: u128,
    /// Rate cap in bytes per second.
    pub cap: u64,
    /// Current rate in bytes per second.
    pub rate: u64,
}

/// Run-time state of a bandwidth resource.
#[derive(Clone, Debug)]
pub(crate) struct BwState {
    /// Capacity in bytes per second.
    pub capacity: u64,
    /// Active transfers, kept sorted by (cap, task) so water-filling needs no sort.
    pub active: Vec<Active>,
    /// Time progress was last applied, in ps.
    pub last_ps: u64,
    /// Incremented at each recompute; check events carry it and stale ones are ignored.
    pub epoch: u32,
    /// Sum of current rates in bytes per second.
    pub in_use: u64,
    /// Time with at least one transfer active, in ps.
    pub busy_ps: u64,
    /// Start of the current busy period.
    pub busy_since_ps: u64,
    /// Bytes moved by finished transfers.
    pub bytes: u64,
    /// Highest total rate seen.
    pub peak_bytes_per_s: u64,
    /// Needs a recompute before time moves on.
    pub dirty: bool,
}

impl BwState {
    pub fn new(capacity: u64) -> Self {
        BwState {
            capacity,
            active: Vec::new(),
            last_ps: 0,
            epoch: 0,
            in_use: 0,
            busy_ps: 0,
            busy_since_ps: 0,
            bytes: 0,
            peak_bytes_per_s: 0,
            dirty: false,
        }
    }

    /// Applies progress at the current rates up to `now_ps`.
    pub fn advance(&mut self, now_ps: u64) {
        let dt = (now_ps - self.last_ps) as u128;
        if dt > 0 {
            for a in &mut self.active {
                a.remaining = a.remaining.saturating_sub(a.rate as u128 * dt);
            }
        }
        self.last_ps = now_ps;
    }

    /// Adds a transfer (call [`BwState::advance`] first).
    pub fn add(&mut self, task: u32, bytes: u64, cap: u64, now_ps: u64) {
        if self.active.is_empty() {
            self.busy_since_ps = now_ps;
        }
        let a = Active {
            task,
            remaining: bytes as u128 * PS_PER_S,
            cap,
            rate: 0,
        };
        let pos = self.active.partition_point(|x| (x.cap, x.task) < (cap, task));
        self.active.insert(pos, a);
        self.bytes += bytes;
        self.dirty = true;
    }

    /// Removes finished transfers (remaining 0), appending their tasks to `done` in task order.
    pub fn take_finished(&mut self, now_ps: u64, done: &mut Vec<u32>) {
        let before = done.len();
        self.active.retain(|a| {
            if a.remaining == 0 {
                done.push(a.task);
                false
            } else {
                true
            }
        });
        if done.len() > before {
            done[before..].sort_unstable();
            self.dirty = true;
            if self.active.is_empty() {
                self.busy_ps += now_ps - self.busy_since_ps;
            }
        }
    }

    /// Max-min fair rates with caps (water-filling); integer rates that sum to the capacity
    /// whenever the caps allow (leftover bytes/s go one each to the lowest-cap uncapped transfers).
    pub fn recompute(&mut self) {
        self.dirty = false;
        self.epoch = self.epoch.wrapping_add(1);
        let n = self.active.len();
        let mut left = self.capacity;
        let mut i = 0;
        while i < n {
            let fair = left / (n - i) as u64;
            let cap = self.active[i].cap;
            if cap <= fair {
                self.active[i].rate = cap;
                left -= cap;
                i += 1;
            } else {
                let extra = (left - fair * (n - i) as u64) as usize;
                for (k, a) in self.active[i..].iter_mut().enumerate() {
                    a.rate = fair + u64::from(k < extra);
                }
                left = 0;
                break;
            }
        }
        self.in_use = self.capacity - left;
        self.peak_bytes_per_s = self.peak_bytes_per_s.max(self.in_use);
    }

    /// Time (ps) of the next transfer finish at current rates, if any transfer is progressing.
    pub fn next_finish_ps(&self) -> Option<u64> {
        self.active
            .iter()
            .filter(|a| a.rate > 0)
            .map(|a| {
                self.last_ps
                    .saturating_add(a.remaining.div_ceil(a.rate as u128).min(u64::MAX as u128) as u64)
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(s: &BwState) -> Vec<(u32, u64)> {
        s.active.iter().map(|a| (a.task, a.rate)).collect()
    }

    #[test]
    fn equal_share_without_caps() {
        let mut s = BwState::new(100);
        s.add(0, 100, u64::MAX, 0);
        s.add(1, 300, u64::MAX, 0);
        s.recompute();
        assert_eq!(rates(&s), vec![(0, 50), (1, 50)]);
        assert_eq!(s.next_finish_ps(), Some(2 * PS_PER_S as u64));
    }

    #[test]
    fn capped_transfer_leaves_rest_to_others() {
        let mut s = BwState::new(100);
        s.add(0, 100, 20, 0);
        s.add(1, 100, u64::MAX, 0);
        s.add(2, 100, u64::MAX, 0);
        s.recompute();
        assert_eq!(rates(&s), vec![(0, 20), (1, 40), (2, 40)]);
        assert_eq!(s.in_use, 100);
    }

    #[test]
    fn caps_below_capacity_leave_it_unused() {
        let mut s = BwState::new(100);
        s.add(0, 100, 10, 0);
        s.add(1, 100, 30, 0);
        s.recompute();
        assert_eq!(rates(&s), vec![(0, 10), (1, 30)]);
        assert_eq!(s.in_use, 40);
    }

    #[test]
    fn indivisible_capacity_is_spread_exactly() {
        let mut s = BwState::new(100);
        for t in 0..3 {
            s.add(t, 10, u64::MAX, 0);
        }
        s.recompute();
        assert_eq!(rates(&s), vec![(0, 34), (1, 33), (2, 33)]);
        assert_eq!(s.in_use, 100);
    }
}
