use std::collections::{HashSet, VecDeque};

use super::*;

const COSTS: Costs = Costs {
    disk_ns: 100e3,
    codec_ns: 20e3,
    compress_share: 0.5,
};

/// Plain FIFO over every page, as `none` runs on a fault-only
/// mechanism: its disk faults.
fn fifo_faults(refs: &[u64], frames: usize) -> u64 {
    let mut q = VecDeque::new();
    let mut held = HashSet::new();
    let mut seen = HashSet::new();
    let mut faults = 0;
    for &r in refs {
        if held.insert(r) {
            if !seen.insert(r) {
                faults += 1;
            }
            q.push_back(r);
            if q.len() > frames {
                held.remove(&q.pop_front().unwrap());
            }
        }
    }
    faults
}

/// Every reference of `refs`, as the mechanism would report it.
fn feed(m: &mut Miniatures, refs: &[u64]) {
    let mut seen = HashSet::new();
    let mut actions = Vec::new();
    for &r in refs {
        let from = if seen.insert(r) {
            Level::New
        } else {
            Level::Uncompressed
        };
        m.touch(r, from, &mut actions);
    }
}

#[test]
fn the_rate_keeps_enough_frames() {
    let rate = |frames| Miniatures::new(frames, &[0.0], COSTS, 2.0).rate();
    assert_eq!(rate(100), 1);
    // A small budget samples thinner (down to 64 frames), since the
    // splits' tables are charged to it.
    assert_eq!(rate(128), 2);
    assert_eq!(rate(768), 4);
    assert_eq!(rate(2047), 4);
    assert_eq!(rate(2048), 4);
    assert_eq!(rate(4096), 8);
    assert_eq!(rate(25_600), 32);
    assert_eq!(rate(1 << 24), MAX_RATE);
}

proptest::proptest! {
    /// Seeing every touch, a rate-1 split without a cache is `none`.
    #[test]
    fn at_rate_one_the_first_split_is_fifo(refs in proptest::collection::vec(0u64..40, 1..600), frames in 1usize..30) {
        let mut m = Miniatures::new(frames, &[0.0, 0.5], COSTS, 2.0);
        feed(&mut m, &refs);
        proptest::prop_assert_eq!(m.none_disk_faults() as u64, fifo_faults(&refs, frames));
    }
}

#[test]
fn a_sample_estimates_fifos_faults() {
    // A loop over 30,000 pages with a hot set, in 20,000 frames.
    let mut refs = Vec::new();
    let mut x = 7u64;
    for _ in 0..6 {
        for p in 0..30_000u64 {
            refs.push(p);
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            refs.push((x >> 33) % 2_000);
        }
    }
    let frames = 20_000;
    let exact = fifo_faults(&refs, frames) as f64;
    let mut m = Miniatures::new(frames, &[0.0], COSTS, 2.0);
    assert!(m.rate() > 1);
    feed(&mut m, &refs);
    let est = m.none_disk_faults();
    assert!((est - exact).abs() < 0.1 * exact, "estimate {est}, exact {exact}");
}

#[test]
fn the_split_moves_only_when_the_costs_differ_beyond_their_noise() {
    // A loop 1.4 times memory, every page sampled: a 50% cache at 2:1
    // holds it, 0% faults on every page.
    let mut m = Miniatures::new(100, &[0.0, 0.5], COSTS, 2.0);
    assert_eq!(m.rate(), 1);
    feed(&mut m, &(0..140u64).chain(0..1).collect::<Vec<_>>());
    // One disk fault against one hit: cheaper, within noise.
    assert_eq!(m.best(), 1);
    assert_eq!(m.best_from(0), 0);
    feed(&mut m, &(0..20).flat_map(|_| 0..140u64).collect::<Vec<_>>());
    assert_eq!(m.best_from(0), 1);
    // An inactive or unknown current split defers to the cheapest.
    assert_eq!(m.best_from(7), 1);
}

