//! One set-associative cache level with LRU replacement, plain or with
//! compressed lines (segmented, or pair-matching as paper 003 §6.4
//! proposes).

/// Bytes of a cache line.
pub const LINE: usize = 64;

/// Most line frames per set.
pub const MAX_WAYS: usize = 64;

/// How a level stores its lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Organization {
    /// Uncompressed: `ways` lines per set.
    Plain,
    /// Compressed into segments: each set has `ways × segments` segments
    /// of `64 / segments` bytes and twice as many tags as ways; a line
    /// takes as many segments as its compressed size needs. Space is
    /// assumed compacted (the hardware's cost, not modelled here).
    Segmented {
        /// Segments per line: 4 or 8 in the literature.
        segments: usize,
    },
    /// Pair-matching (003 §6.4): each of the `ways` line frames holds one
    /// line, or two compressed lines whose sizes add to 64 bytes or less.
    PairMatching,
}

/// A cache level's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Bytes of line frames (uncompressed capacity).
    pub size: usize,
    /// Line frames per set.
    pub ways: usize,
    /// How lines are stored.
    pub organization: Organization,
}

/// What one access did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The line was there.
    Hit {
        /// Stored compressed (smaller than a line).
        compressed: bool,
    },
    /// The line was not there; it is now, and these lines left.
    Miss {
        /// Lines evicted to make room (at most two for pair-matching,
        /// any number for segments).
        evicted: Vec<u64>,
    },
}

/// Counts of one level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Accesses that hit.
    pub hits: u64,
    /// Accesses that missed.
    pub misses: u64,
    /// Hits on lines stored compressed.
    pub compressed_hits: u64,
    /// Lines evicted.
    pub evictions: u64,
    /// Hits on the least recently used line of a set that holds at least
    /// its ways' worth of lines: what one line less per set would have
    /// missed (003 §6.7.1's marginal-gain counter).
    pub lru_hits: u64,
}

/// A line that left a level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Victim {
    /// Line number.
    pub line: u64,
    /// Bytes it took in the level (64: stored uncompressed).
    pub stored: u8,
    /// Bytes it compresses to, as sized when filled (64: it does not, or
    /// the level never asked).
    pub size: u8,
    /// Written since it was filled.
    pub dirty: bool,
}

/// What one reference found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A hit; `compressed`: stored compressed, so decompressed to be read.
    Hit {
        /// Stored compressed.
        compressed: bool,
    },
    /// A miss: the line is now filled.
    Miss,
}

/// What the set helpers below need of a level's entries.
pub(crate) trait Tagged: Copy {
    fn line(&self) -> u64;
    fn stamp(&self) -> u64;
    fn make_dirty(&mut self);
}

/// Implements [`Tagged`] for an entry type with `line`, `stamp` and
/// `dirty` fields.
macro_rules! tagged {
    ($entry:ty) => {
        impl $crate::cache::Tagged for $entry {
            fn line(&self) -> u64 {
                self.line
            }
            fn stamp(&self) -> u64 {
                self.stamp
            }
            fn make_dirty(&mut self) {
                self.dirty = true;
            }
        }
    };
}
pub(crate) use tagged;

tagged!(Entry);

/// One pass over a set: where `line` is, the oldest stamp, lines held.
#[inline]
pub(crate) fn scan<E: Tagged>(set: &[Option<E>], line: u64) -> (Option<usize>, u64, usize) {
    let (mut found, mut oldest, mut held) = (None, u64::MAX, 0);
    for (i, e) in set.iter().enumerate() {
        if let Some(e) = e {
            held += 1;
            oldest = oldest.min(e.stamp());
            if e.line() == line {
                found = Some(i);
            }
        }
    }
    (found, oldest, held)
}

/// Marks `line` dirty if the set holds it; whether it did.
pub(crate) fn mark_dirty_in<E: Tagged>(set: &mut [Option<E>], line: u64) -> bool {
    match set.iter_mut().flatten().find(|e| e.line() == line) {
        Some(e) => {
            e.make_dirty();
            true
        }
        None => false,
    }
}

/// Takes `line` out of the set, if there.
pub(crate) fn take_from<E: Tagged>(set: &mut [Option<E>], line: u64) -> Option<E> {
    set.iter_mut().find(|e| e.is_some_and(|e| e.line() == line))?.take()
}

