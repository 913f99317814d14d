//! Detection of same-filled blocks: blocks that are one value repeated.
//!
//! Zero pages and pages filled with one pattern are common (freshly mapped
//! memory, memset buffers); the store keeps them as the value alone, as
//! Linux's zram does. The test runs over the block in 32-byte chunks compared
//! with a splatted value, which the compiler turns into wide vector compares,
//! and stops at the first chunk that differs, so non-uniform pages (the
//! usual case) cost a few nanoseconds.

/// Returns the 64-bit value that fills `block`, if it is one value repeated.
///
/// Returns `None` when the block is empty or its length is not a multiple
/// of 8.
///
/// ```
/// use ccvm_codec::same_filled_u64;
/// assert_eq!(same_filled_u64(&[0u8; 4096]), Some(0));
/// let mut page = [7u8; 4096];
/// assert_eq!(same_filled_u64(&page), Some(0x0707070707070707));
/// page[4095] = 0;
/// assert_eq!(same_filled_u64(&page), None);
/// ```
pub fn same_filled_u64(block: &[u8]) -> Option<u64> {
    if block.is_empty() || !block.len().is_multiple_of(8) {
        return None;
    }
    let first = u64::from_le_bytes(block[..8].try_into().ok()?);
    let mut splat = [0u8; 32];
    for w in splat.chunks_exact_mut(8) {
        w.copy_from_slice(&first.to_le_bytes());
    }
    let mut chunks = block.chunks_exact(32);
    for c in &mut chunks {
        if c != &splat[..] {
            return None;
        }
    }
    chunks
        .remainder()
        .chunks_exact(8)
        .all(|w| w == &splat[..8])
        .then_some(first)
}

/// Returns the 32-bit word that fills `block`, if it is one word repeated.
///
/// Returns `None` when the block is empty or its length is not a multiple
/// of 4.
///
/// ```
/// use ccvm_codec::same_filled_u32;
/// let page: Vec<u8> = [1u8, 2, 3, 4].repeat(1024);
/// assert_eq!(same_filled_u32(&page), Some(0x04030201));
/// ```
pub fn same_filled_u32(block: &[u8]) -> Option<u32> {
    if block.len() < 4 || !block.len().is_multiple_of(4) {
        return None;
    }
    let first = u32::from_le_bytes(block[..4].try_into().ok()?);
    if block.len().is_multiple_of(8) {
        let v = same_filled_u64(block)?;
        return (v == (first as u64) * 0x1_0000_0001).then_some(first);
    }
    block.chunks_exact(4).all(|w| w == first.to_le_bytes()).then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_only_uniform_blocks() {
        for len in [16usize, 40, 64, 4096] {
            let mut b = vec![0xABu8; len];
            assert_eq!(same_filled_u64(&b), Some(0xABABABABABABABAB));
            for i in 0..len {
                b[i] ^= 1;
                assert_eq!(same_filled_u64(&b), None, "len {len} flip {i}");
                assert_eq!(same_filled_u32(&b), None);
                b[i] ^= 1;
            }
        }
        let b: Vec<u8> = [1u8, 2, 3, 4, 5, 6, 7, 8].repeat(512);
        assert_eq!(same_filled_u64(&b), Some(0x0807060504030201));
        assert_eq!(same_filled_u32(&b), None);
        assert_eq!(same_filled_u32(&[9, 9, 9, 9]), Some(0x09090909));
        assert_eq!(same_filled_u64(&[]), None);
    }
}
