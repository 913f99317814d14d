//! Many threads use one store at once: each owns a share of the page
//! numbers and checks them against its own model, while another thread
//! reads every number to contend for the store.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ccvm_store::{Store, StoreConfig, StoreError};

const THREADS: u64 = 4;

fn page(seed: u64) -> [u8; 4096] {
    // Pointer-and-counter-like words: compressible, different per seed.
    let mut p = [0u8; 4096];
    for (i, w) in p.chunks_exact_mut(8).enumerate() {
        let v = if i % 3 == 0 {
            0x7F00_0000_1000 + (seed % 4096) * 64 + i as u64
        } else {
            seed ^ (i as u64 % 17)
        };
        w.copy_from_slice(&v.to_le_bytes());
    }
    p
}

#[test]
fn threads_share_a_store() {
    for allocator in ["rm", "zs"] {
        let config = StoreConfig {
            allocator: allocator.into(),
            ..StoreConfig::default()
        };
        let store = Arc::new(Store::new(config).unwrap());
        let done = Arc::new(AtomicBool::new(false));
        let reader = {
            let (store, done) = (store.clone(), done.clone());
            std::thread::spawn(move || {
                let mut out = [0u8; 4096];
                let mut reads = 0u64;
                while !done.load(Ordering::Relaxed) {
                    for p in 0..2000 {
                        match store.get(p, &mut out) {
                            Ok(()) | Err(StoreError::NotFound(_)) => reads += 1,
                            Err(e) => panic!("reader: {e}"),
                        }
                    }
                }
                reads
            })
        };
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let store = store.clone();
                std::thread::spawn(move || {
                    let mut model: HashMap<u64, u64> = HashMap::new();
                    let mut x = 0x1234_5678 + t;
                    let mut out = [0u8; 4096];
                    for _ in 0..40_000 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let p = (x % 500) * THREADS + t;
                        match x % 4 {
                            0 | 1 => {
                                store.put(p, &page(x)).unwrap();
                                model.insert(p, x);
                            }
                            2 => match model.get(&p) {
                                Some(&seed) => {
                                    store.get(p, &mut out).unwrap();
                                    assert!(out == page(seed), "thread {t}: page {p}");
                                }
                                None => assert!(matches!(store.get(p, &mut out), Err(StoreError::NotFound(_)))),
                            },
                            _ => assert_eq!(store.remove(p), model.remove(&p).is_some()),
                        }
                    }
                    model.len()
                })
            })
            .collect();
        let kept: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
        done.store(true, Ordering::Relaxed);
        assert!(reader.join().unwrap() > 0);
        assert_eq!(store.stats().pages as usize, kept, "{allocator}");
    }
}
