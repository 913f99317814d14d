//! WordLZ's format, pinned on hand-worked blocks, and the parts of the
//! encoder the corpus-wide round trips may not reach.

use super::{slot, WordLz};
use crate::{Codec, DecodeError};

fn words(ws: &[u32]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// Eight distinct words, then the same eight again; the block, its
/// encoding (in a buffer of 128 bytes) and the encoding's length.
fn repeated_run() -> (Vec<u8>, [u8; 128], usize) {
    let first: Vec<u32> = (0..8).map(|k| 0x1000_0000 * (k + 1) + 0x0505_0505 * k).collect();
    let block = words(&[first.clone(), first].concat());
    let mut out = [0u8; 128];
    let n = WordLz::new().compress(&block, &mut out).unwrap();
    (block, out, n)
}

fn round_trip(block: &[u8]) -> usize {
    let mut c = WordLz::new();
    let mut out = vec![0u8; 2 * block.len() + 64];
    let n = c.compress(block, &mut out).expect("fits twice the block");
    let mut back = vec![0u8; block.len()];
    c.decompress(&out[..n], &mut back).expect("own output decodes");
    assert_eq!(back, block);
    n
}

/// A xorshift generator, for blocks that do not depend on a crate.
fn rng(mut x: u64) -> impl FnMut() -> u64 {
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

#[test]
fn the_four_word_kinds_are_coded_as_the_format_says() {
    // zero, miss, partial (same upper 20 bits), exact.
    let block = words(&[0, 0xAAAA_B000, 0xAAAA_B123, 0xAAAA_B123]);
    let s = slot(0xAAAA_B000) as u8;
    let mut out = [0u8; 64];
    let n = WordLz::new().compress(&block, &mut out).unwrap();
    let field = (u16::from(s) | 0x123 << 4).to_le_bytes();
    #[rustfmt::skip]
    let expected = [
        1, 0, 1, 0, 1, 0, 2, 0,       // stream lengths: seq, tags, idx, part
        0x40,                         // four word tokens, no match
        0b01_10_11_00,                // tags: zero, miss, partial, exact
        s,                            // the exact match's index
        field[0], field[1],           // the partial's index and low 12 bits
        0x00, 0xB0, 0xAA, 0xAA,       // the miss
    ];
    assert_eq!(&out[..n], &expected);
    assert_eq!(round_trip(&block), n);
}

#[test]
fn a_repeated_run_is_one_match_with_its_offset() {
    // Eight distinct words, then the same eight again: the second half is
    // one match of 32 bytes from 32 back.
    let (block, out, n) = repeated_run();
    // seq: eight words and a match of 32 = 6 + 15 + 11, offset 32.
    assert_eq!(&out[..2], &[4, 0]);
    assert_eq!(&out[8..12], &[0x8F, 32, 0, 11]);
    assert_eq!(round_trip(&block), n);
}

#[test]
fn byte_packed_records_are_matched_at_every_alignment() {
    // sqlite-like cells: 19-byte records sharing 14 bytes, so each repeat
    // sits at a different alignment than the one before.
    let mut r = rng(7);
    let mut block = Vec::new();
    while block.len() < 4096 {
        let v = r();
        block.extend_from_slice(&v.to_le_bytes()[..3]);
        block.extend_from_slice(b"\x12\x03%\x03SKU-000576");
        block.extend_from_slice(&[b'0' + (v >> 32) as u8 % 10, b'0' + (v >> 40) as u8 % 10]);
    }
    block.truncate(4096);
    let n = round_trip(&block);
    assert!(
        n < 4096 * 45 / 100,
        "{n} bytes: the common part of each record should cost a match"
    );
}

#[test]
fn matches_reach_across_a_large_block() {
    // 64 KiB: random words, the first 8 KiB repeated from 40 KiB on, so the
    // offsets need all 16 bits (no literal bytes in blocks this large).
    let mut r = rng(11);
    let mut block: Vec<u8> = (0..65536 / 8).flat_map(|_| r().to_le_bytes()).collect();
    let unrepeated = round_trip(&block);
    let (head, tail) = block.split_at_mut(40960);
    tail[..8192].copy_from_slice(&head[..8192]);
    let n = round_trip(&block);
    assert!(n + 8000 < unrepeated, "{n} against {unrepeated}");
}

#[test]
fn a_match_may_end_just_before_the_block_end() {
    // A 4-byte-shifted repeat that ends 1 to 3 bytes before the end, so the
    // last word token overlaps the match.
    for tail in 1..4 {
        let mut r = rng(3 + tail as u64);
        let mut block: Vec<u8> = (0..48).map(|_| r() as u8).collect();
        let src: Vec<u8> = block[1..21].to_vec();
        let at = 48 - 20 - tail;
        block[at..at + 20].copy_from_slice(&src);
        round_trip(&block);
    }
}

#[test]
fn damaged_offsets_and_lengths_are_named() {
    let (block, out, n) = repeated_run();
    let mut back = vec![0u8; block.len()];
    let mut bad = out[..n].to_vec();
    bad[9] = 200; // the offset: beyond the 32 bytes written
    assert_eq!(
        WordLz::new().decompress(&bad, &mut back),
        Err(DecodeError::Corrupt("match offset reaches before the block"))
    );
    let mut bad = out[..n].to_vec();
    bad[0] = 200; // the sequence stream's length
    assert_eq!(
        WordLz::new().decompress(&bad, &mut back),
        Err(DecodeError::Corrupt("stream lengths exceed the input"))
    );
}
