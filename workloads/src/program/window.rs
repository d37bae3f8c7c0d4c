//! The steady-state window: how many steps the graph holds before and after the measured ones.
//! The graph builder and the measurement both read it; it depends on neither.

/// Steps simulated before the measured ones so the pipeline is full and the host's lead settled
/// when the window opens: the host starts up to `prefetch` steps ahead, and a pipelined schedule
/// settles into its two-step pattern after the first two steps.
pub fn warmup_steps(prefetch: u32) -> usize {
    prefetch.max(1) as usize + 2
}

/// Steps simulated after the last measured one so every unit is still at its steady-state work
/// when the window closes: the host works up to `prefetch` steps ahead, and a pipelined
/// SparseCore runs step i+2's lookups beside step i's updates.
pub fn drain_steps(prefetch: u32) -> usize {
    prefetch.max(1) as usize + 2
}
