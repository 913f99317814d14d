//! The pager's side of a shared budget (see the `tree` module): what this
//! process holds, published to its tree, and the allowance it gets back.
//!
//! # Choices
//!
//! * On the fault path the table is read every
//!   [`FAULTS_BETWEEN`](crate::tree::FAULTS_BETWEEN) faults; the budget
//!   kept at every fault is the allowance last read.
//! * Once the tree has a second member, each process runs a thread that
//!   re-reads the table every [`PERIOD`](crate::tree::PERIOD) and gives
//!   back what it holds over its allowance ([`Pager::rebalance`]), so that
//!   a process that sleeps still makes room for the others. The thread
//!   blocks every signal but the faults (SIGBUS, SIGSEGV, SIGILL, SIGFPE):
//!   a program's handler run on it while it holds the pager could fault on
//!   the region and wait on the pager forever. It may fault on the region
//!   only as it starts, before it takes the pager (the C library's thread
//!   start reads locale tables that the program's heap holds), and its
//!   allocations come from the C library, never the paged heap
//!   ([`allocating_for_ccvm`]). Its calls go straight to the kernel (it is
//!   not registered with the guard, see `crate::guard`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, Weak};

use super::observe::Event;
use super::Pager;
use crate::tree::{Tree, FAULTS_BETWEEN, PERIOD};

/// The budget a process shares with those it forked or was forked from
/// (see the `tree` module), and what it may hold of it now.
pub(super) struct Share {
    /// The tree, if the process is in one.
    pub(super) tree: Option<Tree>,
    /// What this process may hold now, bytes: the whole budget when alone.
    pub(super) allowance: u64,
    /// Faults until the tree's table is read again.
    pub(super) countdown: u32,
    /// Whether this process runs the tree's thread.
    pub(super) trimming: bool,
}

impl Share {
    /// A process alone with a budget of `ram_bytes`.
    pub(super) fn alone(ram_bytes: u64) -> Share {
        Share {
            tree: None,
            allowance: ram_bytes,
            countdown: 0,
            trimming: false,
        }
    }
}
use ccvm_codec::PAGE_SIZE;

impl Pager {
    /// Shares the RAM budget with the processes this one will fork.
    pub(crate) fn share_budget(&mut self, tree: Tree) {
        self.share.tree = Some(tree);
    }

    /// Leaves the tree: the region no longer pages, and holds nothing the
    /// others should make room for.
    pub(crate) fn leave_tree(&mut self) {
        self.share.tree = None;
    }

    /// What this process holds against the budget, bytes: resident pages,
    /// the store's memory and ccvm's own.
    pub(super) fn charge(&self) -> u64 {
        self.pages.resident as u64 * PAGE_SIZE as u64 + self.parts.store.memory_used() + self.overhead.bytes
    }

    /// Publishes the charge and reads the allowance: now, or when
    /// [`FAULTS_BETWEEN`] faults have passed.
    pub(super) fn consult_tree(&mut self, now: bool) {
        if self.share.tree.is_none() {
            return;
        }
        if !now && self.share.countdown > 0 {
            self.share.countdown -= 1;
            return;
        }
        self.share.countdown = FAULTS_BETWEEN;
        let charge = self.charge();
        let tree = self.share.tree.as_ref().expect("checked");
        let a = tree.allowance(charge);
        let floor = self.overhead.bytes + self.parts.split.reserve + crate::tree::PROCESS_FLOOR;
        self.share.allowance = a.bytes.max(floor).min(self.parts.split.ram_bytes);
        if a.processes > 1 {
            let (peak_bytes, processes) = tree.peaks();
            self.observers.observe(Event::Tree {
                processes,
                peak_bytes,
                allowance: self.share.allowance,
            });
        }
    }

    /// Before a fork: holds a slot in the tree for the child, charged what
    /// it will inherit.
    pub(crate) fn hold_for_child(&mut self) {
        let charge = self.charge();
        if let Some(tree) = &mut self.share.tree {
            tree.hold_for_child(charge);
        }
    }

    /// The tree's thread: frees the slots of processes gone, re-reads the
    /// allowance and gives back what is held over it. Returns false once
    /// this process has left the tree (the thread then ends).
    pub(crate) fn rebalance(&mut self) -> bool {
        let Some(tree) = &mut self.share.tree else {
            return false;
        };
        tree.reap();
        self.collect_finished();
        self.run_actions();
        self.consult_tree(true);
        self.keep_within_ram();
        self.consult_tree(true);
        true
    }

    /// After a fork, in the parent or in a child that is paged: the child
    /// takes a slot of its own, and both give back what they hold over
    /// their new shares. Returns whether the caller should start the
    /// tree's thread ([`start_trimmer`], once the pager is released).
    pub(crate) fn join_tree_after_fork(&mut self, child: bool) -> bool {
        let Some(tree) = &mut self.share.tree else {
            return false;
        };
        if child {
            tree.join_after_fork();
            // The parent's thread is not the child's.
            self.share.trimming = false;
            self.observers.statistics.forget_allowance();
        } else {
            tree.forked();
        }
        // Both give back what they hold over their new share before the
        // program goes on: the child holds all the parent held, and pages
        // it or the parent write from here on are copied (see `tree`).
        self.consult_tree(true);
        self.keep_within_ram();
        self.consult_tree(true);
        !std::mem::replace(&mut self.share.trimming, true)
    }

    /// The tree's thread could not be started.
    pub(crate) fn no_trimmer(&mut self) {
        self.share.trimming = false;
    }
}

