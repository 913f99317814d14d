//! Builds the library `ccvm exec` preloads into programs (crates/preload)
//! and hands it to `ccvm` to embed, so that one `ccvm` binary is all a user
//! needs.
//!
//! The library is a cdylib that replaces `malloc`: it cannot be a Rust
//! dependency of `ccvm` (its symbols would replace ccvm's own allocator),
//! so it is built by a separate cargo run in its own target directory.
//! It is always an optimised build, without link-time optimisation or
//! debug information, to keep this step short.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    // OUT_DIR is <target>/<profile>/build/<package>-<hash>/out.
    let target = out_dir
        .ancestors()
        .nth(4)
        .expect("OUT_DIR is inside the target directory");
    let preload_target = target.join("preload");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(&manifest_dir)
        .args(["build", "--release", "--quiet", "-p", "ccvm-preload", "--target-dir"])
        .arg(&preload_target)
        .args([
            "--config",
            "profile.release.lto=false",
            "--config",
            "profile.release.debug=0",
            "--config",
            "profile.release.codegen-units=16",
        ])
        // Flags meant for the outer build (coverage, sanitizers) do not
        // belong in a library loaded into other programs.
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        // Under `cargo clippy` the outer build runs through clippy-driver;
        // the library is built, not linted, here (it is linted as a
        // workspace member).
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("RUSTC_WRAPPER")
        .env_remove("CLIPPY_ARGS")
        .status()
        .expect("running cargo to build crates/preload");
    assert!(status.success(), "building crates/preload failed");
    let built = preload_target.join("release/libccvm_preload.so");
    std::fs::copy(&built, out_dir.join("libccvm_preload.so"))
        .unwrap_or_else(|e| panic!("copying {}: {e}", built.display()));
    for dir in [
        "crates/preload",
        "crates/runtime",
        "crates/store",
        "crates/codec",
        "crates/policy",
        "crates/trace",
    ] {
        println!("cargo:rerun-if-changed={dir}");
    }
    println!("cargo:rerun-if-changed=Cargo.lock");
    println!("cargo:rerun-if-changed=build.rs");
}
