//! Packed files against the plain bytes they came from: every page read
//! back through [`Packed::read_page`] and through a [`Mapping`], in random
//! order and from several threads, for files of real memory pages, zero
//! pages, random bytes and partial last pages, with every general codec.

use std::io::Cursor;
use std::path::PathBuf;

use ccvm_codec::PAGE_SIZE;
use ccvm_pack::{pack, pack_file, Mapping, Packed, ReadOptions};
use fastrand::Rng;

fn real_pages() -> Vec<u8> {
    let files = ccvm_corpus::load_dir(ccvm_corpus::default_dir()).unwrap();
    files
        .iter()
        .flat_map(|f| f.pages().step_by(11))
        .flatten()
        .copied()
        .collect()
}

/// A file of `pages` pages drawn from real pages, zero pages, random
/// bytes and text, cut `short` bytes before the end.
fn file(rng: &mut Rng, real: &[u8], pages: usize, short: usize) -> Vec<u8> {
    let mut data = Vec::with_capacity(pages * PAGE_SIZE);
    let real_pages = real.len() / PAGE_SIZE;
    for _ in 0..pages {
        match rng.u64(..) % 8 {
            0 => data.extend_from_slice(&[0u8; PAGE_SIZE]),
            1 => data.extend((0..PAGE_SIZE).map(|_| rng.u64(..) as u8)),
            2 => data.extend(b"let x = compress(page);\n".iter().cycle().take(PAGE_SIZE)),
            _ => {
                let p = rng.u64(..) as usize % real_pages;
                data.extend_from_slice(&real[p * PAGE_SIZE..(p + 1) * PAGE_SIZE]);
            }
        }
    }
    data.truncate(data.len().saturating_sub(short));
    data
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("ccvm-pack-{}-{name}", std::process::id()))
}

#[test]
fn every_page_reads_back_with_every_codec() {
    let real = real_pages();
    let mut rng = Rng::with_seed(0x9E37_79B9_7F4A_7C15);
    for info in ccvm_codec::CODECS.iter().filter(|c| c.general) {
        for (pages, short) in [(0, 0), (1, 4095), (1, 0), (37, 1000), (120, 0)] {
            let data = file(&mut rng, &real, pages, short);
            let mut codec = (info.make)();
            let mut out = Cursor::new(Vec::new());
            let summary = pack(&data[..], data.len() as u64, &mut out, codec.as_mut()).unwrap();
            assert_eq!(
                summary.zero + summary.raw + summary.compressed,
                data.len().div_ceil(PAGE_SIZE) as u64
            );
            let path = temp(&format!("{}-{pages}-{short}.ccz", info.name));
            std::fs::write(&path, out.get_ref()).unwrap();
            assert_eq!(summary.packed_len, out.get_ref().len() as u64);
            for direct in [false, true] {
                let mut packed = Packed::open(
                    &path,
                    ReadOptions {
                        direct,
                        ..ReadOptions::default()
                    },
                )
                .unwrap();
                assert_eq!(packed.file_len(), data.len() as u64);
                let mut page = [0u8; PAGE_SIZE];
                // Random order: the reader keeps no position.
                for _ in 0..packed.pages() * 2 {
                    let p = rng.u64(..) % packed.pages().max(1);
                    if packed.pages() == 0 {
                        break;
                    }
                    packed.read_page(p, &mut page).unwrap();
                    let from = p as usize * PAGE_SIZE;
                    let to = (from + PAGE_SIZE).min(data.len());
                    assert_eq!(&page[..to - from], &data[from..to], "{} page {p}", info.name);
                    assert!(page[to - from..].iter().all(|&b| b == 0), "the tail is zero-padded");
                }
            }
            std::fs::remove_file(&path).unwrap();
        }
    }
}

#[test]
fn a_mapping_holds_the_file_byte_for_byte_under_threads() {
    let real = real_pages();
    let mut rng = Rng::with_seed(42);
    let data = file(&mut rng, &real, 600, 123);
    let src = temp("mapped.bin");
    let dst = temp("mapped.ccz");
    std::fs::write(&src, &data).unwrap();
    for codec in ["exepack2", "lz4", "wkdm", "copy"] {
        let summary = pack_file(&src, &dst, ccvm_codec::by_name(codec).unwrap().as_mut()).unwrap();
        assert_eq!(summary.file_len, data.len() as u64);
        let mapping = Mapping::new(Packed::open(&dst, ReadOptions::default()).unwrap()).unwrap();
        let bytes = mapping.as_slice();
        assert_eq!(bytes.len(), data.len());
        // Four threads touch pages in their own random orders, so pages
        // are often faulted by two threads at once.
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let data = &data;
                s.spawn(move || {
                    let mut rng = Rng::with_seed(t * 7919 + 1);
                    for _ in 0..800 {
                        let p = rng.u64(..) as usize % data.len().div_ceil(PAGE_SIZE);
                        let from = p * PAGE_SIZE;
                        let to = (from + PAGE_SIZE).min(data.len());
                        assert_eq!(&bytes[from..to], &data[from..to], "{codec} page {p}");
                    }
                });
            }
        });
        assert_eq!(bytes, &data[..], "{codec}");
        let stats = mapping.finish();
        assert_eq!(
            stats.pages,
            data.len().div_ceil(PAGE_SIZE) as u64,
            "{codec}: each page loaded once"
        );
    }
    std::fs::remove_file(&src).unwrap();
    std::fs::remove_file(&dst).unwrap();
}

#[test]
fn the_kernel_reads_from_a_mapping_too() {
    // A write(2) from the mapping faults inside the kernel; the handler
    // thread serves it like any other fault.
    let data: Vec<u8> = (0..5 * PAGE_SIZE as u32 + 17).map(|i| (i % 251) as u8).collect();
    let src = temp("kernel.bin");
    let dst = temp("kernel.ccz");
    let copy = temp("kernel.out");
    std::fs::write(&src, &data).unwrap();
    pack_file(&src, &dst, ccvm_codec::by_name("exepack2").unwrap().as_mut()).unwrap();
    let mapping = Mapping::new(Packed::open(&dst, ReadOptions::default()).unwrap()).unwrap();
    std::fs::write(&copy, mapping.as_slice()).unwrap();
    assert_eq!(std::fs::read(&copy).unwrap(), data);
    for p in [src, dst, copy] {
        std::fs::remove_file(p).unwrap();
    }
}
