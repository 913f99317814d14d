//! Reads arbitrary bytes as a line trace (`ccvm sim record-lines`): every
//! outcome must be a trace or a one-line error, never a panic. With the
//! first byte odd, the rest is taken as the records of one block and
//! wrapped in a valid header, frame and CRC, so that the record parser
//! behind them is reached too.
#![no_main]

use ccvm_cachesim::trace::{LineTrace, MAGIC, VERSION};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let bytes = if mode & 1 == 1 && !rest.is_empty() && rest.len() <= 1 << 20 {
        let header = br#"{"program":"f","args":[],"method":"fuzz"}"#;
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&(header.len() as u32).to_le_bytes());
        b.extend_from_slice(header);
        let frame = zstd::bulk::compress(rest, 1).unwrap();
        b.extend_from_slice(&(rest.len() as u32).to_le_bytes());
        b.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        b.extend_from_slice(&crc32fast::hash(rest).to_le_bytes());
        b.extend_from_slice(&frame);
        b
    } else {
        rest.to_vec()
    };
    match LineTrace::read(&bytes[..], "fuzz") {
        Ok(t) => {
            let n = t.events().filter(|e| matches!(e, ccvm_cachesim::trace::Event::Reference { .. })).count();
            assert_eq!(n as u64, t.references());
        }
        Err(e) => assert!(!e.to_string().contains('\n')),
    }
});
