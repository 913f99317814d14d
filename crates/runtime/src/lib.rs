//! ccvm's live runtime: regions of memory that a program reads and writes
//! normally, of which ccvm keeps at most a RAM budget, part uncompressed
//! and part in a compression cache, and the rest in a swap file, as paper
//! 000 proposes (and as CRAMES does without a disk, paper 003 chapter 3).
//!
//! The primary abstraction is [`Region`]. Its pages start missing; each
//! fault is served through userfaultfd: zeros on first touch, or the page
//! decompressed from the cache, or read from the swap file, checked and
//! decompressed. Which pages leave memory, and whether they are
//! compressed or written out, is decided by a [`ccvm_policy::Policy`], the
//! same code the simulator runs.
//!
//! # Design
//!
//! * Faults are served in the faulting thread by default
//!   ([`FaultMode::Signal`], `signal` module): userfaultfd's SIGBUS mode
//!   makes the touch raise SIGBUS, whose handler maps the page and
//!   returns. The classic design (a handler thread woken by fault events,
//!   [`FaultMode::Thread`]) put a sleep, a wake-up on another CPU and a
//!   wake-up back into every fault, about 20 µs of a 30 µs fault. The
//!   price: a system call that touches a page that is not resident fails
//!   with `EFAULT`. A program that links ccvm touches such buffers first
//!   ([`Region::prefault`]); an unmodified one runs under the [`guard`],
//!   which intercepts every system call and faults in and pins its
//!   buffers first (`crate::pins` keeps the pager off them).
//! * Page frames are moved instead of copied, with `UFFDIO_MOVE` where the
//!   kernel has it (`frames` module, [`RuntimeConfig::move_frames`]): an
//!   evicted page's frame is moved out and reused for the next page
//!   mapped, so eviction needs no write-protection, copy or `madvise`, and
//!   mapping no allocation. While the process runs other threads, pages
//!   are mapped in by copying instead, since a move interrupts their CPUs
//!   (`threads` module, [`RuntimeConfig::copy_in_when_threaded`]).
//! * Compression runs on another core, in a helper process that shares a
//!   ring of page buffers with the pager (`compressor` module,
//!   [`RuntimeConfig::background_compression`]): a process, because a
//!   thread of the program would make every frame move interrupt its CPU.
//! * Runs of faults are read ahead (`readahead` module,
//!   [`RuntimeConfig::readahead`]): a cache fault that continues a run
//!   maps the next cached pages too, and a first touch that continues one
//!   maps the next new pages, so a scan pays one signal per window, not
//!   per page.
//! * Recency of resident pages: the runtime sees only faults, so a policy
//!   sees resident pages in fault order (FIFO), and exact recency once a
//!   page is in the cache (every touch there faults). That is the FIFO-LRU
//!   segmented queue with page traps that paper 000 §3.1 lists among the
//!   LRU approximations its adaptivity tolerates; the cache is the trap.
//! * The budget: uncompressed pages (at most the policy's limit), the
//!   store's whole memory (chunks, slack and bookkeeping) *and ccvm's own
//!   memory* stay within the RAM budget, as a memory cgroup counts them.
//!   ccvm's own is what the region's tables grew by (counted by the
//!   binaries' allocator, [`accounting`]), the state of every page seen,
//!   spare frames and the helper process with its ring; it is measured
//!   every 512 faults, charged, and the policy is resized to what is left
//!   ([`ccvm_policy::Policy::set_ram`]). How the RAM divides (the policy's
//!   budget, the store's reserve of two chunks and its ceiling) is
//!   [`ccvm_policy::RamSplit`], made by [`RuntimeConfig::ram_split`]; each
//!   compressed page is charged an eighth more than its bytes for the
//!   store's slack ([`CHARGE`]), so that an empty cache costs nothing; the
//!   runtime evicts further if slack ever pushes the sum over. While a
//!   fault is served one page more may be resident, until its evictions
//!   run. (`docs/results.md` has what leaving ccvm's own memory out cost.)
//! * Settings are values, not names: [`RuntimeConfig`] holds a
//!   [`ccvm_codec::CodecId`], a [`ccvm_policy::PolicySpec`] and a
//!   [`FaultMode`], parsed once where they enter (the command line, the C
//!   interface, the JSON of [`ExecSettings`]), checked by one
//!   [`RuntimeConfig::validate`], each with one default.
//! * One budget for a process tree (`tree` module): the children a paged
//!   process forks are paged too, and all of them share `--ram`, each
//!   holding what the others leave and at least an equal share.
//! * The swap file (`swap` module) and the fault handler (`pager` module)
//!   state their own choices: clustered direct writes with per-page CRCs
//!   kept in memory; write-safe eviction; one pager lock per region. The
//!   pager serves each page state in a function of its own, hands an
//!   evicted page's bytes on as a value the eviction owns (a copied
//!   buffer or a parked frame), and tells its observers (the statistics
//!   and the trace) what happens without knowing them.
//! * [`floor`] is the least pager of this design (trap and move, nothing
//!   else), the floor `ccvm bench faults` measures ccvm against.
//! * userfaultfd itself is reached through a few ioctls declared here
//!   (`uffd` module), so that building needs no libclang.
#![deny(missing_docs)]

