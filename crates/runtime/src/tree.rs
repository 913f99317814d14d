//! One RAM budget for a process tree: a paged process and the children it
//! forks (and theirs) share `--ram`, as a memory cgroup would hold them.
//!
//! # Choices
//!
//! * A table in one page of shared anonymous memory, made with the first
//!   region and inherited by every `fork`: a slot per live process with
//!   its pid and its charge (resident pages, the store's memory and ccvm's
//!   own, as the pager keeps within its budget). Each process publishes
//!   its charge and reads the others'; no process waits on another.
//! * The division is max-min fair: a process may hold what the others
//!   leave of the budget, and never less than an equal share. So a lone
//!   process keeps the whole budget, as before children were paged; a
//!   child that needs little leaves the rest to its parent; and when all
//!   want more than the budget, each holds `--ram / n`. A process over its
//!   share while the tree is over the budget gives back down to it.
//! * A process that sleeps (a parent waiting on its workers) takes no
//!   fault, so its pager would never run: every process of a tree with
//!   more than one member runs a small thread that re-reads the table
//!   every [`PERIOD`] and gives back what it holds over its allowance.
//!   Busy processes also re-read it every [`FAULTS_BETWEEN`] faults.
//! * A page two processes map after a fork is one page of memory until
//!   either writes it, but each counts it: the tree is held to the budget
//!   as counted, which can only be more than the kernel counts. (The
//!   kernel charges a shared page once, and the pager cannot see a
//!   copy-on-write break, since the page stays resident in both.)
//! * A process that ends without leaving (`_exit`, a kill) keeps its slot
//!   until a member finds its pid gone; a zombie keeps it until reaped.
//!   Between two reads of the table, processes that grow together may
//!   pass the budget by what they fault in meanwhile.
//! * Each member holds at least its own tables, the store's reserve and
//!   [`PROCESS_FLOOR`], whatever its share: with a fifth of 4 MiB, less
//!   than ccvm's own tables, every fault evicted everything resident and
//!   five processes thrashed for minutes. A tree of many processes in a
//!   tiny budget passes it by that much.
//! * [`SLOTS`] processes at most take part; a process forked past that is
//!   paged within an equal share of the budget among that many.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// Processes the table has room for (one 4 KiB page).
pub(crate) const SLOTS: usize = 254;

/// How often a member of a tree re-reads the table in its own thread.
pub(crate) const PERIOD: Duration = Duration::from_millis(20);

/// The least a member holds beyond its own tables and the store's
/// reserve, whatever its share: below about this, each fault evicts what
/// the last one mapped.
pub(crate) const PROCESS_FLOOR: u64 = 1 << 20;

/// Faults between two reads of the table on the fault path.
pub(crate) const FAULTS_BETWEEN: u32 = 64;

#[repr(C)]
struct Slot {
    /// 0 when free; minus the parent's pid while held for a child about to
    /// be forked.
    pid: AtomicI32,
    /// For a slot held for a child: the parent's reap count when it was
    /// taken (see [`Tree::reap`]).
    held_at: AtomicU32,
    charge: AtomicU64,
}

#[repr(C)]
struct Table {
    /// Most charged by the whole tree at once, as read by its members.
    peak: AtomicU64,
    /// Most processes in the tree at once.
    most: AtomicU64,
    /// The budget, bytes.
    budget: AtomicU64,
    _reserved: AtomicU64,
    slots: [Slot; SLOTS],
}

const _: () = assert!(std::mem::size_of::<Table>() <= 4096);

/// This process's place in its tree's table.
pub(crate) struct Tree {
    table: NonNull<Table>,
    /// Our slot; `None` past [`SLOTS`] processes.
    slot: Option<usize>,
    pid: i32,
    /// The slot held for the child about to be forked.
    for_child: Option<usize>,
    /// Calls of [`Tree::reap`] so far.
    reaps: u32,
}

// SAFETY: the table is shared memory of atomics only.
unsafe impl Send for Tree {}

/// What a process may hold now, and how it was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Allowance {
    /// Bytes this process may hold.
    pub bytes: u64,
    /// Live processes in the tree, this one included.
    pub processes: u64,
}

