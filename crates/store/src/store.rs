//! The store: a mapping table from page numbers to where each page is kept
//! (paper 003 §3.4.1.1, Table 3.3), over chunk memory placed by a
//! [`SlotAllocator`].
//!
//! # Choices
//!
//! * The mapping table (the `table` module) holds 16 bytes a page, as
//!   zram's does. Each entry says how the page is kept: as a same-filled
//!   value (no slot, as zram does), compressed, or raw (a page whose
//!   compressed size is above the huge threshold, about 3/4 of a page by
//!   default, as zram's huge class), with its slot.
//! * Compression runs outside the store's lock: a put compresses into a
//!   local buffer with a codec taken from a pool, then locks only to place
//!   the bytes. A get decodes straight from the page's slot under a shared
//!   lock, as zram decodes from the object zsmalloc maps: gets run side by
//!   side, and no copy of the compressed bytes is made.
//! * The memory a store counts is exact: chunks, the table's leaves, the
//!   chunks' member lists and the allocator's books. The store keeps no
//!   put order; recency is the policy's.
//! * A put is all or nothing: when the new page cannot be placed (the
//!   memory limit, or a failed chunk request), the store is left exactly as
//!   it was, including any older version of that page.
//! * Growth ahead of need (§4.3): the next chunk is requested as soon as the
//!   free bytes in the chunks held drop below 1/8 of a chunk, i.e. once the
//!   newest chunk's worth of space is fuller than the fill ratio 7/8, so a
//!   put rarely waits for memory. The ratio is applied to one chunk, not to
//!   all held memory: applied to all, it would keep an eighth of a large
//!   store empty. The memory limit counts chunks, allocator bookkeeping and
//!   the mapping table, and is never exceeded.
//! * Compaction (§5.3.3): when a slot does not fit although enough bytes
//!   are free in the chunks held (over 4% of them; or any amount when no
//!   chunk can be added), at most once per an eighth of the pages put,
//!   every slot is re-placed in (chunk, offset) order, each freed then
//!   allocated again.
//!   First fit places from the lowest chunk, so slots move towards the
//!   front and whole chunks at the end drain and are returned; best fit
//!   (the default, `rm-best`) takes empty chunks last, to the same end.
//! * Empty chunks are returned as they appear, keeping one spare so that a
//!   store hovering at a chunk boundary does not request and return the same
//!   chunk over and over.

use std::sync::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

// The TSC-based clock: a codec call is a few microseconds, and the
// system clock's own cost (50 to 250 ns a reading here) would blur the
// store's share of a call.
use quanta::Instant;

use ccvm_codec::{same_filled_u64, Codec, CompressError, DecodeError, PAGE_SIZE};
use thiserror::Error;

mod books;
mod compact;
mod encode;

use ccvm_policy::HUGE_THRESHOLD;
pub use compact::COMPACTION_MOVES_PER_PUT;
pub use encode::{encode, Stored};

use crate::alloc::{self, SlotAllocator};
use crate::chunks::{Chunk, ChunkSource, MappedChunks};
use crate::table::{Place, Table};

/// Headroom every put keeps beyond what it adds itself.
const BOOKS_HEADROOM: usize = 64;

/// How a store is made.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// The codec of the pages it holds.
    pub codec: ccvm_codec::CodecId,
    /// Allocator name (see [`alloc::ALLOCATORS`]).
    pub allocator: String,
    /// Bytes per chunk: a power of two from 4096 to 1 GiB.
    pub chunk_size: usize,
    /// Memory the store may use, all counted; `usize::MAX` for no limit.
    pub memory_limit: usize,
    /// Pages that compress to more than this many bytes are kept raw.
    pub huge_threshold: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            codec: "lz4".parse().expect("LZ4 is registered"),
            allocator: "rm-best".into(),
            chunk_size: 64 * 1024,
            memory_limit: usize::MAX,
            huge_threshold: HUGE_THRESHOLD,
        }
    }
}