#[test]
fn a_cache_is_dropped_only_when_the_long_costs_agree() {
    // A loop 1.4 times memory, every page sampled: the 50% cache holds it.
    let mut m = Miniatures::new(100, &[0.0, 0.5], COSTS, 2.0);
    feed(&mut m, &(0..20).flat_map(|_| 0..140u64).collect::<Vec<_>>());
    assert_eq!(m.best_from(0), 1);
    // A burst of new pages: the cache's split pays a compression for each
    // page it spills, the one without a cache nothing, so lately no cache
    // is cheaper beyond the noise, but not over the long costs.
    feed(&mut m, &(1_000..1_400u64).collect::<Vec<_>>());
    assert_eq!(m.best(), 0);
    assert_eq!(m.best_from(1), 1, "a burst does not drop the cache");
    // New pages for eight memories' worth and more: the cache never
    // pays, and both horizons say so.
    feed(&mut m, &(2_000..5_000u64).collect::<Vec<_>>());
    assert_eq!(m.best_from(1), 0);
    // Turning a cache on needs only the recent costs.
    feed(&mut m, &(0..3).flat_map(|_| 0..140u64).collect::<Vec<_>>());
    assert_eq!(m.best_from(0), 1);
}

#[test]
fn a_cache_only_grows_up_to_half_of_memory() {
    // A loop 1.4 times memory, every page sampled: the 50% cache at 2:1
    // holds it.
    let mut m = Miniatures::new(100, &[0.0, 0.1, 0.5], COSTS, 2.0);
    feed(&mut m, &(0..20).flat_map(|_| 0..140u64).collect::<Vec<_>>());
    assert_eq!(m.best_from(0), 2);
    // Lately the 10% split is cheaper, far beyond the noise, on both
    // horizons (costs set by hand, in disk faults' worth): shrinking
    // would spill what the big cache holds, so the split stays.
    let (unit, long_unit) = (COSTS.disk_ns * m.weight, COSTS.disk_ns * m.long_weight);
    m.splits[0].cost = 200.0 * unit;
    m.splits[0].long_cost = 2000.0 * long_unit;
    m.splits[1].cost = 20.0 * unit;
    m.splits[1].long_cost = 20.0 * long_unit;
    m.splits[2].cost = 60.0 * unit;
    m.splits[2].long_cost = 600.0 * long_unit;
    assert_eq!(m.best(), 1);
    assert_eq!(m.best_from(2), 2, "a cheaper smaller cache does not shrink it");
    // Growing a cache needs only the recent costs.
    assert_eq!(m.best_from(1), 1);
    m.splits[1].cost = 100.0 * unit;
    assert_eq!(m.best_from(1), 2);
    // Dropping the cache still follows both horizons.
    m.splits[0].cost = 10.0 * unit;
    m.splits[0].long_cost = 10.0 * long_unit;
    assert_eq!(m.best_from(2), 0);
}

#[test]
fn a_wide_cache_shrinks_on_the_recent_costs() {
    // Pages at 8:1 run the 75% split; lately the 50% split is cheaper.
    let mut m = Miniatures::new(100, &[0.0, 0.5, 0.75], COSTS, 8.0);
    assert!(m.splits[2].active);
    let unit = COSTS.disk_ns * m.weight;
    m.splits[0].cost = 200.0 * unit;
    m.splits[1].cost = 20.0 * unit;
    m.splits[2].cost = 60.0 * unit;
    assert_eq!(m.best_from(2), 1);
}

#[test]
fn disk_bits_keep_each_splits_pages_apart() {
    let mut d = DiskBits::default();
    d.put(9, 0, false);
    d.put(9, 3, true);
    assert_eq!(d.take(9, 1), None);
    assert_eq!(d.take(9, 3), Some(true));
    assert_eq!(d.take(9, 3), None);
    d.put(5, 3, false);
    d.clear_split(0);
    assert_eq!(d.take(9, 0), None);
    assert_eq!(d.take(5, 3), Some(false));
    assert!(d.0.is_empty(), "a page no split holds takes no entry");
}

#[test]
fn a_cache_wins_where_it_holds_the_loop() {
    // A loop 1.4 times memory: FIFO faults on every page, a 50% cache
    // at 2:1 holds it all.
    let refs: Vec<u64> = (0..20).flat_map(|_| 0..1400u64).collect();
    let mut m = Miniatures::new(1000, &[0.0, 0.5], COSTS, 2.0);
    feed(&mut m, &refs);
    assert_eq!(m.best(), 1);
    // At 1:1 the cache holds less than uncompressed memory did.
    let mut m = Miniatures::new(1000, &[0.0, 0.5], COSTS, 1.0);
    feed(&mut m, &refs);
    assert_eq!(m.best(), 0);
}

