//! The runtime never returns wrong data and leaves nothing behind: a
//! corrupted swap file stops the run with a corruption report, system calls
//! can read into managed memory, and a dropped region frees its mapping and
//! its swap file.

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::process::Command;

use ccvm_runtime::{FaultMode, Region, RuntimeConfig, FATAL_EXIT};

fn small(policy: &str, share: f64) -> RuntimeConfig {
    RuntimeConfig {
        ram_bytes: 32 * 4096,
        uncompressed_share: share,
        policy: policy.parse().unwrap(),
        ..RuntimeConfig::default()
    }
}

/// Fills every page with words that name it.
fn fill(region: &mut Region) {
    for (i, w) in bytemuck::cast_slice_mut::<u8, u64>(region.as_mut_slice())
        .iter_mut()
        .enumerate()
    {
        *w = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (i % 7);
    }
}

/// Runs in a child process (see `a_corrupted_swap_file_stops_the_run`):
/// pages a region out, overwrites the swap file, and reads the region.
#[test]
fn corrupt_child() {
    if std::env::var_os("CCVM_CORRUPT_CHILD").is_none() {
        return;
    }
    let mut region = Region::new(1 << 20, small("none", 1.0)).unwrap();
    fill(&mut region);
    // Evicted pages have reached the disk once their clusters filled:
    // overwrite the whole file through a second, buffered descriptor.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/self/fd/{}", region.swap_fd()))
        .unwrap();
    let junk = vec![0xa5u8; 1 << 20];
    file.write_all_at(&junk, 0).unwrap();
    file.sync_all().unwrap();
    let sum: u64 = region.as_mut_slice().iter().map(|&b| b as u64).sum();
    println!("read the region without noticing: {sum}");
}

#[test]
fn a_corrupted_swap_file_stops_the_run() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "corrupt_child", "--nocapture", "--test-threads", "1"])
        .env("CCVM_CORRUPT_CHILD", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(FATAL_EXIT), "stderr: {stderr}");
    let line = stderr.lines().find(|l| l.starts_with("ccvm:")).expect("a ccvm: line");
    assert!(line.contains("corrupt") && line.contains("checksum mismatch"), "{line}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("without noticing"));
}

#[test]
fn read_syscall_into_paged_memory_in_thread_mode() {
    let path = std::env::temp_dir().join(format!("ccvm-read-{}", std::process::id()));
    let data: Vec<u8> = (0..(1 << 20)).map(|i: u32| (i * 7 % 251) as u8).collect();
    std::fs::File::create(&path).unwrap().write_all(&data).unwrap();
    let config = RuntimeConfig {
        fault_mode: FaultMode::Thread,
        ..small("fixed", 0.5)
    };
    let mut region = Region::new(2 << 20, config).unwrap();
    fill(&mut region);
    let file = std::fs::File::open(&path).unwrap();
    // Half a page in, over pages that are on disk or in the cache: the
    // kernel's own copy faults, and the handler serves it.
    let dst = &mut region.as_mut_slice()[2048..2048 + data.len()];
    file.read_exact_at(dst, 0).unwrap();
    assert!(region.as_mut_slice()[2048..2048 + data.len()] == data[..]);
    let stats = region.finish().unwrap();
    assert!(stats.faults_cache + stats.faults_disk > 0);
    std::fs::remove_file(path).unwrap();
}

/// In SIGBUS mode the kernel's own access to a page that is not resident
/// fails with EFAULT and changes nothing; touching the buffer first makes
/// the same read work.
#[test]
fn read_syscall_in_signal_mode_fails_cleanly_then_works_after_prefault() {
    let path = std::env::temp_dir().join(format!("ccvm-read-sig-{}", std::process::id()));
    let data: Vec<u8> = (0..(24 << 10)).map(|i: u32| (i * 13 % 251) as u8).collect();
    std::fs::File::create(&path).unwrap().write_all(&data).unwrap();
    let mut region = Region::new(2 << 20, small("fixed", 0.5)).unwrap();
    assert_eq!(region.fault_mode(), FaultMode::Signal);
    // A page only read is the zero page, write-protected: prefault must
    // make it writable for the kernel too.
    let last = region.len() - 4096;
    assert_eq!(region.as_mut_slice()[last], 0);
    region.prefault(last..region.len());
    file_read_into_last_page(&mut region, last);
    fill(&mut region);
    let before: Vec<u8> = region.as_mut_slice()[..4096].to_vec();
    fill(&mut region); // page 0 is evicted again
    let file = std::fs::File::open(&path).unwrap();
    let err = file.read_at(&mut region.as_mut_slice()[..data.len()], 0).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EFAULT), "{err}");
    assert_eq!(
        &region.as_mut_slice()[..4096],
        &before[..],
        "a failed read changed the page"
    );
    region.prefault(0..data.len());
    file.read_exact_at(&mut region.as_mut_slice()[..data.len()], 0).unwrap();
    assert!(region.as_mut_slice()[..data.len()] == data[..]);
    std::fs::remove_file(path).unwrap();
}

