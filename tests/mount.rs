//! `ccvm mount` as a person uses it: mount an empty directory, copy a
//! source tree in and `tar` it, run fsx-style random reads, writes and
//! truncations against a model, fill a small filesystem to ENOSPC, and
//! unmount. Needs /dev/fuse and root (the mount is made directly, without
//! fusermount); bad mount points are refused with one line everywhere.

mod common;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{ccvm, fails_with_one_line, scratch_dir};

/// A new mount of `size` at a scratch folder for test `name`, or `None`
/// (said on stderr) where mounting cannot be done: no /dev/fuse, not root.
fn mount_or_skip(name: &str, size: &str) -> Option<(PathBuf, Mounted)> {
    // SAFETY: geteuid cannot fail.
    if !Path::new("/dev/fuse").exists() || unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: mounting needs /dev/fuse and root");
        return None;
    }
    let dir = scratch_dir(name);
    let m = Mounted::new(&dir, size);
    Some((dir, m))
}

/// A mounted filesystem, unmounted when dropped.
struct Mounted {
    dir: PathBuf,
    child: Option<Child>,
}

impl Mounted {
    fn new(dir: &Path, size: &str) -> Mounted {
        let child = Command::new(env!("CARGO_BIN_EXE_ccvm"))
            .args(["mount", dir.to_str().unwrap(), "--size", size])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let needle = format!(" {} fuse", dir.display());
        while !std::fs::read_to_string("/proc/mounts").unwrap().contains(&needle) {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the filesystem never appeared"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Mounted {
            dir: dir.to_path_buf(),
            child: Some(child),
        }
    }

    /// Unmounts, and returns what `ccvm mount` said.
    fn unmount(mut self) -> String {
        self.finish()
    }

    fn finish(&mut self) -> String {
        let Some(child) = self.child.take() else {
            return String::new();
        };
        let status = Command::new("umount").arg(&self.dir).status().unwrap();
        assert!(status.success(), "umount failed");
        let out = child.wait_with_output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{said}");
        said
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
            if let Some(mut c) = self.child.take() {
                let _ = c.wait();
            }
        }
    }
}

/// Copies the tree at `from` into `to`, files and directories.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target);
        } else if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// Whether the two trees hold the same files with the same bytes.
fn same_tree(a: &Path, b: &Path) {
    let mut names: Vec<_> = std::fs::read_dir(a).unwrap().map(|e| e.unwrap().file_name()).collect();
    let mut other: Vec<_> = std::fs::read_dir(b).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    other.sort();
    assert_eq!(names, other, "{}", b.display());
    for n in names {
        let (x, y) = (a.join(&n), b.join(&n));
        if x.is_dir() {
            same_tree(&x, &y);
        } else {
            assert!(
                std::fs::read(&x).unwrap() == std::fs::read(&y).unwrap(),
                "{}",
                y.display()
            );
        }
    }
}

