//! Hand-worked tiny traces: exact counts for every policy (no compression,
//! fixed split, zswap, Douglis, adaptive); LRU's faults never rise with
//! memory; every policy serves every reference on random traces.

use ccvm_policy::{Adaptive, Budget, Costs, Params, Policy, SAFE_ALLOWANCE};
use ccvm_sim::{lru_faults, simulate, CodecCosts, SimConfig, SimResult, Trace};
use ccvm_trace::{Footer, Header};
use proptest::prelude::*;

/// A trace of `refs` in which page p's content is image p from the start.
fn trace(refs: &[u32]) -> Trace {
    let pages = refs.iter().max().map_or(0, |&m| m + 1);
    Trace {
        header: Header {
            workload: "hand".into(),
            seed: 0,
            region_bytes: pages as u64 * 4096,
            window_pages: 0,
        },
        footer: Footer {
            run_time_ns: 1,
            references: refs.len() as u64,
            images: pages as u64,
        },
        refs: refs.to_vec(),
        images: (0..pages).map(|p| (0, p, p)).collect(),
        discards: Vec::new(),
        image_count: pages,
    }
}

/// Every image compresses to `size` bytes in 10 ns and back in 20 ns.
fn costs(images: u32, size: u32) -> CodecCosts {
    CodecCosts {
        codec: "hand".into(),
        size: vec![size; images as usize],
        compress_ns: vec![10; images as usize],
        decompress_ns: vec![20; images as usize],
    }
}

fn policy(name: &str, pages: u64, share: f64) -> Box<dyn Policy> {
    let budget = Budget {
        ram_bytes: pages * 4096,
        page_size: 4096,
    };
    let params = Params {
        uncompressed_share: share,
        costs: Costs {
            disk_ns: 5e6,
            codec_ns: 30.0,
            compress_share: 0.5,
        },
    };
    ccvm_policy::by_name(name, budget, params).unwrap()
}

#[test]
fn no_compression_is_lru_with_every_eviction_written() {
    // Two frames. 0 1 2(-0) 0(disk,-1) 3(-2) 0(hit) 1(disk,-3).
    let t = trace(&[0, 1, 2, 0, 3, 0, 1]);
    let r = simulate(
        &t,
        &costs(4, 1000),
        policy("none", 2, 1.0).as_mut(),
        &SimConfig::default(),
    );
    let want = SimResult {
        trap_faults: 0,
        zero_faults: 4,
        cache_hits: 0,
        disk_faults: 2,
        compressions: 0,
        decompressions: 0,
        disk_writes: 4,
        codec_ns: 0.0,
        paging_ns: 2.0 * 5e6,
    };
    assert_eq!(r, want);
    // The stack pass agrees: 6 misses at 2 frames, 4 of them first touches.
    assert_eq!(lru_faults(&t.refs, 4, 3)[2] - 4, 2);
}

#[test]
fn fixed_split_counts_by_hand() {
    // Four frames, half compressed: 2 uncompressed pages and 8192 bytes of
    // cache. Pages take 1000 + 64 bytes, so the cache holds 7.
    // Pages 0..9 new: 0..7 compressed in turn; the 8th (page 7) pushes the
    // cache to 8 pages, so page 0 spills. Then 0 (disk: 8 compressed, 1
    // spills), then 5 (cache hit: 9 compressed, fits).
    let mut refs: Vec<u32> = (0..10).collect();
    refs.extend([0, 5]);
    let t = trace(&refs);
    let r = simulate(
        &t,
        &costs(10, 1000),
        policy("fixed", 4, 0.5).as_mut(),
        &SimConfig::default(),
    );
    let want = SimResult {
        trap_faults: 0,
        zero_faults: 10,
        cache_hits: 1,
        disk_faults: 1,
        compressions: 10,
        decompressions: 2,
        disk_writes: 2,
        codec_ns: 10.0 * 10.0 + 2.0 * 20.0,
        paging_ns: 5e6 + 140.0,
    };
    assert_eq!(r, want);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn lru_faults_never_rise_with_memory(refs in proptest::collection::vec(0u32..60, 1..2000)) {
        let f = lru_faults(&refs, 60, 61);
        for m in 1..f.len() {
            prop_assert!(f[m] <= f[m - 1], "faults rise from {} to {} pages", m - 1, m);
        }
    }

    #[test]
    fn every_policy_serves_every_reference(refs in proptest::collection::vec(0u32..40, 1..1500), frames in 4u64..24, size in 200u32..4096) {
        let t = trace(&refs);
        let distinct = { let mut v = refs.clone(); v.sort_unstable(); v.dedup(); v.len() as u64 };
        for name in ccvm_policy::names() {
            let r = simulate(&t, &costs(40, size), policy(name, frames, 0.5).as_mut(), &SimConfig::default());
            // Each reference is a first touch, a hit in memory, a cache hit
            // or a disk fault; first touches are the distinct pages.
            prop_assert_eq!(r.zero_faults, distinct, "{}", name);
            prop_assert!(r.cache_hits + r.disk_faults + r.zero_faults <= refs.len() as u64, "{}", name);
            prop_assert!(r.decompressions <= r.cache_hits + r.disk_faults, "{}", name);
        }
    }

    /// On a mechanism that sees only faults, `adaptive-safe` measures what
    /// running without a cache would cost while it runs with one; at a
    /// memory small enough to sample every page, its measure is exact.
    #[test]
    fn the_guard_measures_nones_faults_while_compressing(refs in proptest::collection::vec(0u32..60, 1..3000), frames in 4u64..40, size in 200u32..2000) {
        let t = trace(&refs);
        let faults_only = SimConfig { trap_share: Some(0.0), ..SimConfig::default() };
        let none = simulate(&t, &costs(60, size), policy("none", frames, 1.0).as_mut(), &faults_only);
        let budget = Budget { ram_bytes: frames * 4096, page_size: 4096 };
        let costs_model = Costs { disk_ns: 5e6, codec_ns: 30.0, compress_share: 0.5 };
        let mut safe = Adaptive::new(budget, costs_model).with_allowance(SAFE_ALLOWANCE);
        let r = simulate(&t, &costs(60, size), &mut safe, &faults_only);
        // Memory never filled: nothing was measured, and nothing paged.
        let estimate = safe.none_estimate().unwrap_or(0.0);
        prop_assert_eq!(estimate, none.disk_faults as f64, "compressed {} pages", r.compressions);
    }
}

