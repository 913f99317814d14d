//! The system simulator on hand-worked traces: every cycle, byte and
//! write-back counted by hand below.

use ccvm_cachesim::system::{simulate, Machine, Run, Timing, L2};
use ccvm_cachesim::trace::{Header, LineTrace, LineTraceWriter};
use ccvm_cachesim::{Config, Organization};

enum Ev {
    C(u64, u8),
    R(u64, u64),
    W(u64, u64),
}

/// A trace of `events`; contents records name images by a byte value.
fn trace(events: &[Ev]) -> LineTrace {
    let header = Header {
        program: "hand".into(),
        args: vec![],
        method: "by hand".into(),
    };
    let mut w = LineTraceWriter::new(Vec::new(), &header).unwrap();
    for e in events {
        match *e {
            Ev::C(line, v) => w.contents(line, &[v; 64]).unwrap(),
            Ev::R(line, gap) => w.reference(line, false, gap).unwrap(),
            Ev::W(line, gap) => w.reference(line, true, gap).unwrap(),
        }
    }
    LineTrace::read(&w.finish().unwrap()[..], "hand").unwrap()
}

fn machine(l2: Organization, link: bool) -> Machine {
    Machine {
        // One L1 frame; one L2 set of two frames.
        l1: Config {
            size: 64,
            ways: 1,
            organization: Organization::Plain,
        },
        l2: L2::Fixed(Config {
            size: 128,
            ways: 2,
            organization: l2,
        }),
        timing: Timing {
            l1: 2,
            period: u64::MAX,
            ..Timing::PAPER
        },
        link_compression: link,
    }
}

fn run(t: &LineTrace, sizes: &[u8], m: Machine) -> Run {
    simulate(t, sizes, &m)
}

/// Image 0 (byte 0) compresses to 16 bytes, image 1 (byte 1) not at all.
const SIZES: [u8; 2] = [16, 64];

fn scenario() -> LineTrace {
    use Ev::*;
    trace(&[
        C(0, 0),
        C(1, 1),
        C(2, 1),
        R(0, 1),
        R(0, 1),
        W(1, 0),
        R(2, 0),
        R(0, 0),
        R(1, 0),
    ])
}

#[test]
fn plain_cycles_bytes_and_write_backs() {
    let r = run(&scenario(), &SIZES, machine(Organization::Plain, false));
    // R0: 1+2, miss: 3+10+80 = 93, 7 cycles of transfer: 100. R0: hit, 103.
    // W1: 105, miss: 202. R2: 204, miss, line 0 leaves the L2 clean: 301.
    // R0: 303, miss: 400; line 1 leaves dirty, written back from 400 to 407.
    // R1: 402, miss, its request at 492 finds the link free: 499.
    assert_eq!(r.cycles, 499);
    assert_eq!((r.references, r.instructions), (6, 2));
    assert_eq!((r.l1.hits, r.l1.misses, r.l2.hits, r.l2.misses), (1, 5, 0, 5));
    assert_eq!((r.bytes_read, r.bytes_written, r.writebacks), (5 * 64, 64, 1));
    assert_eq!(r.unknown, 0);
}

#[test]
fn link_compression_moves_compressed_sizes() {
    let r = run(&scenario(), &SIZES, machine(Organization::Plain, true));
    // R0: 3, request 93, 16 bytes in 2 cycles, 8 to decompress: 103. R0: 106.
    // W1: 108 → 205. R2: 207 → 304. R0: 306 → 398 + 8 = 406; line 1's
    // write-back, 64 bytes, 406 → 413. R1: 408 → 498 → 505.
    assert_eq!(r.cycles, 505);
    assert_eq!((r.bytes_read, r.bytes_written), (16 + 64 + 64 + 16 + 64, 64));
}

#[test]
fn a_compressed_l2_holds_four_lines_in_two_frames() {
    use Ev::*;
    let t = trace(&[
        C(0, 0),
        C(1, 0),
        C(2, 0),
        C(3, 0),
        R(0, 0),
        R(1, 0),
        R(2, 0),
        R(3, 0),
        R(0, 0),
    ]);
    let plain = run(&t, &SIZES, machine(Organization::Plain, false));
    assert_eq!((plain.l2.hits, plain.l2.misses), (0, 5));
    for org in [Organization::PairMatching, Organization::Segmented { segments: 4 }] {
        let r = run(&t, &SIZES, machine(org, false));
        assert_eq!((r.l2.hits, r.l2.compressed_hits, r.l2.misses), (1, 1, 4), "{org:?}");
        // The hit costs 2 + 10 + 8 instead of a miss's 2 + 10 + 80 + 7.
        assert_eq!(plain.cycles - r.cycles, 87 - 8, "{org:?}");
    }
}

#[test]
fn a_dirty_line_is_sized_again_when_written_back() {
    use Ev::*;
    // Line 0 is filled compressible, then its contents change to
    // incompressible; its write-back moves 64 bytes, not 16.
    let t = trace(&[C(0, 0), W(0, 0), C(0, 1), R(1, 0), R(2, 0), R(3, 0)]);
    let r = run(&t, &SIZES, machine(Organization::Plain, true));
    assert_eq!((r.writebacks, r.bytes_written), (1, 64));
    assert_eq!(r.unknown, 3, "lines 1 to 3 had no contents");
    assert_eq!(r.bytes_read, 16 + 3 * 64);
}
