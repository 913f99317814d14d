//! The `ccvm` command line: bad input gives one clear line and a failing
//! exit status; good input gives well-formed reports.

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one sequence of steps and checks; the limit is for the code under test"
)]

mod common;

use std::process::Command;

use common::{ccvm, fails_with_one_line, scratch_dir, small_trace};

#[test]
fn bad_corpus_folders_and_files_give_one_line() {
    let missing = std::env::temp_dir().join("ccvm-no-such-folder");
    fails_with_one_line(
        &ccvm(&["bench", "codecs", "--corpus", missing.to_str().unwrap()]),
        &["ccvm-no-such-folder", "does not exist"],
    );
    let empty = scratch_dir("empty");
    fails_with_one_line(
        &ccvm(&["bench", "codecs", "--corpus", empty.to_str().unwrap()]),
        &["has no page files"],
    );
    let odd = scratch_dir("odd");
    std::fs::write(odd.join("short.bin"), vec![7u8; 5000]).unwrap();
    fails_with_one_line(
        &ccvm(&["bench", "codecs", "--corpus", odd.to_str().unwrap()]),
        &["short.bin", "5000 bytes is not a multiple of 4096"],
    );
    for d in [empty, odd] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn unknown_codec_lists_the_known_ones() {
    fails_with_one_line(
        &ccvm(&["bench", "codecs", "--codec", "gzip"]),
        &["unknown codec 'gzip'", "wkdm", "lz4"],
    );
}

#[test]
fn bench_reports_json_and_csv_on_any_page_folder() {
    let dir = scratch_dir("pages");
    // Two pages of real-shaped data: small integers, and text.
    let ints: Vec<u8> = (0..1024u32).flat_map(|i| (i % 300).to_le_bytes()).collect();
    let text: Vec<u8> = b"page of text in memory ".iter().copied().cycle().take(4096).collect();
    std::fs::write(dir.join("mixed"), [ints, text].concat()).unwrap();
    let corpus = dir.to_str().unwrap();

    let out = ccvm(&[
        "bench", "codecs", "--corpus", corpus, "--codec", "wkdm", "--codec", "lz4", "--passes", "1", "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 4, "two codecs, one file plus the total each");
    for r in rows {
        assert_eq!(r["pages"], 2);
        // WKdm halves neither page of text; both codecs still shrink the file.
        assert!(r["ratio"].as_f64().unwrap() > 1.2, "{r}");
        assert!(r["symmetric_mbps"].as_f64().unwrap() > 0.0);
    }

    let out = ccvm(&[
        "bench", "codecs", "--corpus", corpus, "--codec", "pbpm", "--passes", "1", "--csv",
    ]);
    assert!(out.status.success());
    let csv = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("file,codec,pages,ratio"));
    assert_eq!(lines.len(), 3);
    assert!(lines[1].starts_with("mixed,pbpm,2,"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn cache_line_blocks_are_measured_and_bad_sizes_refused() {
    let out = ccvm(&[
        "bench", "codecs", "--codec", "cpack", "--block", "64", "--passes", "1", "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let all = rows.as_array().unwrap().iter().find(|r| r["file"] == "all").unwrap();
    assert_eq!(all["block"], 64);
    // C-Pack was made for lines: real heap lines shrink.
    assert!(all["ratio"].as_f64().unwrap() > 1.3, "{all}");
    fails_with_one_line(
        &ccvm(&["bench", "codecs", "--block", "100"]),
        &["--block 100", "divides 4096"],
    );
}

#[test]
fn bench_store_reports_each_allocator_and_refuses_bad_settings() {
    let dir = scratch_dir("store");
    let pages: Vec<u8> = (0..64u32)
        .flat_map(|p| (0..1024u32).flat_map(move |i| (i % (40 + p)).to_le_bytes()))
        .collect();
    std::fs::write(dir.join("pages"), pages).unwrap();
    let corpus = dir.to_str().unwrap();
    let out = ccvm(&[
        "bench",
        "store",
        "--corpus",
        corpus,
        "--allocator",
        "rm",
        "--allocator",
        "zs",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for r in rows {
        assert_eq!(r["pages"], 64);
        assert!(r["compressed_bytes"].as_u64().unwrap() < 64 * 4096 / 2, "{r}");
        assert!(r["mem_used"].as_u64().unwrap() >= r["compressed_bytes"].as_u64().unwrap());
    }
    fails_with_one_line(
        &ccvm(&["bench", "store", "--corpus", corpus, "--allocator", "slab"]),
        &["unknown allocator 'slab'", "rm"],
    );
    fails_with_one_line(
        &ccvm(&["bench", "store", "--corpus", corpus, "--chunk", "5000"]),
        &["chunk size 5000 is not a power of two"],
    );
    // Throughput with two threads: every page is got back as put (the
    // command fails otherwise), and both phases report a rate.
    let out = ccvm(&[
        "bench",
        "store",
        "--corpus",
        corpus,
        "--allocator",
        "rm",
        "--codec",
        "wordlz",
        "--threads",
        "2",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &rows.as_array().unwrap()[0];
    assert_eq!((r["threads"].as_u64(), r["pages"].as_u64()), (Some(2), Some(64)));
    assert!(
        r["put_mbps"].as_f64().unwrap() > 0.0 && r["get_mbps"].as_f64().unwrap() > 0.0,
        "{r}"
    );
    fails_with_one_line(
        &ccvm(&["bench", "store", "--corpus", corpus, "--threads", "0"]),
        &["--threads 0"],
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bad_run_settings_give_one_line() {
    fails_with_one_line(
        &ccvm(&["run", "--workload", "nosuch", "--size", "4M", "--ram", "1M"]),
        &["unknown workload 'nosuch'", "hashindex"],
    );
    // clap's own errors add a hint line after the one that matters.
    let out = ccvm(&["run", "--workload", "matmul", "--size", "4Q", "--ram", "1M"]);
    assert!(!out.status.success());
    let first = String::from_utf8_lossy(&out.stderr)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(
        first.contains("unknown size unit 'q' in '4Q'; use K, M, G or T"),
        "{first}"
    );
    // A matmul run of 4 MiB in 1 MiB with one wrong setting each.
    for (extra, needles) in [
        (&["--codec", "zip"][..], &["unknown codec"][..]),
        (&["--uncompressed-share", "2"], &["between 0 and 1"]),
        (&["--policy", "lfu"], &["unknown policy 'lfu'", "adaptive-safe"]),
        (
            &["--swap-dir", "/no/such/dir"],
            &["cannot create a swap file in /no/such/dir", "--swap-dir"],
        ),
    ] {
        let mut args = vec!["run", "--workload", "matmul", "--size", "4M", "--ram", "1M"];
        args.extend_from_slice(extra);
        fails_with_one_line(&ccvm(&args), needles);
    }
    // `bench faults` checks its share before it sets anything up.
    fails_with_one_line(
        &ccvm(&["bench", "faults", "--share", "2"]),
        &["--share 2 is not between 0.05 and 0.95"],
    );
}

/// Without userfaultfd rights (an unprivileged user, with
/// `vm.unprivileged_userfaultfd` at 0 and /dev/userfaultfd root-only), the
/// run says so and what to do. Needs root to switch user; skipped otherwise.
#[test]
fn without_userfaultfd_rights_the_run_says_what_to_do() {
    let unprivileged = std::fs::read_to_string("/proc/sys/vm/unprivileged_userfaultfd").unwrap_or_default();
    let is_root = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
    if !is_root || unprivileged.trim() != "0" || Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipped: needs root, setpriv and vm.unprivileged_userfaultfd=0");
        return;
    }
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            env!("CARGO_BIN_EXE_ccvm"),
        ])
        .args(["run", "--workload", "matmul", "--size", "2M", "--ram", "1M"])
        .output()
        .unwrap();
    fails_with_one_line(
        &out,
        &[
            "userfaultfd is not available",
            "run as root",
            "unprivileged_userfaultfd=1",
        ],
    );
}

#[test]
fn run_reports_a_matching_checksum_and_the_faults() {
    // Compression in the faulting thread: with the helper process, a
    // loaded machine (the other tests run alongside) can leave every evicted
    // page still in the helper's ring when it is touched again, so that no
    // fault is served from the cache (1 run in 10 under two busy loops).
    // A fixed split, so that the cache is used whatever the guard decides,
    // and 4 MiB: about 1.5 MiB of it is ccvm's own (tables, buffers).
    let out = ccvm(&[
        "run",
        "--workload",
        "matmul",
        "--size",
        "8M",
        "--ram",
        "4M",
        "--policy",
        "fixed50",
        "--compress-in-fault",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["checksum_ok"], true);
    assert!(v["stats"]["faults_cache"].as_u64().unwrap() > 0);
    assert!(v["stats"]["latency_cache"]["p50_us"].as_f64().unwrap() > 0.0);
}

#[test]
fn trace_then_sweep_and_a_damaged_trace_gives_file_and_offset() {
    let dir = scratch_dir("sim");
    let trace = dir.join("s.trace");
    small_trace(&trace);
    let results = dir.join("results");
    let out = ccvm(&[
        "sim",
        "sweep",
        trace.to_str().unwrap(),
        "--out",
        results.to_str().unwrap(),
        "--sizes",
        "4",
        "--runs",
        "1",
        "--policy",
        "adaptive",
        "--codec",
        "wkdm",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let csv = std::fs::read_to_string(results.join("sweep.csv")).unwrap();
    assert!(csv.lines().count() > 8, "{csv}");
    assert!(results.join("fig3_s.svg").exists() && results.join("fig6_s.png").exists());
    let report = ccvm(&["sim", "report", results.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(
        text.contains("adaptive") && text.contains("completion, % change"),
        "{text}"
    );

    // A CPU 50 times slower runs the program 50 times longer too, so more
    // sizes page little enough relative to it: the region widens.
    let interesting = |csv: &str| {
        csv.lines()
            .filter(|l| l.starts_with("s,lru,") && l.split(',').nth(7) == Some("true"))
            .count()
    };
    let slow = dir.join("slow");
    let mut args = vec!["sim", "sweep", trace.to_str().unwrap(), "--out", slow.to_str().unwrap()];
    args.extend(["--sizes", "4", "--runs", "1", "--policy", "adaptive", "--codec", "wkdm"]);
    args.extend(["--cpu-factor", "50"]);
    let out = ccvm(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let slow_csv = std::fs::read_to_string(slow.join("sweep.csv")).unwrap();
    assert!(
        slow_csv
            .lines()
            .nth(1)
            .unwrap()
            .split(',')
            .nth(4)
            .and_then(|f| f.parse::<f64>().ok())
            == Some(50.0),
        "{slow_csv}"
    );
    assert!(interesting(&slow_csv) > interesting(&csv), "{slow_csv}\n{csv}");
    let report = ccvm(&["sim", "report", slow.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&report.stdout).contains("50 times slower"));
    *args.last_mut().unwrap() = "0";
    fails_with_one_line(&ccvm(&args), &["--cpu-factor", "must be a positive number"]);
    *args.last_mut().unwrap() = "1";
    // Exact sizes instead of log-spaced ones.
    let exact = dir.join("exact");
    let mut exact_args = vec![
        "sim",
        "sweep",
        trace.to_str().unwrap(),
        "--out",
        exact.to_str().unwrap(),
    ];
    exact_args.extend([
        "--runs", "1", "--policy", "adaptive", "--codec", "wkdm", "--pages", "40,100",
    ]);
    let out = ccvm(&exact_args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut sizes: Vec<String> = std::fs::read_to_string(exact.join("sweep.csv"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(5).unwrap().to_string())
        .collect();
    sizes.sort();
    sizes.dedup();
    assert_eq!(sizes, ["100", "40"]);
    args.extend(["--disk-ms", "0.625,-1"]);
    fails_with_one_line(&ccvm(&args), &["--disk-ms", "must be a positive number", "-1"]);

    let bytes = std::fs::read(&trace).unwrap();
    let cut = dir.join("cut.trace");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let out = ccvm(&[
        "sim",
        "sweep",
        cut.to_str().unwrap(),
        "--out",
        results.to_str().unwrap(),
    ]);
    fails_with_one_line(&out, &[cut.to_str().unwrap(), "record offset"]);
    std::fs::remove_dir_all(&dir).unwrap();
}
