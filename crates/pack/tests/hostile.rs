//! Damaged `.ccz` files: every bit flip and every truncation of a small
//! packed file is caught, by the header's and index's CRCs when the file
//! is opened, or by the page's own checks when that page is read, with an
//! error naming the page whose data was damaged; random bytes never panic.

use std::io::Cursor;

use ccvm_codec::PAGE_SIZE;
use ccvm_pack::format::{data_start, HEADER_BYTES};
use ccvm_pack::{pack, PackError, Packed, ReadOptions};
use proptest::prelude::*;

fn original() -> Vec<u8> {
    let files = ccvm_corpus::load_dir(ccvm_corpus::default_dir()).unwrap();
    let mut data: Vec<u8> = files
        .iter()
        .flat_map(|f| f.pages().take(1))
        .take(4)
        .flatten()
        .copied()
        .collect();
    data.extend_from_slice(&[0u8; PAGE_SIZE]);
    data.extend(b"text of a file, ".iter().cycle().take(2000));
    data
}

fn packed_bytes(data: &[u8], codec: &str) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    pack(
        data,
        data.len() as u64,
        &mut out,
        ccvm_codec::by_name(codec).unwrap().as_mut(),
    )
    .unwrap();
    out.into_inner()
}

/// Opens `bytes` as a file and reads every page: the first error, or the
/// pages read.
fn read_all(bytes: &[u8], name: &str) -> Result<Vec<u8>, PackError> {
    let path = std::env::temp_dir().join(format!("ccvm-hostile-{}-{name}.ccz", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    let result = Packed::open(&path, ReadOptions::default()).and_then(|mut p| {
        let mut all = Vec::new();
        let mut page = [0u8; PAGE_SIZE];
        for i in 0..p.pages() {
            p.read_page(i, &mut page)?;
            all.extend_from_slice(&page);
        }
        Ok(all)
    });
    std::fs::remove_file(&path).unwrap();
    result
}

#[test]
fn every_bit_flip_is_caught_where_it_is() {
    let data = original();
    let pages = data.len().div_ceil(PAGE_SIZE) as u64;
    for codec in ["exepack2", "lz4", "wkdm"] {
        let good = packed_bytes(&data, codec);
        let start = data_start(pages) as usize;
        // Page spans of the data, to say which page a flip lands in.
        let mut p = Packed::open(
            &{
                let path = std::env::temp_dir().join(format!("ccvm-hostile-good-{}-{codec}.ccz", std::process::id()));
                std::fs::write(&path, &good).unwrap();
                path
            },
            ReadOptions::default(),
        )
        .unwrap();
        let spans: Vec<(u64, u64, u64)> = (0..pages)
            .filter_map(|i| {
                p.entry(i)
                    .filter(|e| e.stored > 0)
                    .map(|e| (i, e.offset, e.offset + e.stored as u64))
            })
            .collect();
        p.verify().unwrap();
        for at in 0..good.len() {
            let bit = (at * 5 % 8) as u8;
            let mut bad = good.clone();
            bad[at] ^= 1 << bit;
            let result = read_all(&bad, codec);
            if at < start {
                assert!(
                    matches!(result, Err(PackError::Header(_))),
                    "{codec}: a flip at {at} in the header or index gave {result:?}"
                );
            } else {
                let page = spans.iter().find(|s| (s.1..s.2).contains(&(at as u64))).unwrap().0;
                match result {
                    Err(PackError::Page { page: p, .. }) => assert_eq!(p, page, "{codec}: flip at {at}"),
                    // A flip the decoder cannot see and the output does not
                    // show (an offset moved to equal bytes) leaves the file's
                    // content intact.
                    Ok(all) => {
                        assert!(
                            all[..data.len()] == data[..],
                            "{codec}: a flip at {at} in page {page} read back wrong"
                        )
                    }
                    Err(other) => panic!("{codec}: a flip at {at} in page {page}'s data gave {other}"),
                }
            }
        }
        let _ = std::fs::remove_file(
            std::env::temp_dir().join(format!("ccvm-hostile-good-{}-{codec}.ccz", std::process::id())),
        );
    }
}

#[test]
fn every_truncation_is_an_error() {
    let data = original();
    let good = packed_bytes(&data, "exepack2");
    for len in 0..good.len() {
        let result = read_all(&good[..len], "truncated");
        assert!(result.is_err(), "a file cut to {len} of {} bytes read back", good.len());
        let message = result.unwrap_err().to_string();
        assert!(!message.contains('\n'), "one line: {message}");
        if len < HEADER_BYTES {
            assert!(message.contains("shorter than a .ccz header"), "{message}");
        }
    }
    let mut all = read_all(&good, "whole").unwrap();
    all.truncate(data.len());
    assert_eq!(all, data);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// A valid header over random index and data bytes: opening and
    /// reading fail cleanly or give pages that passed their CRCs.
    #[test]
    fn random_bytes_behind_a_valid_header_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..3000), pages in 0u64..4) {
        let mut bytes = ccvm_pack::format::Header {
            file_len: pages * PAGE_SIZE as u64,
            pages,
            codec: "exepack2".into(),
            index_crc: crc32fast::hash(&tail[..tail.len().min(pages as usize * 16)]),
        }
        .encode()
        .to_vec();
        bytes.extend_from_slice(&tail);
        let _ = read_all(&bytes, "random");
    }

    #[test]
    fn random_files_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
        prop_assert!(read_all(&bytes, "noise").is_err());
    }
}

#[test]
fn a_codec_name_that_is_not_a_name_is_refused_in_one_line() {
    // Found by fuzzing: a newline for a codec name made a two-line error.
    for name in ["\n", "lz4\nx", "", "gzip"] {
        let mut header = ccvm_pack::format::Header {
            file_len: 0,
            pages: 0,
            codec: name.into(),
            index_crc: crc32fast::hash(&[]),
        }
        .encode()
        .to_vec();
        header.truncate(64);
        let e = read_all(&header, "name").unwrap_err().to_string();
        assert!(!e.contains('\n'), "{e:?}");
        assert!(e.contains("codec"), "{e}");
    }
}
