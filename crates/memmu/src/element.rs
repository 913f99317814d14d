//! What a handle's array may hold: fixed-size numbers, stored little-endian.

/// A fixed-size value stored in MEMMU memory as `SIZE` little-endian bytes.
///
/// `SIZE` divides every page size MEMMU accepts (a power of two of at
/// least 16 bytes), so no element straddles two pages.
pub trait Element: Copy + Default + std::fmt::Debug + PartialEq {
    /// Bytes of one element: 1, 2, 4 or 8.
    const SIZE: usize;
    /// Reads an element from its `SIZE` bytes.
    fn read(bytes: &[u8]) -> Self;
    /// Writes the element into its `SIZE` bytes.
    fn write(self, bytes: &mut [u8]);
}

macro_rules! element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            #[inline]
            fn read(bytes: &[u8]) -> Self {
                let mut b = [0u8; std::mem::size_of::<$t>()];
                b.copy_from_slice(&bytes[..Self::SIZE]);
                <$t>::from_le_bytes(b)
            }
            #[inline]
            fn write(self, bytes: &mut [u8]) {
                bytes[..Self::SIZE].copy_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}

element!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64);
