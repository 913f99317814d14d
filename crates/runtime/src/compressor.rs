//! Compression off the fault path: a helper process that compresses
//! evicted pages while the program runs.
//!
//! The faulting thread copies an evicted page into a ring of page buffers
//! shared with the helper (a `memfd` mapped by both) and goes on; the
//! helper compresses it there with its own codec, as the store would
//! ([`ccvm_store::encode`]), and leaves the result beside it. The pager
//! collects finished pages into the store (a copy of the compressed bytes)
//! at its next fault, telling the policy their sizes then. A cache fault
//! thus costs the faulting thread a copy, the decompression and the maps;
//! the compression runs on another core, as the kernel's `kswapd` reclaims
//! ahead of need.
//!
//! # Why a process and not a thread
//!
//! A thread was tried first and was slower than no helper at all: with a
//! second thread of the process running on the other CPU, every
//! `UFFDIO_MOVE` the fault path makes must flush that CPU's TLB too, by an
//! inter-processor interrupt the mover waits for. A process has its own
//! address space: the program's page-table changes never interrupt it.
//! (`docs/kernel.md`, "What did not pay", has the measurement.)
//!
//! # Choices
//!
//! * The helper is forked when the region is made, before the region and
//!   its shadow are mapped, so it holds no reference to their pages (a
//!   shared page cannot be moved). It touches only the ring and its own
//!   codec, dies with its parent (`PR_SET_PDEATHSIG`) and raises no
//!   `SIGCHLD`, so a program that waits for its own children never sees it.
//! * The ring is single-producer, single-consumer and in order: the pager
//!   pushes, the helper finishes entries in push order and advances one
//!   counter, the pager collects up to it. [`RING`] entries (512 KiB,
//!   charged to the RAM budget like the rest of ccvm's memory): enough
//!   for the helper to keep up with a compression-heavy run, few enough to
//!   be a small share of a budget (`docs/results.md`, "Why the policy's
//!   and the helper's constants are what they are"). A full ring means
//!   the helper is behind, and the faulting thread compresses that page
//!   itself.
//! * A fault on a page still in the ring is served from the ring: if the
//!   helper has finished it, it is collected first; if not, the faulting
//!   thread compresses the copy itself and the helper's result is dropped
//!   when collected. Either way the policy sees what it would without the
//!   helper: the page compressed, then touched.
//! * The helper naps on a timer when the ring is empty ([`SPINS`] checks
//!   first, then naps of [`NAP_NS`]), and sleeps on a futex in the shared
//!   mapping only after [`NAPS`] naps found nothing. The pager wakes a
//!   sleeping helper when [`WAKE_BATCH`] pages wait, and a napping one
//!   only when half the ring waits. Why: a wake-up is a futex system call
//!   and an inter-processor interrupt, paid by the faulting thread, and a
//!   helper woken every few pages finishes each batch and falls asleep
//!   before the next, so the program pays a wake-up per batch
//!   (`docs/kernel.md`, "A helper that naps instead of being woken"); a
//!   nap's timer fires on the helper's own CPU and costs the program
//!   nothing. The price: up to a nap's worth of evicted
//!   pages waits uncompressed in the ring, which is memory the ring holds
//!   anyway, and an idle helper wakes [`NAPS`] times before it sleeps.
use std::sync::atomic::{AtomicU32, Ordering};

use ccvm_codec::{Codec, PAGE_SIZE};
use ccvm_store::{encode, Stored};

/// Entries in the ring.
pub(crate) const RING: usize = 64;

/// Pages waiting in the ring before a sleeping helper is woken.
const WAKE_BATCH: u32 = 8;

/// Checks of an empty ring (a `pause` each) before the helper sleeps:
/// a short wait, because a helper that spins takes a CPU from the
/// program's own threads. With 2,000, graph-mt (four threads on two
/// CPUs) took 7.37, 6.99, 6.33 and 7.18 s against 6.14, 6.09, 6.10 and
/// 5.38 s with 200 (`ccvm run --workload graph-mt --size 256M --ram
/// 232M`, alternated); graph and hashindex did not change beyond noise.
const SPINS: u32 = 200;

/// A nap's length in nanoseconds: about two faults' worth of a program
/// that pages hard, so that a nap rarely lets more than a few pages wait.
const NAP_NS: i64 = 50_000;

/// Empty naps in a row (20 ms) before the helper sleeps until woken.
const NAPS: u32 = 400;

/// Values of [`Header::sleeping`].
const AWAKE: u32 = 0;
const ASLEEP: u32 = 1;
const NAPPING: u32 = 2;

/// Kinds of a finished entry, as the helper writes them.
const SAME: u32 = 0;
const COMPRESSED: u32 = 1;
const RAW: u32 = 2;

