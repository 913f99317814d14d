use super::*;
use crate::levels::testing::drive;

use crate::levels::testing::PAGE;

/// (disk faults, cache hits) over `refs`, every page compressing to
/// `bytes`.
fn replay(p: &mut Adaptive, refs: &[u64], bytes: u64) -> (u64, u64) {
    let d = drive(p, refs, bytes, 100 * PAGE);
    (d.disk, d.hits)
}

/// A policy over 100 pages with these disk and codec costs, ns.
fn adaptive(disk_ns: f64, codec_ns: f64) -> Adaptive {
    Adaptive::new(
        budget(),
        Costs {
            disk_ns,
            codec_ns,
            compress_share: 0.5,
        },
    )
}

/// 130 pages touched at random in 100 frames, each compressing to
/// 2,048 bytes: the footprint fits with 69 pages uncompressed (the
/// other 61 in 31 frames' worth of cache, less 1% of the frames).
/// The fixed targets either side are 23% (77 uncompressed, whose
/// cache of 23 frames holds 46 of the 53 others: disk faults) and 37%
/// (63 uncompressed: 6 more cache faults in every 130 touches).
#[test]
fn a_footprint_that_fits_keeps_the_most_uncompressed_pages_that_fit() {
    let mut x: u64 = 7;
    let refs: Vec<u64> = (0..40_000)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) % 130
        })
        .collect();
    for faults_only in [false, true] {
        let mut p = adaptive(5e6, 1e5).with_allowance(SAFE_ALLOWANCE);
        if faults_only {
            p.faults_only();
        }
        let warm = drive(&mut p, &refs[..20_000], 2048, 100 * PAGE).disk;
        let (uncompressed, _, on_disk) = p.occupancy();
        assert!(
            (66..=69).contains(&uncompressed),
            "{uncompressed} uncompressed (faults only: {faults_only})"
        );
        assert!(
            on_disk <= 2,
            "{on_disk} pages on disk after {warm} disk faults (faults only: {faults_only})"
        );
    }
}

fn budget() -> Budget {
    crate::levels::testing::budget(100)
}

#[test]
fn a_loop_slightly_larger_than_memory_turns_compression_on() {
    // 130 pages cycled: LRU faults on every touch; with a 2:1 cache at
    // a 23% share or more, all of them fit.
    let refs: Vec<u64> = (0..40).flat_map(|_| 0..130u64).collect();
    let mut p = adaptive(5e6, 1e5);
    let (disk, hits) = replay(&mut p, &refs, PAGE / 2);
    assert!(p.target_share() >= 0.23, "share {}", p.target_share());
    assert!(hits > disk * 5, "hits {hits}, disk {disk}");
}

/// The guard pays what the mechanism says the codec took: on a loop
/// where compression pays at the estimated cost, compressions that
/// each really cost a disk fault soon stop it.
#[test]
fn paid_codec_time_above_the_estimate_stops_compression_sooner() {
    let refs: Vec<u64> = (0..40).flat_map(|_| 0..130u64).collect();
    let compressions = |paid_per_compression: Option<f64>| {
        let mut p = adaptive(5e6, 1e5).with_allowance(SAFE_ALLOWANCE);
        let mut level = std::collections::HashMap::new();
        let mut count = 0;
        for &r in &refs {
            let mut actions = Vec::new();
            p.touch(r, *level.get(&r).unwrap_or(&Level::New), &mut actions);
            level.insert(r, Level::Uncompressed);
            let mut i = 0;
            while i < actions.len() {
                match actions[i] {
                    Action::Compress(v) => {
                        count += 1;
                        level.insert(v, Level::Compressed);
                        let mut more = Vec::new();
                        p.compressed(v, PAGE / 2, &mut more);
                        actions.extend(more);
                        if let Some(ns) = paid_per_compression {
                            p.codec_time(1, 0, ns);
                        }
                    }
                    Action::Spill(v) | Action::SwapOut(v) => {
                        level.insert(v, Level::Disk);
                    }
                    Action::Watch(_) => {}
                }
                i += 1;
            }
        }
        count
    };
    let estimated = compressions(None);
    let as_estimated = compressions(Some(0.5e5));
    let dear = compressions(Some(5e6));
    assert_eq!(as_estimated, estimated, "paying the estimate changes nothing");
    assert!(
        dear * 10 < estimated,
        "{dear} compressions at a disk fault each, {estimated} at the estimate"
    );
}

#[test]
#[should_panic(expected = "targets must ascend from 0")]
fn targets_must_ascend_from_zero() {
    Adaptive::with_targets(
        budget(),
        Costs {
            disk_ns: 1.0,
            codec_ns: 1.0,
            compress_share: 0.5,
        },
        &[0.1, 0.5],
    );
}

