//! Hostile paths and users: the preloaded library's cache, outputs written
//! through planted links, and flags whose meaning could overwrite input.
//! Tests that need a second user run as root with `setpriv`, and say so
//! when they are skipped.

mod common;

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output};

use common::{ccvm, fails_with_one_line, quick_sweep, scratch_dir, small_trace};

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Runs `ccvm args` as `uid` with `TMPDIR=tmpdir`, or `None` when this
/// process cannot (not root, no setpriv, or `uid` cannot run the binary).
fn ccvm_as(uid: u32, tmpdir: &Path, args: &[&str]) -> Option<Output> {
    if !is_root() || Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipped: needs root and setpriv to run as a second user");
        return None;
    }
    let out = Command::new("setpriv")
        .args([
            format!("--reuid={uid}"),
            format!("--regid={uid}"),
            "--clear-groups".into(),
        ])
        .arg(env!("CARGO_BIN_EXE_ccvm"))
        .args(args)
        .env("TMPDIR", tmpdir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("Permission denied") && err.contains("setpriv") {
        eprintln!("skipped: uid {uid} cannot run {}", env!("CARGO_BIN_EXE_ccvm"));
        return None;
    }
    Some(out)
}

fn shared_tmp(name: &str) -> std::path::PathBuf {
    let dir = scratch_dir(name);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    dir
}

#[test]
fn a_preload_folder_squatted_by_another_user_is_refused_before_the_program_runs() {
    let tmp = shared_tmp("squat");
    let squat = tmp.join("ccvm-4242");
    std::fs::create_dir(&squat).unwrap();
    std::fs::set_permissions(&squat, std::fs::Permissions::from_mode(0o777)).unwrap();
    // The attacker's library, under every name a build could look for.
    std::fs::write(squat.join("evil.so"), b"not a library").unwrap();
    if is_root() {
        std::os::unix::fs::chown(&squat, Some(4343), Some(4343)).unwrap();
    }
    let marker = tmp.join("ran");
    let script = format!("touch {}", marker.display());
    let Some(out) = ccvm_as(4242, &tmp, &["exec", "--", "/bin/sh", "-c", &script]) else {
        std::fs::remove_dir_all(&tmp).unwrap();
        return;
    };
    fails_with_one_line(&out, &["ccvm-4242", "belongs to uid 4343", "TMPDIR"]);
    assert!(
        !marker.exists(),
        "the program must not run with a library from a squatted folder"
    );
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn a_preload_folder_others_may_write_or_a_link_is_refused() {
    let tmp = shared_tmp("open-mode");
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    let mine = tmp.join(format!("ccvm-{me}"));
    std::fs::create_dir(&mine).unwrap();
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ccvm"))
        .args(["exec", "--", "/bin/true"])
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    fails_with_one_line(&out, &["has mode 777", "other users"]);
    std::fs::remove_dir(&mine).unwrap();
    let elsewhere = tmp.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &mine).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ccvm"))
        .args(["exec", "--", "/bin/true"])
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    fails_with_one_line(&out, &["is not a folder"]);
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "nothing written through the link"
    );
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn a_cached_library_is_loaded_only_if_its_bytes_are_ccvms() {
    if !Path::new("/dev/userfaultfd").exists() && !is_root() {
        eprintln!("skipped: needs userfaultfd");
        return;
    }
    let tmp = shared_tmp("cached-lib");
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_ccvm"))
            .args(["exec", "--ram", "8M", "--", "/bin/true"])
            .env("TMPDIR", &tmp)
            .output()
            .unwrap()
    };
    let out = run();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // SAFETY: geteuid cannot fail.
    let folder = tmp.join(format!("ccvm-{}", unsafe { libc::geteuid() }));
    let meta = std::fs::metadata(&folder).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o700);
    let libs: Vec<_> = std::fs::read_dir(&folder).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(libs.len(), 1, "{libs:?}");
    let good = std::fs::read(&libs[0]).unwrap();
    // Same name, same length, other bytes: replaced, not loaded.
    std::fs::write(&libs[0], vec![0u8; good.len()]).unwrap();
    let out = run();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("cannot be preloaded"));
    assert_eq!(std::fs::read(&libs[0]).unwrap(), good);
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// A victim file and a link to it named `name` in `dir`.
fn planted_link(dir: &Path, name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let victim = dir.join(format!("victim-of-{name}"));
    std::fs::write(&victim, "precious").unwrap();
    let link = dir.join(name);
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    (victim, link)
}

