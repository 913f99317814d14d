//! MEMMU against plain arrays: long random sequences of allocations,
//! frees, checked reads and writes, and pinned views, with sensor-like,
//! random and zero data, on memories small enough that pages are
//! compressed, coalesced and refused. Every read must match the model; a
//! refused operation (out of memory) must change nothing; stale handles,
//! bad indices and oversized pins must be errors.

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one sequence of steps and checks; the limit is for the code under test"
)]

use ccvm_memmu::{Handle, Memmu, MemmuConfig, MemmuError};
use fastrand::Rng;

/// A value to write at `i`: mostly a slow signal (compresses), sometimes
/// noise or zero.
fn value(rng: &mut Rng, i: usize, style: u64) -> u16 {
    match style % 4 {
        0 => 0,
        1 => rng.u64(..) as u16,
        _ => 512u16
            .wrapping_add((i as u16 / 3) % 50)
            .wrapping_add((rng.u64(..) % 3) as u16),
    }
}

fn run(config: MemmuConfig, steps: usize, seed: u64) -> (usize, usize, usize) {
    let slots = config.working_pages;
    let page = config.page;
    let mut m = Memmu::new(config).unwrap();
    let mut rng = Rng::with_seed(seed);
    let mut live: Vec<(Handle<u16>, Vec<u16>)> = Vec::new();
    let mut dead: Vec<Handle<u16>> = Vec::new();
    let (mut refused, mut no_space, mut freed) = (0, 0, 0);
    for step in 0..steps {
        match rng.usize(..100) {
            0..=4 => match m.alloc::<u16>(rng.usize(..1500)) {
                Ok(h) => {
                    let len = m.len(h).unwrap();
                    live.push((h, vec![0; len]));
                }
                Err(MemmuError::NoVirtualSpace { .. }) => no_space += 1,
                Err(e) => panic!("alloc: {e}"),
            },
            5..=7 if !live.is_empty() => {
                let (h, _) = live.swap_remove(rng.usize(..live.len()));
                m.free(h).unwrap();
                dead.push(h);
                freed += 1;
            }
            8 if !dead.is_empty() => {
                let h = dead[rng.usize(..dead.len())];
                assert!(
                    matches!(m.get(h, 0), Err(MemmuError::UseAfterFree { .. })),
                    "step {step}"
                );
                assert!(matches!(m.free(h), Err(MemmuError::UseAfterFree { .. })));
            }
            9..=49 if !live.is_empty() => {
                let k = rng.usize(..live.len());
                let (h, model) = &mut live[k];
                let i = rng.usize(..model.len() + 2);
                let style = rng.u64(..);
                let v = value(&mut rng, i, style);
                match m.set(*h, i, v) {
                    Ok(()) => model[i] = v,
                    Err(MemmuError::OutOfBounds { .. }) => assert!(i >= model.len()),
                    Err(MemmuError::OutOfMemory { .. }) => refused += 1,
                    Err(e) => panic!("set: {e}"),
                }
            }
            50..=84 if !live.is_empty() => {
                let (h, model) = &live[rng.usize(..live.len())];
                let i = rng.usize(..model.len() + 2);
                match m.get(*h, i) {
                    Ok(v) => assert_eq!(v, model[i], "step {step}: element {i}"),
                    Err(MemmuError::OutOfBounds { .. }) => assert!(i >= model.len()),
                    Err(MemmuError::OutOfMemory { .. }) => refused += 1,
                    Err(e) => panic!("get: {e}"),
                }
            }
            85..=89 if !live.is_empty() => {
                // Two ranges pinned together (of two arrays, or of one,
                // perhaps overlapping): the first copied into the second.
                let a = rng.usize(..live.len());
                let b = rng.usize(..live.len());
                let (ha, la) = (live[a].0, live[a].1.len());
                let (hb, lb) = (live[b].0, live[b].1.len());
                let n = rng.usize(..page / 2 + 1).min(la).min(lb);
                let (sa, sb) = (rng.usize(..la - n + 1), rng.usize(..lb - n + 1));
                match m.pin_many(&[(ha, sa..sa + n), (hb, sb..sb + n)]) {
                    Ok(mut view) => {
                        for i in 0..n {
                            assert_eq!(view.get_in(0, i), live[a].1[sa + i], "step {step}");
                            let v = view.get_in(0, i);
                            view.set_in(1, i, v);
                            live[b].1[sb + i] = v;
                        }
                    }
                    Err(MemmuError::PinTooLarge { pages, slots: s }) => assert!(pages > s),
                    Err(MemmuError::OutOfMemory { .. }) => refused += 1,
                    Err(e) => panic!("pin_many: {e}"),
                }
            }
            _ if !live.is_empty() => {
                // A pinned run: read it all, then write part of it.
                let k = rng.usize(..live.len());
                let (h, model) = &mut live[k];
                let per_page = page / 2;
                let start = rng.usize(..model.len() + 1);
                let end = (start + rng.usize(..per_page * (slots + 1))).min(model.len());
                match m.pin(*h, start..end) {
                    Ok(mut view) => {
                        assert_eq!(view.iter().collect::<Vec<_>>(), model[start..end], "step {step}");
                        let style = rng.u64(..);
                        for i in (0..end - start).step_by(1 + rng.usize(..5)) {
                            let v = value(&mut rng, start + i, style);
                            view.set(i, v);
                            model[start + i] = v;
                        }
                    }
                    Err(MemmuError::PinTooLarge { pages, slots: s }) => assert!(pages > s),
                    Err(MemmuError::OutOfMemory { .. }) => refused += 1,
                    Err(e) => panic!("pin: {e}"),
                }
            }
            _ => {}
        }
        assert!(m.stored_bytes() <= m.region_bytes());
    }
    // Everything left reads back, page by page through pins.
    for (h, model) in &live {
        for start in (0..model.len()).step_by(page / 2) {
            let end = (start + page / 2).min(model.len());
            match m.pin(*h, start..end) {
                Ok(mut view) => assert_eq!(view.iter().collect::<Vec<_>>(), model[start..end]),
                Err(MemmuError::OutOfMemory { .. }) => refused += 1,
                Err(e) => panic!("final pin: {e}"),
            }
        }
    }
    (refused, no_space, freed)
}

