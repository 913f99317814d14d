//! The cleaner: the cluster with the fewest live bytes read in one
//! request, its live pages checked and appended to the cluster being
//! filled, and freed (see the module docs of `swap`).

use std::os::unix::fs::FileExt;
use std::time::Instant;

use super::{SwapError, SwapFile, SwapSlot, CLUSTER};
use crate::aligned::AlignedBuf;
use crate::delay::wait;

impl SwapFile {
    /// Cleans one cluster if the clusters in use hold more than twice the
    /// live data (see the module docs), appending each moved page and its
    /// new slot to `moved`; the old slots of those pages are void.
    ///
    /// # Errors
    ///
    /// A failed read or write, or a moved page that fails its check.
    pub fn clean(&mut self, moved: &mut Vec<(u64, SwapSlot)>) -> Result<(), SwapError> {
        let in_use = self.clusters_in_use() * CLUSTER as u64;
        if in_use <= 2 * self.total_live + 4 * CLUSTER as u64 {
            return Ok(());
        }
        let current = self.current as usize;
        let Some(victim) = (0..self.members.len())
            .filter(|&c| c != current && !self.members[c].is_empty() && !self.frozen[c])
            .min_by_key(|&c| self.live_bytes[c])
        else {
            return Ok(());
        };
        let entries = std::mem::take(&mut self.members[victim]);
        let mut buf = self.clean_buf.take().expect("the cleaner does not nest");
        let result = self.move_pages(victim, &entries, &mut buf, moved);
        self.clean_buf = Some(buf);
        if result.is_err() {
            self.members[victim] = entries;
            return result;
        }
        self.total_live -= self.live_bytes[victim] as u64;
        self.live_bytes[victim] = 0;
        self.free_clusters.push(victim as u32);
        self.stats.cleaned += 1;
        Ok(())
    }

    fn move_pages(
        &mut self,
        victim: usize,
        entries: &[(u64, SwapSlot)],
        buf: &mut AlignedBuf,
        moved: &mut Vec<(u64, SwapSlot)>,
    ) -> Result<(), SwapError> {
        let started = Instant::now();
        let extent = entries
            .iter()
            .map(|(_, s)| s.offset as usize + s.payload_len().next_multiple_of(self.align))
            .max()
            .unwrap_or(0);
        let at = victim as u64 * CLUSTER as u64;
        if let Err(e) = self.file.file().read_exact_at(&mut buf[..extent], at) {
            return Err(self.io_error("read", at, e));
        }
        self.stats.reads += 1;
        self.stats.bytes_read += extent as u64;
        wait(self.latency.saturating_sub(started.elapsed()));
        for &(page, slot) in entries {
            let payload = &buf[slot.offset as usize..slot.offset as usize + slot.payload_len()];
            if crc32fast::hash(payload) != slot.crc {
                return Err(SwapError::Corrupt {
                    dir: self.dir.clone(),
                    page,
                    offset: at + slot.offset as u64,
                    what: "checksum mismatch while cleaning",
                });
            }
        }
        for &(page, slot) in entries {
            let payload = &buf[slot.offset as usize..slot.offset as usize + slot.payload_len()];
            let new = self.write(page, slot.stored(), payload)?;
            moved.push((page, new));
            self.stats.pages_moved += 1;
        }
        Ok(())
    }
}
