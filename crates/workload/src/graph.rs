//! A pointer-rich graph: each node's out-edges form a linked list of edge
//! records in an edge pool. Edges are built source by source, as a loader
//! reading a sorted edge file does, with out-degrees from 1 to 15. Half of
//! the targets are near their source (web links stay mostly within a site,
//! social links within a community), a quarter are chosen by preferential
//! attachment (power-law in-degrees) and a quarter uniformly. Runs a
//! breadth-first search from node 0, then PageRank iterations that walk
//! every list.
//!
//! `graph-mt` is the same graph and search with PageRank split over
//! [`THREADS`] threads by source node. Pushes from different threads land
//! on the same targets, so each thread adds into an accumulator array of
//! its own, and the arrays are summed in thread order: the floating-point
//! sums, and so the checksum, do not depend on how the threads interleave.

use rand_core::Rng;

use crate::{mix, rng, Arena};

const EDGES_PER_NODE: usize = 8;
const ITERATIONS: usize = 5;
const NIL: u32 = u32::MAX;

/// Threads of `graph-mt`'s PageRank (fixed, so the checksum is the same on
/// every machine).
pub const THREADS: usize = 4;

/// The graph's arrays, carved from the workload's memory.
struct Graph<'a> {
    /// node: [first edge, out-degree, BFS distance, unused]
    nodes: &'a mut [[u32; 4]],
    /// edge: [target, next edge of the same source]
    edges: &'a mut [[u32; 2]],
}

/// Builds the graph into `arena` (n nodes) and runs the search; returns
/// the graph and the checksum so far.
fn build_and_search<'a>(arena: &mut Arena<'a>, n: usize, seed: u64) -> (Graph<'a>, u64) {
    let e = n * EDGES_PER_NODE;
    let nodes: &mut [[u32; 4]] = arena.take(n);
    let edges: &mut [[u32; 2]] = arena.take(e);
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
    let graph = Graph { nodes, edges };
    (graph, sum)
}

/// Pushes the rank of sources `range` along their out-edges into `next`
/// (which the caller has zeroed); returns their dangling mass.
fn push(g: &Graph, rank: &[f64], range: std::ops::Range<usize>, next: &mut [f64]) -> f64 {
    let mut dangling = 0.0;
    for v in range {
        let [first, degree, _, _] = g.nodes[v];
        if degree == 0 {
            dangling += rank[v];
            continue;
        }
        let share = rank[v] / degree as f64;
        let mut k = first;
        while k != NIL {
            let [t, nx] = g.edges[k as usize];
            next[t as usize] += share;
            k = nx;
        }
    }
    dangling
}

pub fn run(memory: &mut [u8], seed: u64) -> u64 {
    // Per node: 16 B of node, 8 edges of 8 B, two ranks, a queue entry.
    let n = memory.len() / (16 + EDGES_PER_NODE * 8 + 16 + 4 + 4);
    let mut arena = Arena::new(memory);
    let (g, sum) = build_and_search(&mut arena, n, seed);
    let rank: &mut [f64] = arena.take(n);
    let next: &mut [f64] = arena.take(n);
    // PageRank, pushing along every list; dangling mass spread evenly.
    rank.fill(1.0 / n as f64);
    for _ in 0..ITERATIONS {
        next.fill(0.0);
        let dangling = push(&g, rank, 0..n, next);
        let base = (0.15 + 0.85 * dangling) / n as f64;
        for v in 0..n {
            rank[v] = base + 0.85 * next[v];
        }
    }
    rank.iter().fold(sum, |s, x| mix(s, (x * 1e12) as u64))
}

/// `graph-mt`: as [`run`], with PageRank on [`THREADS`] threads.
pub fn run_threaded(memory: &mut [u8], seed: u64) -> u64 {
    // Per node as in `run`, with an accumulator per thread.
    let n = memory.len() / (16 + EDGES_PER_NODE * 8 + 8 + 8 * THREADS + 4 + 4);
    let mut arena = Arena::new(memory);
    let (g, sum) = build_and_search(&mut arena, n, seed);
    let rank: &mut [f64] = arena.take(n);
    let mut nexts: Vec<&mut [f64]> = (0..THREADS).map(|_| arena.take::<f64>(n)).collect();
    rank.fill(1.0 / n as f64);
    let per = n.div_ceil(THREADS);
    for _ in 0..ITERATIONS {
        let danglings: Vec<f64> = std::thread::scope(|s| {
            let (g, rank) = (&g, &*rank);
            let handles: Vec<_> = nexts
                .iter_mut()
                .enumerate()
                .map(|(t, next)| {
                    s.spawn(move || {
                        next.fill(0.0);
                        push(g, rank, (t * per).min(n)..((t + 1) * per).min(n), next)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a PageRank thread"))
                .collect()
        });
        let dangling: f64 = danglings.iter().sum();
        let base = (0.15 + 0.85 * dangling) / n as f64;
        for v in 0..n {
            let pushed: f64 = nexts.iter().map(|next| next[v]).sum();
            rank[v] = base + 0.85 * pushed;
        }
    }
    rank.iter().fold(sum, |s, x| mix(s, (x * 1e12) as u64))
}