fn file_read_into_last_page(region: &mut Region, last: usize) {
    let path = std::env::temp_dir().join(format!("ccvm-read-zero-{}", std::process::id()));
    std::fs::write(&path, [7u8; 4096]).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    file.read_exact_at(&mut region.as_mut_slice()[last..last + 4096], 0)
        .unwrap();
    assert!(region.as_mut_slice()[last..].iter().all(|&b| b == 7));
    std::fs::remove_file(path).unwrap();
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn maps_with(addr: usize) -> bool {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines().any(|l| {
        let range = l.split(' ').next().unwrap();
        let (a, b) = range.split_once('-').unwrap();
        let (a, b) = (
            usize::from_str_radix(a, 16).unwrap(),
            usize::from_str_radix(b, 16).unwrap(),
        );
        (a..b).contains(&addr)
    })
}

#[test]
fn nothing_is_left_after_a_region_is_dropped() {
    // Other tests in this binary run in parallel and open descriptors of
    // their own, so this one checks its own region's: the mapping, and the
    // swap file's descriptor (which names a deleted file while open). Its
    // swap files live in a folder of their own: another test's swap file
    // may reuse both the descriptor number and the inode number.
    let dir = std::env::temp_dir().join(format!("ccvm-drop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for _ in 0..3 {
        let config = RuntimeConfig {
            swap_dir: Some(dir.clone()),
            ..small("fixed", 0.5)
        };
        let mut region = Region::new(1 << 20, config).unwrap();
        fill(&mut region);
        let addr = region.as_ptr() as usize;
        let fd = region.swap_fd();
        let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
        assert!(link.to_string_lossy().contains("(deleted)"), "{link:?}");
        assert!(maps_with(addr));
        drop(region);
        assert!(!maps_with(addr), "the region's mapping outlives it");
        let now = std::fs::read_link(format!("/proc/self/fd/{fd}"));
        assert!(now.map_or(true, |l| l != link), "the swap file outlives its region");
    }
    std::fs::remove_dir_all(&dir).unwrap();
    let before = open_fds();
    for _ in 0..5 {
        let mut region = Region::new(1 << 20, small("fixed", 0.5)).unwrap();
        fill(&mut region);
    }
    // Each region holds a userfaultfd, an eventfd and its swap file.
    assert!(open_fds() < before + 3, "descriptors leak");
}

/// Runs in a child process (see `a_full_disk_stops_the_run`).
#[test]
fn full_disk_child() {
    let Some(dir) = std::env::var_os("CCVM_FULL_DISK_CHILD") else {
        return;
    };
    let config = RuntimeConfig {
        swap_dir: Some(dir.into()),
        ..small("none", 1.0)
    };
    let mut region = Region::new(4 << 20, config).unwrap();
    fill(&mut region);
    let sum: u64 = region.as_mut_slice().iter().map(|&b| b as u64).sum();
    println!("paged 4 MiB through a 128 KiB disk: {sum}");
}

/// A swap directory on a 128 KiB tmpfs fills up: the run stops with a
/// clear message. Needs root to mount; skipped otherwise.
#[test]
fn a_full_disk_stops_the_run() {
    let dir = std::env::temp_dir().join(format!("ccvm-full-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=128k", "tmpfs"])
        .arg(&dir)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: cannot mount a small tmpfs (needs root)");
        let _ = std::fs::remove_dir(&dir);
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "full_disk_child", "--nocapture", "--test-threads", "1"])
        .env("CCVM_FULL_DISK_CHILD", &dir)
        .output()
        .unwrap();
    let _ = Command::new("umount").arg(&dir).status();
    let _ = std::fs::remove_dir(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(FATAL_EXIT), "stderr: {stderr}");
    let line = stderr.lines().find(|l| l.starts_with("ccvm:")).expect("a ccvm: line");
    assert!(line.contains("no space left") && line.contains("--swap-dir"), "{line}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("paged 4 MiB"));
}
