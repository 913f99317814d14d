//! Adaptive L2 compression by marginal performance gain (paper 003 §6.7).
//!
//! Each set's ways are split in two groups: way-1 (the newer half) and
//! way-2 (the older half). A filled line enters way-1; a line pushed out
//! of way-1 moves to way-2; a line pushed out of way-2 leaves the chip.
//! The controller sets a [`Mode`] from the measured marginal gain: below
//! the first threshold nothing is compressed; above it lines entering
//! way-2 are stored compressed, pair-matched two to a frame where their
//! sizes fit; above the second, way-1's too. When the mode falls, a
//! compressed line that is hit in a group no longer compressing is stored
//! whole again and its partner is pushed down (out of way-1 into way-2,
//! or off chip from way-2).
//!
//! Choices the paper leaves open: a hit in way-2 moves the line to way-1
//! (the groups are the two halves of each set's recency order, so that
//! with compression off the cache is exactly an LRU cache), and the
//! frame-level placement is the pair-matching of [`crate::Organization`]:
//! a frame with room as things are, else the group's least recent line
//! goes, and its partner too if the newcomer does not fit beside it.

use crate::cache::{mark_dirty_in, scan, take_from, Access, Counts, Victim, LINE, MAX_WAYS};
use crate::Level;

/// Which groups store lines compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    /// None: the cache is a plain LRU cache.
    Off,
    /// Way-2 (the older half).
    Way2,
    /// Both halves.
    Both,
}

/// The marginal-gain thresholds, in hits on a set's least recently used
/// line per instruction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// Above this way-2 compresses.
    pub t1: f64,
    /// Above this way-1 compresses too.
    pub t2: f64,
}

impl Thresholds {
    /// 003 §7.5's values, found once for all its applications.
    pub const PAPER: Thresholds = Thresholds {
        t1: 0.000_037_5,
        t2: 0.000_062_5,
    };

