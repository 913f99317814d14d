//! Shared body of the decoder fuzz targets.
//!
//! The first input byte selects a mode. Even: the rest is untrusted
//! compressed data, decoded into a block of a length the byte also selects;
//! any result but a panic or an out-of-bounds access is fine. Odd: the rest
//! (cut to whole words) is a block that must round-trip exactly.

use std::sync::{Mutex, OnceLock};

use ccvm_codec::{by_name, Codec, MAX_BLOCK};

pub fn check(name: &str, data: &[u8]) {
    static CODEC: OnceLock<Mutex<Box<dyn Codec>>> = OnceLock::new();
    let mut codec = CODEC.get_or_init(|| Mutex::new(by_name(name).unwrap())).lock().unwrap();
    let Some((&mode, rest)) = data.split_first() else { return };
    if mode & 1 == 0 {
        let words = [1usize, 2, 16, 17, 1024, 255][(mode as usize >> 1) % 6];
        let mut block = vec![0u8; words * 4];
        let _ = codec.decompress(rest, &mut block);
    } else {
        let len = rest.len() / 4 * 4;
        if len == 0 || len > MAX_BLOCK {
            return;
        }
        let block = &rest[..len];
        let mut out = vec![0u8; 2 * len + 64];
        if let Ok(n) = codec.compress(block, &mut out) {
            let mut back = vec![0u8; len];
            codec.decompress(&out[..n], &mut back).expect("decoding own output");
            assert_eq!(back, block, "round trip differs");
        }
    }
}
