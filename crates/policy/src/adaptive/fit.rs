//! The fitting share: the most uncompressed pages with which every page
//! the program has fits in memory (the parent module's docs say why the
//! policy weighs it and never keeps a bigger cache).

use super::Adaptive;

impl Adaptive {
    /// Uncompressed frames to keep: the target's, or, with the guard
    /// (`adaptive-safe`), more if that many leave room in the cache for
    /// every other page the program has.
    pub(super) fn uncompressed_goal(&self) -> usize {
        let goal = self.uncompressed_target.min(self.frames);
        if self.allowance.is_none() || self.target == 0 {
            return goal;
        }
        goal.max(self.fitting_uncompressed())
    }

    /// The most uncompressed frames with which the program's footprint so
    /// far (every page the policy knows) fits in memory, the rest
    /// compressed at the cache's mean charge a page, less 1% for that
    /// mean's drift. Past it, a bigger cache sends no page to disk that a
    /// smaller one would: it only turns uncompressed hits into cache
    /// faults.
    pub(super) fn fitting_uncompressed(&self) -> usize {
        let (u, c, d) = self.levels.occupancy();
        let page = self.page_size as f64;
        let mean = match c {
            0 => page / self.ratio(),
            c => self.levels.compressed_bytes() as f64 / c as f64,
        };
        if mean >= page {
            return 0;
        }
        let fit = (self.ram as f64 - (u + c + d) as f64 * mean) / (page - mean);
        (fit - self.frames as f64 / 100.0).clamp(0.0, self.frames as f64) as usize
    }

    /// Moves the fitting share to where the program's footprint fits now
    /// (by half a percent or more), up to the widest target.
    pub(super) fn update_fit(&mut self) {
        let Some(i) = self.fit else {
            return;
        };
        let widest = self.targets[self.targets.len() - 1];
        let share = (1.0 - self.fitting_uncompressed() as f64 / self.frames as f64).clamp(0.0, widest);
        if (share - self.shares[i]).abs() < 0.005 {
            return;
        }
        self.shares[i] = share;
        self.update_bounds();
        if let Some(m) = &mut self.minis {
            m.set_share(i, share);
        }
        if self.target == i {
            self.uncompressed_target = self.bounds[i].0.max(1);
        }
    }
}
