//! Cache levels on hand-worked traces (every hit, miss and eviction
//! counted by hand), and against a plain LRU model on random traces.

use ccvm_cachesim::{Cache, Config, Organization, Outcome};
use proptest::prelude::*;

fn miss(evicted: &[u64]) -> Outcome {
    Outcome::Miss {
        evicted: evicted.to_vec(),
    }
}

fn one_set(ways: usize, organization: Organization) -> Cache {
    Cache::new(Config {
        size: ways * 64,
        ways,
        organization,
    })
}

#[test]
fn plain_lru_by_hand() {
    let mut c = one_set(2, Organization::Plain);
    let (a, b, x) = (1, 2, 3);
    assert_eq!(c.access(a, 10), miss(&[]));
    assert_eq!(c.access(b, 10), miss(&[]));
    assert_eq!(
        c.access(a, 10),
        Outcome::Hit { compressed: false },
        "a plain level stores lines whole"
    );
    assert_eq!(c.access(x, 10), miss(&[b]), "b is least recently used");
    assert_eq!(c.access(b, 10), miss(&[a]));
    assert_eq!(c.access(a, 10), miss(&[x]));
    let k = c.counts();
    assert_eq!((k.hits, k.misses, k.evictions), (1, 5, 3));
}

#[test]
fn segmented_by_hand() {
    // One set: 2 frames x 4 segments of 16 bytes, 4 tags.
    let mut c = one_set(2, Organization::Segmented { segments: 4 });
    assert_eq!(c.access(1, 16), miss(&[]), "1 segment");
    assert_eq!(c.access(2, 40), miss(&[]), "3 segments");
    assert_eq!(c.access(3, 64), miss(&[]), "4 segments: all 8 used");
    assert_eq!(
        c.access(4, 20),
        miss(&[1, 2]),
        "2 segments: 1 frees one, 2 frees three more"
    );
    assert_eq!(c.access(3, 64), Outcome::Hit { compressed: false });
    assert_eq!(c.access(4, 20), Outcome::Hit { compressed: true });
    assert_eq!(c.occupancy(), (2, 1));
    // Four tags bound the lines even when segments are left.
    for line in 5..7 {
        c.access(line, 1);
    }
    assert_eq!(
        c.access(7, 1),
        miss(&[3]),
        "tags full: the LRU line goes though segments are free"
    );
}

#[test]
fn pair_matching_by_hand() {
    // One set of two frames.
    let mut c = one_set(2, Organization::PairMatching);
    assert_eq!(c.access(1, 40), miss(&[]), "frame 0");
    assert_eq!(c.access(2, 30), miss(&[]), "40 + 30 > 64: frame 1");
    assert_eq!(c.access(3, 20), miss(&[]), "beside line 1: 60");
    assert_eq!(c.access(4, 34), miss(&[]), "beside line 2: 64 exactly");
    assert_eq!(c.occupancy(), (4, 4), "four lines in two frames");
    assert_eq!(
        c.access(5, 64),
        miss(&[1, 3]),
        "an uncompressed line: LRU line 1 and its partner leave"
    );
    assert_eq!(
        c.access(6, 10),
        miss(&[2]),
        "LRU line 2 leaves; 10 fits beside line 4 (34)"
    );
    assert_eq!(c.access(4, 34), Outcome::Hit { compressed: true });
    assert_eq!(c.access(5, 64), Outcome::Hit { compressed: false });
    assert_eq!(c.occupancy(), (3, 2));
}

/// A plain LRU cache, the simplest way: each set a list, most recent last.
struct Model {
    sets: Vec<Vec<u64>>,
    ways: usize,
}

impl Model {
    fn access(&mut self, line: u64) -> Outcome {
        let n = self.sets.len();
        let set = &mut self.sets[line as usize % n];
        if let Some(i) = set.iter().position(|&l| l == line) {
            set.remove(i);
            set.push(line);
            return Outcome::Hit { compressed: false };
        }
        let evicted = if set.len() == self.ways {
            vec![set.remove(0)]
        } else {
            vec![]
        };
        set.push(line);
        Outcome::Miss { evicted }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// An uncompressed level is a plain LRU cache, and so is a compressed
    /// one when no line compresses.
    #[test]
    fn uncompressed_levels_are_plain_lru(
        sets_log in 0usize..4,
        ways in 1usize..6,
        trace in proptest::collection::vec(0u64..64, 1..600),
    ) {
        let sets = 1 << sets_log;
        let config = |organization| Config { size: sets * ways * 64, ways, organization };
        let mut levels = [
            Cache::new(config(Organization::Plain)),
            Cache::new(config(Organization::Segmented { segments: 8 })),
            Cache::new(config(Organization::PairMatching)),
        ];
        let mut model = Model { sets: vec![Vec::new(); sets], ways };
        for &line in &trace {
            let want = model.access(line);
            for c in levels.iter_mut() {
                prop_assert_eq!(c.access(line, 64), want.clone());
            }
        }
    }

    /// With any sizes, a compressed level never holds more than its space
    /// and hits exactly on the lines it holds.
    #[test]
    fn compressed_levels_hit_what_they_hold(
        trace in proptest::collection::vec((0u64..96, 1usize..80), 1..800),
        pair in any::<bool>(),
    ) {
        let organization = if pair { Organization::PairMatching } else { Organization::Segmented { segments: 4 } };
        let mut c = Cache::new(Config { size: 4 * 4 * 64, ways: 4, organization });
        for &(line, size) in &trace {
            let held = c.contains(line);
            let out = c.access(line, size);
            prop_assert_eq!(matches!(out, Outcome::Hit { .. }), held);
            if let Outcome::Miss { evicted } = out {
                prop_assert!(!evicted.contains(&line));
                for e in evicted {
                    prop_assert!(!c.contains(e));
                }
            }
            prop_assert!(c.contains(line));
            let (lines, _) = c.occupancy();
            prop_assert!(lines <= 2 * c.frames());
        }
    }
}
