//! The library `ccvm exec` preloads (`LD_PRELOAD`) into an unmodified,
//! dynamically linked program, so that the program's heap is paged live
//! through ccvm's compression cache.
//!
//! It provides no Rust API: it replaces the C library's allocation entry
//! points ([`exports`]) and, when the `CCVM_EXEC` environment variable
//! holds [`ccvm_runtime::ExecSettings`], starts a
//! [`Region`] as the process starts and serves the
//! program's memory from a [`heap`] over it. Without the variable it is
//! inert: everything goes to the C library.
//!
//! # Key decision: one region, one heap, everything else passed on
//!
//! The program's malloc family and its private anonymous `mmap`s are
//! served from one region reserved at start
//! ([`ExecSettings::heap_bytes`](ccvm_runtime::ExecSettings)), by a TLSF
//! allocator. That includes reservations (`PROT_NONE`, `MAP_NORESERVE`)
//! that a managed runtime (V8, a JVM) commits later with `mprotect` or a
//! fixed `mmap`, and protection changes: [`vm`] gives them the kernel's
//! semantics inside the region. One region keeps the pager, policy and
//! store exactly those of `ccvm run`. Everything else (shared or file
//! mappings, stacks, fixed addresses outside the heap) goes to the kernel
//! unchanged. What is allocated before the region is up, and what does
//! not fit in it, comes from the C library's own malloc, unpaged and
//! counted; `free` tells the two apart by address.
//!
//! The library's own Rust allocations, the pager's included, go straight
//! to the C library (`__libc_malloc`), never to the paged heap, and its
//! own mappings straight to the kernel: the pager must not fault on its
//! own memory.
//!
//! # Faults and system calls
//!
//! Faults are served in the faulting thread (SIGBUS mode) unless
//! `--fault-mode thread` is given; the library then installs
//! [`ccvm_runtime::guard`] as the process starts, so that every system call
//! of the program finds its heap buffers in memory.
//!
//! # Fork, exec, exit
//!
//! * `fork`: the child is paged too, from its copy of the parent's state
//!   at the fork, with `--ram` for its own pages and a report of its own
//!   (see `ccvm_runtime::ForkGuard`). In thread mode the child instead
//!   gets its whole heap in memory and is not paged. `vfork` and
//!   `posix_spawn` children share the parent's memory and are served by
//!   its pager.
//! * `exec`: the new program inherits `CCVM_EXEC` and is paged with a
//!   budget of its own.
//! * exit, from any thread: the process writes its
//!   [`ExecReport`] to `<report_dir>/<pid>.json`.
//!   The region is left in place: other threads may still be running.

#![deny(missing_docs)]

pub mod exports;
pub mod heap;
pub mod io;
pub mod mappings;
pub mod vm;

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU8, Ordering};
use std::sync::MutexGuard;

use ccvm_runtime::{guard, ChildPaging, ExecReport, ExecSettings, FaultMode, ForkGuard, Region};

/// The library's own allocations: the C library's malloc, never the heap.
struct LibcAlloc;

// SAFETY: forwards to the C library's allocator, which returns blocks of
// at least the size and alignment asked for.
unsafe impl std::alloc::GlobalAlloc for LibcAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        let p = if layout.align() <= 16 {
            // SAFETY: the C library's malloc, whose blocks are 16-aligned.
            unsafe { exports::__libc_malloc(layout.size()) }
        } else {
            // SAFETY: the C library's memalign, for larger alignments.
            unsafe { exports::__libc_memalign(layout.align(), layout.size()) }
        };
        p.cast()
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        // calloc, not malloc and a memset: large blocks come zeroed from
        // the kernel, untouched (the pager's per-page tables).
        if layout.align() <= 16 {
            // SAFETY: the C library's calloc, whose blocks are 16-aligned.
            unsafe { exports::__libc_calloc(1, layout.size()).cast() }
        } else {
            // SAFETY: the caller's layout, passed on.
            let p = unsafe { self.alloc(layout) };
            if !p.is_null() {
                // SAFETY: a fresh block of `layout.size()` bytes.
                unsafe { p.write_bytes(0, layout.size()) };
            }
            p
        }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: std::alloc::Layout) {
        // SAFETY: `ptr` came from the C library's allocator above.
        unsafe { exports::__libc_free(ptr.cast()) }
    }
}

/// Counted, so that the pager's tables are charged to the RAM budget
/// (see `ccvm_runtime::accounting`).
#[global_allocator]
static ALLOC: ccvm_runtime::accounting::Counted<LibcAlloc> = ccvm_runtime::accounting::Counted(LibcAlloc);

