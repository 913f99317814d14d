//! Decoders treat input as untrusted: truncated, bit-flipped and random
//! inputs give errors, never panics or out-of-bounds accesses.

use ccvm_codec::{Codec, CODECS, PAGE_SIZE};
use proptest::prelude::*;

/// A few real pages of each corpus file, compressed by `codec`.
fn samples(codec: &mut dyn Codec) -> Vec<(Vec<u8>, usize)> {
    let files = ccvm_corpus::load_dir(ccvm_corpus::default_dir()).unwrap();
    let mut out = Vec::new();
    for f in &files {
        for page in f.pages().step_by(97).take(6) {
            let mut buf = vec![0u8; 2 * PAGE_SIZE];
            if let Ok(n) = codec.compress(page, &mut buf) {
                buf.truncate(n);
                out.push((buf, PAGE_SIZE));
            }
        }
    }
    // Cache-line-sized blocks too.
    let line: Vec<u8> = (0..64u8).map(|i| i / 3).collect();
    let mut buf = vec![0u8; 256];
    if let Ok(n) = codec.compress(&line, &mut buf) {
        buf.truncate(n);
        out.push((buf, 64));
    }
    out
}

#[test]
fn truncated_inputs_are_rejected() {
    for info in CODECS {
        let mut codec = (info.make)();
        for (input, len) in samples(codec.as_mut()) {
            let mut back = vec![0u8; len];
            // Every cut within 64 bytes of either end (headers, the last
            // symbols), and one in every 7 between.
            let n = input.len();
            let cuts = (0..n).filter(|&c| c < 64 || c + 64 >= n || c % 7 == 0);
            for cut in cuts {
                assert!(
                    codec.decompress(&input[..cut], &mut back).is_err(),
                    "{}: accepted input truncated to {cut} of {}",
                    info.name,
                    input.len()
                );
            }
            let mut longer = input.clone();
            longer.push(0);
            assert!(
                codec.decompress(&longer, &mut back).is_err(),
                "{}: accepted a trailing byte",
                info.name
            );
        }
    }
}

#[test]
fn bit_flips_never_panic() {
    for info in CODECS {
        let mut codec = (info.make)();
        for (input, len) in samples(codec.as_mut()).into_iter().take(8) {
            let mut back = vec![0u8; len];
            let mut corrupt = input.clone();
            for bit in 0..input.len() * 8 {
                corrupt[bit / 8] ^= 1 << (bit % 8);
                let _ = codec.decompress(&corrupt, &mut back);
                corrupt[bit / 8] ^= 1 << (bit % 8);
            }
            // A wrong output length is an error too.
            let mut wrong = vec![0u8; len + 4];
            let _ = codec.decompress(&input, &mut wrong);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn random_inputs_never_panic(input in prop::collection::vec(any::<u8>(), 0..6000), words in 1usize..1100) {
        for info in CODECS {
            let mut codec = (info.make)();
            let mut back = vec![0u8; words * 4];
            let _ = codec.decompress(&input, &mut back);
        }
    }
}
