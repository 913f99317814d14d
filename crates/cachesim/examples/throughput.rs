//! References per second through a two-level hierarchy (32 KiB 8-way L1,
//! 1 MiB 8-way L2), plain and compressed, with line sizes from real memory
//! (the corpus's 64-byte lines under C-Pack) and a synthetic reference
//! stream: mostly walks through 4 KiB pages, sometimes a jump within a
//! working set of 4 MiB. The bar is 10 million a second.
//!
//! `cargo run --release -p ccvm-cachesim --example throughput`

use std::time::Instant;

use ccvm_cachesim::{Config, Hierarchy, Latencies, LineSizes, Organization, LINE};

/// Line sizes from a table made once: line `n` takes the size of a corpus
/// line picked by hashing `n`, so that the working set samples the whole
/// corpus rather than its first file.
struct Table(Vec<u8>);

impl LineSizes for Table {
    #[inline]
    fn size(&mut self, line: u64) -> usize {
        let k = (line.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 24) as usize;
        self.0[k % self.0.len()] as usize
    }
}

fn main() {
    let files = ccvm_corpus::load_dir(ccvm_corpus::default_dir()).expect("the bundled corpus");
    let mut codec = ccvm_codec::by_name("cpack").expect("C-Pack");
    let mut out = [0u8; LINE];
    let sizes: Vec<u8> = files
        .iter()
        .flat_map(|f| f.data.chunks_exact(LINE))
        .map(|l| codec.compress(l, &mut out).map_or(LINE, |n| n.min(LINE)) as u8)
        .collect();
    let refs = 20_000_000u64;
    let mut rng = fastrand::Rng::with_seed(7);
    let working = 4u64 << 20;
    let trace: Vec<u64> = {
        let mut addr = 0u64;
        (0..refs)
            .map(|_| {
                addr = if rng.u8(..100) < 97 {
                    (addr + 8) % working
                } else {
                    rng.u64(..working) & !7
                };
                addr
            })
            .collect()
    };
    let lat = Latencies {
        l1: 2,
        l2: 12,
        decompress: 4,
        memory: 200,
    };
    let l1 = Config {
        size: 32 << 10,
        ways: 8,
        organization: Organization::Plain,
    };
    println!("{refs} references, working set 4 MiB, line sizes from C-Pack on the corpus");
    println!(
        "{:>22} {:>10} {:>10} {:>14} {:>12}",
        "L2 (1 MiB, 8-way)", "L2 misses", "M refs/s", "held/frames", "compressed"
    );
    for (name, organization) in [
        ("plain", Organization::Plain),
        ("segmented (4)", Organization::Segmented { segments: 4 }),
        ("segmented (8)", Organization::Segmented { segments: 8 }),
        ("pair-matching", Organization::PairMatching),
    ] {
        let l2 = Config {
            size: 1 << 20,
            ways: 8,
            organization,
        };
        let mut h = Hierarchy::new(l1, l2, Table(sizes.clone()), lat);
        let started = Instant::now();
        for &a in &trace {
            h.access(a);
        }
        let secs = started.elapsed().as_secs_f64();
        let r = h.report();
        let (held, compressed) = h.l2().occupancy();
        println!(
            "{name:>22} {:>10} {:>10.1} {:>14.2} {:>11.1}%",
            r.l2.misses,
            refs as f64 / secs / 1e6,
            held as f64 / h.l2().frames() as f64,
            compressed as f64 * 100.0 / held.max(1) as f64
        );
    }
}
