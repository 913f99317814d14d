//! `ccvm sim record-lines` and `ccvm sim cache` end to end: a real program
//! traced under Valgrind's Lackey, its line contents checked against what
//! it wrote, the trace simulated; bad input refused in one line.

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one sequence of steps and checks; the limit is for the code under test"
)]

mod common;

use std::path::Path;
use std::process::Command;

use ccvm_cachesim::system::{simulate, Machine, Timing, L2};
use ccvm_cachesim::trace::{Event, LineTrace};
use ccvm_cachesim::{Config, Organization};
use common::{ccvm, fails_with_one_line, scratch_dir};

fn have_valgrind() -> bool {
    let ok = Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: valgrind is not installed (.ci/run installs it)");
    }
    ok
}

fn build_pattern(dir: &Path) -> std::path::PathBuf {
    let out = dir.join("pattern");
    let status = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&out)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/lines/pattern.c"))
        .status()
        .expect("a C compiler (cc)");
    assert!(status.success());
    out
}

#[test]
fn a_traced_program_shows_what_it_wrote() {
    if !have_valgrind() {
        return;
    }
    let dir = scratch_dir("lines");
    let program = build_pattern(&dir);
    let trace_path = dir.join("pattern.cclt");
    let out = ccvm(&[
        "sim",
        "record-lines",
        "-o",
        trace_path.to_str().unwrap(),
        "--",
        program.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The program's own output went through.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        (1024 * (b'c' as u64 + b'c' as u64 + b'v' as u64 + b'm' as u64)).to_string()
    );
    let t = LineTrace::open(&trace_path).unwrap();
    // 16 Ki stores of 4 bytes and 4 Ki loads at least, besides the loader's.
    assert!(t.references() > 20_000, "{}", t.references());
    assert!(t.instructions() > t.references());
    let pattern: Vec<u8> = b"ccvm".iter().copied().cycle().take(64).collect();
    let image = t
        .images()
        .iter()
        .position(|i| i[..] == pattern[..])
        .expect("the pattern's line image") as u32;
    let lines: std::collections::HashSet<u64> = t
        .events()
        .filter_map(|e| match e {
            Event::Contents { line, image: i } if i == image => Some(line),
            _ => None,
        })
        .collect();
    // The 64 KiB buffer: 1024 lines (a line or two at its ends may share
    // malloc's header and differ).
    assert!(
        (1020..=1026).contains(&lines.len()),
        "{} lines hold the pattern",
        lines.len()
    );

    // Simulated, nearly every fill has contents.
    let machine = Machine {
        l1: Config {
            size: 32 << 10,
            ways: 2,
            organization: Organization::Plain,
        },
        l2: L2::Fixed(Config {
            size: 256 << 10,
            ways: 8,
            organization: Organization::PairMatching,
        }),
        timing: Timing::PAPER,
        link_compression: true,
    };
    let mut codec = ccvm_codec::by_name("cpack").unwrap();
    let r = simulate(&t, &t.sizes(codec.as_mut()), &machine);
    assert!(r.l2.misses > 1024, "the buffer's lines were all fetched");
    assert!(
        r.unknown * 100 < r.l2.misses,
        "{} of {} fills without contents",
        r.unknown,
        r.l2.misses
    );
    assert!(
        r.bytes_read < r.l2.misses * 64,
        "the pattern crosses the link compressed"
    );

    let out = ccvm(&["sim", "cache", trace_path.to_str().unwrap(), "--l2", "64K", "--link"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8_lossy(&out.stdout);
    for org in ["plain", "seg8", "pair", "adaptive"] {
        assert_eq!(
            table
                .lines()
                .filter(|l| l.starts_with("pattern") && l.contains(org))
                .count(),
            2,
            "{table}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_input_is_one_line() {
    let dir = scratch_dir("lines-bad");
    let missing = dir.join("none.cclt");
    fails_with_one_line(&ccvm(&["sim", "cache", missing.to_str().unwrap()]), &["none.cclt"]);
    let junk = dir.join("junk.cclt");
    std::fs::write(&junk, b"CCVMLNT\0\x01\0\0\0\x02\0\0\0{}").unwrap();
    fails_with_one_line(
        &ccvm(&["sim", "cache", junk.to_str().unwrap()]),
        &["junk.cclt", "header"],
    );
    std::fs::write(&junk, b"not a trace at all").unwrap();
    fails_with_one_line(&ccvm(&["sim", "cache", junk.to_str().unwrap()]), &["bad magic"]);
    let mut w = ccvm_cachesim::trace::LineTraceWriter::new(
        Vec::new(),
        &ccvm_cachesim::trace::Header {
            program: "x".into(),
            args: vec![],
            method: "test".into(),
        },
    )
    .unwrap();
    w.reference(1, false, 1).unwrap();
    let good = dir.join("good.cclt");
    std::fs::write(&good, w.finish().unwrap()).unwrap();
    fails_with_one_line(
        &ccvm(&["sim", "cache", good.to_str().unwrap(), "--org", "bogus"]),
        &["bogus", "pair"],
    );
    fails_with_one_line(
        &ccvm(&["sim", "cache", good.to_str().unwrap(), "--l2", "100K"]),
        &["power-of-two"],
    );
    fails_with_one_line(
        &ccvm(&["sim", "cache", good.to_str().unwrap(), "--codec", "nope"]),
        &["nope"],
    );
    fails_with_one_line(&ccvm(&["sim", "record-lines", "-o", "/tmp/x.cclt"]), &["--workload"]);
    std::fs::remove_dir_all(&dir).unwrap();
}
