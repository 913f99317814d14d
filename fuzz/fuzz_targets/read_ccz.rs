//! Reads arbitrary bytes as a `.ccz` file, opening it and loading every
//! page: every outcome must be pages or a one-line error, never a panic.
//! With the first byte odd, the header's and index's CRCs are made right
//! first, so that the checks behind them are reached too.
#![no_main]

use std::io::Write;

use ccvm_pack::format::{HEADER_BYTES, ENTRY_BYTES};
use ccvm_pack::{Packed, ReadOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut bytes = rest.to_vec();
    if mode & 1 == 1 && bytes.len() >= HEADER_BYTES {
        let pages = u64::from_le_bytes(bytes[24..32].try_into().unwrap()).min(1 << 20) as usize;
        let index_end = (HEADER_BYTES + pages * ENTRY_BYTES).min(bytes.len());
        let crc = crc32fast::hash(&bytes[HEADER_BYTES..index_end]);
        bytes[48..52].copy_from_slice(&crc.to_le_bytes());
        let crc = crc32fast::hash(&bytes[..60]);
        bytes[60..64].copy_from_slice(&crc.to_le_bytes());
    }
    let path = std::env::temp_dir().join(format!("ccvm-fuzz-{}.ccz", std::process::id()));
    std::fs::File::create(&path).unwrap().write_all(&bytes).unwrap();
    match Packed::open(&path, ReadOptions::default()) {
        Ok(mut p) => {
            for first in (0..p.pages().min(4096)).step_by(3) {
                if let Err(e) = p.read_run(first, 3, |_, _| Ok(())) {
                    assert!(!e.to_string().contains('\n'));
                }
            }
        }
        Err(e) => assert!(!e.to_string().contains('\n')),
    }
});
