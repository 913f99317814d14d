//! Regions page correctly: every byte read is the byte last written, with
//! the region four times its RAM budget, from one and from many threads.

use std::sync::atomic::Ordering;

use ccvm_runtime::{FaultMode, Region, RuntimeConfig};

fn config(ram: u64, share: f64, policy: &str) -> RuntimeConfig {
    RuntimeConfig {
        ram_bytes: ram,
        uncompressed_share: share,
        policy: policy.parse().unwrap(),
        ..RuntimeConfig::default()
    }
}

/// A page's worth of words that compress like program data.
fn word(page: usize, i: usize, round: u64) -> u64 {
    let base = (page as u64) << 20 | round << 12;
    if i.is_multiple_of(4) {
        base | i as u64
    } else {
        (i as u64 / 16).wrapping_mul(0x9e37_79b9) ^ round
    }
}

/// Checks that page `p` of `mem` holds round `round - 1`'s words (for a
/// round after the first), then writes round `round`'s; `what` names the
/// run in failures.
fn check_and_write(mem: &mut [u8], p: usize, round: u64, what: &str) {
    let words: &mut [u64] = bytemuck::cast_slice_mut(&mut mem[p * 4096..(p + 1) * 4096]);
    if round > 0 {
        for (i, w) in words.iter().enumerate() {
            assert_eq!(*w, word(p, i, round - 1), "{what}: page {p} word {i} round {round}");
        }
    }
    for (i, w) in words.iter_mut().enumerate() {
        *w = word(p, i, round);
    }
}

#[test]
fn sequential_passes_over_four_times_the_budget() {
    for (policy, share) in [
        ("fixed", 0.5),
        ("none", 1.0),
        ("fixed", 0.1),
        ("adaptive", 0.5),
        ("adaptive-fine", 0.5),
        ("zswap", 0.5),
        ("douglis", 0.5),
    ] {
        let ram = 256 * 4096;
        let mut region = Region::new(4 * ram as usize, config(ram, share, policy)).unwrap();
        let pages = region.len() / 4096;
        for round in 0..3u64 {
            let mem = region.as_mut_slice();
            for p in 0..pages {
                check_and_write(mem, p, round, policy);
            }
        }
        let stats = region.finish().unwrap();
        // A loop over more than memory misses every time under LRU, so
        // every page comes back from disk (through the cache or not), or
        // from the cache, by a fault or read ahead of one: never from
        // uncompressed memory. How many come from the cache depends on the
        // helper process's timing: on a loaded 2-core machine one run took
        // 14 cache faults and 64 read-ahead pages, and 1,970 disk faults.
        // Pages read from disk ahead of a fault count with the disk's.
        let from_disk = stats.faults_disk + stats.pages_read_ahead_disk;
        let back = from_disk + stats.faults_cache + stats.pages_read_ahead;
        assert_eq!(back, 2 * pages as u64, "{policy}: {stats:?}");
        assert!(from_disk >= 2 * pages as u64 * 9 / 10, "{policy}: {stats:?}");
        if policy == "none" {
            assert_eq!(stats.pages_compressed, 0);
        } else {
            // Every other policy compresses pages before they go to disk.
            assert!(stats.pages_spilled > 0, "{policy}: {stats:?}");
        }
    }
}

/// Every way of serving faults (in the faulting thread or a handler
/// thread) and of moving pages (frames moved, or copied under write
/// protection; with moved frames, pages mapped in by moving or, since
/// other threads run, by copying) keeps every thread's writes.
#[test]
fn many_threads_against_a_model_with_signal_faults() {
    many_threads_against_a_model(&[
        (FaultMode::Signal, true, 0.0, false, true),
        (FaultMode::Signal, true, 0.0, true, true),
        (FaultMode::Signal, true, 0.0, true, false),
        (FaultMode::Signal, true, 0.3, true, true),
        (FaultMode::Signal, true, 0.3, false, false),
        (FaultMode::Signal, false, 0.0, false, true),
        (FaultMode::Signal, false, 0.0, true, true),
    ]);
}

// The two fault modes in two tests, so that the harness runs them side by side.
#[test]
fn many_threads_against_a_model_with_a_fault_thread() {
    many_threads_against_a_model(&[
        (FaultMode::Thread, true, 0.0, false, true),
        (FaultMode::Thread, true, 0.0, false, false),
        (FaultMode::Thread, false, 0.0, false, true),
        (FaultMode::Thread, true, 0.3, false, true),
        (FaultMode::Thread, false, 0.0, true, true),
    ]);
}

