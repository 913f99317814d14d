//! Plain LRU at every memory size from one pass: the stack distance of
//! each reference (distinct pages touched since the page's previous
//! reference), counted in a Fenwick tree over last-reference times.

/// Faults of an LRU memory of `m` pages, for every `m` from 0 to `max`
/// (index `m`); first references fault at every size.
///
/// ```
/// // a b a c b: distances ∞ ∞ 1 ∞ 2
/// let f = ccvm_sim::lru_faults(&[0, 1, 0, 2, 1], 4, 3);
/// assert_eq!(f, [5, 5, 4, 3]);
/// ```
pub fn lru_faults(refs: &[u32], pages: usize, max: usize) -> Vec<u64> {
    let n = refs.len();
    let mut tree = vec![0u32; n + 1];
    let mut last = vec![u32::MAX; pages.max(refs.iter().map(|&p| p as usize + 1).max().unwrap_or(0))];
    // hist[d]: references at distance d; beyond `max` (and first ones) in cold.
    let mut hist = vec![0u64; max + 1];
    let mut cold = 0u64;
    let mut live = 0usize;
    for (t, &p) in refs.iter().enumerate() {
        let prev = last[p as usize];
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
            while i <= n {
                tree[i] -= 1;
                i += i & i.wrapping_neg();
            }
            live -= 1;
        }
        let mut i = t + 1;
        while i <= n {
            tree[i] += 1;
            i += i & i.wrapping_neg();
        }
        live += 1;
        last[p as usize] = t as u32;
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
