//! `adaptive-safe`'s guard: what paging without a cache would have cost,
//! what the policy spent, and whether it is past its allowance (the
//! parent module's docs give the rules and why).

use super::{Adaptive, JUDGED_STEPS};
use crate::{Level, Miniatures};

impl Adaptive {
    /// What paging without compression would have cost so far, ns: plain
    /// LRU read off the recency order, or, on a fault-only mechanism,
    /// `none` measured on a sample.
    pub(super) fn baseline_cost(&self) -> f64 {
        match &self.minis {
            Some(_) => self.none_cost,
            None => self.lru_cost,
        }
    }

    /// Adds `none`'s disk faults estimated since the last call to its
    /// cost, at today's price of a disk fault. Repricing the whole
    /// estimate instead, when the runtime's measured price moved, would
    /// move the baseline under the guard's feet: a falling price makes
    /// compression's past look like a loss and stops it for the rest of
    /// the run (`docs/results.md`, "Wide shares for pages that compress
    /// well, and a guard that holds its price").
    pub(super) fn sync_baseline(&mut self) {
        if let Some(m) = &self.minis {
            let faults = m.none_disk_faults();
            self.none_cost += (faults - self.none_faults) * self.costs.disk_ns;
            self.none_faults = faults;
        }
    }

    /// The guard's estimate of `none`'s disk faults so far, when it
    /// measures them on a sample (after [`Policy::faults_only`](crate::Policy::faults_only)).
    pub fn none_estimate(&self) -> Option<f64> {
        self.minis.as_ref().map(Miniatures::none_disk_faults)
    }

    /// This policy's paging cost so far, ns, less (with measured splits)
    /// the compression of the pages the cache holds now: an investment
    /// whose return, hits, the splits have measured but which has not yet
    /// come; it is counted once the page leaves the cache.
    pub(super) fn spent(&self) -> f64 {
        match self.minis {
            Some(_) => self.own_cost - self.levels.compressed_len() as f64 * self.costs.compress_ns(),
            None => self.own_cost,
        }
    }

    /// Whether compression has so far cost more than the allowance over
    /// paging without it (then the target is 0).
    ///
    /// With measured splits, `none`'s cost is an estimate from a sample,
    /// a few percent off either way, while the policy's own cost is
    /// counted exactly: compared whole, an estimate a little low keeps a
    /// program at 0% for a whole run that a cache would have halved
    /// (`docs/results.md`, "Why the policy's and the helper's constants
    /// are what they are"). So the two are
    /// compared only over the stretches in which the policy compressed (a
    /// target above 0), and there the estimate is corrected by what the
    /// stretches at 0% measured: at 0% the policy *is* `none`, up to the
    /// pages sampled for the ratio, so its own cost over them, divided by
    /// the estimate's, is the estimate's error on this program. The excess
    /// over the compressing stretches may reach the allowance of `none`'s
    /// whole cost.
    ///
    /// The estimate grows in steps (a sampled page's disk fault counts for
    /// the sampling rate's worth), so a stretch is judged by the allowance
    /// only once the estimate has taken [`JUDGED_STEPS`] steps in it;
    /// before that, by four times the allowance. Judged fault by fault, a
    /// one-fault stretch with no step looked like a pure loss, and graph
    /// at 110M turned compression on and off 13,000 times, never keeping
    /// it long enough to hit.
    ///
    /// Two more slacks bound what the guard may mistake for harm:
    /// * the estimate's sampling error: over compressing stretches in which
    ///   it took n steps, two standard errors, 2·√(n+1) steps. Without it,
    ///   the first stretch of a run, judged when `none` had taken two
    ///   steps, looked like a loss of a disk fault's worth per eviction
    ///   and kept compression off for the next 17,000 evictions of the
    ///   CPython cache (`docs/programs/kvcache.py` in 178 MiB), which went
    ///   to disk raw;
    /// * one fill of the target's cache: compressing pages that no touch
    ///   has yet called back is how a share is tried, and its cost is paid
    ///   back only when they return.
    ///
    /// Both are bounded in absolute terms, so the guard's promise becomes:
    /// no more than the allowance over `none`, plus the sampling error,
    /// plus one cache's worth of compressions.
    pub(super) fn harmful(&self) -> bool {
        let Some(a) = self.allowance else {
            return false;
        };
        let Some(m) = &self.minis else {
            return self.spent() + self.costs.disk_ns > self.baseline_cost() * (1.0 + a);
        };
        let base = self.baseline_cost();
        let proving = self.target != 0 && base - self.on_base < JUDGED_STEPS * m.rate() as f64 * self.costs.disk_ns;
        // One sampled disk fault: the estimate's step.
        let step = m.rate() as f64 * self.costs.disk_ns;
        let steps = (self.on_total + if self.target != 0 { base - self.on_base } else { 0.0 }) / step;
        let noise = 2.0 * (steps + 1.0).sqrt() * step;
        let (u, e) = self.bounds[self.target.max(1)];
        let fill = (e - u) as f64 * self.costs.compress_ns();
        let allowed = if proving { 4.0 * a } else { a } * base + noise + fill;
        let excess = self.excess_now();
        excess > 0.0 && excess + self.costs.disk_ns > allowed
    }

    /// `excess`, with the stretch since the last `choose` if the policy
    /// compresses in it.
    pub(super) fn excess_now(&self) -> f64 {
        if self.target == 0 {
            self.excess
        } else {
            self.excess + (self.spent() - self.last_spent) - (self.baseline_cost() - self.last_base) * self.correction()
        }
    }

    /// The factor that corrects `none`'s sampled estimate: own cost over
    /// the estimate at 0%, once the estimate has counted 64 sampled disk
    /// faults there (1 before), within [0.5, 2].
    ///
    /// 64 sampled faults, each standing for the sampling rate's worth, not
    /// 64 estimated ones: at one page in 16 that was four samples, whose
    /// quotient is off by half as often as not. node at 182M took its
    /// factor from the short 0% stretch at its first refault, at 0.53 to
    /// 0.93, and with `none`'s estimate scaled down by it the guard stopped
    /// a cache that was paying its way in 7 of 30 runs, which then took
    /// 5.3 to 7.7 s where the others took 3.6 to 4.4 and `none` 6.3
    /// (`docs/results.md`, "The guard's correction from four samples").
    pub(super) fn correction(&self) -> f64 {
        let rate = self.minis.as_ref().map_or(1, Miniatures::rate) as f64;
        if self.off_base < 64.0 * rate * self.costs.disk_ns {
            1.0
        } else {
            (self.off_spent / self.off_base).clamp(0.5, 2.0)
        }
    }

    /// Charges a touch served from `from` to the policy's own cost.
    pub(super) fn charge(&mut self, from: Level) {
        match from {
            Level::Disk => self.own_cost += self.costs.disk_ns,
            Level::Compressed => self.own_cost += self.costs.decompress_ns(),
            Level::New | Level::Uncompressed => {}
        }
    }
}