/// The tree thread's stack. Its own mapping, made straight by the kernel:
/// a stack from the C library would be an anonymous mapping that `ccvm
/// exec` places in the paged region, and the thread would fault on its
/// own stack while it holds the pager.
const STACK: usize = 256 << 10;

/// Threads being started by [`spawn_trimmer`] in this process.
static SPAWNING: AtomicUsize = AtomicUsize::new(0);
/// The tree thread's stack in this process, `[low, high)`.
static STACK_LOW: AtomicUsize = AtomicUsize::new(0);
static STACK_HIGH: AtomicUsize = AtomicUsize::new(0);

/// Whether an allocation made now is for ccvm: made while ccvm's thread
/// is started (the C library allocates its thread-local tables then), on
/// that thread's stack, or on a thread that holds the pager (see
/// `super::lock`). `ccvm exec`'s `malloc` then takes the C library's
/// memory, not the paged heap: a thread that holds the pager must never
/// fault on the region, since serving the fault needs the pager.
pub fn allocating_for_ccvm() -> bool {
    if SPAWNING.load(Ordering::Acquire) > 0 || super::lock::held_here() {
        return true;
    }
    let here = &() as *const () as usize;
    here >= STACK_LOW.load(Ordering::Relaxed) && here < STACK_HIGH.load(Ordering::Relaxed)
}

/// Starts the tree's thread for `pager`, with every signal but the faults
/// blocked, on a stack of its own; whether it started. The stack is not
/// given back if the thread ends (when the region stops paging). Call it
/// without holding the pager: the C library starts a thread with every
/// signal blocked and reads the locale's tables, which the program's heap
/// may hold, before it unblocks any, so a fault there would end the
/// process; they are read here first, where a fault is served.
pub(crate) fn start_trimmer(pager: Weak<Mutex<Pager>>) -> bool {
    crate::guard::touch_locale();
    extern "C" fn start(arg: *mut libc::c_void) -> *mut libc::c_void {
        // SAFETY: the box made below, given to this thread alone.
        let pager = unsafe { Box::from_raw(arg.cast::<Weak<Mutex<Pager>>>()) };
        trim(*pager);
        std::ptr::null_mut()
    }
    let _allow = crate::guard::Allow::new();
    let Some(stack) = ccvm_store::chunks::map_anonymous(STACK, libc::MAP_PRIVATE | libc::MAP_STACK) else {
        return false;
    };
    SPAWNING.fetch_add(1, Ordering::AcqRel);
    STACK_LOW.store(stack as usize, Ordering::Relaxed);
    STACK_HIGH.store(stack as usize + STACK, Ordering::Relaxed);
    let arg = Box::into_raw(Box::new(pager));
    // SAFETY: plain data filled by the C library; the stack is ours and
    // outlives the thread; the mask is this thread's, put back below, so
    // that the new thread inherits the full one.
    let created = unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::pthread_attr_init(&mut attr);
        libc::pthread_attr_setstack(&mut attr, stack, STACK);
        libc::pthread_attr_setdetachstate(&mut attr, libc::PTHREAD_CREATE_DETACHED);
        libc::sigfillset(&mut all);
        // A fault is not a signal the program sends: the C library's
        // thread start reads locale tables the program's heap holds.
        for sig in [libc::SIGBUS, libc::SIGSEGV, libc::SIGILL, libc::SIGFPE] {
            libc::sigdelset(&mut all, sig);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let mut thread: libc::pthread_t = 0;
        let rc = libc::pthread_create(&mut thread, &attr, start, arg.cast());
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        libc::pthread_attr_destroy(&mut attr);
        rc == 0
    };
    SPAWNING.fetch_sub(1, Ordering::AcqRel);
    if !created {
        // SAFETY: the box and mapping made above, which no thread got.
        unsafe {
            drop(Box::from_raw(arg));
            libc::munmap(stack, STACK);
        }
    }
    created
}

/// What the tree's thread calls every [`SNAPSHOT_PERIOD`], a `fn()` as a
/// `usize` (0: nothing).
static TICK: AtomicUsize = AtomicUsize::new(0);

/// How often the tree's thread calls the function given to
/// [`on_tree_tick`].
pub const SNAPSHOT_PERIOD: std::time::Duration = std::time::Duration::from_millis(500);

/// Has the tree's thread of this process (and of every process forked
/// from it) call `tick` every [`SNAPSHOT_PERIOD`], without the pager held.
/// `ccvm exec` writes a snapshot of the process's report there, so that a
/// process killed by a signal, which runs no code at its end, is still
/// reported. `tick` runs on ccvm's thread: what it allocates comes from
/// the C library, and it must not touch the paged heap.
pub fn on_tree_tick(tick: fn()) {
    TICK.store(tick as usize, Ordering::Release);
}

fn trim(pager: Weak<Mutex<Pager>>) {
    let every = (SNAPSHOT_PERIOD.as_nanos() / PERIOD.as_nanos()).max(1) as u64;
    let mut periods = 0u64;
    loop {
        std::thread::sleep(PERIOD);
        let Some(pager) = pager.upgrade() else {
            return;
        };
        let _allow = crate::guard::Allow::new();
        {
            let mut p = super::lock(&pager);
            if !p.rebalance() {
                return;
            }
        }
        periods += 1;
        let tick = TICK.load(Ordering::Acquire);
        if tick != 0 && periods.is_multiple_of(every) {
            // SAFETY: stored by `on_tree_tick` from a `fn()`.
            let tick: fn() = unsafe { std::mem::transmute::<usize, fn()>(tick) };
            tick();
        }
    }
}
