//! External-sort style: 64-byte records (a key and seven payload words)
//! are sorted in runs of 4096 records (256 KiB), then the runs are merged
//! k-way into a second array, as a database sort-merge does.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand_core::Rng;

use crate::{mix, rng, Arena};

type Record = [u64; 8];
const RUN: usize = 4096;

pub fn run(memory: &mut [u8], seed: u64) -> u64 {
    let n = memory.len() / (2 * 64);
    let mut arena = Arena::new(memory);
    let input: &mut [Record] = arena.take(n);
    let output: &mut [Record] = arena.take(n);
    let mut r = rng(seed);
    for (i, rec) in input.iter_mut().enumerate() {
        // Keys repeat (about four records per key), payloads are small
        // counters and copies of the key, as table rows are.
        let key = r.next_u64() % (n as u64 / 4 + 1);
        *rec = [key, i as u64, key * 3, (i % 97) as u64, 0, 1, key >> 3, 42];
    }
    for run in input.chunks_mut(RUN) {
        run.sort_unstable_by_key(|rec| (rec[0], rec[1]));
    }
    // Merge: a heap of the head of each run.
    let runs = n.div_ceil(RUN);
    let mut pos: Vec<usize> = (0..runs).map(|k| k * RUN).collect();
    let mut heap: BinaryHeap<Reverse<(u64, u64, usize)>> = (0..runs)
        .filter(|&k| pos[k] < n)
        .map(|k| Reverse((input[pos[k]][0], input[pos[k]][1], k)))
        .collect();
    let mut out = 0;
    while let Some(Reverse((_, _, k))) = heap.pop() {
        output[out] = input[pos[k]];
        out += 1;
        pos[k] += 1;
        if pos[k] < ((k + 1) * RUN).min(n) {
            heap.push(Reverse((input[pos[k]][0], input[pos[k]][1], k)));
        }
    }
    let mut sum = n as u64;
    let mut prev = (0, 0);
    for rec in output.iter() {
        let key = (rec[0], rec[1]);
        // An unsorted output changes the checksum, never passes silently.
        if key < prev {
            sum = mix(sum, u64::MAX);
        }
        prev = key;
        sum = mix(sum, rec[0] ^ rec[1] << 32 ^ rec[2]);
    }
    sum
}
