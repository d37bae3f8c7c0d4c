//! The event queue: a 4-ary min-heap of (time, sequence) keys packed into one `u128`, with a
//! payload beside each key. Four children per node halve the depth of a binary heap, and the
//! child selection compiles to conditional moves, so a pop costs few mispredicted branches.
//! Keys are unique (the sequence number is), so the order is total and runs are deterministic.

/// One entry: `key = time << 64 | seq`; `what` is the event's payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub key: u128,
    pub what: u32,
}

impl Entry {
    /// Event time in ps.
    #[inline]
    pub fn time(&self) -> u64 {
        (self.key >> 64) as u64
    }
    /// Sequence number.
    #[inline]
    pub fn seq(&self) -> u64 {
        self.key as u64
    }
}

/// A 4-ary min-heap of [`Entry`] by key.
#[derive(Debug, Default)]
pub(crate) struct EventHeap {
    v: Vec<Entry>,
}

impl EventHeap {
    /// An empty heap with room for `cap` entries.
    pub fn with_capacity(cap: usize) -> Self {
        EventHeap {
            v: Vec::with_capacity(cap),
        }
    }

    /// Number of entries.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.v.len()
    }

    /// Adds an event at `time` with sequence number `seq`.
    #[inline]
    pub fn push(&mut self, time: u64, seq: u64, what: u32) {
        let e = Entry {
            key: (time as u128) << 64 | seq as u128,
            what,
        };
        let mut i = self.v.len();
        self.v.push(e);
        while i > 0 {
            let p = (i - 1) / 4;
            if self.v[p].key <= e.key {
                break;
            }
            self.v[i] = self.v[p];
            i = p;
        }
        self.v[i] = e;
    }

    /// The entries, in heap order.
    pub fn entries(&self) -> &[Entry] {
        &self.v
    }

    /// Moves every entry `dt` later with its sequence number `dseq` higher and its payload
    /// mapped by `what`: adding the same to every key keeps their order, so the heap stays one.
    pub fn shift(&mut self, dt: u64, dseq: u64, what: impl Fn(u32) -> u32) {
        for e in &mut self.v {
            e.key += (dt as u128) << 64 | dseq as u128;
            e.what = what(e.what);
        }
    }

    /// Removes and returns the entry with the smallest key.
    #[inline]
    pub fn pop(&mut self) -> Option<Entry> {
        let top = *self.v.first()?;
        let last = self.v.pop()?;
        let n = self.v.len();
        if n == 0 {
            return Some(top);
        }
        let mut i = 0;
        loop {
            let c = 4 * i + 1;
            if c >= n {
                break;
            }
            // Smallest of up to four children, selected without branches on the full set.
            let mut m = c;
            let end = (c + 4).min(n);
            for k in c + 1..end {
                if self.v[k].key < self.v[m].key {
                    m = k;
                }
            }
            if self.v[m].key >= last.key {
                break;
            }
            self.v[i] = self.v[m];
            i = m;
        }
        self.v[i] = last;
        Some(top)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_then_sequence_order() {
        let mut h = EventHeap::with_capacity(4);
        // Pseudo-random times with many ties; the sequence number is the push order.
        let mut want = Vec::new();
        for i in 0..1000u64 {
            let t = (i * 7919) % 97;
            h.push(t, i, i as u32);
            want.push((t, i, i as u32));
        }
        want.sort();
        let mut got = Vec::new();
        while let Some(e) = h.pop() {
            got.push((e.time(), e.seq(), e.what));
        }
        assert_eq!(got, want);
        assert_eq!(h.len(), 0);
    }

    #[test]
    fn interleaved_push_and_pop_stay_ordered() {
        let mut h = EventHeap::default();
        let mut last = None;
        let mut now = 0u64;
        for i in 0..5000u64 {
            h.push(now + (i * 31) % 17, i, 0);
            if i % 3 != 0 {
                let e = h.pop().unwrap();
                assert!(last.is_none_or(|l| e.key > l));
                last = Some(e.key);
                now = e.time();
            }
        }
    }
}
