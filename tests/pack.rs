//! `ccvm pack`, `ccvm map` and `ccvm bench pack` as a person uses them: a
//! real executable packed, mapped and written back byte for byte; damaged
//! and wrong files refused with one line naming what is wrong.

mod common;

use common::{ccvm, fails_with_one_line, scratch_dir};

/// A real executable to pack: the test binary's own `ccvm`.
fn executable() -> &'static str {
    env!("CARGO_BIN_EXE_ccvm")
}

#[test]
fn a_packed_executable_maps_back_byte_for_byte() {
    let dir = scratch_dir("pack");
    let packed = dir.join("ccvm.ccz");
    let back = dir.join("ccvm.back");
    for codec in ["exepack2", "lz4"] {
        let out = ccvm(&["pack", executable(), "-o", packed.to_str().unwrap(), "--codec", codec]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains(&format!("compressed with {codec}")), "{said}");
        let original = std::fs::read(executable()).unwrap();
        assert!(
            std::fs::metadata(&packed).unwrap().len() < original.len() as u64 * 3 / 4,
            "{said}"
        );
        let out = ccvm(&[
            "map",
            packed.to_str().unwrap(),
            "--verify",
            "--output",
            back.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(
            std::fs::read(&back).unwrap() == original,
            "{codec}: the mapped bytes differ"
        );
        let out = ccvm(&[
            "map",
            packed.to_str().unwrap(),
            "--touch",
            "sparse",
            "--buffered",
            "--csv",
        ]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let csv = String::from_utf8_lossy(&out.stdout);
        let row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
        let pages: usize = row[3].parse().unwrap();
        assert_eq!(
            pages,
            original.len().div_ceil(4096).div_ceil(5),
            "a fifth of the pages: {csv}"
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn damaged_and_wrong_files_give_one_line() {
    let dir = scratch_dir("pack-bad");
    let packed = dir.join("ccvm.ccz");
    let p = packed.to_str().unwrap();
    assert!(ccvm(&["pack", executable(), "-o", p]).status.success());
    let good = std::fs::read(&packed).unwrap();
    // A byte of page data changed: --verify names the page and offset.
    let mut bad = good.clone();
    let at = bad.len() - 100;
    bad[at] ^= 0xFF;
    std::fs::write(&packed, &bad).unwrap();
    fails_with_one_line(&ccvm(&["map", p, "--verify"]), &["ccvm.ccz", "page ", "file offset "]);
    // Without --verify the damaged page is found when it is touched: the
    // process stops with one line, as a program whose mapped file cannot
    // be read gets SIGBUS.
    let out = ccvm(&["map", p]);
    fails_with_one_line(&out, &["ccvm.ccz", "page ", "stopping"]);
    assert_eq!(out.status.code(), Some(3));
    // A damaged index, a truncated file, a file that is not a .ccz at all.
    let mut bad = good.clone();
    bad[64 + 5] ^= 1;
    std::fs::write(&packed, &bad).unwrap();
    fails_with_one_line(&ccvm(&["map", p]), &["index's CRC does not match"]);
    std::fs::write(&packed, &good[..good.len() / 2]).unwrap();
    fails_with_one_line(&ccvm(&["map", p, "--verify"]), &["page "]);
    fails_with_one_line(&ccvm(&["map", executable()]), &["not a .ccz file"]);
    fails_with_one_line(
        &ccvm(&["map", dir.join("missing.ccz").to_str().unwrap()]),
        &["missing.ccz"],
    );
    fails_with_one_line(
        &ccvm(&["pack", executable(), "-o", p, "--codec", "gzip"]),
        &["unknown codec 'gzip'"],
    );
    fails_with_one_line(&ccvm(&["bench", "pack", dir.join("none").to_str().unwrap()]), &["none"]);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bench_pack_loads_every_variant_and_checks_it() {
    let dir = scratch_dir("bench-pack");
    let out = ccvm(&[
        "bench",
        "pack",
        executable(),
        "--repeat",
        "1",
        "--codec",
        "exepack2",
        "--dir",
        dir.to_str().unwrap(),
        "--csv",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let csv = String::from_utf8_lossy(&out.stdout);
    let variants: Vec<&str> = csv.lines().skip(1).map(|l| l.split(',').nth(1).unwrap()).collect();
    assert_eq!(variants.len(), 6, "mmap, copy, exepack2 for two patterns: {csv}");
    assert!(variants.iter().any(|v| v.starts_with("ccz exepack2")), "{csv}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "packed files are removed");
    std::fs::remove_dir_all(dir).unwrap();
}