/// The default policy watches pages (its miniatures' sample): with four
/// threads running, watched pages leave in the batches and come back by
/// copies, and the model still reads every byte it wrote.
#[test]
fn many_threads_against_a_model_with_watched_pages() {
    let ram = 128 * 4096;
    let config = RuntimeConfig {
        fault_mode: FaultMode::Signal,
        ..config(ram, 0.5, "adaptive-safe")
    };
    let stats = threads_against_a_model(Region::new(4 * ram as usize, config).unwrap());
    assert!(stats.pages_watched > 0 && stats.faults_watch > 0, "{stats:?}");
    assert!(stats.pages_evicted_together > 0, "{stats:?}");
    // Signal faults, untraced: the sampled pages were sized as watched.
    assert!(stats.pages_measured > 0, "{stats:?}");
}

/// Fault mode, moved frames, trap share, background compression, pages
/// copied in while other threads run.
fn many_threads_against_a_model(configs: &[(FaultMode, bool, f64, bool, bool)]) {
    for &(fault_mode, move_frames, trap_share, background_compression, copy_in) in configs {
        let ram = 128 * 4096;
        let config = RuntimeConfig {
            fault_mode,
            move_frames,
            copy_in_when_threaded: copy_in,
            trap_share,
            background_compression,
            ..config(ram, 0.5, "fixed")
        };
        let stats = threads_against_a_model(Region::new(4 * ram as usize, config).unwrap());
        assert!(stats.faults_cache > 0, "{stats:?}");
        assert_eq!(stats.faults_trap > 0, trap_share > 0.0, "{stats:?}");
        assert_eq!(
            stats.pages_compressed_background > 0,
            background_compression,
            "{stats:?}"
        );
        // Evictions leave in batches, one flush each, where faults are
        // signals and no page is trapped (the model checks every byte that
        // left so): copied into the helper's ring, not handed in frames.
        let together = fault_mode == FaultMode::Signal && copy_in && trap_share == 0.0;
        assert_eq!(stats.pages_evicted_together > 0, together, "{stats:?}");
        assert!(stats.eviction_batches <= stats.pages_evicted_together, "{stats:?}");
        // Moved frames are handed to the helper, which reads them itself.
        assert_eq!(
            stats.pages_read_by_helper > 0,
            background_compression && move_frames && !together,
            "{stats:?}"
        );
        // Four threads run: with frames and the setting, pages come in by
        // copying, and the frames moved out pile up and are freed in
        // batches (which the model's checks cover).
        assert_eq!(stats.pages_copied_in > 0, move_frames && copy_in, "{stats:?}");
    }
}

/// A word's first value: one word in four random (splitmix64), so that a
/// page compresses about 3:1 whatever the codec, and the compression cache
/// fills and sends pages on to the swap file.
fn first_value(i: usize) -> u64 {
    if !i.is_multiple_of(4) {
        return 0;
    }
    let mut z = (i as u64).wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn threads_against_a_model(region: Region) -> ccvm_runtime::RuntimeStats {
    let words = region.atomics();
    for (i, w) in words.iter().enumerate() {
        w.store(first_value(i), Ordering::Relaxed);
    }
    let threads = 4;
    // Each thread owns the words i with i % threads == t, so the model is
    // per thread, while pages are shared by all threads.
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let mut model = std::collections::HashMap::new();
                let mut x = 0x1234_5678_9abc_def1u64 ^ t as u64;
                for step in 0..6_000u64 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let i = ((x >> 8) as usize % (words.len() / threads)) * threads + t;
                    if x & 3 == 0 {
                        let v = x ^ step;
                        words[i].store(v, Ordering::Relaxed);
                        model.insert(i, v);
                    } else {
                        let got = words[i].load(Ordering::Relaxed);
                        let want = model.get(&i).copied().unwrap_or_else(|| first_value(i));
                        assert_eq!(got, want, "thread {t} word {i} step {step}");
                    }
                }
            });
        }
    });
    let stats = region.finish().unwrap();
    eprintln!("{stats:?}");
    assert!(stats.faults_disk > 0, "{stats:?}");
    stats
}

