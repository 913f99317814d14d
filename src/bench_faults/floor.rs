//! The floor under any pager built on userfaultfd's signal faults: the
//! same touches served by a pager that only traps and moves frames
//! (`ccvm_runtime::floor`), so that the gap between ccvm and the floor, and
//! between the floor and the kernel, are read from one run.

use std::time::Instant;

use anyhow::Context;
use ccvm_runtime::floor::FloorRegion;

use super::{touch, Run};

/// The touches with `resident` of the region's pages in memory, served by
/// trap and moves alone.
///
/// # Errors
///
/// A kernel without userfaultfd's SIGBUS mode or `UFFDIO_MOVE`, or a move
/// that failed.
pub(super) fn run(data: &[u8], resident: usize, touches: usize, seed: u64) -> anyhow::Result<Run> {
    let region = FloorRegion::new(data, resident).context("the floor's region")?;
    let started = Instant::now();
    // SAFETY: the region's pages, each present or served by its handler,
    // touched by this thread alone (the benchmark's child has one).
    let checksum = unsafe { touch(region.as_ptr().cast(), region.pages(), touches, seed) };
    let wall_s = started.elapsed().as_secs_f64();
    let faults = region.finish().context("the floor's run")?;
    Ok(Run {
        wall_s,
        faults,
        disk_faults: 0,
        checksum,
    })
}
