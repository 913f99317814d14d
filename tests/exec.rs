//! `ccvm exec` on real programs: a C program built here that does what
//! programs do to their heap (threads, fork, exec, large reallocs, mmap,
//! a read(2) into paged memory, exit from a thread), and two real programs
//! (CPython, sqlite3), each at half and a quarter of its heap, under two
//! policies, must print exactly what it prints unpaged.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ccvm-exec-test-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Builds tests/exec/stress.c with the system's C compiler.
fn build_stress(dir: &Path, extra: &[&str]) -> PathBuf {
    let out = dir.join(if extra.is_empty() { "stress" } else { "stress-static" });
    let status = Command::new("cc")
        .args(["-O2", "-pthread", "-o"])
        .arg(&out)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/exec/stress.c"))
        .args(extra)
        .status()
        .expect("a C compiler (cc) is installed: .ci/run installs gcc");
    assert!(status.success(), "cc failed on tests/exec/stress.c");
    out
}

fn ccvm_exec(flags: &[&str], command: &[&str], report: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ccvm"))
        .arg("exec")
        .args(flags)
        .arg("--report")
        .arg(report)
        .arg("--")
        .args(command)
        .output()
        .unwrap()
}

/// `ccvm exec --ram 12M --fault-mode MODE` (MODE: a fault mode, then any
/// further flags, space-separated), reporting to a file in `dir` named
/// after the mode; the output and that file's path.
fn ccvm_exec_in_mode(mode: &str, command: &[&str], dir: &Path) -> (Output, PathBuf) {
    let path = dir.join(format!("{}.json", mode.replace(' ', "")));
    let mut flags = vec!["--ram", "12M", "--fault-mode"];
    flags.extend(mode.split(' '));
    (ccvm_exec(&flags, command, &path), path)
}