/// Why a store could not be made from its [`StoreConfig`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    /// No allocator has that name (the message lists them).
    #[error("{0}")]
    Allocator(String),
    /// The chunk size is not a power of two from 4096 to 1 GiB.
    #[error("chunk size {0} is not a power of two from 4096 to 1 GiB")]
    ChunkSize(usize),
    /// The huge threshold is not within a page.
    #[error("huge threshold {0} is not between 1 and 4096 bytes")]
    HugeThreshold(usize),
}

/// Why a store operation failed.
#[derive(Debug, Error)]
pub enum StoreError {
    /// The page would take the store past its memory limit.
    #[error("store is full: the page does not fit within the memory limit of {limit} bytes")]
    Full {
        /// The limit.
        limit: usize,
    },
    /// A chunk was needed and the chunk source had none.
    #[error("no memory for another chunk")]
    OutOfMemory,
    /// The page is not in the store.
    #[error("page {0} is not in the store")]
    NotFound(u64),
    /// The stored bytes did not decode: the store's memory was corrupted.
    #[error("page {page} is corrupt in the store: {source}")]
    Corrupt {
        /// The page.
        page: u64,
        /// What the decoder found.
        source: DecodeError,
    },
    /// A page was not 4096 bytes.
    #[error("a page is {PAGE_SIZE} bytes, not {0}")]
    PageSize(usize),
}

/// Counters named as in Linux zram's `mm_stat`, plus a few of ccvm's.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    /// Bytes of the pages stored (4096 each), same-filled ones included.
    pub orig_data_size: u64,
    /// Bytes of the compressed and raw pages' slots as requested.
    pub compr_data_size: u64,
    /// Bytes of chunk memory held.
    pub mem_used_total: u64,
    /// The memory limit (0 when there is none, as in zram).
    pub mem_limit: u64,
    /// Peak of [`Stats::memory_used`] since the store was made.
    pub mem_used_max: u64,
    /// Pages kept as a same-filled value.
    pub same_pages: u64,
    /// Pages moved by compaction, in total.
    pub pages_compacted: u64,
    /// Pages kept raw because they compressed too little.
    pub huge_pages: u64,
    /// Pages stored.
    pub pages: u64,
    /// Bytes of allocator bookkeeping and mapping table.
    pub metadata_bytes: u64,
    /// Compactions run.
    pub compactions: u64,
    /// Free bytes inside held chunks / held chunk bytes.
    pub fragmentation: f64,
}

impl Stats {
    /// Everything the store uses: chunks plus bookkeeping.
    pub fn memory_used(&self) -> u64 {
        self.mem_used_total + self.metadata_bytes
    }
}

/// A codec with its scratch page, lent to one operation at a time.
struct Worker {
    codec: Box<dyn Codec>,
    buf: Box<[u8; PAGE_SIZE]>,
}

/// Everything behind the store's lock.
struct Inner {
    table: Table,
    alloc: Box<dyn SlotAllocator>,
    chunks: Vec<Option<Chunk>>,
    held: usize,
    source: Box<dyn ChunkSource>,
    chunk_size: usize,
    limit: usize,
    /// Sum of slot footprints.
    used: usize,
    /// Per chunk number: the footprints of its slots.
    chunk_used: Vec<usize>,
    /// Per chunk number: the pages with a slot in it, so that emptying a
    /// chunk visits its own pages and not the whole table.
    members: Vec<Vec<u64>>,
    /// Bytes the member lists hold (their capacities).
    member_bytes: usize,
    /// Puts since the last compaction.
    puts_since_compaction: usize,
    stats: Stats,
}

/// A compressed page store. See the module docs.
///
/// ```
/// use ccvm_store::{Store, StoreConfig};
/// let store = Store::new(StoreConfig::default()).unwrap();
/// let page: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
/// store.put(7, &page).unwrap();
/// let mut back = [0u8; 4096];
/// store.get(7, &mut back).unwrap();
/// assert_eq!(&back[..], &page[..]);
/// assert!(store.stats().compr_data_size < 4096);
/// ```
pub struct Store {
    inner: RwLock<Inner>,
    workers: Mutex<Vec<Worker>>,
    make_codec: fn() -> Box<dyn Codec>,
    huge_threshold: usize,
}

