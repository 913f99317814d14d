//! Criterion benchmarks of replay speed, in references per second: the
//! LRU stack-distance pass and each policy's simulation, on a synthetic
//! trace of 1M references over 20,000 pages with a skewed, phased
//! locality (a hot set that drifts, plus scans), at half the footprint.

use ccvm_policy::{Budget, Costs, Params};
use ccvm_sim::{lru_faults, simulate, CodecCosts, SimConfig, Trace};
use ccvm_trace::{Footer, Header};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const PAGES: u32 = 20_000;
const REFS: usize = 1_000_000;

fn synthetic() -> Trace {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut refs = Vec::with_capacity(REFS);
    for i in 0..REFS {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let phase = (i / 100_000) as u32 * 1500;
        let page = match x % 10 {
            // A hot set of 2,000 pages that moves with each phase.
            0..=6 => (phase + (x >> 8) as u32 % 2000) % PAGES,
            // Scans.
            7 | 8 => (i as u32 / 3) % PAGES,
            _ => (x >> 8) as u32 % PAGES,
        };
        refs.push(page);
    }
    Trace {
        header: Header {
            workload: "synthetic".into(),
            seed: 0,
            region_bytes: PAGES as u64 * 4096,
            window_pages: 0,
        },
        footer: Footer {
            run_time_ns: 1,
            references: REFS as u64,
            images: PAGES as u64,
        },
        refs,
        images: (0..PAGES).map(|p| (0, p, p)).collect(),
        discards: Vec::new(),
        image_count: PAGES,
    }
}

fn replay(c: &mut Criterion) {
    let trace = synthetic();
    let costs = CodecCosts::uniform(PAGES, 2.0, 4000, 2000);
    let mut group = c.benchmark_group("replay");
    group.throughput(Throughput::Elements(REFS as u64));
    group.sample_size(10);
    group.bench_function("lru_stack_pass", |b| {
        b.iter(|| lru_faults(&trace.refs, PAGES as usize, PAGES as usize + 1))
    });
    for name in ["none", "fixed", "adaptive", "adaptive-fine", "zswap", "douglis"] {
        group.bench_function(BenchmarkId::new("simulate", name), |b| {
            b.iter(|| {
                let budget = Budget {
                    ram_bytes: PAGES as u64 / 2 * 4096,
                    page_size: 4096,
                };
                let params = Params {
                    uncompressed_share: 0.5,
                    costs: Costs {
                        disk_ns: 5e6,
                        codec_ns: 6e3,
                        compress_share: 0.5,
                    },
                };
                let mut p = ccvm_policy::by_name(name, budget, params).unwrap();
                simulate(&trace, &costs, p.as_mut(), &SimConfig::default())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, replay);
criterion_main!(benches);
