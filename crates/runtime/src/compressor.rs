//! Compression off the fault path: a helper process that compresses
//! evicted pages while the program runs.
//!
//! The faulting thread hands an evicted page to the helper through a ring
//! of entries shared with it (a `memfd` mapped by both) and goes on: the
//! address of the page's parked frame, which the helper reads itself, or,
//! where it cannot, a copy of the page. The helper compresses it with its
//! own codec, as the store would ([`ccvm_store::encode`]), and leaves the
//! result in the entry. The pager collects finished pages into the store
//! (a copy of the compressed bytes) at its next fault, telling the policy
//! their sizes then. A cache fault thus costs the faulting thread the
//! decompression and the maps; the compression runs on another core, as
//! the kernel's `kswapd` reclaims ahead of need.
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
//! * Where frames move (`UFFDIO_MOVE`), the helper reads an evicted page
//!   from its frame with `process_vm_readv`, which it tries once at its
//!   start (a program that is not dumpable refuses it, and then pages are
//!   copied into the ring; one that turns itself not dumpable later has
//!   the page the helper could not read compressed by the pager, and
//!   copies from then on). The 4 KiB copy had been 0.89 µs of a cache
//!   fault's 11.5 on the faulting thread, most of it the cold page's
//!   cache misses; the helper pays them now. The frame is the ring's
//!   until the page is collected (it becomes spare then) or taken back.
//!   Each entry's state (unread, being read, read, taken back) is shared
//!   with the helper, and the pager waits while the helper reads, since
//!   the read pins the frame and a pinned frame cannot be moved.
//! * A fault on a page still in the ring is served from the ring: if the
//!   helper has finished it, it is collected first; if not, the faulting
//!   thread compresses the copy itself and the helper's result is dropped
//!   when collected (a page handed over in its frame: from the frame,
//!   taken back first). Either way the policy sees what it would without
//!   the helper: the page compressed, then touched.
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

use crate::frames::Parked;

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
/// The helper could not read the frame: the pager compresses it.
const NOT_READ: u32 = 3;

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
    /// [`READS_FRAMES`] once the helper has read the program's memory
    /// (`process_vm_readv`), [`READS_NOTHING`] if it cannot, 0 before it
    /// has tried.
    reads: AtomicU32,
}

/// Values of [`Header::reads`].
const READS_FRAMES: u32 = 1;
const READS_NOTHING: u32 = 2;

/// Values of [`Entry::state`]: the page's bytes are in the entry's input
/// (copied by the pager), or in a frame of the program's at [`Entry::src`]
/// that the helper has yet to read, is reading, has read, or that the
/// pager took back before the helper began.
const IN_INPUT: u32 = 0;
const UNREAD: u32 = 1;
const READING: u32 = 2;
const READ: u32 = 3;
const TAKEN: u32 = 4;

#[repr(C)]
struct Entry {
    /// Kind of the result, then its length or same-filled word.
    kind: u32,
    len: u32,
    word: u64,
    /// Where the page's bytes are: see [`IN_INPUT`] and after.
    state: AtomicU32,
    /// The address of the page's frame in the program, for a state other
    /// than [`IN_INPUT`].
    src: u64,
    input: [u8; PAGE_SIZE],
    output: [u8; PAGE_SIZE],
}

