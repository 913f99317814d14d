//! A pinned view: ranges of arrays whose pages are held resident while
//! the view lives.

use std::ops::Range;

use crate::{Element, Memmu};

/// One pinned range.
struct View {
    /// Index in `slots` of the range's first page.
    first_slot: usize,
    /// Element index (in the array) of the range's first element.
    start: usize,
    len: usize,
    /// Element index of the first pinned page's first element.
    base: usize,
}

/// Elements of arrays whose pages are pinned in the working area: reads
/// and writes are a shift, a mask and an index, with no handle check.
///
/// The view borrows the [`Memmu`] mutably, so nothing else can run on it
/// (and evict these pages) while the view lives; dropping it unpins them.
/// A view made by [`Memmu::pin`] has one range, read with [`Pinned::get`];
/// one made by [`Memmu::pin_many`] has several, read with
/// [`Pinned::get_in`].
pub struct Pinned<'a, T: Element> {
    mem: &'a mut Memmu,
    /// The slot of each pinned page of each range, ranges in order.
    slots: Vec<usize>,
    /// Slots pinned (each once), to unpin.
    pinned: Vec<usize>,
    views: Vec<View>,
    shift: u32,
    _element: std::marker::PhantomData<T>,
}

impl<'a, T: Element> Pinned<'a, T> {
    pub(crate) fn new(
        mem: &'a mut Memmu,
        slots: Vec<usize>,
        pinned: Vec<usize>,
        views: Vec<(usize, Range<usize>, usize)>,
    ) -> Self {
        let shift = (mem.page_size() / T::SIZE).trailing_zeros();
        let views = views
            .into_iter()
            .map(|(first_slot, r, base)| View {
                first_slot,
                start: r.start,
                len: r.len(),
                base,
            })
            .collect();
        Pinned {
            mem,
            slots,
            pinned,
            views,
            shift,
            _element: std::marker::PhantomData,
        }
    }

    /// Elements in the (first) range.
    pub fn len(&self) -> usize {
        self.len_of(0)
    }

    /// Whether the (first) range is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Elements in range `k`.
    ///
    /// # Panics
    ///
    /// If there is no range `k`.
    pub fn len_of(&self, k: usize) -> usize {
        self.views[k].len
    }

    #[inline]
    fn at(&self, k: usize, i: usize) -> (usize, usize) {
        let v = &self.views[k];
        assert!(i < v.len, "index {i} out of a pinned range of {} elements", v.len);
        let e = v.start + i - v.base;
        (
            self.slots[v.first_slot + (e >> self.shift)],
            (e & ((1 << self.shift) - 1)) * T::SIZE,
        )
    }

    /// Element `i` of the range (element `start + i` of the array).
    ///
    /// # Panics
    ///
    /// If `i` is past the range, as a slice index.
    #[inline]
    pub fn get(&mut self, i: usize) -> T {
        self.get_in(0, i)
    }

    /// Sets element `i` of the range.
    ///
    /// # Panics
    ///
    /// If `i` is past the range.
    #[inline]
    pub fn set(&mut self, i: usize, value: T) {
        self.set_in(0, i, value)
    }

    /// Element `i` of range `k`.
    ///
    /// # Panics
    ///
    /// If there is no range `k` or `i` is past it.
    #[inline]
    pub fn get_in(&mut self, k: usize, i: usize) -> T {
        let (slot, off) = self.at(k, i);
        T::read(&self.mem.slot_bytes(slot)[off..off + T::SIZE])
    }

    /// Sets element `i` of range `k`.
    ///
    /// # Panics
    ///
    /// If there is no range `k` or `i` is past it.
    #[inline]
    pub fn set_in(&mut self, k: usize, i: usize, value: T) {
        let (slot, off) = self.at(k, i);
        value.write(&mut self.mem.slot_bytes(slot)[off..off + T::SIZE]);
    }

    /// The (first) range's elements in order.
    pub fn iter(&mut self) -> impl Iterator<Item = T> + use<'_, 'a, T> {
        (0..self.len()).map(move |i| self.get(i))
    }
}

impl<T: Element> Drop for Pinned<'_, T> {
    fn drop(&mut self) {
        let pinned = std::mem::take(&mut self.pinned);
        self.mem.unpin(&pinned);
    }
}