#[test]
fn random_faults_make_the_swap_file_clean_itself_without_losing_a_page() {
    // Pages leave and come back in random order, so clusters of the swap
    // file empty only partly and the cleaner must move their live pages.
    for (policy, share, trap_share) in [("none", 1.0, 0.0), ("fixed", 0.5, 0.0), ("adaptive", 0.5, 0.4)] {
        let ram = 64 * 4096;
        let config = RuntimeConfig {
            trap_share,
            move_frames: trap_share > 0.0,
            ..config(ram, share, policy)
        };
        let mut region = Region::new(8 * ram as usize, config).unwrap();
        let pages = region.len() / 4096;
        let mut model = vec![0u64; pages];
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for step in 0..40_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let p = (x >> 16) as usize % pages;
            let words: &mut [u64] = bytemuck::cast_slice_mut(&mut region.as_mut_slice()[p * 4096..(p + 1) * 4096]);
            assert_eq!(words[(p * 7) % 512], model[p], "{policy}: page {p} at step {step}");
            if x & 1 == 0 {
                model[p] = x;
                for (i, w) in words.iter_mut().enumerate() {
                    *w = if i == (p * 7) % 512 { x } else { word(p, i, step) };
                }
            }
        }
        let stats = region.finish().unwrap();
        if trap_share > 0.0 {
            assert!(stats.faults_trap > 0, "{policy}: {stats:?}");
            continue;
        }
        assert!(
            stats.swap.cleaned > 0 && stats.swap.pages_moved > 0,
            "{policy}: {:?}",
            stats.swap
        );
    }
}