/// Max-min fair division of `budget` among `processes`: what the others'
/// `others` charges leave, and at least an equal share.
pub(crate) fn divide(budget: u64, processes: u64, others: u64) -> u64 {
    (budget / processes.max(1)).max(budget.saturating_sub(others))
}

/// Whether process `pid` still exists.
fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 || *libc::__errno_location() != libc::ESRCH }
}

fn own_pid() -> i32 {
    // SAFETY: no arguments, cannot fail.
    unsafe { libc::getpid() }
}

impl Tree {
    /// A new tree of this process alone, sharing `budget` bytes; `None` if
    /// the table cannot be mapped.
    pub fn new(budget: u64) -> Option<Tree> {
        let base = ccvm_store::chunks::map_anonymous(4096, libc::MAP_SHARED)?;
        let table = NonNull::new(base.cast::<Table>())?;
        let mut tree = Tree {
            table,
            slot: None,
            pid: own_pid(),
            for_child: None,
            reaps: 0,
        };
        tree.table().budget.store(budget, Ordering::Relaxed);
        tree.join();
        Some(tree)
    }

    fn table(&self) -> &Table {
        // SAFETY: a page of shared memory mapped for the process's life
        // (never unmapped: children forked later hold it too), all atomics.
        unsafe { self.table.as_ref() }
    }

    /// The tree's budget, bytes.
    pub fn budget(&self) -> u64 {
        self.table().budget.load(Ordering::Relaxed)
    }

    /// Takes a free slot (or one whose process is gone) for this process.
    fn join(&mut self) {
        self.pid = own_pid();
        self.slot = None;
        for (i, s) in self.table().slots.iter().enumerate() {
            let pid = s.pid.load(Ordering::Acquire);
            if (pid == 0 || (pid != self.pid && !alive(pid)))
                && s.pid
                    .compare_exchange(pid, self.pid, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                s.charge.store(0, Ordering::Release);
                self.slot = Some(i);
                break;
            }
        }
        let n = self.members().0;
        self.table().most.fetch_max(n, Ordering::Relaxed);
    }

    /// Before a fork: holds a slot for the child, charged `charge` (what
    /// it inherits), so that the parent's share after the fork already
    /// counts the child.
    pub fn hold_for_child(&mut self, charge: u64) {
        self.for_child = None;
        let marker = -self.pid;
        for (i, s) in self.table().slots.iter().enumerate() {
            if s.pid
                .compare_exchange(0, marker, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                s.held_at.store(self.reaps, Ordering::Relaxed);
                s.charge.store(charge, Ordering::Release);
                self.for_child = Some(i);
                return;
            }
        }
    }

    /// In a forked child: takes the slot its parent held for it, or, if
    /// the parent has given it up meanwhile, another one.
    pub fn join_after_fork(&mut self) {
        let parent = self.pid;
        self.pid = own_pid();
        if let Some(i) = self.for_child.take() {
            let s = &self.table().slots[i];
            if s.pid
                .compare_exchange(-parent, self.pid, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                self.slot = Some(i);
                return;
            }
        }
        self.join();
    }

    /// In the parent after a fork: the held slot is the child's now.
    pub fn forked(&mut self) {
        self.for_child = None;
    }

    /// Live members and the sum of the others' charges.
    fn members(&self) -> (u64, u64) {
        let (mut n, mut others) = (0, 0);
        for (i, s) in self.table().slots.iter().enumerate() {
            if s.pid.load(Ordering::Acquire) == 0 {
                continue;
            }
            n += 1;
            if Some(i) != self.slot {
                others += s.charge.load(Ordering::Acquire);
            }
        }
        if self.slot.is_none() {
            n += 1;
        }
        (n, others)
    }

    /// Frees the slots of processes that are gone, and those this process
    /// held for a child two reaps ago or more that the child never took (a
    /// fork that failed, a child that ran unpaged).
    pub fn reap(&mut self) {
        self.reaps = self.reaps.wrapping_add(1);
        for s in &self.table().slots {
            let pid = s.pid.load(Ordering::Acquire);
            let gone = match pid {
                0 => false,
                p if p == -self.pid => self.reaps.wrapping_sub(s.held_at.load(Ordering::Relaxed)) >= 2,
                p if p < 0 => !alive(-p),
                p => p != self.pid && !alive(p),
            };
            if gone {
                let _ = s.pid.compare_exchange(pid, 0, Ordering::AcqRel, Ordering::Acquire);
            }
        }
    }

