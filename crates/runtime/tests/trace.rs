//! A traced run records every fault as a reference and every compressed
//! page's content, and the trace reads back consistently.

use std::collections::HashMap;

use ccvm_runtime::{Region, RuntimeConfig, TraceConfig};
use ccvm_trace::{Event, TraceReader};

#[test]
fn a_traced_workload_reads_back_with_every_fault_and_image() {
    let path = std::env::temp_dir().join(format!("ccvm-trace-test-{}.trace", std::process::id()));
    let w = ccvm_workload::by_name("sortmerge").unwrap();
    let size = 2 << 20;
    let window = 16u64;
    let ram = window * 4096 + 4 * size as u64;
    let budget = RuntimeConfig {
        ram_bytes: ram,
        ..RuntimeConfig::default()
    }
    .policy_budget();
    let config = RuntimeConfig {
        ram_bytes: ram,
        uncompressed_share: (window * 4096 + 2048) as f64 / budget.ram_bytes as f64,
        // The window is a fixed split's uncompressed share.
        policy: "fixed".parse().unwrap(),
        trace: Some(TraceConfig {
            path: path.clone(),
            workload: w.name.into(),
            seed: 5,
            run_time_ns: 1234,
        }),
        ..RuntimeConfig::default()
    };
    let mut region = Region::new(size, config).unwrap();
    let mut plain = vec![0u8; size];
    assert_eq!((w.run)(region.as_mut_slice(), 5), (w.run)(&mut plain, 5));
    let stats = region.finish().unwrap();
    assert_eq!(stats.faults_disk, 0, "the cache holds everything while tracing");

    let mut r = TraceReader::open(&path).unwrap();
    assert_eq!(r.header().workload, "sortmerge");
    assert_eq!(r.header().window_pages, window);
    let (mut refs, mut images) = (0u64, 0u64);
    let mut contents: HashMap<u64, Box<[u8]>> = HashMap::new();
    while let Some(e) = r.next_event().unwrap() {
        match e {
            Event::Reference { page, .. } => {
                assert!(page < (size / 4096) as u64);
                refs += 1;
            }
            Event::NewImage { id, bytes } => {
                contents.insert(id, bytes);
            }
            Event::Image { id, .. } => {
                assert!(contents.contains_key(&id));
                images += 1;
            }
            Event::Discard { .. } => panic!("sortmerge drops no page"),
        }
    }
    let footer = r.footer().unwrap();
    assert_eq!(footer.run_time_ns, 1234);
    assert_eq!(refs, stats.faults_zero + stats.faults_cache);
    assert_eq!(images, stats.pages_compressed + stats.pages_pending as u64);
    // Deduplication: sortmerge's pages change between compressions, but
    // not every time.
    assert!((contents.len() as u64) <= images);
    std::fs::remove_file(path).unwrap();
}
