//! The paper's cost/benefit analysis (000 §3): each touch's recency
//! position counted for every target split, and at the end of each
//! period the split whose faults, priced by their costs, are cheapest
//! chosen (the parent module's docs say how, and where this project
//! departs from the paper).

use super::{Adaptive, MAX_RATIO, MAX_RATIO_WIDE, RATIO_SAMPLE};
use crate::miniature::{WIDE_ON_RATIO, WIDE_SHARE};

impl Adaptive {
    pub(super) fn ratio(&self) -> f64 {
        let wide = self.targets.last().is_some_and(|&t| t > WIDE_SHARE);
        let max = if wide { MAX_RATIO_WIDE } else { MAX_RATIO };
        // (adaptive-safe) The cache's own mean once it holds a few dozen
        // pages: a run of incompressible pages through a moving average
        // of 64 sizes made every share look useless and stopped the cache
        // (`ccvm bench faults`, whose real pages come in runs by source).
        let mean = match (self.allowance, self.levels.compressed_len()) {
            (Some(_), c) if c >= RATIO_SAMPLE as usize => self.levels.compressed_bytes() as f64 / c as f64,
            _ => self.avg_bytes,
        };
        (self.page_size as f64 / mean).clamp(1.0, max)
    }

    pub(super) fn regions(&self, t: usize) -> (usize, usize) {
        let u = (self.frames as f64 * (1.0 - self.shares[t])).floor() as usize;
        let e = u + ((self.frames - u) as f64 * self.ratio()) as usize;
        (u, e)
    }

    /// Counts a touch at recency position `p` for every target.
    pub(super) fn record(&mut self, p: usize) {
        let smallest = self.bounds[..self.n_shares].iter().map(|b| b.0).min().unwrap_or(0);
        if p < smallest || p >= self.reach {
            return;
        }
        self.weight /= self.decay;
        if self.weight > 1e200 {
            for x in self.hits.iter_mut().chain(self.faults.iter_mut()) {
                *x /= self.weight;
            }
            self.weight = 1.0;
        }
        for t in 0..self.n_shares {
            let (u, e) = self.bounds[t];
            if p >= e {
                self.faults[t] += self.weight;
            } else if p >= u {
                self.hits[t] += self.weight;
            }
        }
    }

    pub(super) fn choose(&mut self) {
        self.update_fit();
        let cost = |t: usize| self.hits[t] * self.costs.codec_ns + self.faults[t] * self.costs.disk_ns;
        // Ties go to the smaller cache: compression must earn its keep.
        let best = match &self.minis {
            Some(m) => m.best_from(self.target),
            None => (0..self.n_shares)
                .filter(|&t| self.shares[t] <= WIDE_SHARE || self.ratio() >= WIDE_ON_RATIO || Some(t) == self.fit)
                .fold(0, |b, t| if cost(t) < cost(b) { t } else { b }),
        };
        if self.target == 0 {
            self.off_spent += self.spent() - self.last_spent;
            self.off_base += self.baseline_cost() - self.last_base;
        }
        self.excess = self.excess_now();
        self.last_spent = self.spent();
        self.last_base = self.baseline_cost();
        if self.target == 0 {
            self.on_base = self.last_base;
        }
        // Before any page comes back nothing prices a cache; one that
        // the footprint fits in sends no page to disk.
        let best = match self.fit {
            Some(i) if !self.refaulted && self.shares[i] <= WIDE_SHARE => i,
            _ => best,
        };
        let best = if self.harmful() { 0 } else { best };
        if self.target != 0 && best == 0 {
            self.on_total += self.last_base - self.on_base;
        }
        self.target = best;
        self.uncompressed_target = self.bounds[best].0.max(1);
    }
}