#[test]
fn bad_mount_points_give_one_line() {
    let dir = scratch_dir("mount-bad");
    fails_with_one_line(&ccvm(&["mount", dir.join("missing").to_str().unwrap()]), &["missing"]);
    std::fs::write(dir.join("file"), b"x").unwrap();
    fails_with_one_line(&ccvm(&["mount", dir.to_str().unwrap()]), &["not empty"]);
    fails_with_one_line(
        &ccvm(&["mount", dir.join("file").to_str().unwrap()]),
        &["not a directory"],
    );
    fails_with_one_line(
        &ccvm(&["mount", dir.to_str().unwrap(), "--codec", "gzip"]),
        &["unknown codec"],
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_source_tree_is_copied_tarred_and_read_back() {
    let Some((dir, m)) = mount_or_skip("mount-tree", "64M") else {
        return;
    };
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    copy_tree(&src, &dir.join("crates"));
    same_tree(&src, &dir.join("crates"));
    let tar = |args: &[&str]| {
        assert!(Command::new("tar")
            .args(args)
            .current_dir(&dir)
            .status()
            .unwrap()
            .success())
    };
    tar(&["cf", "all.tar", "crates"]);
    std::fs::create_dir(dir.join("x")).unwrap();
    tar(&["xf", "all.tar", "-C", "x"]);
    same_tree(&src, &dir.join("x/crates"));
    std::fs::rename(dir.join("x/crates"), dir.join("moved")).unwrap();
    std::fs::remove_dir_all(dir.join("moved")).unwrap();
    let said = m.unmount();
    assert!(said.contains("unmounted") && said.contains("bytes of files"), "{said}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn random_reads_writes_and_truncations_match_a_model() {
    let Some((dir, m)) = mount_or_skip("mount-fsx", "64M") else {
        return;
    };
    let path = dir.join("fsx");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let mut model: Vec<u8> = Vec::new();
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for op in 0..3000 {
        match next() % 4 {
            0 | 1 => {
                let at = next() % (model.len() as u64 + 70_000);
                let len = (next() % 50_000) as usize + 1;
                let text = next() % 2 == 0;
                let bytes: Vec<u8> = (0..len)
                    .map(|i| if text { b"abcdefgh"[i % 8] } else { next() as u8 })
                    .collect();
                f.write_all_at(&bytes, at).unwrap();
                let end = at as usize + len;
                if model.len() < end {
                    model.resize(end, 0);
                }
                model[at as usize..end].copy_from_slice(&bytes);
            }
            2 => {
                let at = next() % (model.len() as u64 + 10);
                let mut buf = vec![0u8; (next() % 60_000) as usize];
                let n = f.read_at(&mut buf, at).unwrap();
                let from = (at as usize).min(model.len());
                let to = (at as usize + buf.len()).min(model.len());
                assert_eq!(n, to - from, "op {op}");
                assert!(buf[..n] == model[from..to], "op {op}: read {at}+{}", buf.len());
            }
            _ => {
                let size = next() % (model.len() as u64 * 3 / 2 + 1);
                f.set_len(size).unwrap();
                model.resize(size as usize, 0);
            }
        }
        assert_eq!(f.metadata().unwrap().len(), model.len() as u64, "op {op}");
    }
    drop(f);
    assert!(std::fs::read(&path).unwrap() == model);
    m.unmount();
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_full_filesystem_says_enospc_and_frees_space_on_delete() {
    let Some((dir, m)) = mount_or_skip("mount-full", "2M") else {
        return;
    };
    let mut x = 7u64;
    let noise: Vec<u8> = (0..1 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let mut full = None;
    for i in 0..10 {
        if let Err(e) = std::fs::write(dir.join(format!("n{i}")), &noise) {
            full = Some((i, e));
            break;
        }
    }
    let (i, e) = full.expect("2 MiB of memory cannot hold 10 MiB of noise");
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
    assert!(i >= 1, "at least one MiB of noise fits in 2 MiB");
    for j in 0..=i {
        let _ = std::fs::remove_file(dir.join(format!("n{j}")));
    }
    std::fs::write(dir.join("again"), &noise).expect("deleting gave the space back");
    assert!(std::fs::read(dir.join("again")).unwrap() == noise);
    m.unmount();
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn hangup_and_quit_unmount_and_a_killed_server_is_named_next_time() {
    for sig in [libc::SIGHUP, libc::SIGQUIT] {
        let Some((dir, mut m)) = mount_or_skip("mount-signal", "16M") else {
            return;
        };
        let mut child = m.child.take().unwrap();
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let started = Instant::now();
        while child.try_wait().unwrap().is_none() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "signal {sig} did not end the mount"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let needle = format!(" {} fuse", dir.display());
        assert!(
            !std::fs::read_to_string("/proc/mounts").unwrap().contains(&needle),
            "signal {sig} left it mounted"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
    let Some((dir, mut m)) = mount_or_skip("mount-killed", "16M") else {
        return;
    };
    let mut child = m.child.take().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let out = ccvm(&["mount", dir.to_str().unwrap()]);
    fails_with_one_line(&out, &["umount -l", "fusermount -u"]);
    let _ = Command::new("umount").arg("-l").arg(&dir).status();
    std::fs::remove_dir_all(&dir).unwrap();
}