/// Where this process stands.
const OFF: u8 = 0;
const PAGED: u8 = 1;
/// A forked child: the heap is plain memory.
const DETACHED: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(OFF);
static REGION: AtomicPtr<Region> = AtomicPtr::new(std::ptr::null_mut());
static SETTINGS: AtomicPtr<ExecSettings> = AtomicPtr::new(std::ptr::null_mut());

/// Whether the heap is up (paged, or a forked child's plain copy).
pub fn started() -> bool {
    STATE.load(Ordering::Acquire) != OFF
}

/// The region, while this process is paged (not in a forked child, whose
/// heap is plain memory).
pub(crate) fn paged_region() -> Option<&'static Region> {
    (STATE.load(Ordering::Acquire) == PAGED).then(region).flatten()
}

fn region() -> Option<&'static Region> {
    // SAFETY: set once, to a leaked region.
    unsafe { REGION.load(Ordering::Acquire).as_ref() }
}

/// Stops the program before it runs, with one line.
fn refuse(why: &str) -> ! {
    eprintln!("ccvm: cannot page this program: {why}");
    // SAFETY: ends the process; nothing of the program has run yet.
    unsafe { libc::_exit(125) }
}

#[used]
#[link_section = ".init_array"]
static START: extern "C" fn() = start;

#[used]
#[link_section = ".fini_array"]
static END: extern "C" fn() = end;

extern "C" fn start() {
    let Some(settings) = ExecSettings::from_env() else {
        return;
    };
    let settings = settings.unwrap_or_else(|e| refuse(&e));
    let program = std::env::args().next().unwrap_or_default();
    let program = program.rsplit('/').next().unwrap_or_default();
    let config = settings.runtime_config_for(std::process::id(), program);
    let region = Region::new(settings.heap_bytes as usize, config).unwrap_or_else(|e| refuse(&e.to_string()));
    let region = Box::leak(Box::new(region));
    // SAFETY: the region's memory is ours alone for the rest of the process.
    unsafe { heap::init(region.as_ptr(), region.len()) };
    io::resolve();
    if region.fault_mode() == FaultMode::Signal {
        // Faults in the faulting thread; the guard keeps system calls on
        // heap memory from failing with EFAULT (see ccvm_runtime::guard).
        let start = region.as_ptr() as usize;
        let pin_limit = (settings.config.ram_bytes / 4) as usize;
        guard::install(start, start + region.len(), pin_limit).unwrap_or_else(|e| refuse(&e));
        // Memory calls made without the C library, on the heap.
        guard::route_memory_calls(vm::memory_call);
        // A process that ends without the C library's exit still reports.
        guard::on_exit_group(report_at_exit_group);
    }
    REGION.store(region, Ordering::Release);
    SETTINGS.store(Box::leak(Box::new(settings)), Ordering::Release);
    // SAFETY: registering handlers that live as long as the process.
    if unsafe { libc::pthread_atfork(Some(before_fork), Some(after_fork_parent), Some(after_fork_child)) } != 0 {
        refuse("pthread_atfork failed");
    }
    OWNER.store(std::process::id(), Ordering::Release);
    ccvm_runtime::on_tree_tick(snapshot);
    STATE.store(PAGED, Ordering::Release);
}

/// The process whose heap the region is: a `vfork` child shares the
/// parent's memory, and with it this value, so it never reports as the
/// parent.
static OWNER: AtomicU32 = AtomicU32::new(0);
/// Whether this process wrote its report.
static REPORTED: AtomicBool = AtomicBool::new(false);

/// `_exit`, with this process's report written first. A forked worker that
/// ends with `_exit` (CPython's `os._exit`, which `multiprocessing`'s
/// workers call) skips the destructors that would write it, and its paging
/// went unreported.
///
/// # Safety
///
/// The C library's contract for `_exit`.
#[no_mangle]
pub unsafe extern "C" fn _exit(status: libc::c_int) -> ! {
    end();
    loop {
        // SAFETY: ends the process, as `_exit` does.
        unsafe { libc::syscall(libc::SYS_exit_group, status) };
    }
}

/// `_Exit`, as [`_exit`].
///
/// # Safety
///
/// The C library's contract for `_Exit`.
#[no_mangle]
pub unsafe extern "C" fn _Exit(status: libc::c_int) -> ! {
    // SAFETY: as the caller's.
    unsafe { _exit(status) }
}

fn report_at_exit_group() {
    end();
}

extern "C" fn end() {
    if STATE.load(Ordering::Acquire) != PAGED
        || OWNER.load(Ordering::Acquire) != std::process::id()
        || REPORTED.swap(true, Ordering::AcqRel)
    {
        return;
    }
    let Some(region) = region() else {
        return;
    };
    if let Err(e) = region.finish_trace() {
        eprintln!("ccvm: {e}");
    }
    let Some((dir, report)) = report(false) else {
        return;
    };
    let path = dir.join(format!("{}.json", report.pid));
    let json = serde_json::to_vec(&report).expect("reports serialize");
    if let Err(e) = std::fs::write(&path, json) {
        eprintln!("ccvm: writing the report {}: {e}", path.display());
    }
    // The report at exit replaces the snapshots (see `snapshot`).
    let _ = std::fs::remove_file(dir.join(format!("{}.snapshot", report.pid)));
}

