//! What the default policy holds a page, counted by the allocator: its
//! tables are charged to the RAM budget they size, so every byte here is
//! a byte less for the program's pages.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use ccvm_policy::{Action, Budget, Costs, Level, Params};

struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator, counting what it holds.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HELD.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: as the caller's contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: as the caller's contract.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        HELD.fetch_add(new_size, Ordering::Relaxed);
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: as the caller's contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Bytes a page `policy` holds after `pages` pages, in memory for 13 of
/// every 16, are touched at random 20 times each on a mechanism that sees
/// only faults, every page compressing to 2,000 bytes.
fn bytes_a_page(policy: &str, pages: u64) -> f64 {
    let budget = Budget {
        ram_bytes: pages * 4096 * 13 / 16,
        page_size: 4096,
    };
    let params = Params {
        uncompressed_share: 0.5,
        costs: Costs {
            disk_ns: 150e3,
            codec_ns: 20e3,
            compress_share: 0.5,
        },
    };
    let mut level = vec![Level::New; pages as usize];
    let before = HELD.load(Ordering::Relaxed);
    let mut p = ccvm_policy::by_name(policy, budget, params).unwrap();
    p.faults_only();
    let mut actions = Vec::new();
    let mut x: u64 = 12_345;
    for _ in 0..pages * 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let page = x % pages;
        if level[page as usize] == Level::Uncompressed {
            continue;
        }
        p.touch(page, level[page as usize], &mut actions);
        level[page as usize] = Level::Uncompressed;
        while let Some(a) = actions.pop() {
            match a {
                Action::Compress(q) => {
                    level[q as usize] = Level::Compressed;
                    p.compressed(q, 2000, &mut actions);
                }
                Action::SwapOut(q) | Action::Spill(q) => level[q as usize] = Level::Disk,
                Action::Watch(_) => {}
            }
        }
    }
    let held = HELD.load(Ordering::Relaxed) - before;
    held as f64 / pages as f64
}

#[test]
fn the_default_policy_holds_a_few_dozen_bytes_a_page() {
    for pages in [16_384, 65_536] {
        let b = bytes_a_page(ccvm_policy::DEFAULT_POLICY, pages);
        let none = bytes_a_page("none", pages);
        println!(
            "{pages} pages: {} {b:.1} bytes a page, none {none:.1}",
            ccvm_policy::DEFAULT_POLICY
        );
        assert!(b < 64.0, "{b} bytes a page");
        assert!(none < 32.0, "{none} bytes a page");
    }
}
