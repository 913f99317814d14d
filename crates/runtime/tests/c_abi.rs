//! The C interface works from C: `tests/c/smoke.c`, compiled against
//! `include/ccvm.h`, pages a region through it.

use std::ffi::c_int;

#[link(name = "ccvm_c_smoke", kind = "static")]
extern "C" {
    fn ccvm_c_smoke() -> c_int;
}

#[test]
fn a_c_program_pages_a_region() {
    // Keep the runtime's C entry points linked in.
    let _keep = ccvm_runtime::ffi::ccvm_region_new as *const ();
    // SAFETY: a self-contained C function with no arguments.
    assert_eq!(unsafe { ccvm_c_smoke() }, 0);
}
