//! Careless and hostile input: sizes, numbers and files that once wrapped
//! around, aborted, panicked or ran unbounded; interrupted runs; and the
//! messages a user gets. Every case is refused with one line before any
//! work, or done right.

mod common;

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{ccvm, fails_with_one_line, quick_sweep, scratch_dir, small_trace};

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

/// Runs `ccvm args` with `TMPDIR=tmp`, sends it SIGINT after 1.5 s, and
/// returns how it ended.
fn interrupted(args: &[&str], tmp: &Path) -> std::process::ExitStatus {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ccvm"))
        .args(args)
        .env("TMPDIR", tmp)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    child.wait().unwrap()
}

/// What is left in `dir` besides `keep`.
fn leftovers(dir: &Path, keep: &[&str]) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect()
}

#[test]
fn sizes_that_are_not_whole_pages_are_refused() {
    for cmd in [
        &["run", "--workload", "matmul", "--ram", "1M"][..],
        &["trace", "--workload", "matmul", "-o", "/dev/null"],
    ] {
        let mut args = cmd.to_vec();
        args.extend(["--size", "1048577"]);
        fails_with_one_line(&ccvm(&args), &["--size 1048577", "4096-byte pages"]);
    }
}

#[test]
fn numbers_out_of_range_are_refused_not_wrapped() {
    for (args, needle) in [
        (
            &["sim", "cache", "x.cclt", "--memory-latency", "18446744073709551615"][..],
            "--memory-latency",
        ),
        (
            &["sim", "cache", "x.cclt", "--decompress", "18446744073709551615"],
            "--decompress",
        ),
        (
            &["sim", "sweep", "x.txt", "--out", "o", "--compress-time", "5s"],
            "at most 4s",
        ),
        (
            &["sim", "sweep", "x.txt", "--out", "o", "--decompress-time", "4295ms"],
            "at most 4s",
        ),
        (
            &["sim", "sweep", "x.txt", "--out", "o", "--ratio", "0.5"],
            "ratio of 1 or more",
        ),
        (
            &[
                "run",
                "--workload",
                "matmul",
                "--size",
                "99999999999999G",
                "--ram",
                "1M",
            ],
            "too large",
        ),
        (
            &["sim", "sweep", "x.txt", "--out", "o", "--runs", "100000000000"],
            "--runs",
        ),
        (
            &["sim", "sweep", "x.txt", "--out", "o", "--sizes", "1000000000"],
            "--sizes",
        ),
        (&["map", "x.ccz", "--readahead", "0"], "--readahead"),
        (
            &[
                "run",
                "--workload",
                "matmul",
                "--size",
                "4M",
                "--ram",
                "1M",
                "--disk-latency",
                "1000000h",
            ],
            "at most 10s",
        ),
    ] {
        let out = ccvm(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        fails_with_one_line(&out, &[needle]);
    }
}

#[test]
fn sizes_are_bounded_by_the_machine_with_a_clear_line() {
    fails_with_one_line(
        &ccvm(&["run", "--workload", "matmul", "--size", "1024G", "--ram", "1M"]),
        &["--size 1.0T", "plain memory", "free"],
    );
    fails_with_one_line(
        &ccvm(&["exec", "--ram", "64T", "--", "/bin/true"]),
        &["--ram 64.0T", "this machine's"],
    );
    fails_with_one_line(
        &ccvm(&["sim", "cache", "--l2", "1024G", "x.cclt"]),
        &["--l2 1.0T", "at most"],
    );
    fails_with_one_line(&ccvm(&["sim", "cache", "--l2", "64G", "x.cclt"]), &["--l2 64.0G"]);
    fails_with_one_line(
        &ccvm(&["mount", "/tmp", "--size", "64T"]),
        &["--size 64.0T", "this machine's"],
    );
    fails_with_one_line(&ccvm(&["mount", "/tmp", "--size", "4K"]), &["at least 1M"]);
    fails_with_one_line(
        &ccvm(&["run", "--workload", "matmul", "--size", "2M", "--ram", "40K"]),
        &["--ram 40.0K", "at least 64.0K"],
    );
}

#[test]
fn a_failed_or_interrupted_run_keeps_the_previous_output() {
    let dir = scratch_dir("keep-output");
    // A packed file with a damaged page: the map fails, the old output stays.
    let data = dir.join("data.bin");
    let bytes: Vec<u8> = (0..16 * 4096u32).map(|i| (i * 7 % 253) as u8).collect();
    std::fs::write(&data, &bytes).unwrap();
    let packed = dir.join("data.ccz");
    assert!(ccvm(&["pack", &s(&data), "-o", &s(&packed), "--codec", "lz4"])
        .status
        .success());
    let mut p = std::fs::read(&packed).unwrap();
    let n = p.len();
    for b in &mut p[n - 2000..n - 1000] {
        *b ^= 0x5a;
    }
    std::fs::write(&packed, &p).unwrap();
    let out_file = dir.join("bf.out");
    std::fs::write(&out_file, "previous").unwrap();
    let out = ccvm(&["map", &s(&packed), "--output", &s(&out_file)]);
    assert!(!out.status.success());
    assert_eq!(std::fs::read_to_string(&out_file).unwrap(), "previous");

    // A trace interrupted half-way leaves the previous trace, and no stray file.
    let trace = dir.join("t.trace");
    std::fs::write(&trace, "previous trace").unwrap();
    let status = interrupted(
        &["trace", "--workload", "graph", "--size", "64M", "-o", &s(&trace)],
        &dir,
    );
    assert!(!status.success());
    assert_eq!(std::fs::read_to_string(&trace).unwrap(), "previous trace");
    let left = leftovers(&dir, &["data.bin", "data.ccz", "bf.out", "t.trace"]);
    assert!(left.is_empty(), "{left:?}");

    if Command::new("valgrind").arg("--version").output().is_ok() {
        let keep = dir.join("keep.cclt");
        std::fs::write(&keep, "previous lines").unwrap();
        let out = ccvm(&["sim", "record-lines", "-o", &s(&keep), "--", "/nonexistent"]);
        assert!(!out.status.success());
        assert_eq!(std::fs::read_to_string(&keep).unwrap(), "previous lines");
    } else {
        eprintln!("skipped the record-lines case: no valgrind");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn traces_are_named_apart_and_their_costs_never_shared() {
    let dir = scratch_dir("same-names");
    let (a, b) = (dir.join("a"), dir.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    small_trace(&a.join("s.trace"));
    // Another program's references under the same file name.
    let out = ccvm(&[
        "trace",
        "--workload",
        "matmul",
        "--size",
        "1M",
        "-o",
        &s(&b.join("s.trace")),
    ]);
    assert!(out.status.success());
    let results = dir.join("results");
    let out = quick_sweep(&[&a.join("s.trace"), &b.join("s.trace")], &results);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let csv = std::fs::read_to_string(results.join("sweep.csv")).unwrap();
    assert!(csv.contains("a_s_trace,") && csv.contains("b_s_trace,"), "{csv}");
    assert!(results.join("fig3_a_s_trace.svg").exists() && results.join("fig3_b_s_trace.svg").exists());
    let costs = std::fs::read_dir(results.join("costs")).unwrap().count();
    assert_eq!(costs, 2, "one cost file per trace, not one for both");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn what_a_trace_says_costs_memory_in_proportion_to_the_file() {
    let dir = scratch_dir("sparse");
    let txt = dir.join("t.txt");
    std::fs::write(&txt, "0\n1\n4294967295\n").unwrap();
    let out = ccvm(&["sim", "sweep", &s(&txt), "--out", &s(&dir.join("o"))]);
    fails_with_one_line(&out, &["t.txt", "4294967296 pages", "at most"]);
    for region in [1u64 << 40, 1 << 44] {
        let path = dir.join(format!("r{region}.trace"));
        let header = ccvm_trace::Header {
            workload: "crafted".into(),
            seed: 1,
            region_bytes: region,
            window_pages: 1,
        };
        let mut w = ccvm_trace::TraceWriter::create(&path, &header).unwrap();
        w.reference(0, true).unwrap();
        w.image(0, &[1; 4096]).unwrap();
        w.reference(1, false).unwrap();
        w.finish(1000).unwrap();
        let out = ccvm(&["sim", "sweep", &s(&path), "--out", &s(&dir.join("o"))]);
        fails_with_one_line(&out, &[path.to_str().unwrap(), "pages", "at most"]);
    }
    assert!(!dir.join("o").exists(), "a refused sweep leaves no folder");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_full_disk_on_standard_output_is_one_line_not_a_panic() {
    let dir = scratch_dir("dev-full");
    let trace = dir.join("s.trace");
    small_trace(&trace);
    let results = dir.join("r");
    let sweep = [
        "sim",
        "sweep",
        &s(&trace),
        "--out",
        &s(&results),
        "--sizes",
        "2",
        "--runs",
        "1",
        "--policy",
        "adaptive",
        "--codec",
        "wkdm",
    ]
    .map(String::from);
    let report = ["sim", "report", &s(&results)].map(String::from);
    let run = ["run", "--workload", "matmul", "--size", "2M", "--ram", "1M"].map(String::from);
    for args in [
        vec!["codecs".to_string()],
        sweep.to_vec(),
        report.to_vec(),
        run.to_vec(),
    ] {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_ccvm"))
            .args(&args)
            .stdout(full)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("writing to standard output: No space left on device"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_device_or_fifo_as_the_program_is_refused_at_once() {
    let dir = scratch_dir("exec-dev");
    let fifo = dir.join("fifo");
    let c = std::ffi::CString::new(s(&fifo)).unwrap();
    // SAFETY: a valid, NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for program in ["/dev/zero", fifo.to_str().unwrap()] {
        for extra in [&[][..], &["--unpaged"]] {
            let mut args = vec!["exec"];
            args.extend_from_slice(extra);
            args.extend(["--", program]);
            fails_with_one_line(&ccvm(&args), &[program, "not a regular file"]);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn interrupted_and_piped_runs_leave_nothing_behind() {
    let tmp = scratch_dir("interrupted");
    // A closed pipe on the report's stream: the report folder goes too.
    let mut child = Command::new(env!("CARGO_BIN_EXE_ccvm"))
        .args(["exec", "--ram", "8M", "--json", "--", "/bin/sh", "-c", "sleep 0.3"])
        .env("TMPDIR", &tmp)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let status = child.wait().unwrap();
    assert!(!status.success());
    assert!(
        leftovers(&tmp, &[]).iter().all(|n| n.starts_with("ccvm-")),
        "{:?}",
        leftovers(&tmp, &[])
    );

    // SIGINT sent to `trace --exec`: the program is stopped too, and its
    // traces' folder removed.
    let out_dir = scratch_dir("interrupted-out");
    let t_out = s(&out_dir.join("t.trace"));
    let args = [
        "trace",
        "--exec",
        "-o",
        &t_out,
        "--",
        "/bin/sh",
        "-c",
        "sleep 0.5; exec sleep 30",
    ];
    let status = interrupted(&args, &tmp);
    assert!(!status.success());
    assert!(leftovers(&out_dir, &[]).is_empty(), "{:?}", leftovers(&out_dir, &[]));
    let sleeping = Command::new("pgrep").args(["-f", "exec sleep 30"]).output();
    if let Ok(p) = sleeping {
        assert!(p.stdout.is_empty(), "the traced program was left running");
    }

    if Command::new("valgrind").arg("--version").output().is_ok() {
        let l_out = s(&out_dir.join("l.cclt"));
        let status = interrupted(&["sim", "record-lines", "-o", &l_out, "--", "/bin/sleep", "30"], &tmp);
        assert!(!status.success());
        assert!(
            leftovers(&tmp, &[]).iter().all(|n| n.starts_with("ccvm-")),
            "{:?}",
            leftovers(&tmp, &[])
        );
        assert!(leftovers(&out_dir, &[]).is_empty());
    }
    std::fs::remove_dir_all(&tmp).unwrap();
    std::fs::remove_dir_all(&out_dir).unwrap();
}

#[test]
fn a_signal_sent_to_exec_reaches_the_program_and_its_status_comes_back() {
    let tmp = scratch_dir("exec-signal");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ccvm"))
        .args(["exec", "--ram", "8M", "--", "/bin/sleep", "30"])
        .env("TMPDIR", &tmp)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status:?}");
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(err.contains("signal 15") || err.contains("SIGTERM"), "{err}");
    assert!(leftovers(&tmp, &[]).iter().all(|n| n.starts_with("ccvm-")));
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn sweeps_check_every_input_first_and_refuse_empty_work() {
    let dir = scratch_dir("sweep-inputs");
    let good = dir.join("good.trace");
    small_trace(&good);
    let bad = dir.join("bad.trace");
    std::fs::write(&bad, b"not a trace at all, but long enough to have a header").unwrap();
    let out_dir = dir.join("out");
    let out = ccvm(&["sim", "sweep", &s(&good), &s(&bad), "--out", &s(&out_dir)]);
    fails_with_one_line(&out, &["bad.trace", "not a ccvm trace"]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("costs of"));
    assert!(!out_dir.exists(), "a failed sweep leaves no folder");
    let out = ccvm(&["sim", "sweep", &s(&good), "--out", &s(&out_dir), "--pages", "99999999"]);
    fails_with_one_line(&out, &["no memory size to simulate", "--pages"]);
    assert!(!out_dir.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn without_userfaultfd_nothing_is_done_first() {
    let unprivileged = std::fs::read_to_string("/proc/sys/vm/unprivileged_userfaultfd").unwrap_or_default();
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 || unprivileged.trim() != "0" {
        eprintln!("skipped: needs root (to switch user) and vm.unprivileged_userfaultfd=0");
        return;
    }
    let tmp = scratch_dir("no-uffd");
    std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    let as_nobody = |args: &[&str]| {
        Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                env!("CARGO_BIN_EXE_ccvm"),
            ])
            .args(args)
            .env("TMPDIR", &tmp)
            .current_dir(&tmp)
            .output()
            .unwrap()
    };
    let marker = tmp.join("ran");
    let script = format!("touch {}", marker.display());
    let out = as_nobody(&["exec", "--compare", "--", "/bin/sh", "-c", &script]);
    fails_with_one_line(&out, &["userfaultfd is not available"]);
    assert!(!marker.exists(), "the unpaged comparison ran before the check");
    let out = as_nobody(&["trace", "--workload", "matmul", "--size", "1M", "-o", "t.trace"]);
    fails_with_one_line(&out, &["userfaultfd is not available"]);
    assert!(!tmp.join("t.trace").exists());
    let out = as_nobody(&["map", "/nonexistent.ccz", "--verify"]);
    fails_with_one_line(&out, &["userfaultfd is not available"]);
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn messages_say_what_is_wrong_once_and_safely() {
    let dir = scratch_dir("messages");
    // A 10 MB line with a terminal escape is quoted and cut.
    let long = dir.join("long.txt");
    let mut text = b"\x1b[31m".to_vec();
    text.extend(std::iter::repeat_n(b'x', 10 << 20));
    std::fs::write(&long, &text).unwrap();
    let out = ccvm(&["sim", "sweep", &s(&long), "--out", &s(&dir.join("o"))]);
    fails_with_one_line(&out, &["line 1", "\\u{1b}[31m", "..."]);
    assert!(out.stderr.len() < 500, "{} bytes echoed", out.stderr.len());
    // A folder, and a pipe, as a trace.
    fails_with_one_line(
        &ccvm(&["sim", "sweep", &s(&dir), "--out", &s(&dir.join("o"))]),
        &["is a folder"],
    );
    let piped = Command::new(env!("CARGO_BIN_EXE_ccvm"))
        .args(["sim", "sweep", "/dev/stdin", "--out", &s(&dir.join("o"))])
        .stdin(Stdio::piped())
        .output()
        .unwrap();
    fails_with_one_line(&piped, &["not a regular file", "save it to a file"]);
    // Policies, codecs, missing arguments, shares.
    let out = ccvm(&[
        "run",
        "--workload",
        "matmul",
        "--size",
        "2M",
        "--ram",
        "1M",
        "--policy",
        "fixed150",
    ]);
    assert_eq!(out.status.code(), Some(2));
    fails_with_one_line(&out, &["fixed150", "from 0 to 100"]);
    let out = ccvm(&[
        "run",
        "--workload",
        "matmul",
        "--size",
        "2M",
        "--ram",
        "1M",
        "--codec",
        "zip",
    ]);
    assert_eq!(out.status.code(), Some(2), "a bad codec exits as a bad policy does");
    fails_with_one_line(&ccvm(&["run", "--workload", "matmul"]), &["--size", "--ram"]);
    fails_with_one_line(
        &ccvm(&["exec", "--uncompressed-share", "nan", "--", "/bin/true"]),
        &["--uncompressed-share", "between 0 and 1"],
    );
    // An OS error is said once.
    let out = ccvm(&[
        "run",
        "--workload",
        "matmul",
        "--size",
        "2M",
        "--ram",
        "1M",
        "--swap-dir",
        "/no/such/dir",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    // All-zero pages: no NaN or inf in the store's report.
    let zeros = dir.join("zeros");
    std::fs::create_dir(&zeros).unwrap();
    std::fs::write(zeros.join("z.bin"), vec![0u8; 8 * 4096]).unwrap();
    let out = ccvm(&["bench", "store", "--corpus", &s(&zeros), "--allocator", "zs"]);
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(!table.contains("NaN") && !table.contains("inf"), "{table}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn long_runs_show_progress_on_a_terminal_only() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: needs script(1) for a terminal");
        return;
    }
    let cmd = format!(
        "{} run --workload matmul --size 8M --ram 4M --json",
        env!("CARGO_BIN_EXE_ccvm")
    );
    let on_tty = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .output()
        .unwrap();
    assert!(on_tty.status.success());
    let shown = String::from_utf8_lossy(&on_tty.stdout);
    assert!(
        shown.contains("the paged run") || shown.contains("plain memory"),
        "{shown}"
    );
    let piped = ccvm(&["run", "--workload", "matmul", "--size", "8M", "--ram", "4M", "--json"]);
    assert!(piped.status.success());
    assert!(piped.stderr.is_empty(), "{}", String::from_utf8_lossy(&piped.stderr));
    serde_json::from_slice::<serde_json::Value>(&piped.stdout).expect("stdout is JSON alone");
}
