//! Every allocator against a plain model: one flag per byte of every chunk
//! held, under long random sequences of allocations, frees and chunk
//! returns.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::{Slot, SlotAllocator, ALLOCATORS};

#[derive(Debug, Clone)]
enum Op {
    Alloc(usize),
    Free(usize),
    ReturnEmpty,
}

fn ops(chunk: usize) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        // Compressed-page-like sizes, and anything up to a whole chunk.
        6 => (1usize..=chunk / 3).prop_map(Op::Alloc),
        1 => (1usize..=chunk).prop_map(Op::Alloc),
        5 => any::<usize>().prop_map(Op::Free),
        1 => Just(Op::ReturnEmpty),
    ];
    prop::collection::vec(op, 1..800)
}

/// Longest run of free bytes in any chunk of the model.
fn largest_gap(held: &BTreeMap<u32, Vec<bool>>) -> usize {
    held.values()
        .map(|bytes| bytes.split(|&used| used).map(|run| run.len()).max().unwrap_or(0))
        .max()
        .unwrap_or(0)
}

/// The smallest run of free bytes of at least `fp` bytes in any chunk.
fn smallest_gap_fitting(held: &BTreeMap<u32, Vec<bool>>, fp: usize) -> Option<usize> {
    held.values()
        .flat_map(|bytes| bytes.split(|&used| used).map(|run| run.len()))
        .filter(|&run| run >= fp)
        .min()
}

/// The run of free bytes that starts at `slot`'s offset.
fn gap_at(held: &BTreeMap<u32, Vec<bool>>, slot: Slot) -> usize {
    let bytes = &held[&slot.chunk][slot.offset as usize..];
    bytes.iter().position(|&used| used).unwrap_or(bytes.len())
}

fn mark(held: &mut BTreeMap<u32, Vec<bool>>, slot: Slot, footprint: usize, used: bool) {
    let bytes = held.get_mut(&slot.chunk).expect("slot in a chunk the model holds");
    let range = slot.offset as usize..slot.offset as usize + footprint;
    assert!(range.end <= bytes.len(), "{slot:?} runs past its chunk");
    for b in &mut bytes[range] {
        assert_ne!(*b, used, "{slot:?} overlaps another slot, or frees free bytes");
        *b = used;
    }
}

fn check(mut a: Box<dyn SlotAllocator>, ops: &[Op]) {
    let chunk = a.chunk_size();
    let mut held: BTreeMap<u32, Vec<bool>> = BTreeMap::new();
    let mut live: Vec<Slot> = Vec::new();
    let mut next_chunk = 0u32;
    for op in ops {
        match *op {
            Op::Alloc(len) => {
                let fp = a.footprint(len);
                assert!(fp >= len && fp <= chunk);
                // Best fit is checked where the byte model is small enough
                // to scan on every placement (the 4 KiB property test).
                let best_fit = a.name() == "rm-best" && chunk <= 4096;
                let best = best_fit.then(|| smallest_gap_fitting(&held, fp)).flatten();
                let slot = match a.alloc(len) {
                    Some(s) => {
                        if best_fit {
                            // Best fit: no free run that holds the slot is
                            // smaller than the one it took.
                            assert_eq!(Some(gap_at(&held, s)), best, "rm-best placed {len} bytes at {s:?}");
                        }
                        s
                    }
                    None => {
                        if a.name().starts_with("rm") {
                            // First fit refuses only when no gap is big enough.
                            assert!(largest_gap(&held) < fp, "rm refused {len} bytes with room left");
                        }
                        a.add_chunk(next_chunk);
                        held.insert(next_chunk, vec![false; chunk]);
                        next_chunk += 1;
                        a.alloc(len).expect("a fresh chunk holds any slot")
                    }
                };
                assert_eq!(slot.len as usize, len);
                assert_eq!(slot.offset % 8, 0, "slots are 8-byte aligned");
                mark(&mut held, slot, fp, true);
                live.push(slot);
            }
            Op::Free(i) if !live.is_empty() => {
                let slot = live.swap_remove(i % live.len());
                a.free(slot);
                mark(&mut held, slot, a.footprint(slot.len as usize), false);
            }
            Op::Free(_) => {}
            Op::ReturnEmpty => {
                while let Some(c) = a.pop_empty_chunk() {
                    let bytes = held.remove(&c).expect("returned chunk was held");
                    assert!(bytes.iter().all(|&u| !u), "chunk {c} returned with slots in use");
                }
            }
        }
    }
    for slot in live.drain(..) {
        a.free(slot);
        mark(&mut held, slot, a.footprint(slot.len as usize), false);
    }
    while let Some(c) = a.pop_empty_chunk() {
        held.remove(&c).expect("returned chunk was held");
    }
    assert!(
        held.is_empty(),
        "chunks {:?} not returned after every slot was freed",
        held.keys()
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn allocators_agree_with_the_byte_model(ops in ops(4096)) {
        for info in ALLOCATORS {
            check((info.make)(4096), &ops);
        }
    }
}

#[test]
fn long_random_churn_with_64k_chunks() {
    // A deterministic long run at the default chunk size.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as usize
    };
    let ops: Vec<Op> = (0..20_000)
        .map(|_| match rnd() % 13 {
            0..=5 => Op::Alloc(1 + rnd() % 3500),
            // Now and then a slot of several pages, up to most of a chunk.
            6 => Op::Alloc(1 + rnd() % 40_000),
            7..=11 => Op::Free(rnd()),
            _ => Op::ReturnEmpty,
        })
        .collect();
    for info in ALLOCATORS {
        check((info.make)(65536), &ops);
    }
}
