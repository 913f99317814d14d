//! WordLZ's format, pinned on hand-worked blocks, and the parts of the
//! encoder the corpus-wide round trips may not reach.

use super::WordLz;
use crate::{wk::WkDm256, Codec, DecodeError};

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
fn words_without_a_match_are_a_wkdm_block_behind_one_sequence() {
    // zero, miss, partial (same upper 22 bits), exact: no match, so one
    // sequence of four word tokens, and the four words coded by WKdm.
    let ws = [0, 0xAAAA_B000, 0xAAAA_B123, 0xAAAA_B123];
    let block = words(&ws);
    let mut out = [0u8; 64];
    let n = WordLz::new().compress(&block, &mut out).unwrap();
    let mut wk = [0u8; 64];
    let m = WkDm256::new().compress(&block, &mut wk).unwrap();
    // Header: a sequence byte, four word tokens; then the sequence.
    assert_eq!(&out[..5], &[1, 0, 4, 0, 0x80]);
    assert_eq!(&out[5..n], &wk[..m]);
    assert_eq!(round_trip(&block), n);
}

#[test]
fn a_repeated_run_is_one_match_with_its_offset() {
    // Eight distinct words, then the same eight again: the second half is
    // one match of 8 words from 8 back.
    let (block, out, n) = repeated_run();
    // seq: eight words (7 and 1 more) and a match of 8 = 2 + 6, offset 8.
    assert_eq!(&out[..4], &[4, 0, 8, 0]);
    assert_eq!(&out[4..8], &[0xE6, 1, 8, 0]);
    assert_eq!(round_trip(&block), n);
}

#[test]
fn records_with_a_stride_take_the_repeat_offset() {
    // An array of 3-word records whose last two words repeat: after the
    // first match, each record is its first word and a match at the
    // repeat offset, with no offset written.
    let mut ws = Vec::new();
    for i in 0..300u32 {
        ws.extend_from_slice(&[0x9000_0000 ^ i.wrapping_mul(0x2545_F491), 0x5555_1234, 0x7777_0001]);
    }
    let block = words(&ws);
    let n = round_trip(&block);
    let mut out = vec![0u8; 4096];
    assert_eq!(WordLz::new().compress(&block, &mut out).unwrap(), n);
    let seq_len = usize::from(u16::from_le_bytes([out[0], out[1]]));
    // The first two records: four words and a match of two with its
    // offset; then a token per record (one word, a repeat match of two).
    assert_eq!(seq_len, 3 + 298, "{:x?}", &out[4..20]);
    assert_eq!(&out[4..8], &[0x80, 3, 0, 0x30]);
    assert!(out[4..4 + seq_len].iter().filter(|&&t| t & 0x10 != 0).count() >= 297);
    assert!(n < 300 * 6, "{n} bytes");
}

#[test]
fn a_repeated_word_is_a_run_from_one_word_back() {
    // The repeat offset starts at one word: a page of one non-zero word is
    // that word and one match over the rest.
    let block = words(&[0xDEAD_BEEF; 1024]);
    let mut out = [0u8; 64];
    let n = WordLz::new().compress(&block, &mut out).unwrap();
    // seq: one word, a repeat match of 1023 = 2 + 15 + 255 * 3 + 241.
    assert_eq!(&out[..9], &[5, 0, 1, 0, 0x3F, 255, 255, 255, 241]);
    assert_eq!(round_trip(&block), n);
}

#[test]
fn matches_reach_across_a_large_block() {
    // 64 KiB: random words, the first 8 KiB repeated from 40 KiB on, so the
    // offset needs more than the 10 bits of a page.
    let mut r = rng(11);
    let mut block: Vec<u8> = (0..65536 / 8).flat_map(|_| r().to_le_bytes()).collect();
    let unrepeated = round_trip(&block);
    let (head, tail) = block.split_at_mut(40960);
    tail[..8192].copy_from_slice(&head[..8192]);
    let n = round_trip(&block);
    assert!(n + 8000 < unrepeated, "{n} against {unrepeated}");
}

