//! Memory held by a process tree, sampled: the sum of the proportional set
//! sizes (`Pss` in `/proc/PID/smaps_rollup`) of a process and all its
//! descendants, and its peak. A second view beside a memory cgroup's peak
//! charge (`ccvm bench kernel` meters runs in one): it needs no privilege,
//! and shares pages between processes fairly, but can miss a peak shorter
//! than the time between samples.
//!
//! Each sample walks the tree's page tables under their locks, which the
//! pager takes too: every 50 ms it took 8% of the CPU of a paged run on
//! two cores (`perf` on `ccvm run --workload graph --size 128M --ram
//! 114M`). So samples are at least [`TreeMeter::PERIOD`] apart and at most
//! 1% of the time: the wait after a sample is 100 times what it took.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The process `pid` and its descendants, by `/proc/PID/task/*/children`.
fn tree(pid: u32, out: &mut Vec<u32>) {
    out.push(pid);
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    for task in tasks.flatten() {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
            tree(child, out);
        }
    }
}

/// The summed PSS of `pid`'s tree now, bytes.
pub fn tree_pss(pid: u32) -> u64 {
    let mut pids = Vec::new();
    tree(pid, &mut pids);
    pids.iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/smaps_rollup")).ok())
        .filter_map(|s| {
            s.lines()
                .find(|l| l.starts_with("Pss:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .sum::<u64>()
        * 1024
}

/// Samples a process tree's PSS on its own thread until finished.
pub struct TreeMeter {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl TreeMeter {
    /// Least time between samples.
    pub const PERIOD: Duration = Duration::from_millis(50);

    /// Starts sampling the tree of process `pid`.
    pub fn start(pid: u32) -> TreeMeter {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peak = 0;
            while !flag.load(Ordering::Relaxed) {
                let started = std::time::Instant::now();
                peak = peak.max(tree_pss(pid));
                std::thread::park_timeout(Self::PERIOD.max(started.elapsed() * 100));
            }
            peak
        });
        TreeMeter { stop, thread }
    }

    /// Stops sampling: the peak sampled, bytes.
    pub fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.thread().unpark();
        self.thread.join().unwrap_or(0)
    }
}
