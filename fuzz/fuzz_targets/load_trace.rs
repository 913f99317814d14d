//! Loads arbitrary bytes as a trace for simulation, with the header's
//! sizes free to take any value: a trace may cost memory only in proportion
//! to its length, or be refused.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("ccvm-fuzz-trace-{}", std::process::id()));
    std::fs::write(&path, data).unwrap();
    if let Ok(t) = ccvm_sim::Trace::load(&path) {
        let pages = (t.header.region_bytes / 4096).max(t.refs.iter().map(|&p| p as u64 + 1).max().unwrap_or(0));
        assert!(pages <= ccvm_sim::MAX_SPARSE_PAGES.max(8 * (t.refs.len() + t.images.len()) as u64));
    }
});
