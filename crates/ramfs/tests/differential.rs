//! The filesystem against a plain model (a map from name to bytes): long
//! random sequences of creates, writes at random offsets, truncations,
//! reads, renames and unlinks over two directories, with a memory limit
//! that makes writes fail with ENOSPC. Every read must match the model; a
//! refused write must be short or change nothing; the store's memory must
//! stay within the limit, and everything must be given back at the end.

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one sequence of steps and checks; the limit is for the code under test"
)]

use std::collections::HashMap;
use std::ffi::OsString;

use ccvm_ramfs::{Fs, Kind, SetAttr, ROOT};
use ccvm_store::{Store, StoreConfig};
use fastrand::Rng;

/// Bytes to write: text (compresses), noise (does not), or zeros.
fn data(rng: &mut Rng, len: usize) -> Vec<u8> {
    match rng.u64(..3) {
        0 => b"fn main() { println!(\"compressed RAM\"); }\n"
            .iter()
            .cycle()
            .take(len)
            .copied()
            .collect(),
        1 => (0..len).map(|_| rng.u64(..) as u8).collect(),
        _ => vec![0; len],
    }
}

fn run(limit: usize, steps: usize, seed: u64) -> (usize, usize) {
    let (mut writes, mut reads) = (0, 0);
    let store = Store::new(StoreConfig {
        memory_limit: limit,
        allocator: "zs".into(),
        ..StoreConfig::default()
    })
    .unwrap();
    let mut fs = Fs::new(store, limit as u64, 0, 0);
    let dirs = [
        ROOT,
        fs.make(ROOT, "d".as_ref(), Kind::Dir(Default::default()), 0o755, 0, 0)
            .unwrap()
            .ino,
    ];
    // (dir index, name) -> contents
    let mut model: HashMap<(usize, OsString), Vec<u8>> = HashMap::new();
    let mut rng = Rng::with_seed(seed);
    let (mut nospc, mut short) = (0, 0);
    for step in 0..steps {
        let d = rng.u64(..2) as usize;
        let name = OsString::from(format!("f{}", rng.u64(..12)));
        let ino = fs.lookup(dirs[d], &name).ok().map(|n| n.ino);
        match (rng.u64(..10), ino) {
            (_, None) => {
                fs.make(dirs[d], &name, Kind::File, 0o644, 0, 0).unwrap();
                model.insert((d, name), Vec::new());
            }
            (1..=3, Some(ino)) => {
                let m = model.get_mut(&(d, name.clone())).unwrap();
                let offset = rng.u64(..m.len() as u64 + 20_000);
                let len = rng.u64(..30_000) as usize + 1;
                let bytes = data(&mut rng, len);
                match fs.write(ino, offset, &bytes) {
                    Ok(n) => {
                        writes += 1;
                        if n < bytes.len() {
                            short += 1;
                        }
                        let end = offset as usize + n;
                        if m.len() < end {
                            m.resize(end, 0);
                        }
                        m[offset as usize..end].copy_from_slice(&bytes[..n]);
                    }
                    Err(libc::ENOSPC) => nospc += 1,
                    Err(e) => panic!("step {step}: write errno {e}"),
                }
                assert_eq!(fs.get(ino).unwrap().size, m.len() as u64, "step {step}");
            }
            (4..=6, Some(ino)) => {
                let m = &model[&(d, name.clone())];
                let offset = rng.u64(..m.len() as u64 + 100);
                let len = rng.u64(..40_000) as usize;
                let got = fs.read(ino, offset, len).unwrap();
                reads += 1;
                let from = (offset as usize).min(m.len());
                let to = (offset as usize + len).min(m.len());
                assert!(got == m[from..to], "step {step}: read {offset}+{len} of {name:?}");
            }
            (7, Some(ino)) => {
                let m = model.get_mut(&(d, name.clone())).unwrap();
                let size = rng.u64(..m.len() as u64 * 2 + 1);
                match fs.set_attr(
                    ino,
                    &SetAttr {
                        size: Some(size),
                        ..SetAttr::default()
                    },
                ) {
                    Ok(_) => m.resize(size as usize, 0),
                    Err(libc::ENOSPC) => nospc += 1,
                    Err(e) => panic!("step {step}: truncate errno {e}"),
                }
            }
            (8, Some(_)) => {
                let to_d = rng.u64(..2) as usize;
                let to = OsString::from(format!("f{}", rng.u64(..12)));
                fs.rename(dirs[d], &name, dirs[to_d], &to).unwrap();
                let m = model.remove(&(d, name)).unwrap();
                model.insert((to_d, to), m);
            }
            (9, Some(_)) => {
                fs.remove(dirs[d], &name, false).unwrap();
                model.remove(&(d, name));
            }
            _ => {}
        }
        assert!(fs.usage().memory <= limit as u64, "step {step}: over the limit");
    }
    // Everything reads back, and every name is there and no other.
    for ((d, name), m) in &model {
        let ino = fs.lookup(dirs[*d], name).unwrap().ino;
        assert!(fs.read(ino, 0, m.len() + 10).unwrap() == *m, "{name:?}");
    }
    for (d, &dir) in dirs.iter().enumerate() {
        let names = fs
            .entries(dir)
            .unwrap()
            .into_iter()
            .filter(|(_, n, _)| matches!(n.kind, Kind::File))
            .count();
        assert_eq!(names, model.keys().filter(|k| k.0 == d).count());
    }
    for (d, name) in model.keys() {
        fs.remove(dirs[*d], name, false).unwrap();
    }
    assert_eq!(fs.remove(ROOT, "d".as_ref(), true), Ok(()));
    let u = fs.usage();
    assert_eq!((u.blocks, u.file_bytes), (0, 0), "every block given back");
    assert!(
        writes > steps / 5 && reads > steps / 5,
        "{writes} writes and {reads} reads in {steps} steps"
    );
    (nospc, short)
}

