//! C = A × B for float64 matrices of order n (3n² doubles fill the
//! memory), blocked in 64 × 64 tiles as tuned numeric code is, so pages of
//! B are reused within a tile row rather than streamed once per row of A.

use rand_core::Rng;

use crate::{mix, rng, Arena};

const TILE: usize = 64;

pub fn run(memory: &mut [u8], seed: u64) -> u64 {
    let n = ((memory.len() / 24) as f64).sqrt() as usize;
    let n = n.max(1);
    let mut arena = Arena::new(memory);
    let a: &mut [f64] = arena.take(n * n);
    let b: &mut [f64] = arena.take(n * n);
    let c: &mut [f64] = arena.take(n * n);
    let mut r = rng(seed);
    for x in a.iter_mut().chain(b.iter_mut()) {
        // Values with short mantissas, as measured or rounded data have.
        *x = (r.next_u32() % 2001) as f64 / 100.0 - 10.0;
    }
    c.fill(0.0);
    for ii in (0..n).step_by(TILE) {
        for kk in (0..n).step_by(TILE) {
            for jj in (0..n).step_by(TILE) {
                for i in ii..(ii + TILE).min(n) {
                    for k in kk..(kk + TILE).min(n) {
                        let aik = a[i * n + k];
                        let (row_b, row_c) = (&b[k * n..k * n + n], &mut c[i * n..i * n + n]);
                        for j in jj..(jj + TILE).min(n) {
                            row_c[j] += aik * row_b[j];
                        }
                    }
                }
            }
        }
    }
    c.iter().fold(n as u64, |s, x| mix(s, x.to_bits()))
}
