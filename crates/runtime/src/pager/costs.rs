//! What faults cost on this machine, measured as they are served, for a
//! policy that weighs disk faults against compression-cache faults.
//!
//! The adaptive policy prices a disk fault and a cache fault with two
//! constants (`--disk-cost`, `--cache-cost`). The cache's constant is its
//! whole cost to the program (service, signal, maps, the eviction it
//! causes); the disk's depends on the disk, which varies a hundredfold
//! between machines. A constant below the machine's real price makes the
//! policy undervalue keeping pages off the disk, and a program then takes
//! swap-file faults that a fixed cache would have saved (`docs/results.md`,
//! "Disk faults priced as measured").
//!
//! # Choice
//!
//! Both kinds of fault are priced at their mean service time (moving
//! averages, weight 1/256) plus what the program pays outside the service
//! in the fault mode at hand: the fault's entry, the signal and its return
//! ([`SIGNAL_DELIVERY`]), or in thread mode the wake-ups of the handler
//! thread and of the faulting thread ([`THREAD_DELIVERY`]). Those are the
//! same for both kinds, and no clock in the pager sees them, so they are
//! constants measured on this project's machine. The policy is told every
//! [`REPORT`] faults once cache faults have [`LEAST`] samples; disk faults
//! are priced at `--disk-cost` until they have as many too.
//!
//! Until cache faults are measured, a cache fault is priced at the fault
//! mode's delivery plus [`CACHE_SERVICE`] (unless `--cache-cost` says
//! otherwise). It was a constant 25 µs, a thread-mode price, against
//! about 10 µs in signal mode: a policy that had not yet used its cache
//! never measured it, so it kept weighing a disk fault at four cache
//! faults where it costs eight or more, and on `ccvm bench faults`
//! (whose first evicted pages do not compress) it stayed without a cache
//! for its first 9,000 evictions (`docs/results.md`, "A cache fault priced
//! by its fault mode before it is measured").
//!
//! The cache's price was once the constant `--cache-cost` (25 µs), with a
//! disk fault at that plus the measured difference of their services. In
//! signal mode a cache fault costs about 8 µs all in, so the policy
//! weighed a disk fault at four cache faults where it costs twelve, and
//! sent pages to the swap file that a larger cache would have held
//! (`docs/results.md`, "Cache faults priced as measured").
//!
//! A traced run does not measure (as it does not read ahead): the
//! simulator replaying its trace prices faults with the constants, and
//! must make the same choices.

use std::time::Duration;

use crate::config::FaultMode;

/// What a fault costs the program in signal mode beyond its service: the
/// kernel's fault entry, the SIGBUS and `rt_sigreturn`. `ccvm run
/// --workload hashindex --size 64M --ram 40M --policy fixed50` took 7.6 µs
/// a cache fault all in (wall time less plain memory's, over its 1.16
/// million faults), with service at 3.6 µs median.
pub(crate) const SIGNAL_DELIVERY: Duration = Duration::from_micros(4);

/// The same in thread mode: the kernel's fault entry and event, the
/// wake-up of a handler thread that did not catch the fault while it was
/// still looking, and the faulting thread's wake-up once the page is
/// mapped. `ccvm run --workload hashindex --size 32M --ram 20M --policy
/// fixed50 --fault-mode thread` took 31 µs a cache fault all in in two
/// runs (17.7 s less 0.17 s of plain memory, over 567,000 faults), 16 µs
/// beyond its service's median of 14.8.
pub(crate) const THREAD_DELIVERY: Duration = Duration::from_micros(16);

/// What a cache fault's service takes before one is measured: a lookup,
/// a decode and a map. `ccvm bench faults-child` served its cache faults
/// in 6 to 10 µs (the price it reported, 10 to 14 µs, less the signal's
/// 4), and hashindex's median was 3.6 µs.
pub(crate) const CACHE_SERVICE: Duration = Duration::from_micros(6);

/// What a fault costs beyond its service in `mode`.
pub(crate) fn delivery(mode: FaultMode) -> Duration {
    match mode {
        FaultMode::Signal => SIGNAL_DELIVERY,
        FaultMode::Thread => THREAD_DELIVERY,
    }
}

/// Faults between two reports to the policy.
pub(crate) const REPORT: u32 = 512;

/// Samples of each kind before the first report.
const LEAST: u64 = 32;

/// Weight of a new sample in the moving averages.
const WEIGHT: f64 = 1.0 / 256.0;

/// Moving averages of the service times of disk and cache faults.
#[derive(Default)]
pub(crate) struct CostMeter {
    /// What every fault costs beyond its service, ns.
    delivery_ns: f64,
    disk_ns: f64,
    cache_ns: f64,
    disks: u64,
    caches: u64,
    until_report: u32,
}

impl CostMeter {
    /// A meter adding `delivery` to every fault's service.
    pub fn new(delivery: Duration) -> CostMeter {
        CostMeter {
            delivery_ns: delivery.as_nanos() as f64,
            ..CostMeter::default()
        }
    }

    /// A disk fault (`disk`) or cache fault took `ns` to serve.
    pub fn record(&mut self, disk: bool, ns: u64) {
        let (mean, n) = if disk {
            (&mut self.disk_ns, &mut self.disks)
        } else {
            (&mut self.cache_ns, &mut self.caches)
        };
        *n += 1;
        // The first samples are averaged plainly, then the weight holds.
        let w = WEIGHT.max(1.0 / *n as f64);
        *mean += (ns as f64 - *mean) * w;
    }

    /// Counts a fault; every [`REPORT`] faults, once cache faults were
    /// measured enough, what a fault costs all in (ns): from disk, once
    /// disk faults were measured enough too, and from the cache.
    pub fn due(&mut self) -> Option<(Option<f64>, f64)> {
        if self.until_report > 0 {
            self.until_report -= 1;
            return None;
        }
        self.until_report = REPORT;
        let disk = (self.disks >= LEAST).then_some(self.disk_ns + self.delivery_ns);
        (self.caches >= LEAST).then_some((disk, self.cache_ns + self.delivery_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DELIVERY: Duration = Duration::from_micros(3);

    #[test]
    fn reports_the_cache_first_then_both_all_in() {
        let mut m = CostMeter::new(DELIVERY);
        assert_eq!(m.due(), None, "nothing measured yet");
        for _ in 0..LEAST {
            m.record(false, 10_000);
        }
        for _ in 0..REPORT {
            assert_eq!(m.due(), None);
        }
        assert_eq!(m.due(), Some((None, 13_000.0)), "the cache alone, with its delivery");
        for _ in 0..LEAST {
            m.record(true, 150_000);
        }
        for _ in 0..REPORT {
            assert_eq!(m.due(), None);
        }
        let (disk, cache) = m.due().expect("due again after REPORT faults");
        let disk = disk.expect("disk faults measured");
        assert!(
            (disk - 153_000.0).abs() < 1.0 && (cache - 13_000.0).abs() < 1.0,
            "{disk} {cache}"
        );
    }

    #[test]
    fn the_means_follow_a_change() {
        let mut m = CostMeter::new(DELIVERY);
        for _ in 0..2_000 {
            m.record(true, 100_000);
            m.record(false, 5_000);
        }
        for _ in 0..2_000 {
            m.record(true, 300_000);
        }
        assert!(m.disk_ns > 290_000.0, "{}", m.disk_ns);
        assert!((m.cache_ns - 5_000.0).abs() < 1.0);
    }
}