/// This process's report and the folder it goes to, if reports are asked
/// for and the process is paged.
fn report(snapshot: bool) -> Option<(&'static std::path::Path, ExecReport)> {
    let region = region()?;
    // SAFETY: set once, to leaked settings.
    let settings = unsafe { SETTINGS.load(Ordering::Acquire).as_ref() }?;
    let dir = settings.report_dir.as_deref()?;
    Some((
        dir,
        ExecReport {
            pid: std::process::id(),
            command: std::env::args().collect(),
            settings: settings.clone(),
            heap_peak_bytes: heap::peak() as u64,
            unpaged_bytes: heap::UNPAGED.load(Ordering::Relaxed) as u64,
            stats: region.stats(),
            unpaged_mappings: unpaged_mappings(),
            rss_anon_at_exit_bytes: rss_anon().unwrap_or(0),
            snapshot,
        },
    ))
}

/// Called by the tree's thread (see [`ccvm_runtime::on_tree_tick`]): a
/// snapshot of this process's report, written whole (to a scratch file,
/// then renamed) so that `ccvm exec` never reads half of one. A process
/// that ends without running its exit code (killed by a signal, as
/// `multiprocessing` ends its pool's workers) is reported from its last.
fn snapshot() {
    if STATE.load(Ordering::Acquire) != PAGED
        || OWNER.load(Ordering::Acquire) != std::process::id()
        || REPORTED.load(Ordering::Acquire)
    {
        return;
    }
    let Some((dir, report)) = report(true) else {
        return;
    };
    let Ok(json) = serde_json::to_vec(&report) else {
        return;
    };
    let scratch = dir.join(format!("{}.snapshot.part", report.pid));
    if std::fs::write(&scratch, json).is_ok() {
        let _ = std::fs::rename(&scratch, dir.join(format!("{}.snapshot", report.pid)));
    }
}

fn unpaged_mappings() -> ccvm_runtime::UnpagedMappings {
    let n = |i: usize| vm::UNPAGED_MAPPINGS[i].load(Ordering::Relaxed) as u64;
    ccvm_runtime::UnpagedMappings {
        reserved: n(0),
        fixed: n(1),
        stacks_and_huge: n(2),
        shared: n(3),
        other_protections: n(4),
    }
}

/// This process's `RssAnon`, bytes.
fn rss_anon() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib << 10)
}

/// What is held across a fork, from the prepare handler to the parent's or
/// the child's (the forking thread runs all three, under the heap lock).
struct Held {
    /// The pager's calls under the fork go straight to the kernel (the
    /// child, whose heap is plain memory, is not guarded).
    _allow: guard::Allow,
    heap: heap::Guard,
    mappings: MutexGuard<'static, std::collections::BTreeMap<usize, mappings::Mapping>>,
    pager: ForkGuard<'static>,
}

struct ForkCell(UnsafeCell<Option<Held>>);
// SAFETY: only the forking thread touches it, between taking and
// releasing the heap lock, which serialises forks.
unsafe impl Sync for ForkCell {}
static HELD: ForkCell = ForkCell(UnsafeCell::new(None));

extern "C" fn before_fork() {
    if STATE.load(Ordering::Acquire) != PAGED {
        return;
    }
    let Some(region) = region() else { return };
    let allow = guard::Allow::new();
    // The heap lock first: a thread holding it may be waiting on a fault,
    // which needs the pager.
    let heap = heap::lock();
    let mappings = mappings::lock();
    let pager = region.prepare_fork();
    // SAFETY: see ForkCell.
    unsafe {
        *HELD.0.get() = Some(Held {
            _allow: allow,
            heap,
            mappings,
            pager,
        })
    };
}

extern "C" fn after_fork_parent() {
    // SAFETY: see ForkCell.
    let Some(held) = (unsafe { (*HELD.0.get()).take() }) else {
        return;
    };
    held.pager.parent();
    drop(held.mappings);
    drop(held.heap);
}

extern "C" fn after_fork_child() {
    // SAFETY: see ForkCell.
    let Some(held) = (unsafe { (*HELD.0.get()).take() }) else {
        return;
    };
    OWNER.store(std::process::id(), Ordering::Release);
    if held.pager.child() != ChildPaging::Paged {
        guard::detach();
        STATE.store(DETACHED, Ordering::Release);
    }
    drop(held.mappings);
    drop(held.heap);
}
