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
    let mut heap = Heap {
        objects: arena.take(m),
        stack: arena.take(m),
        allocated: arena.take(m),
        roots: [0u32; ROOTS],
        bump: 0,
        free_list: 0,
        count: 0,
    };
    let mut r = rng(seed);
    let mut sum = m as u64;
    for cycle in 1..=CYCLES {
        heap.allocate(&mut r);
        heap.mutate(&mut r);
        let (marked, payload) = heap.mark(cycle);
        heap.sweep(cycle);
        sum = mix(mix(sum, marked), payload);
    }
    sum
}

/// The heap's objects and the collector's state, all in the arena.
struct Heap<'a> {
    objects: &'a mut [Object],
    stack: &'a mut [u32],
    /// Every object ever bumped, by index.
    allocated: &'a mut [u32],
    roots: [u32; ROOTS],
    bump: usize,
    /// The first free object + 1 (0: none).
    free_list: u32,
    count: usize,
}

impl Heap<'_> {
    /// Allocates half the heap's worth of objects.
    fn allocate(&mut self, r: &mut impl Rng) {
        let m = self.objects.len();
        for _ in 0..m / 2 {
            let Some(obj) = self.take_free() else {
                break;
            };
            let mut fields = [0u32; 6];
            for f in fields.iter_mut() {
                let x = r.next_u64();
                // Mostly links to recent objects; some to anywhere.
                let target = if x & 3 != 0 {
                    obj.saturating_sub((x >> 2) as usize % 64)
                } else {
                    (x >> 2) as usize % self.count
                };
                if x & 0x30 != 0 && self.objects[target][1] == LIVE {
                    *f = target as u32 + 1;
                }
            }
            self.objects[obj] = [
                0, LIVE, fields[0], fields[1], fields[2], fields[3], fields[4], fields[5], 0, 0, 0, 0, 0, 0, 0, 0,
            ];
            let p = r.next_u64();
            for (w, v) in self.objects[obj][8..].iter_mut().enumerate() {
                *v = if w < 4 {
                    (p >> (w * 16)) as u32 & 0xffff
                } else {
                    w as u32
                };
            }
            if p & 15 == 0 {
                self.roots[(p >> 8) as usize % ROOTS] = obj as u32 + 1;
            }
        }
    }

    /// An object from the free list, else a new one bumped; `None` when
    /// the heap is full.
    fn take_free(&mut self) -> Option<usize> {
        if self.free_list != 0 {
            let o = self.free_list as usize - 1;
            self.free_list = self.objects[o][2];
            Some(o)
        } else if self.bump < self.objects.len() {
            self.bump += 1;
            self.allocated[self.bump - 1] = (self.bump - 1) as u32;
            self.count = self.bump;
            Some(self.bump - 1)
        } else {
            None
        }
    }

    /// Rewrites random fields of live objects.
    fn mutate(&mut self, r: &mut impl Rng) {
        let count = self.count as u64;
        for _ in 0..self.objects.len() / 4 {
            let x = r.next_u64();
            let a = self.allocated[(x % count) as usize] as usize;
            let b = self.allocated[((x >> 24) % count) as usize] as usize;
            if self.objects[a][1] == LIVE && self.objects[b][1] == LIVE {
                self.objects[a][2 + (x >> 50) as usize % 6] = b as u32 + 1;
            }
        }
    }

    /// Marks from the roots; returns the objects marked and their
    /// payloads' sum.
    fn mark(&mut self, cycle: u32) -> (u64, u64) {
        let heap = &mut *self.objects;
        let stack = &mut *self.stack;
        let mut top = 0;
        for &root in self.roots.iter().filter(|&&r| r != 0) {
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
        (marked, payload)
    }

    /// Sweeps what was not marked onto the free list.
    fn sweep(&mut self, cycle: u32) {
        for &o in self.allocated[..self.count].iter() {
            let o = o as usize;
            let obj = &mut self.objects[o];
            if obj[1] == LIVE && obj[0] != cycle {
                obj[1] = FREE;
                obj[2] = self.free_list;
                self.free_list = o as u32 + 1;
            }
        }
    }
}