#[repr(C)]
struct Header {
    /// Entries pushed by the pager.
    pushed: AtomicU32,
    /// Entries finished by the helper.
    done: AtomicU32,
    /// [`AWAKE`], [`ASLEEP`] (until woken) or [`NAPPING`] (wakes on
    /// its own).
    sleeping: AtomicU32,
    /// 1 when the helper must exit.
    stop: AtomicU32,
}

#[repr(C)]
struct Entry {
    /// Kind of the result, then its length or same-filled word.
    kind: u32,
    len: u32,
    word: u64,
    input: [u8; PAGE_SIZE],
    output: [u8; PAGE_SIZE],
}

/// A finished page, as [`Helper::collect`] hands it out.
pub(crate) struct Finished<'a> {
    /// The page number.
    pub page: u64,
    /// How the helper encoded it.
    pub stored: Stored,
    /// Its bytes as `stored` says (the page itself when raw).
    pub bytes: &'a [u8],
    /// The page itself.
    pub page_bytes: &'a [u8],
}

/// The pager's side of the helper process. See the module docs.
pub(crate) struct Helper {
    base: *mut u8,
    len: usize,
    child: libc::pid_t,
    /// Pages of the entries pushed and not collected, in push order, with
    /// whether the pager took the page back meanwhile.
    pages: std::collections::VecDeque<(u64, bool)>,
    /// Entries collected.
    collected: u32,
    /// The write end of the helper's lifeline (in the parent).
    lifeline: Option<crate::fds::Held>,
    /// The helper's private memory as last read, and when.
    private: std::cell::Cell<(Option<std::time::Instant>, u64)>,
}

/// How long a reading of the helper's private memory stands. Reading it
/// walks every mapping of the helper's (`smaps_rollup`), which it shares
/// with the program it was forked from, so it is dear, while the memory it
/// measures grows slowly (`docs/results.md`, "Why the policy's and the
/// helper's constants are what they are").
const PRIVATE_READ_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

// SAFETY: the shared mapping is owned by the helper value; the pager that
// holds it is behind a mutex.
unsafe impl Send for Helper {}

