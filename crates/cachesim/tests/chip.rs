//! The chip multiprocessor (003 chapter 7): private L2s alone behave as
//! one-core runs; migration keeps a cache-hungry core's lines on a
//! neighbour's idle L2 and brings them back; under random mixes and every
//! policy the directory never loses a line.

use ccvm_cachesim::cmp::{simulate_chip, Chip, Cooperation};
use ccvm_cachesim::system::{simulate, Machine, Timing, L2};
use ccvm_cachesim::trace::{Header, LineTrace, LineTraceWriter};
use ccvm_cachesim::{Config, Organization};

fn trace(refs: impl IntoIterator<Item = (u64, bool)>, lines: u64) -> LineTrace {
    let header = Header {
        program: "generated".into(),
        args: vec![],
        method: "generated".into(),
    };
    let mut w = LineTraceWriter::new(Vec::new(), &header).unwrap();
    for l in 0..lines {
        // Half the lines compress well (image 0), half not (image 1).
        w.contents(l, &if l % 2 == 0 { [0u8; 64] } else { [l as u8; 64] })
            .unwrap();
    }
    for (line, write) in refs {
        w.reference(line, write, 2).unwrap();
    }
    LineTrace::read(&w.finish().unwrap()[..], "generated").unwrap()
}

fn sizes(t: &LineTrace) -> Vec<u8> {
    t.images()
        .iter()
        .map(|i| if i.iter().all(|&b| b == 0) { 16 } else { 64 })
        .collect()
}

fn l1() -> Config {
    Config {
        size: 1024,
        ways: 2,
        organization: Organization::Plain,
    }
}

fn chip(cooperation: Cooperation) -> Chip {
    let mut c = Chip::paper(l1(), 16 * 1024, 8, cooperation);
    c.timing.period = 20_000;
    c
}

#[test]
fn private_cores_miss_as_they_would_alone() {
    let mut rng = fastrand::Rng::with_seed(4);
    let a = trace((0..60_000).map(|_| (rng.u64(..600), rng.bool())), 600);
    let b = trace((0..60_000).map(|i| (i % 300, false)), 300);
    let (sa, sb) = (sizes(&a), sizes(&b));
    let runs = simulate_chip(&[(&a, &sa), (&b, &sb)], &chip(Cooperation::Private));
    for (run, (t, s)) in runs.iter().zip([(&a, &sa), (&b, &sb)]) {
        let alone = simulate(
            t,
            s,
            &Machine {
                l1: l1(),
                l2: L2::Fixed(Config {
                    size: 16 * 1024,
                    ways: 8,
                    organization: Organization::Plain,
                }),
                timing: Timing::PAPER,
                link_compression: false,
            },
        );
        assert_eq!(
            (run.l1, run.l2.hits, run.l2.misses),
            (alone.l1, alone.l2.hits, alone.l2.misses)
        );
        assert_eq!(
            (run.bytes_read, run.bytes_written),
            (alone.bytes_read, alone.bytes_written)
        );
        // Sharing the link can only delay.
        assert!(run.cycles >= alone.cycles);
    }
}

/// Core 0 reuses 320 lines, 1.25 times its L2, in loops: every line it
/// reuses was pushed out, the gain of more cache is high. Core 1 keeps to
/// 16 lines: its L2 idles.
fn hungry_and_idle() -> (LineTrace, LineTrace) {
    let mut rng = fastrand::Rng::with_seed(8);
    let hungry = trace(
        (0..200_000).map(|i| {
            if i % 5 == 4 {
                (rng.u64(..320), true)
            } else {
                ((i / 5) % 320, false)
            }
        }),
        320,
    );
    let idle = trace((0..200_000).map(|i| (i % 16, false)), 16);
    (hungry, idle)
}

#[test]
fn migration_keeps_a_hungry_cores_lines_on_chip() {
    let (hungry, idle) = hungry_and_idle();
    let (sh, si) = (sizes(&hungry), sizes(&idle));
    let pair = [(&hungry, &sh[..]), (&idle, &si[..])];
    let private = simulate_chip(&pair, &chip(Cooperation::Private));
    for cooperation in [Cooperation::Migration, Cooperation::Cooperative] {
        let runs = simulate_chip(&pair, &chip(cooperation));
        assert!(runs[0].remote_hits > 10_000, "{cooperation:?}: {}", runs[0].remote_hits);
        assert_eq!(runs[1].remote_hits, 0, "the idle core has nothing elsewhere");
        assert!(
            runs[0].bytes_read * 2 < private[0].bytes_read,
            "{cooperation:?}: memory reads {} against {}",
            runs[0].bytes_read,
            private[0].bytes_read
        );
        assert!(runs[0].ipc() > private[0].ipc() * 1.1, "{cooperation:?}");
        // The host's own lines fit beside the guests.
        assert_eq!(runs[1].l2.misses, private[1].l2.misses, "{cooperation:?}");
    }
    let compression = simulate_chip(&pair, &chip(Cooperation::Compression));
    assert_eq!(compression[0].remote_hits, 0);
}

#[test]
fn random_mixes_lose_nothing() {
    // The simulator asserts the directory's and inclusion's invariants on
    // every step; random mixes under every policy must run to the end
    // with every reference counted.
    for seed in 0..6 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let traces: Vec<LineTrace> = (0..3)
            .map(|_| {
                let span = rng.u64(50..900);
                trace((0..30_000).map(|_| (rng.u64(..span), rng.u8(..4) == 0)), span)
            })
            .collect();
        let sizes: Vec<Vec<u8>> = traces.iter().map(sizes).collect();
        let mix: Vec<(&LineTrace, &[u8])> = traces.iter().zip(&sizes).map(|(t, s)| (t, &s[..])).collect();
        for cooperation in [
            Cooperation::Private,
            Cooperation::Compression,
            Cooperation::Migration,
            Cooperation::Cooperative,
        ] {
            let mut c = chip(cooperation);
            c.timing.period = 2_000;
            c.thresholds.t1 = 0.0;
            c.thresholds.t2 = 0.001;
            c.t3 = 0.0;
            for run in simulate_chip(&mix, &c) {
                assert_eq!(run.references, 30_000);
                assert_eq!(run.l1.hits + run.l1.misses, 30_000);
                assert_eq!(run.l2.hits + run.l2.misses, run.l1.misses);
            }
        }
    }
}
