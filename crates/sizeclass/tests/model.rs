//! `SizeClasses` against a plain model: every live object keeps its
//! bytes, lies in the range, aligned, apart from every other, and the
//! slabs are reused once their objects are freed.

use std::collections::BTreeMap;

use ccvm_sizeclass::{SizeClasses, GRAIN, KEEP_EMPTY, MAX_SMALL, SLAB_BYTES};
use proptest::prelude::*;

/// An allocator over a buffer of its own.
struct Fixture {
    area: Vec<u128>,
    small: SizeClasses,
}

impl Fixture {
    fn new(slabs: usize) -> Fixture {
        let mut area = vec![0u128; slabs * SLAB_BYTES / 16];
        // SAFETY: the buffer lives in the fixture beside the allocator and
        // is used by nothing else.
        let small = unsafe { SizeClasses::new(area.as_mut_ptr().cast(), slabs * SLAB_BYTES) };
        Fixture { area, small }
    }

    fn range(&self) -> (usize, usize) {
        let start = self.area.as_ptr() as usize;
        (start, start + self.area.len() * 16)
    }
}

#[derive(Debug, Clone)]
enum Op {
    Alloc(usize),
    Free(usize),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        3 => (1..=MAX_SMALL).prop_map(Op::Alloc),
        1 => (1..=64usize).prop_map(Op::Alloc),
        3 => any::<usize>().prop_map(Op::Free),
    ];
    prop::collection::vec(op, 1..3000)
}

/// Fills an object with a tag derived from its number.
fn fill(p: *mut u8, len: usize, tag: u64) {
    for i in 0..len {
        // SAFETY: inside an object of at least `len` bytes.
        unsafe { p.add(i).write((tag as u8).wrapping_add(i as u8)) };
    }
}

fn intact(p: *const u8, len: usize, tag: u64) -> bool {
    // SAFETY: inside a live object of at least `len` bytes.
    (0..len).all(|i| unsafe { p.add(i).read() } == (tag as u8).wrapping_add(i as u8))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn matches_a_model(ops in ops()) {
        let mut f = Fixture::new(KEEP_EMPTY + 6);
        let slabs = KEEP_EMPTY + 6;
        let (lo, hi) = f.range();
        // start -> (size asked, object size, tag)
        let mut live: BTreeMap<usize, (usize, usize, u64)> = BTreeMap::new();
        for (n, op) in ops.iter().enumerate() {
            match *op {
                Op::Alloc(size) => {
                    let Some(p) = f.small.alloc(size) else {
                        // Full: every slab is in use.
                        prop_assert!(f.small.carved_bytes() == slabs * SLAB_BYTES);
                        continue;
                    };
                    let at = p as usize;
                    let object = f.small.usable_size(p).expect("a live object");
                    prop_assert!(object >= size && object < size + GRAIN);
                    prop_assert_eq!(at % GRAIN, 0);
                    prop_assert!(at >= lo && at + object <= hi);
                    if let Some((&before, &(_, len, _))) = live.range(..at).next_back() {
                        prop_assert!(before + len <= at, "overlaps the object before");
                    }
                    if let Some((&after, _)) = live.range(at..).next() {
                        prop_assert!(at + object <= after, "overlaps the object after");
                    }
                    fill(p, object, n as u64);
                    live.insert(at, (size, object, n as u64));
                }
                Op::Free(pick) => {
                    if live.is_empty() {
                        continue;
                    }
                    let at = *live.keys().nth(pick % live.len()).unwrap();
                    let (_, object, tag) = live.remove(&at).unwrap();
                    prop_assert!(intact(at as *const u8, object, tag));
                    // SAFETY: live, handed out by `small`, not used again.
                    let freed = unsafe { f.small.free(at as *mut u8) }.expect("a live object");
                    prop_assert_eq!(freed.object, object);
                    if let Some((start, len)) = freed.released {
                        // Dropped, as the paged heap drops it: no live
                        // object may lie there.
                        prop_assert_eq!(len, SLAB_BYTES);
                        let (a, b) = (start as usize, start as usize + len);
                        prop_assert!(a >= lo && b <= hi);
                        prop_assert!(live.range(a.saturating_sub(MAX_SMALL)..b).all(|(&o, v)| o + v.1 <= a || o >= b));
                        // SAFETY: inside the fixture's buffer, holding no live object.
                        unsafe { start.write_bytes(0xa5, len) };
                    }
                }
            }
            prop_assert_eq!(f.small.in_use(), live.values().map(|v| v.1).sum::<usize>());
        }
        for (&at, &(_, object, tag)) in &live {
            prop_assert!(intact(at as *const u8, object, tag));
        }
    }
}

#[test]
fn freed_slabs_serve_other_classes() {
    let mut f = Fixture::new(2);
    let mut first = Vec::new();
    while let Some(p) = f.small.alloc(16) {
        first.push(p);
    }
    assert_eq!(first.len(), 2 * SLAB_BYTES / 16);
    assert!(f.small.alloc(500).is_none(), "no slab left");
    for p in first {
        // SAFETY: each handed out once, not used again.
        assert_eq!(unsafe { f.small.free(p) }.map(|f| f.object), Some(16));
    }
    assert_eq!(f.small.in_use(), 0);
    let big = f.small.alloc(500).expect("an emptied slab is reused by any class");
    assert_eq!(f.small.usable_size(big), Some(512));
    assert_eq!(f.small.carved_bytes(), 2 * SLAB_BYTES);
}

#[test]
fn refuses_what_it_did_not_hand_out() {
    let mut f = Fixture::new(1);
    assert!(f.small.alloc(MAX_SMALL + 1).is_none());
    let p = f.small.alloc(40).unwrap();
    // SAFETY: `free` checks these before touching anything.
    unsafe {
        assert!(f.small.free(p.add(16)).is_none(), "inside an object");
        assert!(f.small.free(p.add(48 * 3)).is_none(), "never carved");
        assert!(f.small.free(std::ptr::null_mut()).is_none(), "outside the range");
    }
    assert_eq!(f.small.usable_size(p), Some(48));
}

/// Past the kept empty slabs, an emptied slab is released, and reused
/// (zeroed, as the heap drops it) after the kept ones.
#[test]
fn slabs_past_the_kept_ones_are_released_and_reused() {
    let slabs = KEEP_EMPTY + 3;
    let mut f = Fixture::new(slabs);
    let per = SLAB_BYTES / 512;
    let all: Vec<*mut u8> = (0..slabs * per).map(|_| f.small.alloc(512).unwrap()).collect();
    let mut released = Vec::new();
    for &p in &all {
        // SAFETY: each handed out once, not used again.
        if let Some(range) = unsafe { f.small.free(p) }.unwrap().released {
            released.push(range);
        }
    }
    assert_eq!(released.len(), 3, "all but the kept slabs are released");
    for &(start, len) in &released {
        // SAFETY: a released slab of the fixture's buffer.
        unsafe { start.write_bytes(0, len) };
    }
    // The kept slabs first, then the released ones.
    let again: Vec<*mut u8> = (0..slabs * per).map(|_| f.small.alloc(500).unwrap()).collect();
    let in_released = |p: *mut u8| released.iter().any(|&(s, l)| p >= s && (p as usize) < s as usize + l);
    assert!(again[..KEEP_EMPTY * per].iter().all(|&p| !in_released(p)));
    assert!(again[KEEP_EMPTY * per..].iter().all(|&p| in_released(p)));
    assert!(f.small.alloc(500).is_none(), "every slab in use again");
}