#[test]
fn damaged_offsets_and_lengths_are_named() {
    let (block, out, n) = repeated_run();
    let mut back = vec![0u8; block.len()];
    let mut bad = out[..n].to_vec();
    bad[6] = 200; // the offset: beyond the 8 words written
    assert_eq!(
        WordLz::new().decompress(&bad, &mut back),
        Err(DecodeError::Corrupt("match offset reaches before the block"))
    );
    let mut bad = out[..n].to_vec();
    bad[0] = 200; // the sequence stream's length
    assert_eq!(
        WordLz::new().decompress(&bad, &mut back),
        Err(DecodeError::Corrupt("sequence stream longer than the input"))
    );
    let mut bad = out[..n].to_vec();
    bad[5] = 2; // nine word tokens where the header says eight
    assert_eq!(
        WordLz::new().decompress(&bad, &mut back),
        Err(DecodeError::Corrupt(
            "more word tokens than the block or the header has"
        ))
    );
}

#[test]
fn bad_offsets_are_named_on_the_decoders_fast_path_too() {
    // Four words, the same four, then 40 distinct words: the first
    // sequence (four word tokens and a match of four, offset 4) has the
    // room the fast path needs; the last is the general path's.
    let mut ws = vec![0x1111_0001, 0x2222_0002, 0x3333_0003, 0x4444_0004];
    ws.extend_from_within(..);
    let mut r = rng(5);
    ws.extend((0..40).map(|_| r() as u32));
    let block = words(&ws);
    let mut out = [0u8; 512];
    let n = WordLz::new().compress(&block, &mut out).unwrap();
    assert_eq!(&out[4..7], &[0x82, 4, 0]);
    assert_eq!(round_trip(&block), n);
    let mut back = vec![0u8; block.len()];
    for (offset, what) in [(5, "beyond the four words written"), (0, "zero")] {
        let mut bad = out[..n].to_vec();
        bad[5] = offset;
        assert_eq!(
            WordLz::new().decompress(&bad, &mut back),
            Err(DecodeError::Corrupt("match offset reaches before the block")),
            "an offset {what}"
        );
    }
}

#[test]
fn the_lz_only_variant_has_the_same_sequences_and_the_word_tokens_as_they_are() {
    let mut next = rng(0x5EED);
    // Records of four words (a pointer, a counter, two random words),
    // every fifth one a repeat of an earlier record.
    let mut ws: Vec<u32> = Vec::new();
    for r in 0..256u32 {
        if r % 5 == 4 {
            let from = 4 * (next() as usize % (ws.len() / 4));
            ws.extend_from_within(from..from + 4);
        } else {
            ws.extend([0x7F00_1000 + 64 * r, r, next() as u32, next() as u32]);
        }
    }
    let block = words(&ws);
    let (mut full, mut lz) = (vec![0u8; 8192], vec![0u8; 8192]);
    let n = WordLz::new().compress(&block, &mut full).unwrap();
    let mut only = WordLz::lz_only();
    let m = only.compress(&block, &mut lz).unwrap();
    // Same header and sequences; then the tokens, 4 bytes each.
    let seq_end = 4 + usize::from(u16::from_le_bytes([full[0], full[1]]));
    let tokens = usize::from(u16::from_le_bytes([full[2], full[3]]));
    assert_eq!(full[..seq_end], lz[..seq_end]);
    assert_eq!(m, seq_end + 4 * tokens);
    assert!(n < m, "WKdm codes the word tokens in less than 4 bytes each");
    let mut back = vec![0u8; block.len()];
    only.decompress(&lz[..m], &mut back).unwrap();
    assert_eq!(back, block);
    // The token bytes must be exactly the count in the header.
    for bad in [m - 1, m + 1] {
        assert!(matches!(
            only.decompress(&lz[..bad], &mut back),
            Err(DecodeError::Corrupt(_))
        ));
    }
    // The two formats are not each other's.
    assert!(WordLz::new().decompress(&lz[..m], &mut back).is_err());
}

#[test]
fn the_lz_only_variant_round_trips_every_corpus_page() {
    let files = ccvm_corpus::load_dir(ccvm_corpus::default_dir()).unwrap();
    let mut c = WordLz::lz_only();
    let (mut out, mut back) = (vec![0u8; 8192], vec![0u8; 4096]);
    for page in files.iter().flat_map(|f| f.pages()) {
        let n = c.compress(page, &mut out).unwrap();
        c.decompress(&out[..n], &mut back).unwrap();
        assert_eq!(back, page);
    }
}
