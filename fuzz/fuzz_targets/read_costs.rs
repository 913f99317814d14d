//! Reads arbitrary bytes as a codec-cost cache file, as a sweep does from
//! its `costs` folder: every outcome must be costs or `None`, never a panic
//! or an allocation out of proportion to the input. The trace identity the
//! file must match is taken from the input itself, so that crafted counts
//! behind a matching header are reached.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let word = |i: usize| data.get(i..i + 8).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()));
    if let Some(c) = ccvm_sim::CodecCosts::decode(data, "lz4", word(8), word(16)) {
        assert!(c.size.len() * 12 <= data.len());
        assert!(c.size.iter().all(|&s| (1..=4096).contains(&s)));
    }
});