fn report(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Runs tests/exec/forks.c (`program` with `args`) under `ccvm exec
/// flags`, asserts that it ended well and printed "ok", and returns its
/// report; `what` names the run in failures.
fn forks_report(flags: &[&str], program: &str, args: &[&str], path: &Path, what: &str) -> serde_json::Value {
    let command: Vec<&str> = std::iter::once(program).chain(args.iter().copied()).collect();
    let out = ccvm_exec(flags, &command, path);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.ends_with("ok\n"),
        "{what}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    report(path)
}

/// The heap peak of `command` under ccvm with room to spare, in bytes.
fn heap_peak(command: &[&str], dir: &Path) -> u64 {
    let path = dir.join("peak.json");
    let out = ccvm_exec(&["--ram", "1G"], command, &path);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    report(&path)["processes"][0]["heap_peak_bytes"].as_u64().unwrap()
}

/// Runs `command` unpaged, then paged at half its heap under the default
/// policy and at a quarter under the fixed split: the same output every
/// time, and paging happened.
fn same_output_when_paged(name: &str, command: &[&str], expect_exit: i32) {
    let dir = scratch_dir(&format!("{name}-runs"));
    let plain = Command::new(command[0]).args(&command[1..]).output().unwrap();
    assert_eq!(
        plain.status.code(),
        Some(expect_exit),
        "{name} unpaged: {}",
        String::from_utf8_lossy(&plain.stderr)
    );
    let peak = heap_peak(command, &dir);
    assert!(peak > 8 << 20, "{name}: a heap of {peak} bytes is too small to page");
    // Each policy at one share, so that both shares and both policies are
    // covered in two runs.
    for (share, policy) in [(2, "adaptive-safe"), (4, "fixed")] {
        let ram = (peak / share).to_string();
        let path = dir.join("run.json");
        let out = ccvm_exec(&["--ram", &ram, "--policy", policy], command, &path);
        let what = format!("{name} in {ram} bytes ({policy})");
        assert_eq!(
            out.status.code(),
            Some(expect_exit),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&plain.stdout),
            "{what}: output differs from the unpaged run"
        );
        let r = report(&path);
        let main = &r["processes"][0];
        let stats = &main["stats"];
        let evicted = stats["pages_compressed"].as_u64().unwrap() + stats["pages_swapped_raw"].as_u64().unwrap();
        assert!(evicted > 0, "{what}: nothing left memory: {stats}");
        let back = stats["faults_cache"].as_u64().unwrap() + stats["faults_disk"].as_u64().unwrap();
        assert!(back > 0, "{what}: no page came back: {stats}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_c_program_with_threads_fork_exec_and_mappings_prints_the_same_when_paged() {
    let dir = scratch_dir("stress");
    let stress = build_stress(&dir, &[]);
    let stress = stress.to_str().unwrap();
    same_output_when_paged("stress", &[stress, "16"], 0);
    // The exec'd child is paged too, with its own report.
    let path = dir.join("children.json");
    let out = ccvm_exec(&["--ram", "8M"], &[stress, "16"], &path);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = report(&path);
    let commands: Vec<String> = r["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["command"][1].as_str().unwrap_or_default().to_string())
        .collect();
    // The forked child ends with `_exit`, and reports too.
    assert_eq!(
        commands,
        ["16", "16", "exec-child"],
        "one report each from the program, its forked child and the program it exec'd"
    );
    // Its 64 MiB reservation was paged (committed with mprotect), and its
    // 1 MiB of shared memory was left to the kernel; the report says so.
    let main = &r["processes"][0];
    let unpaged = &main["unpaged_mappings"];
    assert_eq!(unpaged["reserved"].as_u64(), Some(0), "{unpaged}");
    assert!(unpaged["shared"].as_u64().unwrap() >= 1 << 20, "{unpaged}");
    assert!(main["rss_anon_at_exit_bytes"].as_u64().unwrap() > 0, "{main}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Forked children are paged from their copy of the parent's state: each
/// reads the heap as it was at its fork while the parent rewrites it, and
/// the parent reads what it wrote (tests/exec/forks.c checks every page).
/// In signal mode every process of the tree reports its own paging, also
/// when killed by SIGTERM; in thread mode the children run unpaged, from
/// pages written into place.
#[test]
fn forked_children_are_paged_and_read_the_heap_as_at_their_fork() {
    let dir = scratch_dir("forks");
    let program = common::build_c(&dir, "forks");
    let program = program.as_str();
    let path = dir.join("forks.json");
    // A fixed split, so that children fault from the cache and the disk.
    let r = forks_report(
        &["--ram", "4M", "--policy", "fixed"],
        program,
        &["6", "2"],
        &path,
        "fixed",
    );
    let processes = r["processes"].as_array().unwrap();
    // The grandchildren end with `_exit`, and report all the same.
    assert_eq!(processes.len(), 5, "the parent, two children, two grandchildren: {r}");
    for p in processes {
        let stats = &p["stats"];
        let cache = stats["faults_cache"].as_u64().unwrap();
        let disk = stats["faults_disk"].as_u64().unwrap();
        assert!(cache > 0 && disk > 0, "process {} was not paged: {stats}", p["pid"]);
    }
    // Children killed by SIGTERM (as a pool's workers are) run no exit
    // code: each is reported from its last snapshot.
    let r = forks_report(
        &["--ram", "4M", "--policy", "fixed"],
        program,
        &["6", "2", "term"],
        &path,
        "term",
    );
    let processes = r["processes"].as_array().unwrap();
    assert_eq!(processes.len(), 5, "the parent, two children, two grandchildren: {r}");
    let snapshots: Vec<_> = processes.iter().filter(|p| p["snapshot"] == true).collect();
    assert_eq!(
        snapshots.len(),
        2,
        "the two children killed are reported from snapshots: {r}"
    );
    for p in snapshots {
        let stats = &p["stats"];
        assert!(
            stats["faults_cache"].as_u64().unwrap() + stats["faults_disk"].as_u64().unwrap() > 0,
            "a killed child's snapshot holds its faults: {stats}"
        );
    }
    let r = forks_report(
        &["--ram", "4M", "--fault-mode", "thread"],
        program,
        &["6", "1"],
        &path,
        "thread mode",
    );
    assert_eq!(
        r["processes"].as_array().unwrap().len(),
        1,
        "thread mode pages the parent only"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A parent under write scans forks children that are paged too, in fault
/// order from userfaultfds of their own, and every page reads back as
/// tests/exec/forks.c expects.
#[test]
fn children_of_a_write_scanning_parent_are_paged() {
    let dir = scratch_dir("forks-scan");
    let program = common::build_c(&dir, "forks");
    let program = program.as_str();
    let path = dir.join("forks.json");
    let r = forks_report(
        &["--ram", "4M", "--policy", "fixed", "--write-scan"],
        program,
        &["6", "2"],
        &path,
        "write scans",
    );
    let processes = r["processes"].as_array().unwrap();
    assert_eq!(processes.len(), 5, "write scans: {r}");
    for p in processes {
        let stats = &p["stats"];
        let paged = stats["faults_cache"].as_u64().unwrap() + stats["faults_disk"].as_u64().unwrap();
        assert!(paged > 0, "write scans: process {} was not paged: {stats}", p["pid"]);
    }
    assert!(
        processes
            .iter()
            .any(|p| p["stats"]["write_scans"].as_u64().unwrap() > 0),
        "no process scanned: {r}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// System calls handed heap buffers that are not resident (file and socket
/// I/O, stdio's and readdir's internal calls, polling arrays, signal state,
/// futexes, wait and exec arguments) work in both fault modes: in signal
/// mode because the guard faults them in first.
#[test]
fn system_calls_on_evicted_heap_buffers_work_in_both_fault_modes() {
    let dir = scratch_dir("syscalls");
    let program = dir.join("syscalls");
    let status = Command::new("cc")
        .args(["-O2", "-pthread", "-o"])
        .arg(&program)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/exec/syscalls.c"))
        .status()
        .expect("a C compiler (cc) is installed: .ci/run installs gcc");
    assert!(status.success(), "cc failed on tests/exec/syscalls.c");
    let program = program.to_str().unwrap();
    let plain = Command::new(program).arg("28").output().unwrap();
    let plain_out = String::from_utf8_lossy(&plain.stdout).to_string();
    assert!(
        plain.status.success() && !plain_out.contains("FAILED"),
        "unpaged: {plain_out}"
    );
    for mode in ["signal", "thread"] {
        let path = dir.join(format!("{mode}.json"));
        let out = ccvm_exec(&["--ram", "12M", "--fault-mode", mode], &[program, "28"], &path);
        assert!(out.status.success(), "{mode}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            plain_out,
            "{mode}: output differs"
        );
        let stats = &report(&path)["processes"][0]["stats"];
        let back = stats["faults_cache"].as_u64().unwrap() + stats["faults_disk"].as_u64().unwrap();
        assert!(back > 1000, "{mode}: the buffers did not leave memory: {stats}");
        if mode == "signal" {
            // The buffers came back through the guard, before each call.
            assert!(stats["guarded_calls_with_buffers"].as_u64().unwrap() >= 25, "{stats}");
            assert!(stats["guard_pages_touched"].as_u64().unwrap() >= 40, "{stats}");
        } else {
            assert_eq!(stats["guarded_calls"].as_u64().unwrap(), 0, "{stats}");
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

fn build_c(dir: &Path, name: &str) -> PathBuf {
    let out = dir.join(name);
    let status = Command::new("cc")
        .args(["-O2", "-pthread", "-o"])
        .arg(&out)
        .arg(format!("{}/tests/exec/{name}.c", env!("CARGO_MANIFEST_DIR")))
        .status()
        .expect("a C compiler (cc) is installed: .ci/run installs gcc");
    assert!(status.success(), "cc failed on tests/exec/{name}.c");
    out
}

/// Builds `tests/exec/NAME.c`, runs it with `args` unpaged and under
/// `ccvm exec --ram RAM`, checks that both succeed with the same output,
/// and returns that output and the paged process's counters. The scratch
/// folder is removed.
fn c_program_pages_as_unpaged(name: &str, args: &[&str], ram: &str) -> (Vec<u8>, serde_json::Value) {
    // One folder per run: two tests may run one program at once.
    let dir = scratch_dir(&format!("{name}-{}", args.join("-")));
    let program = build_c(&dir, name);
    let mut command = vec![program.to_str().unwrap()];
    command.extend_from_slice(args);
    let plain = Command::new(command[0]).args(&command[1..]).output().unwrap();
    assert!(
        plain.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&plain.stdout)
    );
    let path = dir.join("run.json");
    let out = ccvm_exec(&["--ram", ram], &command, &path);
    assert!(
        out.status.success(),
        "{name}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, plain.stdout, "{name}: output differs from the unpaged run");
    let stats = report(&path)["processes"][0]["stats"].clone();
    std::fs::remove_dir_all(&dir).ok();
    (plain.stdout, stats)
}

/// The parent pid of process `pid`, from /proc.
fn parent_of(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|v| v.trim().parse().ok())
}

fn state_is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .is_ok_and(|s| s.lines().any(|l| l.starts_with("State:") && l.contains('Z')))
}

fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| parent_of(p) == Some(pid))
        .collect()
}

/// A program that closes every descriptor from 3 up (close, closefrom,
/// close_range) and then puts a file of its own on every number it finds
/// open (dup2, dup3) keeps its pager: ccvm's descriptors stay open and
/// move out of the way, in both fault modes; and the helper process ends
/// when the program execs another.
#[test]
fn closing_or_replacing_every_descriptor_leaves_the_pager_running() {
    let dir = scratch_dir("descriptors");
    let program = build_c(&dir, "descriptors");
    let program = program.to_str().unwrap();
    let plain = Command::new(program).arg("32").output().unwrap();
    assert!(plain.status.success());
    for mode in ["signal", "thread"] {
        let path = dir.join(format!("{mode}.json"));
        let out = ccvm_exec(&["--ram", "12M", "--fault-mode", mode], &[program, "32"], &path);
        assert!(out.status.success(), "{mode}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.stdout, plain.stdout, "{mode}");
        let stats = &report(&path)["processes"][0]["stats"];
        // Pages brought back by faults or read ahead with them.
        let back = stats["pages_decompressed"].as_u64().unwrap() + stats["faults_disk"].as_u64().unwrap();
        assert!(back > 1000, "{mode}: nothing was paged back after the closes: {stats}");
    }
    // Exec'd into `sleep`: the helper, a child of the same process, is gone
    // once the program it served is.
    let mut ccvm = Command::new(env!("CARGO_BIN_EXE_ccvm"))
        // Enough RAM for a helper process (see RuntimeConfig::HELPER_MIN_RAM).
        .args(["exec", "--ram", "40M", "--", program, "64", "exec", "/bin/sleep", "3"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let comm = |p: u32| std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
    let mut sleeper = None;
    for _ in 0..100 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        // The program is ccvm's child or grandchild.
        let mut family = children_of(ccvm.id());
        family.extend(family.clone().into_iter().flat_map(children_of));
        sleeper = family.into_iter().find(|&p| comm(p).trim() == "sleep");
        if sleeper.is_some() {
            break;
        }
    }
    // The helper sees its lifeline hang up within 100 ms of going idle.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let left = sleeper.map(|p| {
        children_of(p)
            .into_iter()
            // An ended helper stays a zombie until `sleep` (which never
            // waits for it) ends.
            .filter(|&c| comm(c).trim() == "descriptors" && !state_is_zombie(c))
            .count()
    });
    assert!(ccvm.wait().unwrap().success());
    assert_eq!(left, Some(0), "the helper outlived the program that exec'd");
    std::fs::remove_dir_all(&dir).ok();
}

/// A heap mapping given up with `madvise` after it left memory reads back
/// as the kernel's would (zeros after `MADV_DONTNEED`), through the C
/// library and through `syscall(2)`, in both fault modes.
#[test]
fn madvised_pages_read_back_as_the_kernel_says_after_eviction() {
    let dir = scratch_dir("madvise");
    let program = build_c(&dir, "madvise");
    let program = program.to_str().unwrap();
    for how in [&[][..], &["raw"][..]] {
        let mut command = vec![program, "32"];
        command.extend_from_slice(how);
        let plain = Command::new(command[0]).args(&command[1..]).output().unwrap();
        assert!(plain.status.success(), "{}", String::from_utf8_lossy(&plain.stdout));
        // Write scans evict without write protection, so a dropped page
        // must not be written to make it movable (that ended the program).
        let scans = if how.is_empty() { 4 } else { 2 };
        for mode in ["signal", "thread", "signal --write-scan", "thread --write-scan"]
            .into_iter()
            .take(scans)
        {
            let (out, path) = ccvm_exec_in_mode(mode, &command, &dir);
            let what = format!("{mode} {how:?}");
            assert!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stdout));
            assert_eq!(out.stdout, plain.stdout, "{what}");
            let stats = &report(&path)["processes"][0]["stats"];
            assert!(stats["pages_discarded"].as_u64().unwrap() >= 4096, "{what}: {stats}");
            let evicted = stats["pages_compressed"].as_u64().unwrap() + stats["pages_swapped_raw"].as_u64().unwrap();
            assert!(evicted > 4096, "{what}: the mapping did not leave memory: {stats}");
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Small objects freed in bulk give their memory back: the heap's emptied
/// slabs (past the few it keeps) are dropped, not kept, compressed or
/// written out, and serve the next phase, whose calloc'd objects read as
/// zeros (`tests/exec/phases.c`, paged in 8 MiB).
#[test]
fn small_objects_freed_in_bulk_are_dropped_and_reused() {
    let (out, stats) = c_program_pages_as_unpaged("phases", &[], "8M");
    assert!(String::from_utf8_lossy(&out).contains("phase 2: 0 nonzero"));
    // 48 MiB of 48-byte objects fill 768 slabs of 16 pages; all but 16
    // are dropped when the objects are freed.
    let dropped = stats["pages_discarded"].as_u64().unwrap();
    assert!(dropped >= 752 * 16, "{dropped} pages dropped: {stats}");
}

/// Large blocks freed give their pages back, as the C library unmaps a
/// large chunk, and the heap stays whole around them
/// (`tests/exec/bigfree.c`: 16 MiB blocks freed between live neighbours,
/// taken again by `malloc`, `calloc` and `realloc`, then a 2 MiB buffer
/// freed and taken 64 times, which the sliding threshold keeps), and
/// so do pages unmapped from an anonymous mapping, which a new mapping
/// then reads as zeros.
#[test]
fn large_blocks_freed_give_their_pages_back() {
    let (out, stats) = c_program_pages_as_unpaged("bigfree", &["16"], "8M");
    assert!(String::from_utf8_lossy(&out).starts_with("wrong bytes: 0;"));
    let dropped = stats["pages_discarded"].as_u64().unwrap();
    // The first 16 MiB block, less the pages that hold the allocator's
    // headers (the second, of the threshold's size then, is kept), the 20
    // MiB block freed at the end, and both 16 MiB mappings unmapped (the
    // second may drop its reused pages too).
    let given_back = 4094 + 5118 + 2 * 4096;
    assert!(dropped >= given_back, "{dropped} pages dropped: {stats}");
    // Not the loop's buffer on every turn (512 pages each).
    assert!(
        dropped < given_back + 4096 + 16 * 512,
        "{dropped} pages dropped: {stats}"
    );
}

/// A large block that `realloc` cannot grow in place moves, and its old
/// place gives its pages back, as a block freed does
/// (`tests/exec/bigfree.c` with `move`: an 8 MiB block, filled, with
/// another right after it, grown to 16 MiB). Kept, the old pages were
/// paged as live data. Nothing else is freed before the program exits.
#[test]
fn a_large_block_moved_by_realloc_gives_its_old_pages_back() {
    let (out, stats) = c_program_pages_as_unpaged("bigfree", &["16", "move"], "8M");
    assert_eq!(String::from_utf8_lossy(&out), "wrong bytes: 0; moved 1\n");
    let dropped = stats["pages_discarded"].as_u64().unwrap();
    // The 2048 pages, less the one that holds the allocator's header.
    assert!((2047..=2048).contains(&dropped), "{dropped} pages dropped: {stats}");
}

/// Memory calls made without the C library (inline system calls) on heap
/// pages that left memory do what the kernel's do (`tests/exec/rawcalls.c`:
/// protections changed and back, a range dropped, unmapped and mapped
/// again, moved with `mremap`), in signal mode, where the guard sees every
/// call. Thread mode sees them only through the C library.
#[test]
fn memory_calls_made_without_the_c_library_keep_the_kernels_semantics() {
    let (_, stats) = c_program_pages_as_unpaged("rawcalls", &["16"], "8M");
    assert!(
        stats["pages_compressed"].as_u64().unwrap() + stats["pages_swapped_raw"].as_u64().unwrap() > 1000,
        "the heap did not leave memory: {stats}"
    );
}

#[test]
fn exit_status_and_signals_are_forwarded() {
    let dir = scratch_dir("status");
    let path = dir.join("r.json");
    let out = ccvm_exec(&[], &["/bin/sh", "-c", "exit 7"], &path);
    assert_eq!(out.status.code(), Some(7));
    let out = ccvm_exec(&[], &["/bin/sh", "-c", "kill -TERM $$"], &path);
    assert_eq!(out.status.code(), Some(128 + 15));
    assert!(String::from_utf8_lossy(&out.stderr).contains("killed by signal 15"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_static_program_gets_one_line_and_runs_only_when_asked() {
    let dir = scratch_dir("static");
    let stress = build_stress(&dir, &["-static"]);
    let stress = stress.to_str().unwrap();
    let path = dir.join("r.json");
    let out = ccvm_exec(&[], &[stress, "exec-child", "1"], &path);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("statically linked") && err.contains("--unpaged"), "{err}");
    let out = ccvm_exec(&["--unpaged"], &[stress, "exec-child", "1"], &path);
    assert_eq!(out.status.code(), Some(5), "the program's own exit status");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("blocks: 0 bad"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn cpython_building_dicts_prints_the_same_when_paged() {
    let script = "d = {f'k{i}': [i, str(i * 7), (i, -i)] for i in range(40000)}\n\
                  print(len(d), sum(len(v[1]) for v in d.values()), sorted(d)[::10000])";
    same_output_when_paged("python", &["/usr/bin/python3", "-c", script], 0);
}

#[test]
fn sqlite_with_a_large_cache_prints_the_same_when_paged() {
    let sql = "PRAGMA cache_size = -200000;\n\
               CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v REAL);\n\
               WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 80000)\n\
               INSERT INTO t SELECT i, printf('key-%08d-%s', (i * 7919) % 80000, hex(i)), i * 0.5 FROM n;\n\
               CREATE INDEX tk ON t(k);\n\
               SELECT count(*), sum(v), min(k), max(k) FROM t;\n\
               SELECT k FROM t ORDER BY k LIMIT 3 OFFSET 60000;\n\
               SELECT substr(k, 1, 8), count(*) FROM t GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 3;";
    same_output_when_paged("sqlite", &["/usr/bin/sqlite3", ":memory:", sql], 0);
}

#[test]
fn a_program_is_traced_and_the_trace_reads_back() {
    let dir = scratch_dir("trace");
    let stress = build_stress(&dir, &[]);
    let out = dir.join("stress.trace");
    let run = Command::new(env!("CARGO_BIN_EXE_ccvm"))
        .args(["trace", "--exec", "--window", "16", "-o"])
        .arg(&out)
        .arg("--")
        .args([stress.to_str().unwrap(), "exec-child", "2"])
        .output()
        .unwrap();
    // The program's own exit status is 5 by design: the trace needs 0.
    assert!(!run.status.success());
    assert!(String::from_utf8_lossy(&run.stderr).contains("fails unpaged (exit 5)"));
    let script = "d = {i: str(i) * 3 for i in range(30000)}\nprint(len(d))";
    let run = Command::new(env!("CARGO_BIN_EXE_ccvm"))
        .args(["trace", "--exec", "--window", "16", "-o"])
        .arg(&out)
        .args(["--", "/usr/bin/python3", "-c", script])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let mut reader = ccvm_trace::TraceReader::open(&out).unwrap();
    assert_eq!(reader.header().workload, "python3");
    assert_eq!(reader.header().window_pages, 16);
    let (mut references, mut images) = (0u64, 0u64);
    while let Some(event) = reader.next_event().unwrap() {
        match event {
            ccvm_trace::Event::Reference { .. } => references += 1,
            _ => images += 1,
        }
    }
    let footer = reader.footer().unwrap();
    assert_eq!(footer.references, references);
    assert!(
        references > 1000 && images > 100,
        "{references} references, {images} images"
    );
    assert!(footer.run_time_ns > 0);
    std::fs::remove_dir_all(&dir).ok();
}

/// Reserve-then-commit memory (as V8 and the JVM manage their heaps) is
/// paged with the kernel's semantics: `tests/exec/reserve.c` checks every
/// page against its model after random commits, decommits, protection
/// changes, fixed mappings over the reservation (anonymous and a file),
/// `MADV_FREE` (old contents or zeros), ranges unmapped and mapped again,
/// pages moved out with `mremap`, and probes that `PROT_NONE` pages fault,
/// with one thread and with four on disjoint ranges, in both fault modes,
/// and through inline system calls in signal mode; its output equals the
/// unpaged run's, and the reservations were paged, not left to the kernel.
#[test]
fn reserved_then_committed_memory_is_paged_with_the_kernels_semantics() {
    let dir = scratch_dir("reserve");
    let program = build_c(&dir, "reserve");
    let program = program.to_str().unwrap();
    let runs: [(&[&str], &[&str]); 3] = [
        // Write scans skip the file mapped over the reservation.
        (&["1", "16", "3000", "1"], &["signal", "thread", "signal --write-scan"]),
        (&["4", "4", "1500", "2"], &["signal", "thread"]),
        // Inline system calls: only signal mode's guard sees them.
        (&["4", "4", "1500", "3", "raw"], &["signal"]),
    ];
    for (args, modes) in runs {
        let mut command = vec![program];
        command.extend_from_slice(args);
        let plain = Command::new(command[0]).args(&command[1..]).output().unwrap();
        assert!(plain.status.success(), "{}", String::from_utf8_lossy(&plain.stderr));
        for &mode in modes {
            let (out, path) = ccvm_exec_in_mode(mode, &command, &dir);
            let what = format!("{mode} {args:?}");
            assert!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr));
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&plain.stdout),
                "{what}"
            );
            let main = &report(&path)["processes"][0];
            assert_eq!(main["unpaged_mappings"]["reserved"].as_u64(), Some(0), "{what}: {main}");
            let stats = &main["stats"];
            let back = stats["faults_cache"].as_u64().unwrap() + stats["faults_disk"].as_u64().unwrap();
            assert!(
                back > 1000,
                "{what}: pages did not come back from the cache or disk: {stats}"
            );
            if mode.ends_with("--write-scan") {
                assert!(
                    stats["write_scans"].as_u64().unwrap() > 0,
                    "{what}: no write scan: {stats}"
                );
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Where `program` is installed (by `.ci/run`), its path.
fn installed(program: &str) -> Option<String> {
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .ok()?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !path.is_empty()).then_some(path)
}

/// A managed runtime's heap, reserved and committed as the module docs of
/// the preloaded library's `vm` say, is paged: the output equals the
/// unpaged run's, no more than a few pages of reservations are left to
/// the kernel, and the heap left memory.
fn managed_heap_is_paged(name: &str, command: &[&str], ram: &str) -> serde_json::Value {
    let dir = scratch_dir(name);
    let plain = Command::new(command[0]).args(&command[1..]).output().unwrap();
    assert!(
        plain.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&plain.stderr)
    );
    let path = dir.join("r.json");
    let out = ccvm_exec(&["--ram", ram], command, &path);
    assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&plain.stdout),
        "{name}"
    );
    let r = report(&path);
    let main = &r["processes"][0];
    // A few small fixed reservations outside the heap are left (the JVM
    // maps some pages at addresses of its own).
    let reserved = main["unpaged_mappings"]["reserved"].as_u64().unwrap();
    assert!(
        reserved < 1 << 20,
        "{name}: {reserved} bytes reserved outside the heap: {main}"
    );
    let stats = &main["stats"];
    let evicted = stats["pages_compressed"].as_u64().unwrap() + stats["pages_swapped_raw"].as_u64().unwrap();
    assert!(evicted > 5_000, "{name}: the heap hardly left memory: {stats}");
    let stats = stats.clone();
    std::fs::remove_dir_all(&dir).ok();
    stats
}

/// A Go program linked with cgo: its goroutines run on small stacks in
/// the paged heap, where a signal's frame from the guard or the fault
/// handler would overwrite the next stack, and its signal stacks are its
/// own; it ends with an inline `exit_group`, past the C library's exit.
/// Paged, it prints what it prints unpaged and still reports.
#[test]
fn a_go_program_linked_with_cgo_is_paged() {
    let Some(go) = installed("go") else {
        eprintln!("go is not installed; .ci/run installs it");
        return;
    };
    let dir = scratch_dir("go");
    let program = dir.join("map");
    let status = Command::new(&go)
        .args(["build", "-o"])
        .arg(&program)
        .arg(format!("{}/tests/exec/go/map.go", env!("CARGO_MANIFEST_DIR")))
        .env("CGO_ENABLED", "1")
        .env("GOCACHE", dir.join("cache"))
        .env("GOPATH", dir.join("path"))
        .env("GO111MODULE", "off")
        .status()
        .unwrap();
    assert!(status.success(), "go build failed on tests/exec/go/map.go");
    let stats = managed_heap_is_paged("go", &[program.to_str().unwrap()], "24M");
    // Its threads run on both CPUs: evictions leave in batches, one TLB
    // flush a batch (crates/runtime/src/pager/together.rs).
    assert!(stats["pages_evicted_together"].as_u64().unwrap() > 1000, "{stats}");
    assert!(
        stats["eviction_batches"].as_u64().unwrap() * 4 < stats["pages_evicted_together"].as_u64().unwrap(),
        "{stats}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Signals taken on alternate stacks in the heap while it pages
/// (`tests/exec/sigstack.c`: a 32 KiB stack, which ccvm records and serves
/// on its own, and a 256 KiB one, installed and kept resident; handlers
/// that move the interrupted context, as Go's preemption does) are
/// delivered, and each stack reads back as it was set.
#[test]
fn signals_on_alternate_stacks_in_the_heap_are_delivered() {
    let (_, stats) = c_program_pages_as_unpaged("sigstack", &["24"], "8M");
    assert!(
        stats["faults_cache"].as_u64().unwrap() + stats["faults_disk"].as_u64().unwrap() > 1000,
        "{stats}"
    );
}

#[test]
fn node_builds_a_map_with_its_heap_paged() {
    let Some(node) = installed("node") else {
        eprintln!("node is not installed; .ci/run installs it");
        return;
    };
    let script = "const m = new Map(); for (let i = 0; i < 400000; i++) m.set('k' + i, {a: i, b: 'v' + i * 7});\n\
                  let s = 0; for (let i = 0; i < 400000; i += 3) s += m.get('k' + i).a; console.log(m.size, s);";
    managed_heap_is_paged("node", &[&node, "-e", script], "48M");
}

#[test]
fn a_jvm_builds_a_hash_map_with_its_heap_paged() {
    let Some(java) = installed("java") else {
        eprintln!("java is not installed; .ci/run installs it");
        return;
    };
    let dir = scratch_dir("jvm-src");
    let src = dir.join("M.java");
    std::fs::write(
        &src,
        "public class M { public static void main(String[] a) { var m = new java.util.HashMap<Integer, String>();\n\
         for (int i = 0; i < 1000000; i++) m.put(i, \"v\" + i * 7); long s = 0;\n\
         for (int i = 0; i < 1000000; i += 3) s += m.get(i).length(); System.out.println(m.size() + \" \" + s); } }\n",
    )
    .unwrap();
    // A single source file runs without javac (JEP 330).
    managed_heap_is_paged(
        "jvm",
        &[&java, "-Xmx512m", "-XX:+UseSerialGC", src.to_str().unwrap()],
        "64M",
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A CPython `multiprocessing` pool (fork) over a table built by the
/// parent (`docs/programs/pool.py`, 8,000 records): the same checksum as
/// unpaged, and the parent and its four workers each paged and reported
/// (a worker the pool ends with SIGTERM from its last snapshot).
#[test]
fn a_forking_pools_workers_are_paged_and_score_as_unpaged() {
    let Some(python) = installed("python3") else {
        eprintln!("python3 is not installed");
        return;
    };
    five_python_processes_paged_as_unpaged(&python, "pool", &["8000"]);
}

/// Runs `docs/programs/NAME.py ARGS` unpaged and under `--ram 8M`: the
/// output must be the same, and five processes of the script (a parent
/// and four forked workers) must each be paged and reported.
fn five_python_processes_paged_as_unpaged(python: &str, name: &str, args: &[&str]) {
    let dir = scratch_dir(name);
    let script = format!("{}/docs/programs/{name}.py", env!("CARGO_MANIFEST_DIR"));
    let mut command = vec![python, script.as_str()];
    command.extend_from_slice(args);
    let plain = Command::new(command[0]).args(&command[1..]).output().unwrap();
    assert!(plain.status.success(), "{}", String::from_utf8_lossy(&plain.stderr));
    let path = dir.join("r.json");
    let out = ccvm_exec(&["--ram", "8M"], &command, &path);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&plain.stdout),
        "{name}: the output differs from the unpaged run's"
    );
    let r = report(&path);
    let processes: Vec<_> = r["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["command"][1].as_str() == Some(script.as_str()))
        .collect();
    assert_eq!(processes.len(), 5, "{name}: the parent and its four workers: {r}");
    for p in processes {
        let stats = &p["stats"];
        let back = stats["faults_cache"].as_u64().unwrap() + stats["faults_disk"].as_u64().unwrap();
        assert!(back > 100, "{name}: process {} was hardly paged: {stats}", p["pid"]);
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A pre-fork server in CPython (`docs/programs/prefork.py`: a table
/// loaded, a listening socket, four workers forked that answer lookups and
/// end with `os._exit`): every answer as unpaged, and every process of the
/// tree paged and reported.
#[test]
fn a_pre_fork_servers_workers_are_paged_and_answer_as_unpaged() {
    let Some(python) = installed("python3") else {
        eprintln!("python3 is not installed");
        return;
    };
    five_python_processes_paged_as_unpaged(&python, "prefork", &["4000", "500"]);
}

/// The helper reads evicted pages from the program's frames while the
/// program lets it (`process_vm_readv`); a program that makes itself not
/// dumpable, run without the capability that overrides that, is paged by
/// copies from then on, and prints what it prints unpaged.
#[test]
fn a_program_that_turns_itself_not_dumpable_is_paged_by_copies() {
    let (Some(python), Some(setpriv)) = (installed("python3"), installed("setpriv")) else {
        eprintln!("python3 or setpriv is not installed");
        return;
    };
    let script = "import ctypes, hashlib\n\
                  assert ctypes.CDLL(None).prctl(4, 0, 0, 0, 0) == 0\n\
                  d = {i: ('v%d' % (i * 7)) * 3 for i in range(300000)}\n\
                  h = hashlib.sha256()\n\
                  for r in range(3):\n    for i in range(0, 300000, 7):\n        h.update(d[i].encode())\n\
                  print(len(d), h.hexdigest())";
    let plain = Command::new(&python).args(["-c", script]).output().unwrap();
    assert!(plain.status.success(), "{}", String::from_utf8_lossy(&plain.stderr));
    let dir = scratch_dir("not-dumpable");
    let path = dir.join("r.json");
    let paged = |caps: &[&str]| {
        let out = Command::new(&setpriv)
            .args(caps)
            .arg(env!("CARGO_BIN_EXE_ccvm"))
            .args(["exec", "--ram", "40M", "--report"])
            .arg(&path)
            .args(["--", &python, "-c", script])
            .output()
            .unwrap();
        assert_eq!(out.stdout, plain.stdout, "{}", String::from_utf8_lossy(&out.stderr));
        let r = report(&path);
        let p = r["processes"]
            .as_array()
            .unwrap()
            .iter()
            .max_by_key(|p| p["stats"]["pages_compressed_background"].as_u64().unwrap())
            .unwrap()
            .clone();
        let s = &p["stats"];
        (
            s["pages_compressed_background"].as_u64().unwrap(),
            s["pages_read_by_helper"].as_u64().unwrap(),
        )
    };
    let (compressed, handed) = paged(&["--bounding-set=-all", "--inh-caps=-all"]);
    assert!(
        compressed > 1000 && handed * 10 < compressed,
        "{compressed} compressed, {handed} handed over"
    );
    // With the capability (as root), the frames are handed over.
    // SAFETY: no arguments; reads this process's effective user.
    if unsafe { libc::geteuid() } == 0 {
        let (compressed, handed) = paged(&["--reuid=0"]);
        assert!(
            compressed > 1000 && handed * 2 > compressed,
            "{compressed} compressed, {handed} handed over"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}