/// Scans read ahead (cached pages decompressed, new pages mapped as zeros
/// before they are touched), and every byte stays the byte last written,
/// with four threads scanning the same pages at once.
#[test]
fn scans_read_ahead_without_losing_a_write() {
    let ram = 256 * 4096;
    let mut faults = Vec::new();
    for readahead in [0, 8] {
        let config = RuntimeConfig {
            readahead,
            ..config(ram, 0.3, "fixed")
        };
        let region = Region::new(2 * ram as usize, config).unwrap();
        let words = region.atomics();
        let threads = 4;
        std::thread::scope(|s| {
            for t in 0..threads {
                s.spawn(move || {
                    // Thread t owns the words i with i % threads == t.
                    for round in 0..4u64 {
                        for i in (t..words.len()).step_by(threads) {
                            let want = if round == 0 { 0 } else { (i as u64) << 8 | (round - 1) };
                            assert_eq!(words[i].load(Ordering::Relaxed), want, "word {i} round {round}");
                            words[i].store((i as u64) << 8 | round, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        let stats = region.finish().unwrap();
        eprintln!("readahead {readahead}: {stats:?}");
        if readahead == 0 {
            assert_eq!(stats.pages_read_ahead + stats.pages_zero_ahead, 0, "{stats:?}");
        } else {
            assert!(stats.pages_read_ahead > 0 && stats.pages_zero_ahead > 0, "{stats:?}");
        }
        // Faults per page mapped from the cache or as zeros: how many
        // pages came through the other paths (pending compression, disk)
        // depends on the helper's timing, so the absolute counts do not
        // compare between runs; pages per fault do.
        let faults_here = stats.faults_cache + stats.faults_zero;
        let mapped = faults_here + stats.pages_read_ahead + stats.pages_zero_ahead;
        faults.push(faults_here as f64 / mapped as f64);
    }
    assert_eq!(faults[0], 1.0, "without read-ahead each page is a fault");
    assert!(
        faults[1] < 0.5,
        "read-ahead should at least halve the faults per page: {faults:?}"
    );
}

/// Reading never-written pages maps the zero page: a region sixteen times
/// its RAM budget reads as zeros without compressing or evicting a page.
/// Each page's first write then counts once as a first touch, and every
/// write survives paging, in both fault modes.
#[test]
fn reads_of_untouched_pages_hold_no_memory_until_written() {
    for fault_mode in [FaultMode::Signal, FaultMode::Thread] {
        let ram = 64 * 4096;
        let config = RuntimeConfig {
            fault_mode,
            ..config(ram, 0.5, "fixed")
        };
        let mut region = Region::new(16 * ram as usize, config).unwrap();
        let pages = region.len() / 4096;
        // Backwards, then forwards: faults with and without read-ahead.
        for p in (0..pages).rev().chain(0..pages) {
            let words: &[u64] = bytemuck::cast_slice(&region.as_mut_slice()[p * 4096..(p + 1) * 4096]);
            assert!(words.iter().all(|&w| w == 0), "{fault_mode:?}: page {p}");
        }
        let read = region.stats();
        assert_eq!(read.faults_zero, 0, "{fault_mode:?}: {read:?}");
        assert_eq!(
            read.pages_compressed + read.pages_swapped_raw,
            0,
            "{fault_mode:?}: {read:?}"
        );
        assert_eq!(
            read.faults_zero_read + read.pages_zero_ahead,
            pages as u64,
            "{fault_mode:?}: {read:?}"
        );
        for round in 0..2u64 {
            let mem = region.as_mut_slice();
            for p in 0..pages {
                let words: &mut [u64] = bytemuck::cast_slice_mut(&mut mem[p * 4096..(p + 1) * 4096]);
                if round > 0 {
                    for (i, w) in words.iter().enumerate() {
                        assert_eq!(*w, word(p, i, round - 1), "{fault_mode:?}: page {p} word {i}");
                    }
                }
                // Written from the middle, so that the first access to
                // the page in round 0 is a write to a zero-mapped page.
                for (i, w) in words.iter_mut().enumerate().rev() {
                    *w = word(p, i, round);
                }
            }
        }
        let stats = region.finish().unwrap();
        assert_eq!(
            stats.faults_zero, pages as u64,
            "{fault_mode:?}: one first write each: {stats:?}"
        );
        assert!(stats.pages_compressed > 0, "{fault_mode:?}: {stats:?}");
    }
}

/// With write scans (second chance for pages written lately), every
/// thread's writes are kept in both fault modes, with and without the
/// helper process, under a fixed split and the sampled adaptive policy.
#[test]
fn write_scans_keep_every_write() {
    for (fault_mode, background_compression, policy) in [
        (FaultMode::Signal, true, "fixed"),
        (FaultMode::Signal, false, "adaptive-safe"),
        (FaultMode::Thread, false, "fixed"),
        (FaultMode::Thread, true, "adaptive-safe"),
    ] {
        let ram = 128 * 4096;
        let config = RuntimeConfig {
            fault_mode,
            background_compression,
            write_scan: true,
            ..config(ram, 0.5, policy)
        };
        let stats = threads_against_a_model(Region::new(4 * ram as usize, config).unwrap());
        // The adaptive policy weighs the codec's measured cost against a
        // disk read; in a debug build compressing a page can cost more, and
        // then it rightly keeps no compression cache.
        if policy == "fixed" {
            assert!(stats.faults_cache > 0, "{stats:?}");
        }
        // In 128 frames every resident page faulted in since the last
        // scan, whose report it thus is not: the scans ran, and eviction
        // went on under them.
        assert!(stats.write_scans > 0, "{stats:?}");
        assert_eq!(
            stats.faults_zero_read, 0,
            "no protected zero pages under write scans: {stats:?}"
        );
    }
}

/// Pages shared with a forked child cannot be moved out of the region; under
/// write scans (whose protection stops no writer) eviction makes them the
/// parent's own first. Every byte reads back as last written, in the
/// parent and in the child.
#[test]
fn write_scans_evict_pages_shared_with_a_forked_child() {
    let ram = 64 * 4096;
    let config = RuntimeConfig {
        fault_mode: FaultMode::Signal,
        background_compression: false,
        write_scan: true,
        ..config(ram, 0.5, "fixed")
    };
    let mut region = Region::new(4 * ram as usize, config).unwrap();
    let pages = region.len() / 4096;
    let fill = |mem: &mut [u8], round: u64| {
        for p in 0..pages {
            let words: &mut [u64] = bytemuck::cast_slice_mut(&mut mem[p * 4096..(p + 1) * 4096]);
            for (i, w) in words.iter_mut().enumerate() {
                *w = word(p, i, round);
            }
        }
    };
    let check = |mem: &[u8], round: u64| -> bool {
        (0..pages).all(|p| {
            let words: &[u64] = bytemuck::cast_slice(&mem[p * 4096..(p + 1) * 4096]);
            words.iter().enumerate().all(|(i, w)| *w == word(p, i, round))
        })
    };
    fill(region.as_mut_slice(), 0);
    let guard = region.prepare_fork();
    // SAFETY: the child only copies the region in and exits with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        guard.child();
        // SAFETY: the region stays mapped in the child, as plain memory.
        let mem = unsafe { std::slice::from_raw_parts(region.as_ptr(), region.len()) };
        let ok = check(mem, 0);
        // SAFETY: sleep while the parent evicts pages it shares with us.
        unsafe {
            libc::usleep(300_000);
            libc::_exit(if ok && check(mem, 0) { 0 } else { 1 })
        };
    }
    guard.parent();
    // The resident pages are shared with the child now: touching every
    // other page evicts them.
    assert!(check(region.as_mut_slice(), 0), "parent's pages after the fork");
    fill(region.as_mut_slice(), 1);
    assert!(check(region.as_mut_slice(), 1), "parent's pages after a second round");
    let mut status = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child saw other bytes"
    );
    let stats = region.finish().unwrap();
    assert!(stats.write_scans > 0, "{stats:?}");
}

/// The helper process killed while pages wait in its ring: every byte still
/// reads back as last written (the pager takes the pages it handed over
/// back from their frames, and compresses for itself from then on).
#[test]
fn a_killed_helper_loses_no_page() {
    let ram = 128 * 4096;
    let config = RuntimeConfig {
        fault_mode: FaultMode::Signal,
        background_compression: true,
        ..config(ram, 0.5, "fixed")
    };
    let mut region = Region::new(4 * ram as usize, config).unwrap();
    // The helper is the only child this thread has made.
    let children = std::fs::read_to_string("/proc/thread-self/children").unwrap();
    let helper: libc::pid_t = children.split_whitespace().next().expect("a helper").parse().unwrap();
    let pages = region.len() / 4096;
    for round in 0..4u64 {
        let mem = region.as_mut_slice();
        for p in 0..pages {
            check_and_write(mem, p, round, "killed helper");
            if round == 1 && p == pages / 2 {
                // SAFETY: a signal to our own child process.
                assert_eq!(unsafe { libc::kill(helper, libc::SIGKILL) }, 0);
            }
        }
    }
    let stats = region.finish().unwrap();
    assert!(stats.pages_compressed_background > 0, "{stats:?}");
    assert!(stats.pages_compressed > stats.pages_compressed_background, "{stats:?}");
}

/// Pages the program drops (`MADV_DONTNEED`) read back as zeros and leave
/// every level: random writes, reads and dropped runs of pages over eight
/// times the budget, against a model, under the policies that keep the
/// books differently (fault order, two lists with watched pages, the
/// ager's clock); at the end every page is dropped and the store is empty.
#[test]
fn dropped_pages_read_as_zeros_and_leave_every_level() {
    for (policy, share, move_frames) in [
        ("none", 1.0, false),
        ("fixed", 0.5, false),
        ("adaptive-safe", 0.5, true),
        ("ager", 0.5, false),
    ] {
        let ram = 64 * 4096;
        let config = RuntimeConfig {
            move_frames,
            ..config(ram, share, policy)
        };
        let mut region = Region::new(8 * ram as usize, config).unwrap();
        let pages = region.len() / 4096;
        let mut model = vec![0u64; pages];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for step in 0..30_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let p = (x >> 16) as usize % pages;
            if x.is_multiple_of(23) {
                let run = 1 + (x >> 40) as usize % 24;
                let end = (p + run).min(pages);
                region.discard(p * 4096..end * 4096);
                model[p..end].fill(0);
                continue;
            }
            let words: &mut [u64] = bytemuck::cast_slice_mut(&mut region.as_mut_slice()[p * 4096..(p + 1) * 4096]);
            let at = (p * 7) % 512;
            assert_eq!(words[at], model[p], "{policy}: page {p} at step {step}");
            if model[p] == 0 {
                assert!(
                    words.iter().all(|&w| w == 0),
                    "{policy}: dropped page {p} at step {step} is not zeros"
                );
            }
            if x & 1 == 0 {
                model[p] = x | 1;
                for (i, w) in words.iter_mut().enumerate() {
                    *w = if i == at { x | 1 } else { word(p, i, step) };
                }
            }
        }
        let before = region.stats();
        assert!(
            before.pages_compressed + before.pages_swapped_raw > 0 && before.pages_discarded > 0,
            "{policy}: it paged and dropped pages"
        );
        region.discard(0..region.len());
        let after = region.stats();
        assert_eq!(after.store.pages, 0, "{policy}: the store still holds pages");
        let mem = region.as_mut_slice();
        for p in (0..pages).step_by(7) {
            assert!(
                mem[p * 4096..(p + 1) * 4096].iter().all(|&b| b == 0),
                "{policy}: page {p}"
            );
        }
        region.finish().unwrap();
    }
}
