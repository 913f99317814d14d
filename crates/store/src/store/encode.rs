//! Encoding a page as a store keeps it: same-filled, compressed or raw.

use ccvm_codec::{same_filled_u64, Codec, PAGE_SIZE};

/// Encodes `page` (4096 bytes) as a store encodes it on a put, with
/// `codec` into `out` (at least `huge_threshold` bytes): same-filled pages
/// by their word, pages that compress to `huge_threshold` bytes or fewer
/// compressed, others raw (`out` is then not written). Hand the result to
/// [`Store::put_stored`](super::Store::put_stored).
///
/// ```
/// use ccvm_store::{encode, Stored};
/// let mut codec = ccvm_codec::by_name("wkdm").unwrap();
/// let mut out = [0u8; 3072];
/// assert_eq!(encode(&mut *codec, &[0u8; 4096], &mut out, 3072), Stored::Same(0));
/// ```
///
/// # Panics
///
/// If `page` is not 4096 bytes or `out` is shorter than `huge_threshold`.
pub fn encode(codec: &mut dyn Codec, page: &[u8], out: &mut [u8], huge_threshold: usize) -> Stored {
    assert_eq!(page.len(), PAGE_SIZE, "a page is 4096 bytes");
    if let Some(v) = same_filled_u64(page) {
        return Stored::Same(v);
    }
    match codec.compress(page, &mut out[..huge_threshold]) {
        Ok(n) => Stored::Compressed(n),
        Err(_) => Stored::Raw,
    }
}

/// How a page was kept, as [`Store::take_stored`](super::Store::take_stored) hands it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// Every 8-byte word of the page is this value (little-endian).
    Same(u64),
    /// The page as it is, 4096 bytes.
    Raw,
    /// The codec's output, this many bytes.
    Compressed(usize),
}
