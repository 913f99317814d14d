//! A swap file across `fork`: the clusters holding the slots both
//! processes may read are frozen in each, and the child gets its own copy
//! of the file's books (see the module docs of `swap`).

use super::{SwapError, SwapFile, SwapStats};
#[cfg(test)]
use {
    super::{SharedCounter, CLUSTER},
    crate::aligned::AlignedBuf,
    ccvm_codec::PAGE_SIZE,
};

impl SwapFile {
    /// Before a fork: writes the cluster being filled, so that no page
    /// either process holds is only in this process's buffer.
    ///
    /// # Errors
    ///
    /// The write's error.
    pub fn settle_for_fork(&mut self) -> Result<(), SwapError> {
        self.flush()
    }

    /// After a fork, in the parent and in the child alike: freezes every
    /// cluster that holds a live page (see the module docs).
    fn freeze_live(&mut self) {
        for (c, m) in self.members.iter().enumerate() {
            if !m.is_empty() {
                self.frozen[c] = true;
            }
        }
    }

    /// In the parent after a fork (after [`Self::settle_for_fork`]).
    pub fn after_fork_parent(&mut self) {
        self.freeze_live();
    }

    /// In the child after a fork: freezes what both hold, gives the
    /// parent's free clusters and the cluster it is filling back to it,
    /// and starts a cluster of the child's own.
    pub fn after_fork_child(&mut self) {
        self.freeze_live();
        self.stats = SwapStats {
            alignment: self.stats.alignment,
            file_bytes: self.stats.file_bytes,
            ..SwapStats::default()
        };
        // Free clusters and the (empty) current one stay the parent's.
        self.owned -= self.free_clusters.len() as u64 + 1;
        self.free_clusters.clear();
        self.pending_len = 0;
        self.current = self.new_cluster();
    }

    /// A forked child's copy of this file's state, made as a fork would
    /// make it (for tests: both then run in this process).
    #[cfg(test)]
    pub(super) fn fork_copy(&mut self) -> SwapFile {
        self.settle_for_fork().unwrap();
        let copy = |b: &AlignedBuf| {
            let mut n = AlignedBuf::new(b.len());
            n.copy_from_slice(b);
            n
        };
        let mut child = SwapFile {
            file: crate::fds::raise(self.file.file().try_clone().unwrap().into()),
            dir: self.dir.clone(),
            align: self.align,
            members: self.members.clone(),
            live_bytes: self.live_bytes.clone(),
            total_live: self.total_live,
            free_clusters: self.free_clusters.clone(),
            frozen: self.frozen.clone(),
            owned: self.owned,
            next_cluster: SharedCounter(self.next_cluster.0),
            clean_buf: Some(AlignedBuf::new(CLUSTER)),
            current: self.current,
            pending: copy(&self.pending),
            pending_len: self.pending_len,
            read_buf: AlignedBuf::new(PAGE_SIZE),
            span: copy(&self.span),
            span_at: self.span_at,
            latency: self.latency,
            stats: self.stats,
        };
        self.after_fork_parent();
        child.after_fork_child();
        child
    }
}