impl Store {
    /// Makes a store that takes chunks from the heap.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`], whose message is one line naming the problem: an
    /// unknown allocator, a chunk size that is not a power of two
    /// from 4096 to 1 GiB, or a huge threshold above a page.
    pub fn new(config: StoreConfig) -> Result<Store, ConfigError> {
        Self::with_source(config, Box::new(MappedChunks::default()))
    }

    /// Makes a store that takes chunks from `source`.
    ///
    /// # Errors
    ///
    /// As [`Store::new`].
    pub fn with_source(config: StoreConfig, source: Box<dyn ChunkSource>) -> Result<Store, ConfigError> {
        let make_codec = config.codec.info().make;
        let cs = config.chunk_size;
        if !cs.is_power_of_two() || !(PAGE_SIZE..=1 << 30).contains(&cs) {
            return Err(ConfigError::ChunkSize(cs));
        }
        if config.huge_threshold == 0 || config.huge_threshold > PAGE_SIZE {
            return Err(ConfigError::HugeThreshold(config.huge_threshold));
        }
        let alloc = alloc::by_name(&config.allocator, cs).map_err(ConfigError::Allocator)?;
        let stats = Stats {
            mem_limit: if config.memory_limit == usize::MAX {
                0
            } else {
                config.memory_limit as u64
            },
            ..Stats::default()
        };
        let inner = Inner {
            table: Table::default(),
            alloc,
            chunks: Vec::new(),
            held: 0,
            source,
            chunk_size: cs,
            limit: config.memory_limit,
            used: 0,
            puts_since_compaction: 0,
            chunk_used: Vec::new(),
            members: Vec::new(),
            member_bytes: 0,
            stats,
        };
        Ok(Store {
            inner: RwLock::new(inner),
            workers: Mutex::new(Vec::new()),
            make_codec,
            huge_threshold: config.huge_threshold,
        })
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().expect("store lock")
    }

    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read().expect("store lock")
    }

    /// Runs `f` with a codec and a scratch page from the pool (made if the
    /// pool is empty), so codec work needs no lock and no fresh buffer.
    fn with_worker<R>(&self, f: impl FnOnce(&mut Worker) -> R) -> R {
        let pooled = self.workers.lock().expect("worker pool").pop();
        let mut worker = pooled.unwrap_or_else(|| Worker {
            codec: (self.make_codec)(),
            buf: Box::new([0; PAGE_SIZE]),
        });
        let r = f(&mut worker);
        self.workers.lock().expect("worker pool").push(worker);
        r
    }

    /// Stores `page` (4096 bytes) as page number `page_no`, replacing any
    /// page stored under that number. Returns the bytes its slot takes as
    /// requested: the compressed size, 4096 for a raw page, 0 for a
    /// same-filled one.
    ///
    /// # Errors
    ///
    /// [`StoreError::Full`] when it does not fit within the memory limit,
    /// [`StoreError::OutOfMemory`] when a chunk was needed and none could be
    /// had, [`StoreError::PageSize`] for a page that is not 4096 bytes. On
    /// error the store is unchanged.
    pub fn put(&self, page_no: u64, page: &[u8]) -> Result<usize, StoreError> {
        self.put_inner(page_no, page, false).map(|(len, _)| len)
    }

    /// Stores a page already encoded as [`Store::put`] would encode it
    /// (see [`encode`]): `bytes` holds the first `n` bytes of a
    /// [`Stored::Compressed`]`(n)` page or the 4096 of a [`Stored::Raw`]
    /// one, and is ignored for [`Stored::Same`]. Returns what `put` returns.
    /// The runtime compresses pages in a helper process this way.
    ///
    /// # Errors
    ///
    /// As [`Store::put`]; also [`StoreError::PageSize`] if `bytes` is
    /// shorter than `stored` says.
    pub fn put_stored(&self, page_no: u64, stored: Stored, bytes: &[u8]) -> Result<usize, StoreError> {
        let mut inner = self.write();
        let (bytes, raw) = match stored {
            Stored::Same(v) => {
                inner.put_same(page_no, v)?;
                return Ok(0);
            }
            Stored::Raw => (bytes.get(..PAGE_SIZE).ok_or(StoreError::PageSize(bytes.len()))?, true),
            Stored::Compressed(n) => (bytes.get(..n).ok_or(StoreError::PageSize(bytes.len()))?, false),
        };
        let slot = inner.place(page_no, bytes)?;
        inner.insert(page_no, if raw { Place::Raw(slot) } else { Place::Compressed(slot) });
        inner.grow_ahead();
        Ok(slot.len as usize)
    }

    /// Pages that compress to more than this many bytes are kept raw.
    pub fn huge_threshold(&self) -> usize {
        self.huge_threshold
    }

    /// Like [`Store::put`], also returning the time spent in the codec, so
    /// benchmarks can tell the store's own cost from the codec's.
    ///
    /// # Errors
    ///
    /// As [`Store::put`].
    pub fn put_measured(&self, page_no: u64, page: &[u8]) -> Result<Duration, StoreError> {
        self.put_inner(page_no, page, true).map(|(_, t)| t)
    }

    fn put_inner(&self, page_no: u64, page: &[u8], measure: bool) -> Result<(usize, Duration), StoreError> {
        if page.len() != PAGE_SIZE {
            return Err(StoreError::PageSize(page.len()));
        }
        if let Some(v) = same_filled_u64(page) {
            self.write().put_same(page_no, v)?;
            return Ok((0, Duration::ZERO));
        }
        self.with_worker(|w| {
            let started = measure.then(Instant::now);
            let r = w.codec.compress(page, &mut w.buf[..self.huge_threshold]);
            let codec_time = started.map_or(Duration::ZERO, |t| t.elapsed());
            let (bytes, raw) = match r {
                Ok(n) => (&w.buf[..n], false),
                Err(CompressError::DoesNotFit { .. }) => (page, true),
                Err(e) => unreachable!("a page is a valid block: {e}"),
            };
            let mut inner = self.write();
            let slot = inner.place(page_no, bytes)?;
            let place = if raw { Place::Raw(slot) } else { Place::Compressed(slot) };
            inner.insert(page_no, place);
            inner.grow_ahead();
            Ok((slot.len as usize, codec_time))
        })
    }

    /// Copies page `page_no` into `out` (4096 bytes).
    ///
    /// # Errors
    ///
    /// [`StoreError::NotFound`], [`StoreError::PageSize`], or
    /// [`StoreError::Corrupt`] if the stored bytes do not decode.
    pub fn get(&self, page_no: u64, out: &mut [u8]) -> Result<(), StoreError> {
        self.get_inner(page_no, out, false).map(drop)
    }

    /// Like [`Store::get`], also returning the time spent in the codec.
    ///
    /// # Errors
    ///
    /// As [`Store::get`].
    pub fn get_measured(&self, page_no: u64, out: &mut [u8]) -> Result<Duration, StoreError> {
        self.get_inner(page_no, out, true)
    }

    fn get_inner(&self, page_no: u64, out: &mut [u8], measure: bool) -> Result<Duration, StoreError> {
        if out.len() != PAGE_SIZE {
            return Err(StoreError::PageSize(out.len()));
        }
        self.with_worker(|w| {
            let inner = self.read();
            let entry = inner.table.get(page_no).ok_or(StoreError::NotFound(page_no))?;
            match entry.place {
                Place::Same(v) => {
                    fill(out, v);
                    Ok(Duration::ZERO)
                }
                Place::Raw(slot) => {
                    out.copy_from_slice(inner.bytes(slot));
                    Ok(Duration::ZERO)
                }
                Place::Compressed(slot) => {
                    let started = measure.then(Instant::now);
                    w.codec
                        .decompress(inner.bytes(slot), out)
                        .map_err(|source| StoreError::Corrupt { page: page_no, source })?;
                    Ok(started.map_or(Duration::ZERO, |t| t.elapsed()))
                }
            }
        })
    }

    /// Decodes page `page_no` into `out` (4096 bytes) and removes it: what
    /// a cache fault does. Unlike [`Store::get`] then [`Store::remove`], it
    /// takes the store's lock once and decodes straight from the page's
    /// slot, with no copy of the compressed bytes; the price is that other
    /// callers wait while it decodes, so it suits one caller at a time (the
    /// runtime's pager, which holds its own lock around it anyway).
    ///
    /// ```
    /// use ccvm_store::{Store, StoreConfig};
    /// let store = Store::new(StoreConfig::default()).unwrap();
    /// let page: Vec<u8> = (0..4096u32).map(|i| (i / 64) as u8).collect();
    /// store.put(7, &page).unwrap();
    /// let mut out = [0u8; 4096];
    /// store.take(7, &mut out).unwrap();
    /// assert_eq!(&out[..], &page[..]);
    /// assert!(!store.contains(7));
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Store::get`]; on any error the page stays stored.
    pub fn take(&self, page_no: u64, out: &mut [u8]) -> Result<(), StoreError> {
        if out.len() != PAGE_SIZE {
            return Err(StoreError::PageSize(out.len()));
        }
        self.with_worker(|w| {
            let mut inner = self.write();
            let entry = inner.table.get(page_no).ok_or(StoreError::NotFound(page_no))?;
            match entry.place {
                Place::Same(v) => fill(out, v),
                Place::Raw(slot) => out.copy_from_slice(inner.bytes(slot)),
                Place::Compressed(slot) => w
                    .codec
                    .decompress(inner.bytes(slot), out)
                    .map_err(|source| StoreError::Corrupt { page: page_no, source })?,
            }
            inner.take(page_no);
            inner.maybe_release();
            Ok(())
        })
    }

    /// Removes page `page_no` and copies out how it was kept, without
    /// decoding it: for [`Stored::Compressed`]`(n)` and [`Stored::Raw`] the
    /// first `n` (or 4096) bytes of `out` are the stored bytes. The runtime
    /// moves compressed pages to disk this way, still compressed.
    ///
    /// # Errors
    ///
    /// [`StoreError::NotFound`], or [`StoreError::PageSize`] if `out` is not
    /// 4096 bytes.
    pub fn take_stored(&self, page_no: u64, out: &mut [u8]) -> Result<Stored, StoreError> {
        if out.len() != PAGE_SIZE {
            return Err(StoreError::PageSize(out.len()));
        }
        let mut inner = self.write();
        let entry = inner.table.get(page_no).ok_or(StoreError::NotFound(page_no))?;
        let stored = match entry.place {
            Place::Same(v) => Stored::Same(v),
            Place::Raw(slot) => {
                out.copy_from_slice(inner.bytes(slot));
                Stored::Raw
            }
            Place::Compressed(slot) => {
                out[..slot.len as usize].copy_from_slice(inner.bytes(slot));
                Stored::Compressed(slot.len as usize)
            }
        };
        inner.take(page_no);
        inner.maybe_release();
        Ok(stored)
    }

    /// Memory the store uses now, all counted (as
    /// [`Stats::memory_used`], without taking a whole snapshot).
    pub fn memory_used(&self) -> u64 {
        self.read().memory_used() as u64
    }

    /// Removes page `page_no`; returns whether it was stored.
    pub fn remove(&self, page_no: u64) -> bool {
        let mut inner = self.write();
        let found = inner.take(page_no);
        inner.maybe_release();
        found
    }

    /// Whether page `page_no` is stored.
    pub fn contains(&self, page_no: u64) -> bool {
        self.read().table.contains(page_no)
    }

    /// The store's counters now.
    pub fn stats(&self) -> Stats {
        self.read().snapshot()
    }
}

/// Fills a page with the 8-byte word `v` (little-endian).
fn fill(out: &mut [u8], v: u64) {
    for word in out.chunks_exact_mut(8) {
        word.copy_from_slice(&v.to_le_bytes());
    }
}