#[test]
fn finer_targets_take_a_small_cache_where_ten_percent_is_too_much() {
    // 104 pages cycled in 100 frames at 2:1: every touch is at recency
    // 103. A 3% share (97 + 6 pages) falls 1 short, so all would
    // fault; 6% (94 + 12 pages) serves all from the cache, as 10% does,
    // with 4 more frames uncompressed: ties go to the smaller share.
    let refs: Vec<u64> = (0..60).flat_map(|_| 0..104u64).collect();
    let mut paper = adaptive(5e6, 1e5);
    replay(&mut paper, &refs, PAGE / 2);
    let mut fine = Adaptive::with_targets(
        budget(),
        Costs {
            disk_ns: 5e6,
            codec_ns: 1e5,
            compress_share: 0.5,
        },
        &FINE_TARGETS,
    );
    let (disk, hits) = replay(&mut fine, &refs, PAGE / 2);
    assert_eq!(paper.target_share(), 0.10);
    assert_eq!(fine.target_share(), 0.06);
    assert!(hits > 58 * 104 && disk < 2 * 104, "hits {hits}, disk {disk}");
}

#[test]
fn only_touches_some_target_would_hit_are_events() {
    // 100 frames at 2:1: U runs from 50 (50%) to 100 (0%), E up to 150.
    let mut p = adaptive(5e6, 1e5);
    for position in [0, 49, 150, 400, crate::recency::BEYOND] {
        p.record(position);
        assert_eq!(
            (p.weight, p.hits, p.faults),
            (1.0, [0.0; MAX_TARGETS], [0.0; MAX_TARGETS]),
            "p = {position}"
        );
    }
    p.record(120);
    assert!(p.weight > 1.0, "the clock advances");
    assert_eq!(p.faults[0], p.weight, "beyond 100 frames: a fault at 0%");
    assert_eq!(p.hits[4], p.weight, "within 150 pages at 50%: a hit");
}

#[test]
fn the_split_moves_one_page_per_fault() {
    // The first fault from disk already picks a compressed share, but
    // the uncompressed region shrinks one page per fault after it.
    let refs: Vec<u64> = (0..40).flat_map(|_| 0..130u64).collect();
    let mut p = adaptive(5e6, 1e5);
    let d = drive(&mut p, &refs[..131], PAGE / 2, 100 * PAGE);
    assert!(p.target_share() > 0.0);
    assert_eq!(d.most_compressed_at_once, 2);
    assert_eq!(p.occupancy().0, 99, "one page moved");
    let mut p = adaptive(5e6, 1e5);
    let d = drive(&mut p, &refs, PAGE / 2, 100 * PAGE);
    assert_eq!(d.most_compressed_at_once, 2);
    assert_eq!(p.occupancy().0, p.uncompressed_target, "the split reached its target");
}

#[test]
fn a_loop_that_fits_keeps_compression_off() {
    let refs: Vec<u64> = (0..60).flat_map(|_| 0..90u64).collect();
    let mut p = adaptive(5e6, 1e5);
    let (disk, hits) = replay(&mut p, &refs, PAGE / 2);
    assert_eq!(p.target_share(), 0.0);
    assert_eq!((disk, hits), (0, 0));
}

/// Plain LRU's disk faults over `frames` frames (first touches free).
fn lru_faults(refs: &[u64], frames: usize) -> u64 {
    let mut order: Vec<u64> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut faults = 0;
    for &r in refs {
        match order.iter().position(|&x| x == r) {
            Some(i) => {
                faults += u64::from(order.len() - 1 - i >= frames);
                order.remove(i);
            }
            None => faults += u64::from(!seen.insert(r)),
        }
        order.push(r);
    }
    faults
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
    /// `adaptive-safe`, on phases of loops and random touches over
    /// working sets around memory's size, pages compressing 1:1 to 4:1, disks from as
    /// cheap as the codec to 50 times dearer: the policy's paging cost
    /// (as the simulator charges it: disk faults, and the codec's
    /// compression and decompression costs, split at a random share
    /// from 0.2 to 0.9, per compression and per decompression, counting every
    /// spilled page as decompressed again) stays within 5% of
    /// plain LRU's, plus one codec round trip per frame for the drain.
    #[test]
    fn the_policy_never_costs_much_more_than_lru(
        phases in proptest::collection::vec((60u64..180, 0u64..3, 1u64..6000), 1..6),
        bytes in 1024u64..=4096,
        disk_per_codec in 1.0f64..50.0,
        compress_share in 0.2f64..0.9,
        seed in 0u64..1000,
    ) {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut refs = Vec::new();
        for (set, kind, len) in phases {
            for i in 0..len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                refs.push(match kind {
                    0 => i % set,
                    1 => x % set,
                    _ => if x % 4 == 0 { x % (2 * set) } else { x % (set / 2) },
                });
            }
        }
        let codec_ns = 1e5;
        let disk_ns = codec_ns * disk_per_codec;
        let costs = Costs { disk_ns, codec_ns, compress_share };
        let mut p = Adaptive::new(budget(), costs).with_allowance(SAFE_ALLOWANCE);
        let d = drive(&mut p, &refs, bytes, 100 * PAGE);
        let count = |f: fn(&Action) -> bool| d.actions.iter().filter(|a| f(a)).count() as f64;
        let compressions = count(|a| matches!(a, Action::Compress(_)));
        // Every spilled page decompressed once more, at most.
        let spills = count(|a| matches!(a, Action::Spill(_)));
        let own = d.disk as f64 * disk_ns
            + compressions * codec_ns * compress_share
            + (spills + d.hits as f64) * codec_ns * (1.0 - compress_share);
        let lru = lru_faults(&refs, 100) as f64 * disk_ns;
        proptest::prop_assert!(
            own <= 1.05 * lru + 100.0 * codec_ns,
            "own {own:.0} against LRU {lru:.0} ({} disk, {} hits, {compressions} compressions)",
            d.disk,
            d.hits
        );
    }
}

