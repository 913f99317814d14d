//! Line traces: what is written reads back event for event; damage and
//! truncation anywhere are one-line errors, never a panic or a short run.

use ccvm_cachesim::trace::{Event, Header, LineTrace, LineTraceWriter};
use proptest::prelude::*;

fn header() -> Header {
    Header {
        program: "test".into(),
        args: vec!["a".into()],
        method: "generated".into(),
    }
}

/// Writes `events` (contents as their bytes); returns the file.
fn write(events: &[(u64, Option<bool>, u64, [u8; 64])]) -> Vec<u8> {
    let mut w = LineTraceWriter::new(Vec::new(), &header()).unwrap();
    for &(line, write, gap, bytes) in events {
        match write {
            Some(write) => w.reference(line, write, gap).unwrap(),
            None => w.contents(line, &bytes).unwrap(),
        }
    }
    w.finish().unwrap()
}

fn event_strategy() -> impl Strategy<Value = (u64, Option<bool>, u64, [u8; 64])> {
    (
        prop_oneof![0u64..64, 0u64..(1 << 41)],
        prop_oneof![Just(None), any::<bool>().prop_map(Some)],
        prop_oneof![0u64..10, 0u64..(1 << 30)],
        (any::<u8>(), 0usize..64).prop_map(|(v, n)| {
            let mut b = [0u8; 64];
            b[..n].fill(v);
            b
        }),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn what_is_written_reads_back(events in prop::collection::vec(event_strategy(), 0..3000)) {
        let bytes = write(&events);
        let t = LineTrace::read(&bytes[..], "t").unwrap();
        prop_assert_eq!(t.header(), &header());
        let got: Vec<Event> = t.events().collect();
        prop_assert_eq!(got.len(), events.len());
        for (g, &(line, write, gap, content)) in got.iter().zip(&events) {
            match (*g, write) {
                (Event::Reference { line: l, write: w, instructions }, Some(write)) => {
                    prop_assert_eq!((l, w, instructions), (line, write, gap));
                }
                (Event::Contents { line: l, image }, None) => {
                    prop_assert_eq!(l, line);
                    prop_assert_eq!(t.images()[image as usize], content);
                }
                _ => prop_assert!(false, "event kinds differ"),
            }
        }
        let refs = events.iter().filter(|e| e.1.is_some()).count() as u64;
        prop_assert_eq!(t.references(), refs);
        prop_assert_eq!(t.instructions(), events.iter().filter(|e| e.1.is_some()).map(|e| e.2).sum::<u64>());
    }
}

/// A trace of a few blocks: enough records to cross block boundaries.
fn sample() -> Vec<u8> {
    let mut rng = fastrand::Rng::with_seed(3);
    let events: Vec<_> = (0..150_000)
        .map(|i| {
            let mut b = [0u8; 64];
            rng.fill(&mut b[..8]);
            (
                rng.u64(..5000),
                if i % 10 == 0 { None } else { Some(rng.bool()) },
                rng.u64(..20),
                b,
            )
        })
        .collect();
    write(&events)
}

#[test]
fn images_are_kept_once() {
    let bytes = write(&[
        (1, None, 0, [1; 64]),
        (2, None, 0, [1; 64]),
        (1, None, 0, [2; 64]),
        (1, Some(true), 4, [0; 64]),
    ]);
    let t = LineTrace::read(&bytes[..], "t").unwrap();
    assert_eq!(t.images().len(), 2);
    let images: Vec<u32> = t
        .events()
        .filter_map(|e| match e {
            Event::Contents { image, .. } => Some(image),
            _ => None,
        })
        .collect();
    assert_eq!(images, [0, 0, 1]);
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = sample();
    assert!(bytes.len() > 3 * 12, "several blocks");
    let full = LineTrace::read(&bytes[..], "t").unwrap();
    assert!(full.references() > 100_000);
    // Every cut in the first 2 KiB, then every 997th byte, then the last 2 KiB.
    let cuts = (0..2048)
        .chain((2048..bytes.len() - 2048).step_by(997))
        .chain(bytes.len() - 2048..bytes.len());
    for cut in cuts {
        let e = match LineTrace::read(&bytes[..cut], "t") {
            Err(e) => e.to_string(),
            Ok(_) => panic!("a trace cut at {cut} of {} read", bytes.len()),
        };
        assert!(e.starts_with("t: ") && !e.contains('\n'), "{e}");
    }
}

#[test]
fn damage_is_caught_where_it_is() {
    let bytes = sample();
    let mut rng = fastrand::Rng::with_seed(9);
    for _ in 0..400 {
        let mut bad = bytes.clone();
        let at = rng.usize(..bad.len());
        bad[at] ^= 1 << rng.u8(..8);
        match LineTrace::read(&bad[..], "t") {
            Err(e) => assert!(!e.to_string().contains('\n')),
            // A flip inside the JSON header's text can leave valid JSON
            // (a different program name): only the header may differ.
            Ok(t) => {
                assert!(at < 16 + 200, "damage at {at} went unseen");
                assert_ne!(t.header(), &header());
            }
        }
    }
    let mut extra = bytes.clone();
    extra.push(0);
    assert!(LineTrace::read(&extra[..], "t")
        .unwrap_err()
        .to_string()
        .contains("after the end"));
    let mut version = bytes;
    version[8] = 9;
    assert!(LineTrace::read(&version[..], "t")
        .unwrap_err()
        .to_string()
        .contains("version 9"));
}
