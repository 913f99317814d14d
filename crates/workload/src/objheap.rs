//! A garbage-collected object heap: 64-byte objects with six pointer
//! fields and payload, allocated from a free list or by bumping, linked
//! mostly to recent objects, mutated at random, then marked from a root
//! set with an explicit stack and swept onto the free list, cycle after
//! cycle, as a mark-sweep collector does.

use rand_core::Rng;

use crate::{mix, rng, Arena};

/// Object: [mark cycle, state, six pointers (index + 1, 0 = none),
/// eight payload words]. State: 1 live, 2 free (pointer 0 links the free
/// list).
type Object = [u32; 16];
const LIVE: u32 = 1;
const FREE: u32 = 2;
const ROOTS: usize = 256;
const CYCLES: u32 = 4;

pub fn run(memory: &mut [u8], seed: u64) -> u64 {
    let m = memory.len() / (64 + 4 + 4);
    let mut arena = Arena::new(memory);
    let heap: &mut [Object] = arena.take(m);
    let stack: &mut [u32] = arena.take(m);
    let allocated: &mut [u32] = arena.take(m);
    let mut r = rng(seed);
    let mut roots = [0u32; ROOTS];
    let (mut bump, mut free_list, mut count) = (0usize, 0u32, 0usize);
    let mut sum = m as u64;
    for cycle in 1..=CYCLES {
        // Allocate half the heap's worth of objects.
        for _ in 0..m / 2 {
            let obj = if free_list != 0 {
                let o = free_list as usize - 1;
                free_list = heap[o][2];
                o
            } else if bump < m {
                bump += 1;
                allocated[bump - 1] = (bump - 1) as u32;
                count = bump;
                bump - 1
            } else {
                break;
            };
            let mut fields = [0u32; 6];
            for f in fields.iter_mut() {
                let x = r.next_u64();
                // Mostly links to recent objects; some to anywhere.
                let target = if x & 3 != 0 {
                    obj.saturating_sub((x >> 2) as usize % 64)
                } else {
                    (x >> 2) as usize % count
                };
                if x & 0x30 != 0 && heap[target][1] == LIVE {
                    *f = target as u32 + 1;
                }
            }
            heap[obj] = [
                0, LIVE, fields[0], fields[1], fields[2], fields[3], fields[4], fields[5], 0, 0, 0, 0, 0, 0, 0, 0,
            ];
            let p = r.next_u64();
            for (w, v) in heap[obj][8..].iter_mut().enumerate() {
                *v = if w < 4 {
                    (p >> (w * 16)) as u32 & 0xffff
                } else {
                    w as u32
                };
            }
            if p & 15 == 0 {
                roots[(p >> 8) as usize % ROOTS] = obj as u32 + 1;
            }
        }
        // Mutate: rewrite random fields of live objects.
        for _ in 0..m / 4 {
            let x = r.next_u64();
            let a = allocated[(x % count as u64) as usize] as usize;
            let b = allocated[((x >> 24) % count as u64) as usize] as usize;
            if heap[a][1] == LIVE && heap[b][1] == LIVE {
                heap[a][2 + (x >> 50) as usize % 6] = b as u32 + 1;
            }
        }
        // Mark from the roots.
        let mut top = 0;
        for &root in roots.iter().filter(|&&r| r != 0) {
            if heap[root as usize - 1][0] != cycle {
                heap[root as usize - 1][0] = cycle;
                stack[top] = root - 1;
                top += 1;
            }
        }
        let (mut marked, mut payload) = (0u64, 0u64);
        while top > 0 {
            top -= 1;
            let o = stack[top] as usize;
            marked += 1;
            payload = payload.wrapping_add(heap[o][8..].iter().map(|&v| v as u64).sum::<u64>());
            for f in 2..8 {
                let t = heap[o][f];
                if t != 0 && heap[t as usize - 1][0] != cycle {
                    heap[t as usize - 1][0] = cycle;
                    stack[top] = t - 1;
                    top += 1;
                }
            }
        }
        // Sweep what was not marked onto the free list.
        for &o in allocated[..count].iter() {
            let o = o as usize;
            if heap[o][1] == LIVE && heap[o][0] != cycle {
                heap[o][1] = FREE;
                heap[o][2] = free_list;
                free_list = o as u32 + 1;
            }
        }
        sum = mix(mix(sum, marked), payload);
    }
    sum
}
