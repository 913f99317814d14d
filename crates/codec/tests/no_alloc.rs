//! No codec allocates on the heap per call: a counting allocator watches
//! every compress and decompress of real pages (codecs are made first, so
//! their one-time working memory is not counted).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use ccvm_codec::{CODECS, PAGE_SIZE};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's layout, passed on as GlobalAlloc requires.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above, that is from System.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: `ptr` came from System, as for `dealloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn compress_and_decompress_do_not_allocate() {
    let files = ccvm_corpus::load_dir(ccvm_corpus::default_dir()).unwrap();
    let pages: Vec<&[u8]> = files.iter().flat_map(|f| f.pages().step_by(50)).collect();
    let mut packed = vec![0u8; 2 * PAGE_SIZE];
    let mut back = vec![0u8; PAGE_SIZE];
    for info in CODECS {
        let mut codec = (info.make)();
        // One warm-up round trip: libraries may set up lazily on first use.
        if let Ok(n) = codec.compress(pages[0], &mut packed) {
            codec.decompress(&packed[..n], &mut back).unwrap();
        }
        let before = ALLOCATIONS.with(Cell::get);
        for page in &pages {
            if let Ok(n) = codec.compress(page, &mut packed) {
                codec.decompress(&packed[..n], &mut back).unwrap();
            }
            let _ = codec.decompress(&packed[..17], &mut back);
        }
        let allocations = ALLOCATIONS.with(Cell::get) - before;
        assert_eq!(
            allocations,
            0,
            "{} allocated {allocations} times in {} round trips",
            info.name,
            pages.len()
        );
    }
}
