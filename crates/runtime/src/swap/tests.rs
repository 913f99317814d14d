//! The swap file against a model under long random churn, read-ahead,
//! the cleaner, damage and forked copies.

use std::collections::HashMap;

use super::*;

/// What the model says page `p` holds, and where the file keeps it.
type Model = HashMap<u64, (Stored, Vec<u8>, SwapSlot)>;

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// A random page: same-filled, raw, or compressed to a random length.
fn random_page(x: &mut u64) -> (Stored, Vec<u8>) {
    let kind = xorshift(x) % 8;
    let len = match kind {
        0 => return (Stored::Same(xorshift(x)), Vec::new()),
        1 => 4096,
        _ => 1 + (xorshift(x) % 3000) as usize,
    };
    let bytes: Vec<u8> = (0..len).map(|_| xorshift(x) as u8).collect();
    let stored = if len == 4096 {
        Stored::Raw
    } else {
        Stored::Compressed(len)
    };
    (stored, bytes)
}

fn in_use(swap: &SwapFile) -> u64 {
    swap.clusters_in_use() * CLUSTER as u64
}

/// Reads `page` back and checks it against the model's entry.
fn read_checked(swap: &mut SwapFile, page: u64, (stored, bytes, slot): &(Stored, Vec<u8>, SwapSlot), out: &mut [u8]) {
    assert_eq!(swap.read(page, *slot, out).unwrap(), *stored);
    if !matches!(stored, Stored::Same(_)) {
        assert!(out[..bytes.len()] == bytes[..], "page {page} changed");
    }
}

/// Writes a random page as `page`, then lets the cleaner run and
/// follows the pages it moved.
fn write_and_clean(swap: &mut SwapFile, model: &mut Model, page: u64, x: &mut u64) {
    let (stored, bytes) = random_page(x);
    let slot = swap.write(page, stored, &bytes).unwrap();
    model.insert(page, (stored, bytes, slot));
    let mut moved = Vec::new();
    swap.clean(&mut moved).unwrap();
    for (p, slot) in moved {
        model.get_mut(&p).expect("only live pages move").2 = slot;
    }
}

#[test]
fn long_random_churn_loses_nothing_and_the_cleaner_bounds_the_file() {
    let mut swap = SwapFile::create(&std::env::temp_dir(), Duration::ZERO).unwrap();
    let mut model = Model::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut out = AlignedBuf::new(4096);
    for _ in 0..150_000 {
        let page = xorshift(&mut x) % 3000;
        match model.remove(&page) {
            Some(entry) => read_checked(&mut swap, page, &entry, &mut out),
            None => write_and_clean(&mut swap, &mut model, page, &mut x),
        }
        let live: u64 = swap.live_bytes.iter().map(|&b| b as u64).sum();
        assert_eq!(live, swap.total_live);
        assert!(
            in_use(&swap) <= 2 * live + 6 * CLUSTER as u64,
            "{} in use for {live} live",
            in_use(&swap)
        );
    }
    assert!(
        swap.stats.cleaned > 100 && swap.stats.pages_moved > 1000,
        "{:?}",
        swap.stats
    );
    for (page, entry) in model {
        read_checked(&mut swap, page, &entry, &mut out);
    }
    assert_eq!(swap.total_live, 0);
}

#[test]
fn reading_ahead_through_churn_serves_the_bytes_written() {
    // As the churn above, with each read preceded by a read-ahead of
    // the next pages' slots: spans must never outlive their cluster's
    // reuse, which the checksums would catch, and the bytes must match.
    let mut swap = SwapFile::create(&std::env::temp_dir(), Duration::ZERO).unwrap();
    let mut model = Model::new();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut out = AlignedBuf::new(4096);
    for round in 0..120_000u64 {
        // Sweeps in page order half the time, as scans evict and fault.
        let page = if round % 2 == 0 {
            round / 2 % 2000
        } else {
            xorshift(&mut x) % 2000
        };
        let Some(entry) = model.remove(&page) else {
            write_and_clean(&mut swap, &mut model, page, &mut x);
            continue;
        };
        let ahead: Vec<SwapSlot> = (page + 1..page + 9)
            .filter_map(|p| model.get(&p).map(|e| e.2))
            .collect();
        swap.read_ahead(&ahead).unwrap();
        for p in page + 1..page + 9 {
            let held = model.get(&p).is_some_and(|e| swap.holds_ahead(e.2));
            if held && xorshift(&mut x).is_multiple_of(2) {
                let next = model.remove(&p).expect("held");
                read_checked(&mut swap, p, &next, &mut out);
            }
        }
        read_checked(&mut swap, page, &entry, &mut out);
    }
    assert!(
        swap.stats.span_hits > 1000 && swap.stats.cleaned > 10,
        "{:?}",
        swap.stats
    );
    for (page, entry) in model {
        read_checked(&mut swap, page, &entry, &mut out);
    }
}

