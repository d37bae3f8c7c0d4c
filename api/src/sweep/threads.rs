//! Worker threads of a sweep: `-j N` checked against what the system lets this process start, so an
//! impossible count is refused naming the limit instead of failing with the OS's EAGAIN text.

/// The most threads this process may have and where that limit comes from (the smallest of the
/// per-user process limit, the kernel's thread and pid limits and the cgroup's pids limit), when
/// any can be read.
pub fn thread_limit() -> Option<(u64, &'static str)> {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let number = |text: Option<String>| text.and_then(|t| t.trim().parse::<u64>().ok());
    let nproc = read("/proc/self/limits").and_then(|t| {
        t.lines()
            .find(|l| l.starts_with("Max processes"))
            .and_then(|l| l.split_whitespace().nth(2).and_then(|v| v.parse::<u64>().ok()))
    });
    [
        (nproc, "the per-user process limit (ulimit -u)"),
        (
            number(read("/proc/sys/kernel/threads-max")),
            "/proc/sys/kernel/threads-max",
        ),
        (number(read("/proc/sys/kernel/pid_max")), "/proc/sys/kernel/pid_max"),
        (number(read("/sys/fs/cgroup/pids.max")), "the cgroup's pids.max"),
    ]
    .into_iter()
    .filter_map(|(v, what)| v.map(|v| (v, what)))
    .min_by_key(|(v, _)| *v)
}

/// A thread pool of `jobs` workers (None or 0: one per core). `jobs` above [`thread_limit`] is
/// refused before any thread starts; a pool the OS still refuses is reported with the limit.
pub fn pool(jobs: Option<usize>) -> anyhow::Result<rayon::ThreadPool> {
    let n = jobs.unwrap_or(0);
    let limit = thread_limit();
    if let Some((max, what)) = limit {
        if n as u64 > max {
            anyhow::bail!("-j {n}: more worker threads than this system allows ({max}, {what}); use -j {max} or fewer (default: one per core)");
        }
    }
    rayon::ThreadPoolBuilder::new().num_threads(n).build().map_err(|e| {
        let limit = limit.map_or(String::new(), |(max, what)| format!("; the limit is {max} ({what})"));
        anyhow::anyhow!(
            "-j {n}: could not start {n} worker threads ({e}){limit}; use a smaller -j (default: one per core)"
        )
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn more_jobs_than_the_limit_are_refused_naming_it() {
        let Some((max, what)) = super::thread_limit() else {
            return; // no /proc: nothing to compare against
        };
        let e = super::pool(Some(max as usize + 1)).unwrap_err().to_string();
        assert!(
            e.contains(&format!("-j {}", max + 1)) && e.contains(&max.to_string()) && e.contains(what),
            "{e}"
        );
        assert_eq!(super::pool(Some(2)).unwrap().current_num_threads(), 2);
    }
}
