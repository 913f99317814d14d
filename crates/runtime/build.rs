//! Compiles the C interface's smoke test (`tests/c/smoke.c`) against
//! `include/ccvm.h`, for the `c_abi` test to link.
fn main() {
    println!("cargo:rerun-if-changed=tests/c/smoke.c");
    println!("cargo:rerun-if-changed=include/ccvm.h");
    cc::Build::new()
        .file("tests/c/smoke.c")
        .include("include")
        .warnings_into_errors(true)
        // Only the test links it (by its #[link] attribute), not the library.
        .cargo_metadata(false)
        .compile("ccvm_c_smoke");
    println!(
        "cargo:rustc-link-search=native={}",
        std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")
    );
}