#[test]
fn agrees_with_plain_arrays() {
    let mut refusals = 0;
    for (page, codec, ram) in [
        (256, "delta16", 12 << 10),
        (64, "delta16", 6 << 10),
        (1024, "wkdm", 24 << 10),
        (256, "lz4", 10 << 10),
    ] {
        let config = MemmuConfig {
            ram,
            page,
            working_pages: 6,
            virtual_bytes: 3 * ram,
            codec: codec.parse().unwrap(),
        };
        let (refused, _, freed) = run(config, 60_000, page as u64 * 31 + 7);
        assert!(freed > 100, "{codec}/{page}: frees were exercised");
        refusals += refused;
    }
    assert!(
        refusals > 0,
        "some configuration ran out of memory, so refusals were checked"
    );
}

#[test]
fn a_refused_eviction_changes_nothing() {
    // Noise does not compress: with room for two stored pages, the third
    // eviction must fail, and every value must stay readable after.
    let mut m = Memmu::new(MemmuConfig {
        ram: 2 * 256 + 2 * 256 + 64 * 4 + 100,
        page: 256,
        working_pages: 2,
        virtual_bytes: 64 * 256,
        codec: "delta16".parse().unwrap(),
    })
    .unwrap();
    let h = m.alloc::<u16>(5 * 128).unwrap();
    let mut rng = Rng::with_seed(3);
    let model: Vec<u16> = (0..5 * 128).map(|_| rng.u64(..) as u16 | 1).collect();
    let mut written = 0;
    for (i, &v) in model.iter().enumerate() {
        match m.set(h, i, v) {
            Ok(()) => written = i + 1,
            Err(MemmuError::OutOfMemory { needed, .. }) => {
                assert_eq!(needed, 256, "noise is stored raw");
                break;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(written, 4 * 128, "two stored and two resident pages fit, not five");
    for (i, &v) in model.iter().enumerate().take(4 * 128).skip(2 * 128) {
        assert_eq!(m.get(h, i), Ok(v), "resident pages are intact");
    }
    m.free(h).unwrap();
    assert_eq!(m.stored_bytes(), 0, "freeing gives every block back");
}

#[test]
fn bad_configurations_and_uses_give_one_line() {
    let ok = MemmuConfig {
        ram: 8192,
        page: 256,
        working_pages: 4,
        virtual_bytes: 16384,
        codec: "delta16".parse().unwrap(),
    };
    for (c, needle) in [
        (
            MemmuConfig {
                page: 100,
                ..ok.clone()
            },
            "not a power of two",
        ),
        (
            MemmuConfig {
                working_pages: 0,
                ..ok.clone()
            },
            "at least one page slot",
        ),
        (
            MemmuConfig {
                ram: 1024,
                ..ok.clone()
            },
            "leave nothing for the compressed region",
        ),
        (
            MemmuConfig {
                virtual_bytes: 10,
                ..ok.clone()
            },
            "less than a page",
        ),
    ] {
        let e = Memmu::new(c).err().expect("refused").to_string();
        assert!(e.contains(needle) && !e.contains('\n'), "{e}");
    }
    // A codec is a checked value: an unknown name is refused where it is
    // parsed, before any configuration holds it.
    let e = "gzip".parse::<ccvm_codec::CodecId>().unwrap_err().to_string();
    assert!(e.contains("unknown codec") && !e.contains('\n'), "{e}");
    let mut m = Memmu::new(ok).unwrap();
    let h = m.alloc::<u32>(100).unwrap();
    assert_eq!(
        m.get(h, 100).unwrap_err().to_string(),
        "index 100 out of bounds for an array of 100 elements"
    );
    assert!(m.pin(h, 0..101).is_err());
    let big = m.alloc::<u32>(64 * 5).unwrap();
    assert!(m
        .pin(big, 0..64 * 5)
        .err()
        .expect("too large")
        .to_string()
        .contains("cannot pin 5 pages"));
    m.free(h).unwrap();
    assert!(m.get(h, 0).unwrap_err().to_string().contains("handle used after free"));
    let again = m.alloc::<u32>(100).unwrap();
    assert!(
        m.get(h, 0).is_err(),
        "a stale handle stays stale when its number is reused"
    );
    assert_eq!(m.get(again, 0), Ok(0));
    assert!(m
        .alloc::<u8>(1 << 20)
        .unwrap_err()
        .to_string()
        .contains("no room for an array"));
}