/// A finished page, as [`Helper::collect`] hands it out.
pub(crate) struct Finished<'a> {
    /// The page number.
    pub page: u64,
    /// How the helper encoded it; `None` if it could not read the page,
    /// which the pager then compresses from `page_bytes`.
    pub stored: Option<Stored>,
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
    /// The entries pushed and not collected, in push order.
    pages: std::collections::VecDeque<InRing>,
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
            helper.serve(&mut *codec, huge_threshold, lifeline[0], parent);
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
    fn serve(&self, codec: &mut dyn Codec, huge_threshold: usize, lifeline: libc::c_int, parent: libc::pid_t) {
        let h = self.header();
        // Whether the program's frames can be read from here: the ring's
        // header is at the same address in both processes.
        let mut probe = [0u8; 8];
        let reads = read_from(parent, (&h.stop as *const AtomicU32) as u64, &mut probe);
        h.reads
            .store(if reads { READS_FRAMES } else { READS_NOTHING }, Ordering::Release);
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
            let have = match e.state.load(Ordering::Acquire) {
                IN_INPUT => true,
                _ => match e
                    .state
                    .compare_exchange(UNREAD, READING, Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(_) => {
                        let read = read_from(parent, e.src, &mut e.input);
                        e.state.store(READ, Ordering::Release);
                        if !read {
                            // The program stopped letting us read it (it
                            // made itself not dumpable): copies from now on.
                            h.reads.store(READS_NOTHING, Ordering::Release);
                        }
                        read
                    }
                    // Taken back by the pager: its result is not wanted.
                    Err(_) => false,
                },
            };
            let (kind, len, word) = if !have {
                (NOT_READ, 0, 0)
            } else {
                match encode(codec, &e.input, &mut e.output, huge_threshold) {
                    Stored::Same(v) => (SAME, 0, v),
                    Stored::Compressed(n) => (COMPRESSED, n as u32, 0),
                    Stored::Raw => (RAW, PAGE_SIZE as u32, 0),
                }
            };
            (e.kind, e.len, e.word) = (kind, len, word);
            done = done.wrapping_add(1);
            h.done.store(done, Ordering::Release);
        }
    }

    /// Pages in the ring waiting to be collected (not taken back).
    pub fn waiting(&self) -> usize {
        self.pages.iter().filter(|e| !e.gone).count()
    }

    /// Frames held by pages handed over in them (see [`Helper::push_frame`]).
    pub fn frames_held(&self) -> usize {
        self.pages.iter().filter(|e| e.frame.is_some()).count()
    }

    /// Whether the helper reads evicted pages from their frames itself.
    pub fn reads_frames(&self) -> bool {
        self.header().reads.load(Ordering::Acquire) == READS_FRAMES
    }

    /// The oldest page in the ring not taken back, if any.
    pub fn first_waiting(&self) -> Option<u64> {
        self.pages.iter().find(|e| !e.gone).map(|e| e.page)
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
        unsafe {
            let e = self.entry(i);
            (*e).state.store(IN_INPUT, Ordering::Relaxed);
            (*e).input.copy_from_slice(bytes);
        }
        self.publish(i);
        self.pages.push_back(InRing {
            page,
            gone: false,
            frame: None,
        });
    }

    /// Hands page `page` to the helper in its parked frame, which the
    /// helper reads itself (see the module docs); the frame is the ring's
    /// until the page is collected or taken back.
    ///
    /// # Panics
    ///
    /// If the ring is full (see [`Helper::has_room`]).
    pub fn push_frame(&mut self, page: u64, frame: Parked) {
        assert!(self.has_room(), "the ring is full");
        let i = self.header().pushed.load(Ordering::Relaxed);
        // SAFETY: as in `push`.
        unsafe {
            let e = self.entry(i);
            (*e).src = frame.bytes().as_ptr() as u64;
            (*e).state.store(UNREAD, Ordering::Relaxed);
        }
        self.publish(i);
        self.pages.push_back(InRing {
            page,
            gone: false,
            frame: Some(frame),
        });
    }

    /// Publishes entry `i` to the helper, waking it if it sleeps.
    fn publish(&self, i: u32) {
        let h = self.header();
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
    }

    /// Page `page`, if it is in the ring and not taken back: the pager
    /// takes it back (its result, when collected, is dropped). A page
    /// handed over in its frame comes back as the frame, once the helper
    /// is not reading it.
    pub fn take_back(&mut self, page: u64) -> Option<TakenBack<'_>> {
        let at = self.pages.iter().position(|e| e.page == page && !e.gone)?;
        self.pages[at].gone = true;
        let e = self.entry(self.collected.wrapping_add(at as u32));
        if let Some(frame) = self.pages[at].frame.take() {
            // SAFETY: an entry not yet collected; its state is shared with
            // the helper through atomics only.
            let state = unsafe { &(*e).state };
            // The helper reads the frame at most once, briefly: wait for it
            // to finish rather than move a frame it has pinned.
            let mut spins = 0u32;
            while let Err(s) = state.compare_exchange(UNREAD, TAKEN, Ordering::AcqRel, Ordering::Acquire) {
                if s == READ {
                    break;
                }
                spins += 1;
                if spins < SPINS {
                    std::hint::spin_loop();
                    continue;
                }
                // The helper was preempted mid-read: let it run. A helper
                // that died mid-read pins nothing any more.
                if spins.is_multiple_of(1024) && self.exited() {
                    break;
                }
                // SAFETY: no arguments.
                unsafe { libc::sched_yield() };
            }
            return Some(TakenBack::Frame(frame));
        }
        // SAFETY: an entry not yet collected; the helper only reads its
        // input, and the pager does not overwrite it before collecting it.
        Some(TakenBack::Copy(unsafe { &(*e).input }))
    }

    /// Whether the helper process has ended (it is reaped then).
    fn exited(&self) -> bool {
        let mut status = 0;
        // SAFETY: our child; __WALL because it sends no SIGCHLD.
        let r = unsafe { libc::waitpid(self.child, &mut status, libc::WNOHANG | libc::__WALL) };
        r == self.child || (r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD))
    }

    /// Hands finished pages to `f`, oldest first, skipping those taken
    /// back; the frames of pages handed over in them go to `freed`.
    pub fn collect(&mut self, freed: &mut Vec<Parked>, mut f: impl FnMut(Finished<'_>)) {
        let done = self.header().done.load(Ordering::Acquire);
        while self.collected != done {
            let InRing { page, gone, frame } = self.pages.pop_front().expect("a finished entry was pushed");
            // SAFETY: a finished entry (Acquire above), the pager's until it
            // is pushed again.
            let e = unsafe { &*self.entry(self.collected) };
            self.collected = self.collected.wrapping_add(1);
            if gone {
                freed.extend(frame);
                continue;
            }
            let (stored, bytes): (Option<Stored>, &[u8]) = match e.kind {
                SAME => (Some(Stored::Same(e.word)), &[]),
                COMPRESSED => (Some(Stored::Compressed(e.len as usize)), &e.output[..e.len as usize]),
                NOT_READ => (None, &[]),
                _ => (Some(Stored::Raw), &e.input),
            };
            let page_bytes = match (&frame, e.kind) {
                (Some(frame), NOT_READ) => frame.bytes(),
                _ => &e.input,
            };
            f(Finished {
                page,
                stored,
                bytes,
                page_bytes,
            });
            freed.extend(frame);
        }
    }
}

/// The pager's books of an entry in the ring.
struct InRing {
    page: u64,
    /// Whether the pager took the page back meanwhile.
    gone: bool,
    /// For a page handed over in its frame, the frame (see
    /// [`Helper::push_frame`]), until collected or taken back.
    frame: Option<Parked>,
}

/// What [`Helper::take_back`] gives back.
pub(crate) enum TakenBack<'a> {
    /// The page's copy in the ring.
    Copy(&'a [u8]),
    /// The page's frame, which the helper no longer reads.
    Frame(Parked),
}

/// Reads `out.len()` bytes at `addr` in process `pid`; whether all were
/// read. No allocation, one system call.
pub(crate) fn read_from(pid: libc::pid_t, addr: u64, out: &mut [u8]) -> bool {
    let local = libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: out.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: out.len(),
    };
    // SAFETY: one local buffer we own, one remote range the kernel checks.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    n == out.len() as isize
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