#[test]
fn plain_traces_import_with_clear_errors() {
    let dir = std::env::temp_dir().join(format!("ccvm-import-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let txt = dir.join("a.txt");
    std::fs::write(&txt, "# comment\n0\n1\n0x2\n\n1\n").unwrap();
    let t = Trace::import_plain(&txt, 0).unwrap();
    assert_eq!(t.refs, [0, 1, 2, 1]);
    assert_eq!(t.image_count, 3);
    let csv = dir.join("b.csv");
    std::fs::write(&csv, "time,page,rw\n0,7,r\n1,9,w\n2,7,r\n").unwrap();
    assert_eq!(Trace::import_plain(&csv, 0).unwrap().refs, [7, 9, 7]);
    // The same replay as a native trace with uniform costs.
    let r = simulate(
        &t,
        &CodecCosts::uniform(3, 2.0, 10, 20),
        policy("none", 2, 1.0).as_mut(),
        &SimConfig::default(),
    );
    assert_eq!((r.zero_faults, r.disk_faults), (3, 0));
    for (name, text, needle) in [
        ("c.txt", "1\nx2\n", "line 2: 'x2' is not a page number"),
        (
            "d.csv",
            "a,b\n1,2\n",
            "line 1: a CSV trace needs a header naming a `page` column",
        ),
        ("e.txt", "99999999999\n", "below 2^32"),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        let err = Trace::import_plain(&p, 0).err().expect("an error").to_string();
        assert!(
            err.contains(needle) && err.contains(name) && !err.contains('\n'),
            "{err}"
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn zswap_and_douglis_counts_by_hand() {
    // Four frames; pages take 2000 + 64 bytes compressed; refs 0 1 2 3
    // fill the frames.
    let t = trace(&[0, 1, 2, 3, 4, 5, 0, 2]);
    let config = SimConfig::default();

    // Douglis, bias 2 (ages in touches; a compressed page loses its frame
    // when its age over 2 exceeds the oldest uncompressed page's age):
    // 4 evicts 0, 1, 2 (ages 4, 3, 2 against compressed ages /2 of 2);
    // 5: page 3 (age 2) against 0 (5/2): 0 spills, then 3 is compressed;
    // 0 faults from disk: 1 spills, 4 is compressed; 2 hits in the cache:
    // 5 is compressed. 6 compressions, 2 written, 1 disk fault, 1 hit.
    let r = simulate(&t, &costs(6, 2000), policy("douglis", 4, 0.5).as_mut(), &config);
    assert_eq!(
        (
            r.zero_faults,
            r.cache_hits,
            r.disk_faults,
            r.compressions,
            r.disk_writes,
            r.decompressions
        ),
        (6, 1, 1, 6, 2, 2)
    );

    // zswap with its 20% cap (3276 bytes) holds one compressed page, so
    // each compression past the first spills the older one, and the pool's
    // page leaves a frame free: 4 evicts 0, then 1 (0 spills) and fits;
    // 5 evicts 2 (1 spills); 0 faults from disk and evicts 3 (2 spills);
    // 2 faults from disk and evicts 4 (3 spills).
    let r = simulate(&t, &costs(6, 2000), policy("zswap", 4, 0.5).as_mut(), &config);
    assert_eq!(
        (
            r.zero_faults,
            r.cache_hits,
            r.disk_faults,
            r.compressions,
            r.disk_writes,
            r.decompressions
        ),
        (6, 0, 2, 5, 4, 2)
    );
}

#[test]
fn adaptive_counts_by_hand() {
    // Four frames; every page takes 1984 + 64 = 2048 bytes, a 2:1 ratio.
    // Targets (share: uncompressed frames U, effective pages E):
    // 0%: 4, 4; 10% and 23%: 3, 5; 37% and 50%: 2, 6. A touch at recency
    // position p (distinct pages since its last touch) is an event when
    // some target would make it a hit, 2 <= p < 6; event k weighs q^k with
    // q = 5^(1/4) (d^4 = 0.2). A disk fault costs 400 and a cache hit 100
    // in the analysis.
    //
    // Phase 1, 0..5 three times. First touches are no events; 4 evicts 0,
    // compressed and spilled (0% target). 0 then faults from disk at p = 4
    // (event 1): a fault at 0%, a hit at every other share, so 10% wins
    // (ties go to the smaller share); U = 3 compresses 1 and 2. Each of the
    // next nine touches (events 2-10, p = 4) is a cache hit that
    // compresses the oldest uncompressed page.
    //
    // Phase 2, 0..4 three times: events 11-14 are more hits at p = 4,
    // then hits at p = 3, which only the compressed shares pay for. 0%
    // wins once 100 S(15, 14 + n) > 300 S(1, 14) (S: sums of q^k), that
    // is q^n > 3.989, n = 4: at event 18. U goes back to 4, nothing is
    // compressed, and the cached page 4 spills. The last four touches are
    // in memory.
    let mut refs: Vec<u32> = (0..3).flat_map(|_| 0..5).collect();
    refs.extend((0..3).flat_map(|_| 0..4));
    let t = trace(&refs);
    let budget = Budget {
        ram_bytes: 4 * 4096,
        page_size: 4096,
    };
    let costs_ns = Costs {
        disk_ns: 400.0,
        codec_ns: 100.0,
        compress_share: 0.5,
    };
    let mut p = ccvm_policy::Adaptive::new(budget, costs_ns);
    let r = simulate(&t, &costs(5, 1984), &mut p, &SimConfig::default());
    let want = SimResult {
        trap_faults: 0,
        zero_faults: 5,
        cache_hits: 9 + 8,
        disk_faults: 1,
        compressions: 1 + 2 + 9 + 7,
        decompressions: 1 + 17,
        disk_writes: 2,
        codec_ns: 19.0 * 10.0 + 18.0 * 20.0,
        paging_ns: 5e6 + 550.0,
    };
    assert_eq!(r, want);
    assert_eq!(p.target_share(), 0.0);
    assert_eq!(p.occupancy(), (4, 0, 1), "page 4 on disk");

    // Stopped one reference earlier, after event 17, 10% still holds.
    let t = trace(&refs[..22]);
    let mut p = ccvm_policy::Adaptive::new(budget, costs_ns);
    simulate(&t, &costs(5, 1984), &mut p, &SimConfig::default());
    assert_eq!(p.target_share(), 0.10);
    assert_eq!(p.occupancy(), (3, 2, 0));
}

#[test]
fn trapped_pages_by_hand() {
    // Four frames, no cache. Trace 0 1 2 3 2 0 4 2 5 1 2.
    // Half the resident pages trapped (the oldest): after 0..3, 0 and 1
    // are trapped. 2 is mapped: unseen. 0 is trapped: seen, newest again,
    // and 2 is trapped in its place. 4 evicts the oldest (1); 3 is
    // trapped. 2: trapped, seen. 5 evicts 3; 0 trapped... 1: disk, evicts
    // 0. 2: still resident (trapped), seen: 3 trapped touches in all.
    let t = trace(&[0, 1, 2, 3, 2, 0, 4, 2, 5, 1, 2]);
    let run = |share| {
        let config = SimConfig {
            trap_share: Some(share),
            ..SimConfig::default()
        };
        simulate(&t, &costs(6, 1000), policy("none", 4, 1.0).as_mut(), &config)
    };
    let want = SimResult {
        trap_faults: 3,
        zero_faults: 6,
        cache_hits: 0,
        disk_faults: 1,
        compressions: 0,
        decompressions: 0,
        disk_writes: 3,
        codec_ns: 0.0,
        paging_ns: 5e6,
    };
    assert_eq!(run(0.5), want);
    // Nothing trapped: references to resident pages are never seen, so
    // pages leave in fault order (FIFO): 4, 5, 1 and 2 evict 0, 1, 2, 3,
    // and 1 and 2 come back from disk.
    let fifo = SimResult {
        trap_faults: 0,
        disk_faults: 2,
        disk_writes: 4,
        paging_ns: 2.0 * 5e6,
        ..want
    };
    assert_eq!(run(0.0), fifo);
    // Every page trapped is exact LRU, as with no trap model at all.
    let exact = simulate(
        &t,
        &costs(6, 1000),
        policy("none", 4, 1.0).as_mut(),
        &SimConfig::default(),
    );
    assert_eq!(
        SimResult {
            trap_faults: 0,
            ..run(1.0)
        },
        exact
    );
}
