//! A sensor node's work, to measure MEMMU by: the kinds of benchmark
//! paper 003 §5.5 ran on a TelosB (data sampling, filtering, aggregation,
//! covariance), each written three ways over the same arithmetic: on plain
//! arrays (the baseline), through checked accesses (MEMMU unoptimised),
//! and through pinned views a page at a time (MEMMU with hoisted checks).
//! All three must give the same [`Summary`].

use crate::{Handle, Memmu, MemmuError};

/// `n` samples of each of `sensors` generated 10-bit sensor signals
/// (`ccvm_corpus::sensor`, a different seed per sensor).
pub fn sensor_samples(sensors: usize, n: usize) -> Vec<Vec<u16>> {
    (0..sensors)
        .map(|s| {
            let f = ccvm_corpus::sensor::pages(n.div_ceil(2048), s as u64 + 1);
            f.data
                .chunks_exact(2)
                .take(n)
                .map(|b| u16::from_le_bytes([b[0], b[1]]))
                .collect()
        })
        .collect()
}

/// Taps of the moving-average filter.
pub const TAPS: usize = 8;
/// Samples per aggregation window.
pub const WINDOW: usize = 64;

/// What the work computes, to compare the three ways by.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Summary {
    /// Sum of every filtered sample.
    pub filtered: u64,
    /// A checksum of each window's minimum, maximum and sum.
    pub windows: u64,
    /// `n·Σxy − Σx·Σy` of each neighbouring pair of filtered signals (the
    /// covariance times n²).
    pub covariance: Vec<i64>,
}

/// Window statistics (and the sum of all samples) fed one sample at a
/// time.
#[derive(Default)]
struct Windows {
    total: u64,
    n: usize,
    min: u16,
    max: u16,
    sum: u64,
    check: u64,
}

impl Windows {
    fn add(&mut self, v: u16) {
        if self.n == 0 {
            (self.min, self.max, self.sum) = (v, v, 0);
        }
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum += v as u64;
        self.total += v as u64;
        self.n += 1;
        if self.n == WINDOW {
            self.flush();
        }
    }
    fn flush(&mut self) {
        if self.n > 0 {
            self.check = self
                .check
                .wrapping_mul(31)
                .wrapping_add(self.min as u64 + 3 * self.max as u64 + 7 * self.sum);
            self.n = 0;
        }
    }
}

/// Covariance sums fed one pair at a time.
#[derive(Default)]
struct Cov {
    n: i64,
    x: i64,
    y: i64,
    xy: i64,
}

impl Cov {
    fn add(&mut self, x: u16, y: u16) {
        self.n += 1;
        self.x += x as i64;
        self.y += y as i64;
        self.xy += x as i64 * y as i64;
    }
    fn value(&self) -> i64 {
        self.n * self.xy - self.x * self.y
    }
}

/// The filter's output at `i` from the `TAPS` inputs ending at `i`
/// (fewer at the start), `input(j)` giving input `j`.
fn filter(i: usize, mut input: impl FnMut(usize) -> u16) -> u16 {
    let from = (i + 1).saturating_sub(TAPS);
    let sum: u32 = (from..=i).map(|j| input(j) as u32).sum();
    (sum / (i + 1 - from) as u32) as u16
}

/// The work on plain arrays.
pub fn plain(samples: &[Vec<u16>]) -> Summary {
    let raw: Vec<Vec<u16>> = samples.to_vec();
    let filtered: Vec<Vec<u16>> = raw
        .iter()
        .map(|r| (0..r.len()).map(|i| filter(i, |j| r[j])).collect())
        .collect();
    let mut s = Summary::default();
    let mut w = Windows::default();
    for f in &filtered {
        for &v in f {
            w.add(v);
        }
        w.flush();
    }
    (s.filtered, s.windows) = (w.total, w.check);
    for pair in filtered.windows(2) {
        let mut c = Cov::default();
        pair[0].iter().zip(&pair[1]).for_each(|(&x, &y)| c.add(x, y));
        s.covariance.push(c.value());
    }
    s
}