    /// Publishes this process's `charge` (bytes) and returns what it may
    /// hold (see the module docs).
    pub fn allowance(&self, charge: u64) -> Allowance {
        if let Some(i) = self.slot {
            self.table().slots[i].charge.store(charge, Ordering::Release);
        }
        let (n, others) = self.members();
        let t = self.table();
        t.peak.fetch_max(charge + others, Ordering::Relaxed);
        t.most.fetch_max(n, Ordering::Relaxed);
        let processes = if self.slot.is_none() { SLOTS as u64 } else { n };
        Allowance {
            bytes: divide(self.budget(), processes, others),
            processes: n,
        }
    }

    /// The most the tree charged at once, bytes, and the most processes it
    /// had at once, as read by its members so far.
    pub fn peaks(&self) -> (u64, u64) {
        let t = self.table();
        (t.peak.load(Ordering::Relaxed), t.most.load(Ordering::Relaxed))
    }

    /// Leaves the tree: the slot is free and charges nothing.
    pub fn leave(&mut self) {
        // A forked child's copy that never joined holds its parent's slot.
        if own_pid() != self.pid {
            return;
        }
        if let Some(i) = self.slot.take() {
            let s = &self.table().slots[i];
            s.charge.store(0, Ordering::Release);
            let _ = s.pid.compare_exchange(self.pid, 0, Ordering::AcqRel, Ordering::Acquire);
        }
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        self.leave();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_process_keeps_the_whole_budget() {
        assert_eq!(divide(100, 1, 0), 100);
        let tree = Tree::new(100 << 20).unwrap();
        let a = tree.allowance(150 << 20);
        assert_eq!(
            a,
            Allowance {
                bytes: 100 << 20,
                processes: 1
            }
        );
    }

    #[test]
    fn the_division_is_max_min_fair() {
        // What the others leave, when they hold less than their share.
        assert_eq!(divide(100, 2, 30), 70);
        // An equal share, when they hold more.
        assert_eq!(divide(100, 2, 70), 50);
        assert_eq!(divide(100, 5, 400), 20);
        // Two processes that both follow their allowance settle at halves.
        let (mut a, mut b) = (90u64, 90u64);
        for _ in 0..4 {
            a = a.min(divide(100, 2, b));
            b = b.min(divide(100, 2, a));
        }
        assert_eq!((a, b), (50, 50));
    }

    #[test]
    fn a_forked_child_takes_a_slot_of_its_own_and_leaves_it_at_exit() {
        let mut tree = Tree::new(64 << 20).unwrap();
        tree.allowance(48 << 20);
        tree.hold_for_child(48 << 20);
        // Counted before the fork: the parent's share already halves.
        assert_eq!(
            tree.allowance(48 << 20),
            Allowance {
                bytes: 32 << 20,
                processes: 2
            }
        );
        // SAFETY: the child only touches the shared table and exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            tree.join_after_fork();
            let a = tree.allowance(40 << 20);
            // The parent holds 48 MiB: the child gets its equal share.
            let code = if a
                == (Allowance {
                    bytes: 32 << 20,
                    processes: 2,
                }) {
                0
            } else {
                1
            };
            // SAFETY: ends the forked child without running the test harness's exit.
            unsafe { libc::_exit(code) };
        }
        tree.forked();
        let mut status = 0;
        // SAFETY: waits for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert_eq!(libc::WEXITSTATUS(status), 0, "the child's allowance");
        // The child is gone: its charge no longer counts once reaped.
        tree.reap();
        assert_eq!(tree.allowance(48 << 20).bytes, 64 << 20);
        assert_eq!(tree.peaks(), (96 << 20, 2));
        tree.leave();
    }

    #[test]
    fn a_slot_held_for_a_child_that_never_came_is_given_up() {
        let mut tree = Tree::new(64 << 20).unwrap();
        tree.hold_for_child(48 << 20);
        tree.forked();
        assert_eq!(tree.allowance(16 << 20).processes, 2);
        tree.reap();
        assert_eq!(tree.allowance(16 << 20).processes, 2);
        tree.reap();
        assert_eq!(
            tree.allowance(16 << 20),
            Allowance {
                bytes: 64 << 20,
                processes: 1
            }
        );
    }
}
