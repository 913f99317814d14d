//! Pages the program drops leave every policy: the frames and bytes they
//! held are free again, nothing is asked to move for them, and a dropped
//! page comes back as a new one. Driven as a mechanism would drive a
//! policy, against a model of where each page is.

use std::collections::HashMap;

use ccvm_policy::{Action, Budget, Costs, Level, Params, Policy};

const PAGE: u64 = 4096;
const FRAMES: u64 = 256;

fn make(name: &str, faults_only: bool) -> Box<dyn Policy> {
    let params = Params {
        uncompressed_share: 0.5,
        costs: Costs {
            disk_ns: 150e3,
            codec_ns: 20e3,
            compress_share: 0.5,
        },
    };
    let budget = Budget {
        ram_bytes: FRAMES * PAGE,
        page_size: PAGE,
    };
    let mut p = ccvm_policy::by_name(name, budget, params).unwrap();
    if faults_only {
        p.faults_only();
    }
    p
}

/// The mechanism: carries out actions, keeping `at` (where each page is)
/// as the policy asked; every page compresses to 1,000 bytes.
struct Mechanism {
    at: HashMap<u64, Level>,
    actions: Vec<Action>,
}

impl Mechanism {
    fn touch(&mut self, p: &mut dyn Policy, page: u64) {
        let from = self.at.get(&page).copied().unwrap_or(Level::New);
        p.touch(page, from, &mut self.actions);
        self.at.insert(page, Level::Uncompressed);
        let mut i = 0;
        while i < self.actions.len() {
            match self.actions[i] {
                Action::Compress(v) => {
                    assert_ne!(v, page, "{}: the page touched left at once", p.name());
                    self.at.insert(v, Level::Compressed);
                    p.compressed(v, 1000, &mut self.actions);
                }
                Action::SwapOut(v) | Action::Spill(v) => {
                    self.at.insert(v, Level::Disk);
                }
                Action::Watch(v) => assert_ne!(v, page, "{}: the page touched was watched", p.name()),
            }
            i += 1;
        }
        self.actions.clear();
    }

    fn drop_page(&mut self, p: &mut dyn Policy, page: u64) {
        p.discarded(page);
        self.at.remove(&page);
    }

    fn count(&self, level: Level) -> usize {
        self.at.values().filter(|&&l| l == level).count()
    }
}

#[test]
fn dropped_pages_leave_every_policy() {
    let names: Vec<&str> = ccvm_policy::names().into_iter().chain(["fixed20"]).collect();
    for name in names {
        for faults_only in [false, true] {
            let mut p = make(name, faults_only);
            let mut m = Mechanism {
                at: HashMap::new(),
                actions: Vec::new(),
            };
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            for step in 0..40_000u64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let page = (x >> 20) % (4 * FRAMES);
                if step % 9 == 0 {
                    m.drop_page(p.as_mut(), page);
                } else {
                    m.touch(p.as_mut(), page);
                }
                let (u, c, d) = p.occupancy();
                let what = format!("{name} (faults only: {faults_only}) at step {step}");
                assert_eq!(u, m.count(Level::Uncompressed), "{what}: uncompressed");
                assert_eq!(c, m.count(Level::Compressed), "{what}: compressed");
                assert_eq!(d, m.count(Level::Disk), "{what}: on disk");
                assert_eq!(p.compressed_bytes(), c as u64 * 1000, "{what}: bytes");
            }
            // Every page dropped: the policy holds nothing, and memory
            // fills again without a page moving out.
            let pages: Vec<u64> = m.at.keys().copied().collect();
            for page in pages {
                m.drop_page(p.as_mut(), page);
            }
            assert_eq!(p.occupancy(), (0, 0, 0), "{name}: all dropped");
            assert_eq!(p.compressed_bytes(), 0, "{name}: all dropped");
            for page in 0..p.uncompressed_limit() as u64 / 2 {
                m.touch(p.as_mut(), 10_000 + page);
            }
            assert_eq!(
                m.count(Level::Compressed) + m.count(Level::Disk),
                0,
                "{name}: room after the drops"
            );
        }
    }
}
