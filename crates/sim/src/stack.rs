//! Plain LRU at every memory size from one pass: the stack distance of
//! each reference (distinct pages touched since the page's previous
//! reference), counted in a Fenwick tree over last-reference times.
//!
//! The tree covers a window of four times the pages seen, not the whole
//! trace: when the window fills, the live stamps are renumbered from 0 in
//! order and the tree rebuilt in linear time. It then stays small enough
//! for the CPU's caches (a few hundred KiB for tens of thousands of pages)
//! however long the trace, which is what makes the pass fast.

/// Faults of an LRU memory of `m` pages, for every `m` from 0 to `max`
/// (index `m`); first references fault at every size.
///
/// ```
/// // a b a c b: distances ∞ ∞ 1 ∞ 2
/// let f = ccvm_sim::lru_faults(&[0, 1, 0, 2, 1], 4, 3);
/// assert_eq!(f, [5, 5, 4, 3]);
/// ```
pub fn lru_faults(refs: &[u32], pages: usize, max: usize) -> Vec<u64> {
    let pages = pages.max(refs.iter().map(|&p| p as usize + 1).max().unwrap_or(0));
    let cap = 4 * pages.max(1024);
    let mut tree = vec![0u32; cap + 1];
    let mut stamp = vec![u32::MAX; pages];
    let mut now = 0usize;
    let mut live = 0usize;
    // hist[d]: references at distance d; beyond `max` (and first ones) in cold.
    let mut hist = vec![0u64; max + 1];
    let mut cold = 0u64;
    for &p in refs {
        if now == cap {
            now = renumber(&mut stamp, &mut tree);
        }
        let prev = stamp[p as usize];
        if prev == u32::MAX {
            cold += 1;
        } else {
            // Live stamps after prev: distinct pages touched since.
            let (mut i, mut upto) = (prev as usize + 1, 0usize);
            while i > 0 {
                upto += tree[i] as usize;
                i &= i - 1;
            }
            let d = live - upto;
            if d < max {
                hist[d] += 1;
            } else {
                cold += 1;
            }
            let mut i = prev as usize + 1;
            while i <= cap {
                tree[i] -= 1;
                i += i & i.wrapping_neg();
            }
            live -= 1;
        }
        let mut i = now + 1;
        while i <= cap {
            tree[i] += 1;
            i += i & i.wrapping_neg();
        }
        live += 1;
        stamp[p as usize] = now as u32;
        now += 1;
    }
    // A memory of m pages hits distances below m.
    let mut faults = vec![0u64; max + 1];
    let mut misses = cold + hist.iter().sum::<u64>();
    for (m, f) in faults.iter_mut().enumerate() {
        *f = misses;
        if m < max {
            misses -= hist[m];
        }
    }
    faults
}

/// Renumbers the live stamps 0, 1, ... in their order, rebuilds the tree
/// over them, and returns the next free stamp.
fn renumber(stamp: &mut [u32], tree: &mut [u32]) -> usize {
    let mut order: Vec<(u32, u32)> = stamp
        .iter()
        .enumerate()
        .filter(|(_, &s)| s != u32::MAX)
        .map(|(p, &s)| (s, p as u32))
        .collect();
    order.sort_unstable();
    for (new, &(_, p)) in order.iter().enumerate() {
        stamp[p as usize] = new as u32;
    }
    // Linear-time build: ones at 1..=n, each node adds itself to its parent.
    tree.fill(0);
    let n = order.len();
    for i in 1..tree.len() {
        if i <= n {
            tree[i] += 1;
        }
        let parent = i + (i & i.wrapping_neg());
        if parent < tree.len() {
            tree[parent] += tree[i];
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Brute force: distinct pages since the previous reference.
    fn model(refs: &[u32], max: usize) -> Vec<u64> {
        let mut faults = vec![0u64; max + 1];
        for (t, &p) in refs.iter().enumerate() {
            let d = refs[..t].iter().rposition(|&q| q == p).map(|last| {
                let mut s: Vec<u32> = refs[last + 1..t].to_vec();
                s.sort_unstable();
                s.dedup();
                s.len()
            });
            for (m, f) in faults.iter_mut().enumerate() {
                if d.is_none_or(|d| d >= m) {
                    *f += 1;
                }
            }
        }
        faults
    }

    #[test]
    fn renumbering_keeps_distances_exact() {
        // Few pages and many references: the window refills many times.
        let mut x = 7u64;
        let refs: Vec<u32> = (0..20_000)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                ((x >> 33) % 37) as u32
            })
            .collect();
        assert_eq!(lru_faults(&refs, 37, 40), model(&refs, 40));
    }
}