#[test]
fn outputs_are_never_written_through_planted_links() {
    let dir = scratch_dir("links");
    let data = dir.join("data.bin");
    let bytes: Vec<u8> = (0..3 * 4096u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&data, &bytes).unwrap();
    let d = |p: &Path| p.to_str().unwrap().to_string();

    let (victim, link) = planted_link(&dir, "data.ccz");
    fails_with_one_line(
        &ccvm(&["pack", &d(&data), "-o", &d(&link)]),
        &["data.ccz", "symbolic link"],
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");

    let packed = dir.join("good.ccz");
    assert!(ccvm(&["pack", &d(&data), "-o", &d(&packed)]).status.success());
    let (victim, link) = planted_link(&dir, "mapped.out");
    fails_with_one_line(
        &ccvm(&["map", &d(&packed), "--output", &d(&link)]),
        &["mapped.out", "symbolic link"],
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    // Written whole through a device, never replacing it.
    assert!(ccvm(&["map", &d(&packed), "--output", "/dev/null"]).status.success());
    assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device());

    let (victim, link) = planted_link(&dir, "report.json");
    let marker = dir.join("ran");
    let script = format!("touch {}", marker.display());
    fails_with_one_line(
        &ccvm(&["exec", "--report", &d(&link), "--", "/bin/sh", "-c", &script]),
        &["report.json", "symbolic link"],
    );
    assert!(!marker.exists(), "refused before the program runs");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");

    let (victim, link) = planted_link(&dir, "keep.cclt");
    fails_with_one_line(
        &ccvm(&["sim", "record-lines", "-o", &d(&link), "--", "/bin/true"]),
        &["keep.cclt", "symbolic link"],
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");

    let trace = dir.join("s.trace");
    small_trace(&trace);
    let (victim, link) = planted_link(&dir, "s2.trace");
    fails_with_one_line(
        &ccvm(&["trace", "--workload", "sortmerge", "--size", "1M", "-o", &d(&link)]),
        &["s2.trace", "symbolic link"],
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    let results = dir.join("results");
    std::fs::create_dir(&results).unwrap();
    let (victim, _) = planted_link(&results, "sweep.csv");
    let out = quick_sweep(&[&trace], &results);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("symbolic link"));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn pack_refuses_its_own_source_and_files_without_a_size() {
    let dir = scratch_dir("pack-src");
    let d = |p: &Path| p.to_str().unwrap().to_string();
    let src = dir.join("data.bin");
    std::fs::write(&src, vec![9u8; 8192]).unwrap();
    fails_with_one_line(
        &ccvm(&["pack", &d(&src), "-o", &d(&src)]),
        &["is the file being packed"],
    );
    assert_eq!(std::fs::read(&src).unwrap(), vec![9u8; 8192]);
    // The old fixed temporary name is an ordinary input now.
    let partial = dir.join("data.ccz-partial");
    std::fs::write(&partial, vec![7u8; 4096]).unwrap();
    let out = ccvm(&["pack", &d(&partial), "-o", &d(&dir.join("data.ccz"))]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read(&partial).unwrap(), vec![7u8; 4096]);
    let out_ccz = d(&dir.join("x.ccz"));
    fails_with_one_line(
        &ccvm(&["pack", "/proc/cpuinfo", "-o", &out_ccz]),
        &["/proc/cpuinfo", "copy it"],
    );
    fails_with_one_line(
        &ccvm(&["pack", "/dev/zero", "-o", &out_ccz]),
        &["/dev/zero", "not a regular file"],
    );
    assert!(!dir.join("x.ccz").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sim_cache_json_is_a_flag_and_never_overwrites_a_trace() {
    let dir = scratch_dir("cache-json");
    let a = dir.join("a.cclt");
    std::fs::write(&a, b"my trace").unwrap();
    let b = dir.join("b.cclt");
    std::fs::write(&b, b"other").unwrap();
    let out = ccvm(&["sim", "cache", "--json", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert!(!out.status.success());
    assert_eq!(std::fs::read(&a).unwrap(), b"my trace");
    std::fs::remove_dir_all(&dir).unwrap();
}