pub mod accounting;
pub mod aligned;
mod compressor;
mod config;
pub mod delay;
mod exec;
pub mod fds;
pub mod ffi;
pub mod floor;
mod frames;
pub mod guard;
mod helper_maps;
mod pager;
pub use pager::{allocating_for_ccvm, on_tree_tick, SNAPSHOT_PERIOD};
mod pins;
mod protections;
mod readahead;
mod region;
mod signal;
mod stats;
mod swap;
mod threads;
mod tree;
pub mod uffd;
mod written;

/// `madvise(2)` made straight to the kernel: a library that preloads the
/// runtime may replace `madvise` and `syscall` (ccvm's own does, for the
/// program's heap), and the runtime's own calls must reach the kernel.
/// Returns 0, or -1 with `errno` set.
///
/// ```
/// let page = vec![0u8; 8192];
/// let aligned = (page.as_ptr() as usize).next_multiple_of(4096);
/// // SAFETY: advice that changes nothing, on memory we own.
/// assert_eq!(unsafe { ccvm_runtime::sys_madvise(aligned as *mut _, 4096, libc::MADV_NORMAL) }, 0);
/// ```
///
/// # Safety
///
/// As for `madvise`.
pub unsafe fn sys_madvise(addr: *mut libc::c_void, len: usize, advice: libc::c_int) -> libc::c_int {
    let args = [addr as u64, len as u64, advice as u64, 0, 0, 0];
    // SAFETY: the caller's.
    match unsafe { guard::raw_syscall(libc::SYS_madvise, args) } {
        r if r < 0 => {
            // SAFETY: errno is thread-local.
            unsafe { *libc::__errno_location() = -r as i32 };
            -1
        }
        _ => 0,
    }
}

/// ccvm's page, as every crate takes it (the codec crate defines it).
pub use ccvm_codec::PAGE_SIZE;
pub use config::{FaultMode, RuntimeConfig, RuntimeError, TraceConfig};
pub use exec::{ExecReport, ExecSettings, UnpagedMappings};
pub use pager::FATAL_EXIT;
pub use readahead::DEFAULT_WINDOW as DEFAULT_READAHEAD;
pub use region::{ChildPaging, ForkGuard, Region};
pub use stats::{Latency, RuntimeStats};
pub use swap::{SwapError, SwapStats};
pub use uffd::UffdError;

/// How the runtime charges each compressed page to its policy: with the
/// store's slack, so that the budget covers the store's real memory. The
/// simulator charges the same with `--store-slack`, and a test holds the
/// two to it.
pub const CHARGE: ccvm_policy::Charge = ccvm_policy::Charge::Slack;