impl Helper {
    /// Memory the helper holds apart from the pager's process: its ring
    /// (shared, counted once) and the pages the helper process holds on
    /// its own (`Private_Dirty` of its `smaps_rollup`: its stack, the
    /// codec's state, and old copies of pages the parent wrote since the
    /// fork). 0 for the part that cannot be read.
    ///
    /// The private part is read again at most every [`PRIVATE_READ_EVERY`].
    pub fn memory(&self) -> u64 {
        let (read_at, mut private) = self.private.get();
        if read_at.is_none_or(|t| t.elapsed() >= PRIVATE_READ_EVERY) {
            private = std::fs::read_to_string(format!("/proc/{}/smaps_rollup", self.child))
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find_map(|l| l.strip_prefix("Private_Dirty:"))
                        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                })
                .unwrap_or(0)
                * 1024;
            self.private.set((Some(std::time::Instant::now()), private));
        }
        self.len as u64 + private
    }

    /// Maps the ring and forks the helper process, which compresses with
    /// `codec` and keeps raw what would take more than `huge_threshold`
    /// bytes; `None` if either fails (the pager then compresses itself).
    pub fn start(mut codec: Box<dyn Codec>, huge_threshold: usize) -> Option<Helper> {
        let len = std::mem::size_of::<Header>().next_multiple_of(64) + RING * std::mem::size_of::<Entry>();
        // SAFETY: a fresh shared anonymous mapping (shared across fork).
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return None;
        }
        // One compression first, so that whatever a codec allocates on
        // first use (zstd's workspace) is allocated here, not in the child.
        let mut warm = vec![0u8; PAGE_SIZE];
        let sample: Vec<u8> = (0..PAGE_SIZE).map(|i| (i * 7 % 251) as u8).collect();
        let _ = encode(&mut *codec, &sample, &mut warm, huge_threshold);
        // The helper's lifeline: it hangs up when the program ends or execs
        // another program (the write end is close-on-exec), so that the
        // helper does not outlive it holding memory and the swap file.
        let mut lifeline = [-1; 2];
        // SAFETY: a two-descriptor array.
        if unsafe { libc::pipe2(lifeline.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            // SAFETY: the mapping made above.
            unsafe { libc::munmap(base, len) };
            return None;
        }
        let parent = std::process::id() as libc::pid_t;
        // The program's writable data is not the helper's (see
        // `helper_maps`): left out of this fork alone.
        let left_out = crate::helper_maps::LeftOut::mark();
        // SAFETY: clone without CLONE_VM is fork; exit signal 0 means no
        // SIGCHLD. The child runs only `serve`, which allocates nothing
        // (the codec was warmed above): glibc's fork handlers, which make
        // malloc safe in a child, do not run for a raw clone.
        let child = unsafe { libc::syscall(libc::SYS_clone, 0, 0, 0, 0, 0) } as libc::pid_t;
        if child != 0 {
            drop(left_out);
        } else {
            // The child has none of those mappings to mark again.
            std::mem::forget(left_out);
        }
        if child < 0 {
            // SAFETY: the mapping and pipe made above.
            unsafe {
                libc::munmap(base, len);
                libc::close(lifeline[0]);
                libc::close(lifeline[1]);
            }
            return None;
        }
        let helper = Helper {
            base: base.cast(),
            len,
            child,
            pages: std::collections::VecDeque::with_capacity(RING),
            collected: 0,
            lifeline: None,
            private: std::cell::Cell::new((None, 0)),
        };
        if child == 0 {
            // SAFETY: in the child: die with the parent; if it is already
            // gone, exit.
            unsafe {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() != parent {
                    libc::_exit(0);
                }
                // Naps end near their time, not up to 50 µs later (the
                // default slack), so that few pages wait in the ring.
                libc::prctl(libc::PR_SET_TIMERSLACK, 5_000u64);
                // The program's descriptors (its files, the swap file) are
                // not the helper's to keep open: all but the lifeline go.
                let keep = lifeline[0] as u64;
                let close_range =
                    |first: u64, last: u64| crate::guard::raw_syscall(libc::SYS_close_range, [first, last, 0, 0, 0, 0]);
                if keep > 0 {
                    close_range(0, keep - 1);
                }
                close_range(keep + 1, u32::MAX as u64);
            }
            helper.serve(&mut *codec, huge_threshold, lifeline[0]);
            // SAFETY: ends the child without running the parent's atexit
            // handlers or destructors, which belong to the parent.
            unsafe { libc::_exit(0) }
        }
        // SAFETY: the read end is the helper's; the write end is ours.
        unsafe { libc::close(lifeline[0]) };
        // SAFETY: a descriptor we own from here on.
        let write_end =
            crate::fds::raise(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(lifeline[1]) });
        let mut helper = helper;
        helper.lifeline = Some(write_end);
        Some(helper)
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping starts with a Header, zeroed at creation.
        unsafe { &*(self.base as *const Header) }
    }

    fn entry(&self, i: u32) -> *mut Entry {
        let first = std::mem::size_of::<Header>().next_multiple_of(64);
        // SAFETY: i % RING is within the ring.
        unsafe { self.base.add(first).cast::<Entry>().add(i as usize % RING) }
    }

    /// The helper's loop: compresses entries in order until told to stop,
    /// or until its `lifeline` hangs up.
    fn serve(&self, codec: &mut dyn Codec, huge_threshold: usize, lifeline: libc::c_int) {
        let h = self.header();
        let mut done = h.done.load(Ordering::Acquire);
        let mut empty_naps = 0;
        while h.stop.load(Ordering::Acquire) == 0 {
            let mut spins = 0;
            while h.pushed.load(Ordering::Acquire) == done && spins < SPINS {
                std::hint::spin_loop();
                spins += 1;
            }
            if h.pushed.load(Ordering::Acquire) == done {
                let deep = empty_naps >= NAPS;
                h.sleeping.store(if deep { ASLEEP } else { NAPPING }, Ordering::SeqCst);
                let seen = h.pushed.load(Ordering::SeqCst);
                if seen == done && h.stop.load(Ordering::SeqCst) == 0 {
                    futex_wait(&h.pushed, seen, if deep { 100_000_000 } else { NAP_NS });
                }
                h.sleeping.store(AWAKE, Ordering::SeqCst);
                empty_naps += 1;
                // The lifeline is a system call: checked after a deep sleep
                // and once in a while when napping.
                if (deep || empty_naps % 64 == 0) && hung_up(lifeline) {
                    return;
                }
                continue;
            }
            empty_naps = 0;
            // SAFETY: entry `done` was pushed (Acquire above) and is not
            // touched by the pager until `done` passes it.
            let e = unsafe { &mut *self.entry(done) };
            let (kind, len, word) = match encode(codec, &e.input, &mut e.output, huge_threshold) {
                Stored::Same(v) => (SAME, 0, v),
                Stored::Compressed(n) => (COMPRESSED, n as u32, 0),
                Stored::Raw => (RAW, PAGE_SIZE as u32, 0),
            };
            (e.kind, e.len, e.word) = (kind, len, word);
            done = done.wrapping_add(1);
            h.done.store(done, Ordering::Release);
        }
    }

    /// Pages in the ring waiting to be collected (not taken back).
    pub fn waiting(&self) -> usize {
        self.pages.iter().filter(|&&(_, gone)| !gone).count()
    }

    /// The oldest page in the ring not taken back, if any.
    pub fn first_waiting(&self) -> Option<u64> {
        self.pages.iter().find(|&&(_, gone)| !gone).map(|&(page, _)| page)
    }

    /// Whether the ring has room for another page.
    pub fn has_room(&self) -> bool {
        self.pages.len() < RING
    }

    /// Copies `bytes`, page `page`'s, into the ring for the helper.
    ///
    /// # Panics
    ///
    /// If the ring is full (see [`Helper::has_room`]).
    pub fn push(&mut self, page: u64, bytes: &[u8]) {
        assert!(self.has_room(), "the ring is full");
        let h = self.header();
        let i = h.pushed.load(Ordering::Relaxed);
        // SAFETY: entries past `done` and before `pushed + RING` belong to
        // the pager; this one was collected (the ring has room).
        unsafe { (*self.entry(i)).input.copy_from_slice(bytes) };
        let pushed = i.wrapping_add(1);
        h.pushed.store(pushed, Ordering::SeqCst);
        let waiting = pushed.wrapping_sub(h.done.load(Ordering::Acquire));
        let wake = match h.sleeping.load(Ordering::SeqCst) {
            ASLEEP => waiting >= WAKE_BATCH,
            NAPPING => waiting as usize >= RING / 2,
            _ => false,
        };
        if wake {
            futex_wake(&h.pushed);
        }
        self.pages.push_back((page, false));
    }

    /// The copy of `page` in the ring, if it is there and not taken back:
    /// the pager takes it back (its result, when collected, is dropped).
    pub fn take_back(&mut self, page: u64) -> Option<&[u8]> {
        let at = self.pages.iter().position(|&(p, gone)| p == page && !gone)?;
        self.pages[at].1 = true;
        let i = self.collected.wrapping_add(at as u32);
        // SAFETY: an entry not yet collected; the helper only reads its
        // input, and the pager does not overwrite it before collecting it.
        Some(unsafe { &(*self.entry(i)).input })
    }

    /// Hands finished pages to `f`, oldest first, skipping those taken back.
    pub fn collect(&mut self, mut f: impl FnMut(Finished<'_>)) {
        let done = self.header().done.load(Ordering::Acquire);
        while self.collected != done {
            let (page, gone) = self.pages.pop_front().expect("a finished entry was pushed");
            // SAFETY: a finished entry (Acquire above), the pager's until it
            // is pushed again.
            let e = unsafe { &*self.entry(self.collected) };
            self.collected = self.collected.wrapping_add(1);
            if gone {
                continue;
            }
            let (stored, bytes): (Stored, &[u8]) = match e.kind {
                SAME => (Stored::Same(e.word), &[]),
                COMPRESSED => (Stored::Compressed(e.len as usize), &e.output[..e.len as usize]),
                _ => (Stored::Raw, &e.input),
            };
            f(Finished {
                page,
                stored,
                bytes,
                page_bytes: &e.input,
            });
        }
    }
}

