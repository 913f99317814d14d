//! FMC against CDC (paper 002) on hand-worked traces: every disk read,
//! compressed-cache hit and cycle counted by hand below.

use ccvm_cachesim::memory::{simulate_memory, Cdc, Fmc, MemoryRun, MemorySystem, Scheme, PAGE};
use ccvm_cachesim::trace::{Header, LineTrace, LineTraceWriter};
use ccvm_cachesim::{Config, Organization};

/// A trace whose lines 0, 64 and 128 (pages 0, 1, 2) are zeros and
/// referenced in turn, then whatever `more` writes.
fn trace(more: impl FnOnce(&mut LineTraceWriter<Vec<u8>>)) -> LineTrace {
    let header = Header {
        program: "hand".into(),
        args: vec![],
        method: "by hand".into(),
    };
    let mut w = LineTraceWriter::new(Vec::new(), &header).unwrap();
    for line in [0, 64, 128] {
        w.contents(line, &[0; 64]).unwrap();
    }
    for line in [0, 64, 128] {
        w.reference(line, false, 0).unwrap();
    }
    more(&mut w);
    LineTrace::read(&w.finish().unwrap()[..], "hand").unwrap()
}

/// `memory` bytes behind one L1 frame and one L2 set of two: every
/// reference to a new line reaches memory.
fn system(memory: usize, scheme: Scheme) -> MemorySystem {
    MemorySystem {
        // One L1 frame, one L2 set of two: every reference reaches memory.
        l1: Config {
            size: 64,
            ways: 1,
            organization: Organization::Plain,
        },
        l2: Config {
            size: 128,
            ways: 2,
            organization: Organization::Plain,
        },
        memory,
        memory_latency: 80,
        disk: 1000,
        scheme,
    }
}

/// The three pages, then line 0 again, in two pages of memory.
fn run(scheme: Scheme, codec: &str) -> MemoryRun {
    let t = trace(|w| w.reference(0, false, 0).unwrap());
    simulate_memory(
        &t,
        ccvm_codec::by_name(codec).unwrap().as_mut(),
        &system(2 * PAGE, scheme),
    )
}

const FMC: Fmc = Fmc {
    chipset: 4096,
    chipset_latency: 50,
    block: 256,
    sector: 64,
    decompress: 32,
};

#[test]
fn base_reads_an_evicted_page_from_disk() {
    let r = run(Scheme::Base, "lz4");
    // Three first touches (zero-filled, free): 3 × (10 + 80). Page 0 was
    // pushed out by page 2: 10 + 1000 + 80.
    assert_eq!((r.disk_reads, r.cdc_hits, r.cycles), (1, 0, 3 * 90 + 1090));
    assert_eq!((r.footprint, r.pages_held), (3, 2));
}

#[test]
fn cdc_finds_the_evicted_page_compressed() {
    let cdc = Cdc {
        bytes: PAGE,
        decompress: 50,
        compress: 100,
        path: 1000,
    };
    let r = run(Scheme::Cdc(cdc), "lz4");
    // One uncompressed page: touching pages 1 and 2 pushes 0 and 1 into
    // the CDC (100 each); page 0 comes back from it (50 + 1000) and
    // pushes page 2 in (100).
    assert_eq!((r.disk_reads, r.cdc_hits), (0, 1));
    assert_eq!(r.cycles, 3 * 90 + 2 * 100 + (10 + 50 + 1000 + 80) + 100);
    assert_eq!(r.pages_held, 3);
}

#[test]
fn fmc_holds_compressible_pages_and_hits_its_chipset_cache() {
    let r = run(Scheme::Fmc(FMC), "cpack");
    // Zero pages take a sector per block: 1 KiB each, all three fit.
    // Three misses decompress a block in line (10 + 80 + 32); line 0's
    // block is still in the chipset cache (10 + 50).
    assert_eq!((r.disk_reads, r.chipset_hits, r.pages_held), (0, 1, 3));
    assert_eq!(r.cycles, 3 * 122 + 60);
}

#[test]
fn a_page_leaving_memory_leaves_the_chipset_cache() {
    let r = run(Scheme::ChipsetCache(FMC), "cpack");
    // Uncompressed, page 0 is evicted; its block goes with it, so the
    // last reference reads the disk and misses the chipset cache.
    assert_eq!((r.disk_reads, r.chipset_hits), (1, 0));
    assert_eq!(r.cycles, 3 * 90 + 1090);
}

#[test]
fn fmc_sizes_a_page_again_when_its_contents_change() {
    let t = trace(|w| {
        // Page 0 fills with bytes C-Pack cannot shrink: 4 KiB where it took 1.
        let mut rng = fastrand::Rng::with_seed(1);
        for line in 0..64 {
            let mut b = [0u8; 64];
            rng.fill(&mut b);
            w.contents(line, &b).unwrap();
        }
        w.reference(0, false, 0).unwrap();
        w.reference(64, false, 0).unwrap();
    });
    // Three 1 KiB pages fit; 4 + 1 + 1 KiB do not.
    let system = system(5 * 1024, Scheme::Fmc(FMC));
    let r = simulate_memory(&t, ccvm_codec::by_name("cpack").unwrap().as_mut(), &system);
    // Page 1, the least recent, made room and was read back.
    assert_eq!((r.disk_reads, r.pages_held), (1, 2));
}