#[test]
fn agrees_with_a_model_without_running_out() {
    let (nospc, _) = run(usize::MAX, 20_000, 11);
    assert_eq!(nospc, 0);
}

#[test]
fn agrees_with_a_model_at_a_hard_limit() {
    let (nospc, short) = run(300_000, 30_000, 12);
    assert!(
        nospc + short > 10,
        "the limit was reached: {nospc} refused, {short} short"
    );
}

#[test]
fn directories_behave() {
    let store = Store::new(StoreConfig::default()).unwrap();
    let mut fs = Fs::new(store, u64::MAX, 0, 0);
    let a = fs
        .make(ROOT, "a".as_ref(), Kind::Dir(Default::default()), 0o755, 0, 0)
        .unwrap()
        .ino;
    let b = fs
        .make(a, "b".as_ref(), Kind::Dir(Default::default()), 0o755, 0, 0)
        .unwrap()
        .ino;
    let f = fs.make(b, "f".as_ref(), Kind::File, 0o644, 0, 0).unwrap().ino;
    assert_eq!(
        fs.make(b, "f".as_ref(), Kind::File, 0o644, 0, 0).err(),
        Some(libc::EEXIST)
    );
    assert_eq!(fs.remove(ROOT, "a".as_ref(), true), Err(libc::ENOTEMPTY));
    assert_eq!(fs.remove(a, "b".as_ref(), false), Err(libc::EISDIR));
    assert_eq!(fs.remove(b, "f".as_ref(), true), Err(libc::ENOTDIR));
    assert_eq!(
        fs.rename(ROOT, "a".as_ref(), b, "x".as_ref()),
        Err(libc::EINVAL),
        "not into itself"
    );
    assert_eq!(fs.lookup(f, "x".as_ref()).err(), Some(libc::ENOTDIR));
    fs.write(f, 0, b"data").unwrap();
    fs.link(f, ROOT, "hard".as_ref()).unwrap();
    fs.remove(b, "f".as_ref(), false).unwrap();
    let h = fs.lookup(ROOT, "hard".as_ref()).unwrap().ino;
    assert_eq!(fs.read(h, 0, 10).unwrap(), b"data", "a second name keeps the file");
    assert_eq!(
        fs.get(a).unwrap().nlink,
        3,
        "a directory's links: itself, its entry, b's .."
    );
    fs.rename(a, "b".as_ref(), ROOT, "b2".as_ref()).unwrap();
    assert_eq!((fs.get(a).unwrap().nlink, fs.get(ROOT).unwrap().nlink), (2, 4));
    assert_eq!(fs.entries(b).unwrap()[1].0, ROOT, "b's .. follows the move");
}