#[test]
fn wide_splits_run_only_at_high_ratios() {
    // A loop four times memory (4000 pages in 1000 frames).
    let refs: Vec<u64> = (0..20).flat_map(|_| 0..4000u64).collect();
    let shares = [0.0, 0.5, 0.75];
    let mut m = Miniatures::new(1000, &shares, COSTS, 10.0);
    feed(&mut m, &refs);
    assert_eq!(m.best(), 1, "at 10:1 a 50% cache holds 500 + 5000 pages");
    let mut m = Miniatures::new(1000, &shares, COSTS, 3.0);
    feed(&mut m, &refs);
    // At 3:1 the 75% split (250 + 2250 pages) would not hold it
    // either; it does not run, so nothing is watched for it.
    assert!(!m.splits[2].active && m.disk.0.values().all(|bits| bits & (0b11 << 4) == 0));
    // The ratio rises: it starts at the dearest cost and must earn its
    // way down.
    m.set_ratio(7.0);
    assert!(m.splits[2].active);
    let dearest = m.splits.iter().take(2).map(|s| s.cost).fold(0.0, f64::max);
    assert_eq!(m.splits[2].cost, dearest);
    feed(&mut m, &refs);
    assert_eq!(m.best(), 2, "at 7:1 only 75% (250 + 5250 pages) holds the loop");
    // Just below the ratio that started it, it keeps running.
    m.set_ratio(5.5);
    assert!(m.splits[2].active);
    m.set_ratio(4.0);
    assert!(!m.splits[2].active);
    assert_ne!(m.best(), 2, "stopped, it is not chosen");
}

/// A touch never asks to watch the page touched: the mechanism would
/// unmap the page its fault just mapped, and the access would fault again
/// forever. Random touches, sizes, ratios and floating shares.
#[test]
fn a_touch_never_watches_the_page_touched() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..40 {
        let frames = 8 + (next() % 2000) as usize;
        let mut m = Miniatures::new(frames, &[0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 0.9], COSTS, 2.0);
        m.float(3);
        let pages = 1 + (next() % (4 * frames as u64));
        let mut actions = Vec::new();
        let mut seen = HashSet::new();
        for step in 0..20_000 {
            match next() % 1000 {
                0 => m.set_frames(2 + (next() % 3000) as usize),
                1 => m.set_ratio(1.0 + (next() % 80) as f64 / 10.0),
                2 => m.set_share(3, (next() % 100) as f64 / 100.0),
                _ => {}
            }
            let page = next() % pages;
            let from = if seen.insert(page) {
                Level::New
            } else {
                Level::Uncompressed
            };
            actions.clear();
            m.touch(page, from, &mut actions);
            assert!(
                !actions.contains(&Action::Watch(page)),
                "round {round} step {step}: touching page {page} watched it"
            );
        }
    }
}

#[test]
fn a_cache_is_charged_its_pages_own_sizes() {
    // A loop over 140 pages in 100 frames, while the run's ratio says its
    // pages do not compress: the half-compressed split holds 50 pages
    // uncompressed and 50 cached, so it faults like the split without a
    // cache and pays the compressions on top.
    let refs: Vec<u64> = (0..6).flat_map(|_| 0..140u64).collect();
    let mut plain = Miniatures::new(100, &[0.0, 0.5], COSTS, 1.0);
    feed(&mut plain, &refs);
    assert_eq!(plain.best(), 0);
    // Told that every page compresses four to one, the cache holds 200
    // pages, and the loop fits.
    let mut sized = Miniatures::new(100, &[0.0, 0.5], COSTS, 1.0);
    assert!(sized.wants_size(7));
    for p in 0..140 {
        sized.sized(p, 0.25);
    }
    assert!(!sized.wants_size(7));
    feed(&mut sized, &refs);
    assert_eq!(sized.best(), 1);
    assert!(sized.splits[1].disk_faults < plain.splits[1].disk_faults / 4.0);
    // A page dropped is sized again when it comes back.
    sized.discarded(7);
    assert!(sized.wants_size(7));
}

#[test]
fn a_page_sized_larger_spills_what_no_longer_fits() {
    let mut m = Miniatures::new(100, &[0.0, 0.5], COSTS, 4.0);
    let mut actions = Vec::new();
    // 50 uncompressed frames, then a cache of 50 frames at a quarter page each.
    for p in 0..250 {
        m.touch(p, Level::New, &mut actions);
    }
    let cache = &m.splits[1].compressed;
    assert_eq!(cache.len(), 200);
    assert!((cache.charged() - 50.0).abs() < 1e-6);
    // One cached page turns out not to compress: it takes a whole frame,
    // and the cache lets go of its three oldest pages to stay in its share.
    m.sized(100, 1.0);
    let cache = &m.splits[1].compressed;
    assert_eq!(cache.len(), 197);
    assert!(cache.charged() <= 50.0 + 1e-6);
}
