//! What the command-line tests share: running `ccvm`, scratch folders,
//! and the one-line-error check.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// Runs `ccvm` with `args`.
pub fn ccvm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ccvm"))
        .args(args)
        .output()
        .expect("run ccvm")
}

/// A new empty folder for test `name`.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ccvm-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Asserts a failure with exactly one line on stderr containing every `needle`.
pub fn fails_with_one_line(out: &Output, needles: &[&str]) {
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "stderr: {err}");
    for n in needles {
        assert!(err.contains(n), "{n:?} not in {err:?}");
    }
}

/// A small ccvm trace of the sortmerge workload at `path`.
pub fn small_trace(path: &std::path::Path) {
    let out = ccvm(&[
        "trace",
        "--workload",
        "sortmerge",
        "--size",
        "1M",
        "-o",
        path.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A quick sweep (two sizes, one timed run, the adaptive policy, WKdm) of
/// `traces` into `out`.
pub fn quick_sweep(traces: &[&std::path::Path], out: &std::path::Path) -> Output {
    let mut args: Vec<&str> = vec!["sim", "sweep"];
    args.extend(traces.iter().map(|t| t.to_str().unwrap()));
    args.extend(["--out", out.to_str().unwrap()]);
    args.extend(["--sizes", "2", "--runs", "1", "--policy", "adaptive", "--codec", "wkdm"]);
    ccvm(&args)
}

/// Builds `tests/exec/NAME.c` with the system's C compiler into `dir`;
/// returns the program's path.
pub fn build_c(dir: &std::path::Path, name: &str) -> String {
    let program = dir.join(name);
    let source = format!("{}/tests/exec/{name}.c", env!("CARGO_MANIFEST_DIR"));
    let status = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&program)
        .arg(&source)
        .status()
        .expect("a C compiler (cc) is installed: .ci/run installs gcc");
    assert!(status.success(), "cc failed on {source}");
    program.to_str().unwrap().to_owned()
}
