//! Traces read back what was written; damaged traces give one-line errors
//! naming the file and the offset.

use std::path::{Path, PathBuf};

use ccvm_trace::{Event, Header, TraceReader, TraceWriter};

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("ccvm-trace-{}-{name}", std::process::id()))
}

fn header() -> Header {
    Header {
        workload: "test".into(),
        seed: 9,
        region_bytes: 1 << 20,
        window_pages: 4,
    }
}

/// Writes 5000 references and images over 64 pages (with repeats).
fn write_sample(path: &Path) -> Vec<Event> {
    let mut w = TraceWriter::create(path, &header()).unwrap();
    let mut expected = Vec::new();
    let mut images: Vec<Vec<u8>> = Vec::new();
    let mut x = 12345u64;
    for time in 0..5000u64 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let page = (x >> 40) % 64;
        let write = x & 1 == 1;
        w.reference(page, write).unwrap();
        expected.push(Event::Reference { page, write, time });
        if time % 7 == 0 {
            let content = vec![(page % 5) as u8; 4096];
            let id = match images.iter().position(|i| *i == content) {
                Some(id) => id as u64,
                None => {
                    images.push(content.clone());
                    let id = images.len() as u64 - 1;
                    expected.push(Event::NewImage {
                        id,
                        bytes: content.clone().into_boxed_slice(),
                    });
                    id
                }
            };
            w.image(page, &content).unwrap();
            expected.push(Event::Image { page, id });
        }
        if time % 101 == 0 {
            let pages = 1 + (x >> 20) % 8;
            w.discard(page, pages).unwrap();
            expected.push(Event::Discard { page, pages });
        }
    }
    let footer = w.finish(42).unwrap();
    assert_eq!(footer.references, 5000);
    assert_eq!(footer.images, 5);
    expected
}

fn read_all(path: &Path) -> Result<Vec<Event>, String> {
    let mut r = TraceReader::open(path).map_err(|e| e.to_string())?;
    let mut events = Vec::new();
    while let Some(e) = r.next_event().map_err(|e| e.to_string())? {
        events.push(e);
    }
    Ok(events)
}

#[test]
fn what_is_written_is_read() {
    let path = temp("rt");
    let expected = write_sample(&path);
    let mut r = TraceReader::open(&path).unwrap();
    assert_eq!(r.header(), &header());
    let mut events = Vec::new();
    while let Some(e) = r.next_event().unwrap() {
        events.push(e);
    }
    assert_eq!(events, expected);
    assert_eq!(r.footer().unwrap().run_time_ns, 42);
    std::fs::remove_file(path).unwrap();
}

#[test]
fn every_truncation_and_corruption_is_a_one_line_error() {
    let path = temp("bad");
    write_sample(&path);
    let good = std::fs::read(&path).unwrap();
    let bad = temp("bad2");
    // Every truncation point in the first 200 bytes and a spread after.
    let cuts = (0..200).chain((200..good.len()).step_by(97));
    for cut in cuts {
        std::fs::write(&bad, &good[..cut]).unwrap();
        let err = read_all(&bad).expect_err("a truncated trace is an error");
        assert!(err.starts_with(&bad.display().to_string()), "{err}");
        assert!(!err.contains('\n'), "{err}");
        assert!(err.contains("header") || err.contains("record offset"), "{err}");
    }
    // Flipped bytes in the record stream: zstd's checksum catches them.
    let body = 16 + u32::from_le_bytes(good[12..16].try_into().unwrap()) as usize;
    for pos in (body..good.len()).step_by(53) {
        let mut damaged = good.clone();
        damaged[pos] ^= 0x5a;
        std::fs::write(&bad, &damaged).unwrap();
        if let Err(err) = read_all(&bad) {
            assert!(!err.contains('\n'), "{err}");
        } else {
            panic!("a flipped byte at {pos} went unnoticed");
        }
    }
    std::fs::write(&bad, b"hello, world, this is not a trace").unwrap();
    assert!(read_all(&bad).unwrap_err().contains("not a ccvm trace"));
    std::fs::remove_file(path).unwrap();
    std::fs::remove_file(bad).unwrap();
}

/// A version-1 trace (no dropped pages) is read; a 'D' record in one is
/// refused as the unknown record it was then.
#[test]
fn version_one_traces_are_read() {
    let path = temp("v1");
    let expected = write_sample(&path);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let err = read_all(&path).unwrap_err();
    assert!(err.contains("unknown record type 0x44"), "{err}");
    // The same events without the drops, written as version 1 would be.
    let mut w = TraceWriter::create(&path, &header()).unwrap();
    let mut kept = Vec::new();
    for e in &expected {
        match e {
            Event::Reference { page, write, .. } => w.reference(*page, *write).unwrap(),
            Event::Image { page, .. } => {
                let Some(Event::NewImage { bytes, .. }) = expected
                    .iter()
                    .find(|n| matches!(n, Event::NewImage { id, .. } if Some(id) == image_id(e).as_ref()))
                else {
                    unreachable!("every image is stored first")
                };
                w.image(*page, bytes).unwrap();
            }
            Event::NewImage { .. } => {}
            Event::Discard { .. } => continue,
        }
        kept.push(e.clone());
    }
    w.finish(42).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(read_all(&path).unwrap(), kept);
    std::fs::remove_file(path).unwrap();
}

fn image_id(e: &Event) -> Option<u64> {
    match e {
        Event::Image { id, .. } => Some(*id),
        _ => None,
    }
}