/// The work through checked accesses: every read and write is
/// [`Memmu::get`] or [`Memmu::set`].
///
/// # Errors
///
/// What the memory returns, e.g. [`MemmuError::OutOfMemory`].
pub fn checked(m: &mut Memmu, samples: &[Vec<u16>]) -> Result<Summary, MemmuError> {
    let (raw, filtered) = buffers(m, samples)?;
    for (h, data) in raw.iter().zip(samples) {
        for (i, &v) in data.iter().enumerate() {
            m.set(*h, i, v)?;
        }
    }
    for (r, f) in raw.iter().zip(&filtered) {
        for i in 0..m.len(*r)? {
            let mut err = Ok(());
            let v = filter(i, |j| {
                m.get(*r, j).unwrap_or_else(|e| {
                    err = Err(e);
                    0
                })
            });
            err?;
            m.set(*f, i, v)?;
        }
    }
    let mut s = Summary::default();
    let mut w = Windows::default();
    for f in &filtered {
        for i in 0..m.len(*f)? {
            let v = m.get(*f, i)?;
            w.add(v);
        }
        w.flush();
    }
    (s.filtered, s.windows) = (w.total, w.check);
    for pair in filtered.windows(2) {
        let mut c = Cov::default();
        for i in 0..m.len(pair[0])? {
            c.add(m.get(pair[0], i)?, m.get(pair[1], i)?);
        }
        s.covariance.push(c.value());
    }
    free(m, raw, filtered)?;
    Ok(s)
}

/// The work through pinned views, one page of each array at a time: one
/// check per page instead of per access.
///
/// # Errors
///
/// As [`checked`]; the working area needs at least 3 slots.
pub fn pinned(m: &mut Memmu, samples: &[Vec<u16>]) -> Result<Summary, MemmuError> {
    let per = m.page_size() / 2;
    let (raw, filtered) = buffers(m, samples)?;
    for (h, data) in raw.iter().zip(samples) {
        for c in (0..data.len()).step_by(per) {
            let end = (c + per).min(data.len());
            let mut v = m.pin(*h, c..end)?;
            for (i, &x) in data[c..end].iter().enumerate() {
                v.set(i, x);
            }
        }
    }
    for (r, f) in raw.iter().zip(&filtered) {
        let n = m.len(*r)?;
        for c in (0..n).step_by(per) {
            let end = (c + per).min(n);
            let from = c.saturating_sub(TAPS - 1);
            let mut v = m.pin_many(&[(*r, from..end), (*f, c..end)])?;
            for i in c..end {
                let out = filter(i, |j| v.get_in(0, j - from));
                v.set_in(1, i - c, out);
            }
        }
    }
    let mut s = Summary::default();
    let mut w = Windows::default();
    for f in &filtered {
        let n = m.len(*f)?;
        for c in (0..n).step_by(per) {
            let mut v = m.pin(*f, c..(c + per).min(n))?;
            for x in v.iter() {
                w.add(x);
            }
        }
        w.flush();
    }
    (s.filtered, s.windows) = (w.total, w.check);
    for pair in filtered.windows(2) {
        let n = m.len(pair[0])?;
        let mut cov = Cov::default();
        for c in (0..n).step_by(per) {
            let end = (c + per).min(n);
            let mut v = m.pin_many(&[(pair[0], c..end), (pair[1], c..end)])?;
            for i in 0..end - c {
                cov.add(v.get_in(0, i), v.get_in(1, i));
            }
        }
        s.covariance.push(cov.value());
    }
    free(m, raw, filtered)?;
    Ok(s)
}

type Buffers = (Vec<Handle<u16>>, Vec<Handle<u16>>);

fn buffers(m: &mut Memmu, samples: &[Vec<u16>]) -> Result<Buffers, MemmuError> {
    let raw = samples
        .iter()
        .map(|d| m.alloc::<u16>(d.len()))
        .collect::<Result<Vec<_>, _>>()?;
    let filtered = samples
        .iter()
        .map(|d| m.alloc::<u16>(d.len()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((raw, filtered))
}

fn free(m: &mut Memmu, raw: Vec<Handle<u16>>, filtered: Vec<Handle<u16>>) -> Result<(), MemmuError> {
    raw.into_iter().chain(filtered).try_for_each(|h| m.free(h))
}

/// How many samples the memory holds: buffers of `buffer` samples are
/// allocated and filled from `source` (cycled) through pinned views until
/// the memory refuses; the samples stored before the refusal.
///
/// # Panics
///
/// If `source` is empty or `buffer` is 0.
pub fn capacity(m: &mut Memmu, source: &[u16], buffer: usize) -> usize {
    assert!(!source.is_empty() && buffer > 0, "samples and a buffer size are needed");
    let per = m.page_size() / 2;
    let mut held = 0;
    let mut next = source.iter().cycle();
    loop {
        let Ok(h) = m.alloc::<u16>(buffer) else { return held };
        for c in (0..buffer).step_by(per) {
            let end = (c + per).min(buffer);
            let Ok(mut v) = m.pin(h, c..end) else { return held };
            for i in 0..end - c {
                v.set(i, *next.next().expect("cycled"));
            }
            held += end - c;
        }
    }
}