impl Helper {
    /// In a forked child, whose helper this is not: lets go of the
    /// lifeline (so that the helper still ends with its program) and of the
    /// ring, without stopping the helper, which serves the parent.
    pub(crate) fn abandon(mut self) {
        drop(self.lifeline.take());
        // SAFETY: the ring mapping made in `start`; this process no longer
        // uses it (a shared mapping: the parent's copy stays).
        unsafe { libc::munmap(self.base.cast(), self.len) };
        std::mem::forget(self);
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let h = self.header();
        h.stop.store(1, Ordering::SeqCst);
        futex_wake(&h.pushed);
        let mut status = 0;
        // SAFETY: our child; __WALL because it sends no SIGCHLD.
        unsafe { libc::waitpid(self.child, &mut status, libc::__WALL) };
        // SAFETY: the mapping made in `start`; the child has exited.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// Whether the other end of pipe `fd` is closed.
fn hung_up(fd: libc::c_int) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no wait.
    unsafe { libc::poll(&mut p, 1, 0) == 1 && p.revents & libc::POLLHUP != 0 }
}

/// Sleeps while `word` is `value`, `ns` nanoseconds at most (under a
/// second). The word is in a shared mapping, so the futex is not
/// process-private.
fn futex_wait(word: &AtomicU32, value: u32, ns: i64) {
    let timeout = libc::timespec { tv_sec: 0, tv_nsec: ns };
    // SAFETY: FUTEX_WAIT on a valid word with a valid timeout.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, value, &timeout) };
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a valid word; writes nothing.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, 1) };
}