#[test]
fn incompressible_pages_or_a_cheap_disk_keep_compression_off() {
    let refs: Vec<u64> = (0..40).flat_map(|_| 0..130u64).collect();
    let mut p = adaptive(5e6, 1e5);
    replay(&mut p, &refs, PAGE);
    assert_eq!(p.target_share(), 0.0, "ratio 1 gains nothing");
    let mut p = adaptive(1e5, 5e6);
    replay(&mut p, &refs, PAGE / 2);
    assert_eq!(p.target_share(), 0.0, "codec dearer than disk");
}

/// A measured cache fault prices cache hits; a disk fault keeps its
/// constant until it is measured, and never costs less than a cache hit.
#[test]
fn measured_faults_price_both_levels() {
    let mut p = adaptive(100e3, 25e3);
    p.fault_service(None, 8e3);
    assert_eq!((p.costs.disk_ns, p.costs.codec_ns), (100e3, 8e3));
    p.fault_service(Some(90e3), 7e3);
    assert_eq!((p.costs.disk_ns, p.costs.codec_ns), (90e3, 7e3));
    p.fault_service(None, 120e3);
    assert_eq!((p.costs.disk_ns, p.costs.codec_ns), (120e3, 120e3));
}

/// Before any page comes back, a program that fills memory and goes on
/// allocating is given the cache its footprint fits in, not raw writes:
/// 400 new pages in 100 frames, each compressing to 512 bytes (they fit
/// with 56 uncompressed). Until the ratio's first sample, at the 64th
/// eviction, pages still go raw; after it, to the cache.
#[test]
fn new_pages_past_memory_go_to_a_fitting_cache_before_any_comes_back() {
    let mut p = adaptive(5e6, 1e5).with_allowance(SAFE_ALLOWANCE);
    p.faults_only();
    let refs: Vec<u64> = (0..400).collect();
    let d = drive(&mut p, &refs, 512, 100 * PAGE);
    assert_eq!(d.disk, 0, "nothing came back");
    let (uncompressed, compressed, on_disk) = p.occupancy();
    let what = format!("{uncompressed} uncompressed, {compressed} compressed, {on_disk} on disk");
    assert!(on_disk <= 80, "{what}");
    assert!(compressed >= 250, "{what}");
}

/// The guard corrects `none`'s sampled estimate by what the 0% stretches
/// measured only once they hold 64 sampled disk faults, each standing for
/// the sampling rate's worth.
#[test]
fn the_correction_waits_for_64_sampled_faults() {
    let frames = 4096;
    let costs = Costs {
        disk_ns: 100e3,
        codec_ns: 10e3,
        compress_share: 0.5,
    };
    let budget = Budget {
        ram_bytes: frames * PAGE,
        page_size: PAGE,
    };
    let mut p = Adaptive::new(budget, costs).with_allowance(SAFE_ALLOWANCE);
    p.faults_only();
    let mut actions = Vec::new();
    for page in 0..=frames {
        p.touch(page, Level::New, &mut actions);
    }
    let rate = p.minis.as_ref().expect("memory filled").rate() as f64;
    assert!(rate > 1.0, "the sample is thinner than every page");
    let step = rate * costs.disk_ns;
    (p.off_base, p.off_spent) = (63.0 * step, 0.6 * 63.0 * step);
    assert_eq!(p.correction(), 1.0, "63 samples are too few");
    (p.off_base, p.off_spent) = (64.0 * step, 0.6 * 64.0 * step);
    assert!((p.correction() - 0.6).abs() < 1e-9);
}