    /// The mode for a measured marginal gain.
    pub fn mode(&self, mpg: f64) -> Mode {
        if mpg >= self.t2 {
            Mode::Both
        } else if mpg >= self.t1 {
            Mode::Way2
        } else {
            Mode::Off
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    line: u64,
    /// What the line compresses to.
    size: u8,
    /// What it takes now: `size`, or 64 when stored whole.
    stored: u8,
    stamp: u64,
    /// Frame in the set: way-1's first, then way-2's.
    frame: u8,
    dirty: bool,
}

crate::cache::tagged!(Entry);

impl Entry {
    fn victim(self) -> Victim {
        Victim {
            line: self.line,
            stored: self.stored,
            size: self.size,
            dirty: self.dirty,
        }
    }
}

/// An L2 whose compression follows its [`Mode`]; see the module docs.
///
/// Invariants: a line is in at most one entry; every frame holds one line,
/// or two whose stored sizes add to at most 64 bytes.
///
/// ```
/// use ccvm_cachesim::{AdaptiveCache, Level, Mode};
/// let mut c = AdaptiveCache::new(64 * 2, 2); // one set: a way-1 frame, a way-2 frame
/// c.set_mode(Mode::Way2);
/// let mut out = Vec::new();
/// for line in 0..3 {
///     c.reference(line, false, || 20, &mut out);
/// }
/// // Line 2 in way-1; lines 0 and 1 compressed, sharing the way-2 frame.
/// assert!(out.is_empty());
/// assert_eq!(c.occupancy(), (3, 2));
/// ```
pub struct AdaptiveCache {
    sets: usize,
    ways: usize,
    way1: usize,
    tags: usize,
    entries: Vec<Option<Entry>>,
    mode: Mode,
    clock: u64,
    counts: Counts,
}

impl AdaptiveCache {
    /// An empty cache of `size` bytes of frames and `ways` frames a set,
    /// compression off.
    ///
    /// # Panics
    ///
    /// If `ways` is below 2 or above [`MAX_WAYS`], or `size` is not a
    /// power-of-two number of whole sets.
    pub fn new(size: usize, ways: usize) -> AdaptiveCache {
        assert!((2..=MAX_WAYS).contains(&ways), "2 to {MAX_WAYS} ways");
        assert!(
            size.is_multiple_of(ways * LINE),
            "size must be whole sets of ways lines"
        );
        let sets = size / (ways * LINE);
        assert!(sets.is_power_of_two(), "the set count must be a power of two");
        AdaptiveCache {
            sets,
            ways,
            way1: ways / 2,
            tags: 2 * ways,
            entries: vec![None; sets * 2 * ways],
            mode: Mode::Off,
            clock: 0,
            counts: Counts::default(),
        }
    }

    /// Sets which groups compress lines entering them from now on.
    pub fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    fn compressing(&self, frame: usize) -> bool {
        match self.mode {
            Mode::Off => false,
            Mode::Way2 => frame >= self.way1,
            Mode::Both => true,
        }
    }

    fn group(&self, frame: usize) -> std::ops::Range<usize> {
        if frame < self.way1 {
            0..self.way1
        } else {
            self.way1..self.ways
        }
    }

    /// Places `e` in the frames of `group`, compressed if that group
    /// compresses; returns the lines it pushed out of the group (at most
    /// two).
    fn place(&mut self, s: usize, mut e: Entry, group: std::ops::Range<usize>, force: bool) -> [Option<Entry>; 2] {
        let compress = force || self.compressing(group.start);
        e.stored = if compress { e.size } else { LINE as u8 };
        let set = &mut self.entries[s * self.tags..(s + 1) * self.tags];
        let mut load = [0usize; MAX_WAYS];
        let mut lines = [0usize; MAX_WAYS];
        for x in set.iter().flatten() {
            load[x.frame as usize] += x.stored as usize;
            lines[x.frame as usize] += 1;
        }
        let need = e.stored as usize;
        let fits =
            |f: usize, load: &[usize], lines: &[usize]| lines[f] == 0 || (lines[f] == 1 && load[f] + need <= LINE);
        let mut out = [None, None];
        let frame = match group.clone().find(|&f| fits(f, &load, &lines)) {
            Some(f) => f,
            None => {
                let v = (0..set.len())
                    .filter(|&i| set[i].is_some_and(|x| group.contains(&(x.frame as usize))))
                    .min_by_key(|&i| set[i].map(|x| x.stamp))
                    .expect("a full group holds lines");
                let victim = set[v].take().expect("held");
                let f = victim.frame as usize;
                load[f] -= victim.stored as usize;
                lines[f] -= 1;
                out[0] = Some(victim);
                if !fits(f, &load, &lines) {
                    let p = (0..set.len())
                        .find(|&i| set[i].is_some_and(|x| x.frame as usize == f))
                        .expect("the partner");
                    out[1] = set[p].take();
                }
                f
            }
        };
        e.frame = frame as u8;
        let free = set.iter().position(Option::is_none).expect("a free tag");
        set[free] = Some(e);
        out
    }

    /// Puts `e` in way-1, moving what it pushes out down to way-2 and
    /// what that pushes out to `victims`.
    fn fill(&mut self, s: usize, e: Entry, victims: &mut Vec<Victim>) {
        for down in self.place(s, e, 0..self.way1, false).into_iter().flatten() {
            self.demote(s, down, victims);
        }
    }

    fn demote(&mut self, s: usize, e: Entry, victims: &mut Vec<Victim>) {
        self.demote_as(s, e, false, victims)
    }

    fn demote_as(&mut self, s: usize, e: Entry, compressed: bool, victims: &mut Vec<Victim>) {
        for gone in self.place(s, e, self.way1..self.ways, compressed).into_iter().flatten() {
            self.counts.evictions += 1;
            victims.push(gone.victim());
        }
    }
}

impl AdaptiveCache {
    /// Takes in a line another core's L2 let go (003 §7.4's migration):
    /// stored compressed in way-2 whatever the mode, as the most recent
    /// line there, even if that pushes this cache's own lines out (to
    /// `victims`).
    ///
    /// # Panics
    ///
    /// If `line` is already held.
    pub fn host(&mut self, v: Victim, victims: &mut Vec<Victim>) {
        assert!(self.find(v.line).is_none(), "a line held twice");
        self.clock += 1;
        let s = v.line as usize & (self.sets - 1);
        let e = Entry {
            line: v.line,
            size: v.size.clamp(1, LINE as u8),
            stored: LINE as u8,
            stamp: self.clock,
            frame: 0,
            dirty: v.dirty,
        };
        self.demote_as(s, e, true, victims);
    }

    fn find(&self, line: u64) -> Option<usize> {
        let s = line as usize & (self.sets - 1);
        (s * self.tags..(s + 1) * self.tags).find(|&i| self.entries[i].is_some_and(|e| e.line == line))
    }
}

impl Level for AdaptiveCache {
    fn reference(&mut self, line: u64, write: bool, size: impl FnOnce() -> usize, victims: &mut Vec<Victim>) -> Access {
        self.clock += 1;
        let s = line as usize & (self.sets - 1);
        let base = s * self.tags;
        let (found, oldest, held) = scan(&self.entries[base..base + self.tags], line);
        let Some(i) = found else {
            self.counts.misses += 1;
            let size = size().clamp(1, LINE) as u8;
            let e = Entry {
                line,
                size,
                stored: LINE as u8,
                stamp: self.clock,
                frame: 0,
                dirty: write,
            };
            self.fill(s, e, victims);
            return Access::Miss;
        };
        let mut e = self.entries[base + i].expect("found");
        self.counts.hits += 1;
        self.counts.lru_hits += (e.stamp == oldest && held >= self.ways) as u64;
        let compressed = (e.stored as usize) < LINE;
        self.counts.compressed_hits += compressed as u64;
        e.stamp = self.clock;
        e.dirty |= write;
        let frame = e.frame as usize;
        if frame >= self.way1 {
            // Up to way-1, as the most recent line of the set.
            self.entries[base + i] = None;
            self.fill(s, e, victims);
        } else if compressed && !self.compressing(frame) {
            // Stored whole again; a partner makes room.
            e.stored = LINE as u8;
            self.entries[base + i] = Some(e);
            let partner =
                (0..self.tags).find(|&j| j != i && self.entries[base + j].is_some_and(|x| x.frame as usize == frame));
            if let Some(j) = partner {
                let p = self.entries[base + j].take().expect("partner");
                self.demote(s, p, victims);
            }
        } else {
            self.entries[base + i] = Some(e);
        }
        debug_assert!(self.group(frame).contains(&frame));
        Access::Hit { compressed }
    }

    fn mark_dirty(&mut self, line: u64) -> bool {
        let s = line as usize & (self.sets - 1);
        mark_dirty_in(&mut self.entries[s * self.tags..(s + 1) * self.tags], line)
    }

    fn remove(&mut self, line: u64) -> Option<Victim> {
        let s = line as usize & (self.sets - 1);
        take_from(&mut self.entries[s * self.tags..(s + 1) * self.tags], line).map(Entry::victim)
    }

    fn counts(&self) -> Counts {
        self.counts
    }

    fn occupancy(&self) -> (usize, usize) {
        let held = self.entries.iter().flatten().count();
        let compressed = self
            .entries
            .iter()
            .flatten()
            .filter(|e| (e.stored as usize) < LINE)
            .count();
        (held, compressed)
    }

    fn frames(&self) -> usize {
        self.sets * self.ways
    }

    fn end_period(&mut self, mpg: f64, thresholds: &Thresholds) {
        self.mode = thresholds.mode(mpg);
    }

    fn mode_index(&self) -> usize {
        self.mode as usize
    }
}
