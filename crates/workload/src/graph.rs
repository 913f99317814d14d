//! A pointer-rich graph: each node's out-edges form a linked list of edge
//! records in an edge pool. Edges are built source by source, as a loader
//! reading a sorted edge file does, with out-degrees from 1 to 15. Half of
//! the targets are near their source (web links stay mostly within a site,
//! social links within a community), a quarter are chosen by preferential
//! attachment (power-law in-degrees) and a quarter uniformly. Runs a
//! breadth-first search from node 0, then PageRank iterations that walk
//! every list.

use rand_core::Rng;

use crate::{mix, rng, Arena};

const EDGES_PER_NODE: usize = 8;
const ITERATIONS: usize = 5;
const NIL: u32 = u32::MAX;

pub fn run(memory: &mut [u8], seed: u64) -> u64 {
    // Per node: 16 B of node, 8 edges of 8 B, two ranks, a queue entry.
    let n = memory.len() / (16 + EDGES_PER_NODE * 8 + 16 + 4 + 4);
    let e = n * EDGES_PER_NODE;
    let mut arena = Arena::new(memory);
    // node: [first edge, out-degree, BFS distance, unused]
    let nodes: &mut [[u32; 4]] = arena.take(n);
    // edge: [target, next edge of the same source]
    let edges: &mut [[u32; 2]] = arena.take(e);
    let rank: &mut [f64] = arena.take(n);
    let next: &mut [f64] = arena.take(n);
    let queue: &mut [u32] = arena.take(n);
    nodes.fill([NIL, 0, NIL, 0]);
    let mut r = rng(seed);
    let mut k = 0;
    for (src, node) in nodes.iter_mut().enumerate() {
        let degree = 1 + r.next_u64() as usize % 15;
        for _ in 0..degree.min(e - k) {
            let x = r.next_u64();
            let target = match x & 3 {
                0 | 1 => ((src as u64 + n as u64 + (x >> 2) % 1024).saturating_sub(512) % n as u64) as u32,
                2 if k > 0 => edges[(x >> 2) as usize % k][0],
                _ => ((x >> 2) % n as u64) as u32,
            };
            edges[k] = [target, node[0]];
            node[0] = k as u32;
            node[1] += 1;
            k += 1;
        }
    }
    // Breadth-first search from node 0.
    let (mut head, mut tail) = (0, 1);
    queue[0] = 0;
    nodes[0][2] = 0;
    while head < tail {
        let v = queue[head] as usize;
        head += 1;
        let mut k = nodes[v][0];
        while k != NIL {
            let [t, nx] = edges[k as usize];
            if nodes[t as usize][2] == NIL {
                nodes[t as usize][2] = nodes[v][2] + 1;
                queue[tail] = t;
                tail += 1;
            }
            k = nx;
        }
    }
    let mut sum = mix(n as u64, tail as u64);
    for node in nodes.iter() {
        sum = mix(sum, node[2] as u64);
    }
    // PageRank, pushing along every list; dangling mass spread evenly.
    rank.fill(1.0 / n as f64);
    for _ in 0..ITERATIONS {
        next.fill(0.0);
        let mut dangling = 0.0;
        for v in 0..n {
            let [first, degree, _, _] = nodes[v];
            if degree == 0 {
                dangling += rank[v];
                continue;
            }
            let share = rank[v] / degree as f64;
            let mut k = first;
            while k != NIL {
                let [t, nx] = edges[k as usize];
                next[t as usize] += share;
                k = nx;
            }
        }
        let base = (0.15 + 0.85 * dangling) / n as f64;
        for v in 0..n {
            rank[v] = base + 0.85 * next[v];
        }
    }
    rank.iter().fold(sum, |s, x| mix(s, (x * 1e12) as u64))
}
