//! Generated sensor signals, for the Delta16 codec (paper 003, §5.4), since
//! no sensor node is at hand.
//!
//! Model: a 10-bit ADC (values 0..=1023, as on the MICAz the paper used)
//! sampling a slowly varying quantity: a mid-scale level, a slow swing
//! (amplitude 200 counts, period 5000 samples), a faster oscillation
//! (amplitude 30 counts, period 37 samples), noise from the sum of three
//! uniform draws in -2..=2, and a sudden jump of up to ±300 counts once in
//! about 200 samples (the "sudden change" that Delta16 escapes). Samples are
//! little-endian u16s. Deterministic for a seed.

use crate::{PageFile, PAGE_SIZE};

/// `pages` pages of generated 10-bit sensor samples.
///
/// ```
/// let f = ccvm_corpus::sensor::pages(4, 1);
/// assert_eq!(f.data.len(), 4 * 4096);
/// assert!(f.data.chunks_exact(2).all(|s| u16::from_le_bytes([s[0], s[1]]) < 1024));
/// ```
pub fn pages(pages: usize, seed: u64) -> PageFile {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut spike = 0.0f64;
    let samples = pages * PAGE_SIZE / 2;
    let mut data = Vec::with_capacity(pages * PAGE_SIZE);
    for t in 0..samples {
        let tf = t as f64;
        let noise: i64 = (0..3).map(|_| (rnd() % 5) as i64 - 2).sum();
        if rnd() % 200 == 0 {
            spike = (rnd() % 601) as f64 - 300.0;
        }
        let v = 512.0
            + 200.0 * (tf * std::f64::consts::TAU / 5000.0).sin()
            + 30.0 * (tf * std::f64::consts::TAU / 37.0).sin()
            + spike
            + noise as f64;
        let v = v.round().clamp(0.0, 1023.0) as u16;
        data.extend_from_slice(&v.to_le_bytes());
    }
    PageFile {
        name: "sensor (generated)".into(),
        path: "<generated>".into(),
        data,
    }
}