impl Entry {
    fn victim(self) -> Victim {
        Victim {
            line: self.line,
            stored: self.size,
            size: self.size,
            dirty: self.dirty,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    line: u64,
    size: u8,
    stamp: u64,
    /// The frame it occupies (pair-matching), or unused.
    frame: u8,
    dirty: bool,
}

/// One cache level.
///
/// Invariants: a line is in at most one entry; in each set the entries'
/// space fits the set (ways lines; ways × segments segments; or, for
/// pair-matching, each frame holds one full line or two lines adding to
/// at most 64 bytes).
pub struct Cache {
    config: Config,
    sets: usize,
    /// Entries per set (tags): ways, or twice that when compressed.
    tags: usize,
    entries: Vec<Option<Entry>>,
    clock: u64,
    counts: Counts,
}

impl Cache {
    /// An empty level.
    ///
    /// # Panics
    ///
    /// If `size` is not a whole number of sets of `ways` lines, the set
    /// count not a power of two, or `segments` not 1 to 64 dividing 64.
    pub fn new(config: Config) -> Cache {
        assert!(
            config.ways > 0 && config.size.is_multiple_of(config.ways * LINE),
            "size must be whole sets of ways lines"
        );
        assert!(config.ways <= MAX_WAYS, "at most {MAX_WAYS} ways");
        let sets = config.size / (config.ways * LINE);
        assert!(sets.is_power_of_two(), "the set count must be a power of two");
        if let Organization::Segmented { segments } = config.organization {
            assert!(
                (1..=LINE).contains(&segments) && LINE.is_multiple_of(segments),
                "segments must divide 64"
            );
        }
        let tags = match config.organization {
            Organization::Plain => config.ways,
            _ => 2 * config.ways,
        };
        Cache {
            config,
            sets,
            tags,
            entries: vec![None; sets * tags],
            clock: 0,
            counts: Counts::default(),
        }
    }

    /// The level's counts so far.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Lines held now, and how many of them compressed.
    pub fn occupancy(&self) -> (usize, usize) {
        let held = self.entries.iter().flatten().count();
        let compressed = self
            .entries
            .iter()
            .flatten()
            .filter(|e| (e.size as usize) < LINE)
            .count();
        (held, compressed)
    }

    /// Line frames in all.
    pub fn frames(&self) -> usize {
        self.sets * self.config.ways
    }

    fn set_of(&self, line: u64) -> usize {
        (line as usize) & (self.sets - 1)
    }

    /// Whether `line` is held (no LRU update).
    pub fn contains(&self, line: u64) -> bool {
        let s = self.set_of(line);
        self.entries[s * self.tags..(s + 1) * self.tags]
            .iter()
            .flatten()
            .any(|e| e.line == line)
    }

    /// Accesses `line` (a line number: address / 64), whose compressed
    /// size would be `size` bytes (64 or more: stored uncompressed; a
    /// plain level ignores it).
    pub fn access(&mut self, line: u64, size: usize) -> Outcome {
        self.access_with(line, || size)
    }

    /// As [`Cache::access`], the size asked of `size` only on a miss, when
    /// the line is filled (a size costs a lookup of the line's contents).
    pub fn access_with(&mut self, line: u64, size: impl FnOnce() -> usize) -> Outcome {
        let mut victims = Vec::new();
        match self.reference(line, false, size, &mut victims) {
            Access::Hit { compressed } => Outcome::Hit { compressed },
            Access::Miss => Outcome::Miss {
                evicted: victims.iter().map(|v| v.line).collect(),
            },
        }
    }

    /// The simulator's entry point: references `line` (a write marks it
    /// dirty), asking `size` for its compressed size only on a miss, and
    /// appends the lines that left to `victims` (kept by the caller so no
    /// reference allocates).
    #[inline]
    pub fn reference(
        &mut self,
        line: u64,
        write: bool,
        size: impl FnOnce() -> usize,
        victims: &mut Vec<Victim>,
    ) -> Access {
        self.clock += 1;
        let s = self.set_of(line);
        let set = &mut self.entries[s * self.tags..(s + 1) * self.tags];
        let (found, oldest, held) = scan(set, line);
        if let Some(i) = found {
            let e = set[i].as_mut().expect("found");
            self.counts.lru_hits += (e.stamp == oldest && held >= self.config.ways) as u64;
            e.stamp = self.clock;
            e.dirty |= write;
            let compressed = (e.size as usize) < LINE;
            self.counts.hits += 1;
            self.counts.compressed_hits += compressed as u64;
            return Access::Hit { compressed };
        }
        self.counts.misses += 1;
        let size = match self.config.organization {
            Organization::Plain => LINE,
            _ => size().clamp(1, LINE),
        };
        let before = victims.len();
        self.insert(s, line, size, write, victims);
        self.counts.evictions += (victims.len() - before) as u64;
        Access::Miss
    }

    /// Marks `line` dirty if held (a write-back from the level above);
    /// whether it was held.
    pub fn mark_dirty(&mut self, line: u64) -> bool {
        let s = self.set_of(line);
        mark_dirty_in(&mut self.entries[s * self.tags..(s + 1) * self.tags], line)
    }

    /// Takes `line` out (a back-invalidation), if held.
    pub fn remove(&mut self, line: u64) -> Option<Victim> {
        let s = self.set_of(line);
        take_from(&mut self.entries[s * self.tags..(s + 1) * self.tags], line).map(Entry::victim)
    }

    fn insert(&mut self, s: usize, line: u64, size: usize, dirty: bool, evicted: &mut Vec<Victim>) {
        let (ways, tags, clock) = (self.config.ways, self.tags, self.clock);
        let set = &mut self.entries[s * tags..(s + 1) * tags];
        let lru = |set: &[Option<Entry>]| {
            (0..set.len())
                .filter(|&i| set[i].is_some())
                .min_by_key(|&i| set[i].map(|e| e.stamp))
                .expect("a held line")
        };
        let mut entry = Entry {
            line,
            size: size as u8,
            stamp: clock,
            frame: 0,
            dirty,
        };
        match self.config.organization {
            Organization::Plain => {
                if !set.iter().any(Option::is_none) {
                    let v = lru(set);
                    evicted.push(set[v].take().expect("held").victim());
                }
            }
            Organization::Segmented { segments } => {
                let seg = LINE / segments;
                let need = size.div_ceil(seg);
                let used = |set: &[Option<Entry>]| {
                    set.iter()
                        .flatten()
                        .map(|e| (e.size as usize).div_ceil(seg))
                        .sum::<usize>()
                };
                while !set.iter().any(Option::is_none) || used(set) + need > ways * segments {
                    let v = lru(set);
                    evicted.push(set[v].take().expect("held").victim());
                }
            }
            Organization::PairMatching => {
                // Room in a frame as things are: an empty frame, or a
                // frame whose one line leaves room for this one.
                let mut load = [0usize; MAX_WAYS];
                let mut lines = [0usize; MAX_WAYS];
                for e in set.iter().flatten() {
                    load[e.frame as usize] += e.size as usize;
                    lines[e.frame as usize] += 1;
                }
                let fits = |f: usize, load: &[usize], lines: &[usize]| {
                    lines[f] == 0 || (lines[f] == 1 && load[f] + size <= LINE)
                };
                let frame = match (0..ways).find(|&f| fits(f, &load, &lines)) {
                    Some(f) => f,
                    None => {
                        // Evict the least recently used line; if its
                        // partner and this line do not fit one frame,
                        // the partner goes too.
                        let v = lru(set);
                        let victim = set[v].take().expect("held");
                        evicted.push(victim.victim());
                        let f = victim.frame as usize;
                        load[f] -= victim.size as usize;
                        lines[f] -= 1;
                        if !fits(f, &load, &lines) {
                            let p = (0..set.len())
                                .find(|&i| set[i].is_some_and(|e| e.frame as usize == f))
                                .expect("the partner");
                            evicted.push(set[p].take().expect("held").victim());
                        }
                        f
                    }
                };
                entry.frame = frame as u8;
            }
        }
        let free = set.iter().position(Option::is_none).expect("a free tag after eviction");
        set[free] = Some(entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Space never overflows a set, whatever the sizes.
    #[test]
    fn sets_never_hold_more_than_their_space() {
        let mut rng = fastrand::Rng::with_seed(5);
        for organization in [
            Organization::Segmented { segments: 4 },
            Organization::Segmented { segments: 8 },
            Organization::PairMatching,
        ] {
            let mut c = Cache::new(Config {
                size: 8 * 4 * LINE,
                ways: 4,
                organization,
            });
            for _ in 0..50_000 {
                c.access(rng.u64(..200), rng.usize(1..=64));
                for set in c.entries.chunks(c.tags) {
                    match organization {
                        Organization::Segmented { segments } => {
                            let seg = LINE / segments;
                            let used: usize = set.iter().flatten().map(|e| (e.size as usize).div_ceil(seg)).sum();
                            assert!(used <= 4 * segments);
                        }
                        _ => {
                            for f in 0..4u8 {
                                let lines: Vec<_> = set.iter().flatten().filter(|e| e.frame == f).collect();
                                assert!(lines.len() <= 2);
                                assert!(
                                    lines.len() < 2 || lines.iter().map(|e| e.size as usize).sum::<usize>() <= LINE
                                );
                            }
                        }
                    }
                }
            }
            assert!(c.counts().evictions > 10_000, "the sets filled and emptied");
        }
    }
}