#[test]
fn a_slot_takes_16_bytes_and_keeps_every_kind() {
    assert_eq!(std::mem::size_of::<SwapSlot>(), 16);
    let mut swap = SwapFile::create(&std::env::temp_dir(), Duration::ZERO).unwrap();
    let mut out = AlignedBuf::new(4096);
    for stored in [
        Stored::Same(u64::MAX - 5),
        Stored::Same(0x1234_5678_9abc_def0),
        Stored::Raw,
        Stored::Compressed(17),
    ] {
        let bytes = vec![7u8; if stored == Stored::Raw { 4096 } else { 17 }];
        let slot = swap.write(9, stored, &bytes).unwrap();
        swap.flush().unwrap();
        assert_eq!(swap.read(9, slot, &mut out).unwrap(), stored);
    }
}

#[test]
fn the_cleaner_refuses_a_damaged_cluster() {
    let mut swap = SwapFile::create(&std::env::temp_dir(), Duration::ZERO).unwrap();
    let (mut x, mut slots) = (7u64, Vec::new());
    // 64 clusters of compressed pages, then all but one page in eight
    // read back: the file holds far more than twice its live data.
    for page in 0..64 * 20 {
        let bytes: Vec<u8> = (0..3000).map(|_| xorshift(&mut x) as u8).collect();
        slots.push((page, swap.write(page, Stored::Compressed(3000), &bytes).unwrap()));
    }
    swap.flush().unwrap();
    let mut out = AlignedBuf::new(4096);
    for &(page, slot) in slots.iter().filter(|(p, _)| p % 8 != 0) {
        swap.read(page, slot, &mut out).unwrap();
    }
    let garbage = AlignedBuf::new(CLUSTER);
    for c in 0..swap.members.len() as u64 {
        swap.file.file().write_all_at(&garbage, c * CLUSTER as u64).unwrap();
    }
    let mut moved = Vec::new();
    let err = swap.clean(&mut moved).unwrap_err();
    assert!(
        err.to_string().contains("corrupt") && err.to_string().contains("cleaning"),
        "{err}"
    );
    assert!(moved.is_empty());
}

/// A parent and its forked children share the file: each churns its
/// own pages (writes, reads, the cleaner) after the fork, and every
/// process reads back exactly what it holds, including the pages it
/// held at the fork, which the others may have released and rewritten.
#[test]
fn forked_copies_churn_the_shared_file_and_each_reads_its_own() {
    let mut parent = SwapFile::create(&std::env::temp_dir(), Duration::ZERO).unwrap();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut out = AlignedBuf::new(4096);
    let mut models = vec![Model::new()];
    for page in 0..2000 {
        write_and_clean(&mut parent, &mut models[0], page, &mut x);
    }
    let mut files = vec![parent];
    for round in 0..3 {
        // Process `round` forks; the copies then take turns.
        let child = files[round].fork_copy();
        files.push(child);
        models.push(models[round].clone());
        for _ in 0..5_000 {
            let who = (xorshift(&mut x) % files.len() as u64) as usize;
            let page = xorshift(&mut x) % 3000;
            match models[who].remove(&page) {
                Some(entry) => read_checked(&mut files[who], page, &entry, &mut out),
                None => write_and_clean(&mut files[who], &mut models[who], page, &mut x),
            }
        }
    }
    assert!(
        files.iter().all(|f| f.stats.cleaned > 0),
        "the cleaner ran in every copy"
    );
    for (file, model) in files.iter_mut().zip(models) {
        for (page, entry) in model {
            read_checked(file, page, &entry, &mut out);
        }
    }
}
