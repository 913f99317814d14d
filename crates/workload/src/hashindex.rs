//! A symbol table: identifier strings in a string heap, indexed by an
//! open-addressing hash table (linear probing, FNV-1a), as compilers and
//! interpreters keep them. Inserts every symbol, then looks symbols up with
//! a skew towards a hot set (plus misses), counting uses.

use rand_core::Rng;

use crate::{mix, rng, Arena};

const VERBS: [&str; 10] = [
    "get", "set", "init", "parse", "emit", "load", "alloc", "free", "visit", "check",
];
const NOUNS: [&str; 10] = [
    "node", "token", "buffer", "symbol", "scope", "type", "expr", "block", "frame", "entry",
];

/// Writes symbol `i` into `out`; returns its length.
fn symbol(i: u64, out: &mut [u8; 48]) -> usize {
    let h = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut n = 0;
    let mut put = |s: &[u8]| {
        out[n..n + s.len()].copy_from_slice(s);
        n += s.len();
    };
    put(VERBS[(h >> 60) as usize % 10].as_bytes());
    put(b"_");
    put(NOUNS[(h >> 52) as usize % 10].as_bytes());
    put(b"_");
    let mut digits = [0u8; 16];
    let (mut v, mut d) = (i, 0);
    loop {
        digits[d] = b"0123456789abcdefghijklmnopqrstuvwxyz"[(v % 36) as usize];
        d += 1;
        v /= 36;
        if v == 0 {
            break;
        }
    }
    digits[..d].reverse();
    put(&digits[..d]);
    n
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// A slot: [hash, offset << 32 | len, value]; hash 0 marks an empty slot.
type Slot = [u64; 3];

struct Table<'a> {
    slots: &'a mut [Slot],
    heap: &'a mut [u8],
}

impl Table<'_> {
    /// The slot holding `key`, or the empty slot where it would go.
    fn find(&self, key: &[u8], hash: u64) -> usize {
        let mask = self.slots.len() - 1;
        let mut i = hash as usize & mask;
        loop {
            let s = &self.slots[i];
            if s[0] == 0 {
                return i;
            }
            if s[0] == hash {
                let (off, len) = ((s[1] >> 32) as usize, (s[1] & 0xffff_ffff) as usize);
                if &self.heap[off..off + len] == key {
                    return i;
                }
            }
            i = (i + 1) & mask;
        }
    }
}

pub fn run(memory: &mut [u8], seed: u64) -> u64 {
    // ~24 bytes of heap per symbol and 24-byte slots at load below 0.7.
    let slots = ((memory.len() / 2) / 24).next_power_of_two() / 2;
    let mut arena = Arena::new(memory);
    let slots: &mut [Slot] = arena.take(slots);
    slots.fill([0; 3]);
    let heap_len = arena.remaining();
    let heap: &mut [u8] = arena.take(heap_len);
    let n = (slots.len() as u64 * 7 / 10).min(heap_len as u64 / 24);
    let t = Table { slots, heap };
    let mut key = [0u8; 48];
    let mut top = 0usize;
    for i in 0..n {
        let len = symbol(i, &mut key);
        let hash = fnv(&key[..len]) | 1;
        let at = t.find(&key[..len], hash);
        t.heap[top..top + len].copy_from_slice(&key[..len]);
        t.slots[at] = [hash, (top as u64) << 32 | len as u64, 0];
        top += len;
    }
    let mut r = rng(seed);
    let mut sum = n;
    for _ in 0..2 * n {
        let x = r.next_u64();
        // Squaring a uniform variable skews lookups to low numbers: a hot set.
        let u = (x >> 32) as f64 / (1u64 << 32) as f64;
        let i = if x & 7 == 0 {
            n + (x >> 3) % n
        } else {
            ((u * u) * n as f64) as u64
        };
        let len = symbol(i, &mut key);
        let hash = fnv(&key[..len]) | 1;
        let at = t.find(&key[..len], hash);
        if t.slots[at][0] == 0 {
            sum = mix(sum, i);
        } else {
            t.slots[at][2] += 1;
        }
    }
    t.slots
        .iter()
        .filter(|s| s[0] != 0)
        .fold(sum, |s, slot| mix(s, slot[0] ^ slot[2]))
}
