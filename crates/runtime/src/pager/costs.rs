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
//! A disk fault is priced at the cache fault's constant plus the measured
//! difference of their mean service times: both pay the same signal, maps
//! and eviction, and differ in the decompression against the read. Means
//! are moving averages (weight 1/256), told to the policy every
//! [`REPORT`] faults once each kind has [`LEAST`] samples.
//!
//! A traced run does not measure (as it does not read ahead): the
//! simulator replaying its trace prices faults with the constants, and
//! must make the same choices.
//!
//! Measured (`ccvm exec --ram 178M -- python3 docs/programs/kvcache.py`,
//! default policy, three runs each, alternated): 29.5, 26.6 and 30.4 s
//! with the constants, 24.8, 27.2 and 26.9 s measuring, swap-file faults
//! halved (51,000 to 24,000). `ccvm run --workload hashindex --size 256M
//! --ram 131M`: 126.4 s against 63.1 s (530,435 swap-file faults against
//! 23,375); graph (`--size 256M --ram 200M`) 29.1 against 28.1 s.

/// Faults between two reports to the policy.
pub(crate) const REPORT: u32 = 512;

/// Samples of each kind before the first report.
const LEAST: u64 = 32;

/// Weight of a new sample in the moving averages.
const WEIGHT: f64 = 1.0 / 256.0;

/// Moving averages of the service times of disk and cache faults.
#[derive(Default)]
pub(crate) struct CostMeter {
    disk_ns: f64,
    cache_ns: f64,
    disks: u64,
    caches: u64,
    until_report: u32,
}

impl CostMeter {
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

    /// Counts a fault; every [`REPORT`] faults, once both kinds were
    /// measured enough, the mean service times (disk, cache) in ns.
    pub fn due(&mut self) -> Option<(f64, f64)> {
        if self.until_report > 0 {
            self.until_report -= 1;
            return None;
        }
        self.until_report = REPORT;
        (self.disks >= LEAST && self.caches >= LEAST).then_some((self.disk_ns, self.cache_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_the_means_once_both_kinds_are_measured() {
        let mut m = CostMeter::default();
        for _ in 0..LEAST {
            m.record(false, 10_000);
        }
        assert_eq!(m.due(), None, "no disk fault yet");
        for _ in 0..LEAST {
            m.record(true, 150_000);
        }
        for _ in 0..REPORT {
            assert_eq!(m.due(), None);
        }
        let (disk, cache) = m.due().expect("due again after REPORT faults");
        assert!(
            (disk - 150_000.0).abs() < 1.0 && (cache - 10_000.0).abs() < 1.0,
            "{disk} {cache}"
        );
    }

    #[test]
    fn the_means_follow_a_change() {
        let mut m = CostMeter::default();
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
