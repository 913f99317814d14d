//! Every built-in workload gives the same checksum paged through a region
//! four times its RAM budget (objheap: twice) as in plain memory, under
//! the configurations below (the slowest workloads under some of them).

use ccvm_runtime::{Region, RuntimeConfig};
use ccvm_workload::WORKLOADS;

// One test per workload, so that the harness runs them side by side: each
// waits on its swap file's reads most of the time.
#[test]
fn hashindex_at_four_times_its_budget_matches_plain_memory() {
    matches_plain_memory("hashindex");
}

// The graphs, the slowest at four times, leave out `none` (swap-file
// paging alone, which the others cover).
#[test]
fn graph_at_four_times_its_budget_matches_plain_memory() {
    matches_plain_memory_in("graph", &CONFIGS[..3], 4);
}

#[test]
fn graph_mt_at_four_times_its_budget_matches_plain_memory() {
    matches_plain_memory_in("graph-mt", &CONFIGS[..3], 4);
}

#[test]
fn sortmerge_at_four_times_its_budget_matches_plain_memory() {
    matches_plain_memory("sortmerge");
}

#[test]
fn matmul_at_four_times_its_budget_matches_plain_memory() {
    matches_plain_memory("matmul");
}

// objheap faults the most: at four times its budget each configuration
// took 25 to 30 s of the suite (100,000 swap-file faults), and at twice
// about 11 s. It runs at twice its budget, with a cache compressed in the
// background under the fixed split and the adaptive policy (the other
// configurations' paths are the other workloads').
#[test]
fn objheap_at_twice_its_budget_matches_plain_memory() {
    matches_plain_memory_in("objheap", &CONFIGS[1..3], 2);
}

#[test]
fn every_workload_is_tested() {
    let tested = ["hashindex", "graph", "graph-mt", "sortmerge", "matmul", "objheap"];
    let all: Vec<_> = WORKLOADS.iter().map(|w| w.name).collect();
    assert_eq!(all, tested, "a workload was added: give it a test above");
}

/// Policy, codec, uncompressed share and background compression.
const CONFIGS: [(&str, &str, f64, bool); 4] = [
    ("fixed", "wkdm", 0.5, false),
    ("fixed", "hybrid", 0.5, true),
    ("adaptive", "hybrid", 0.5, true),
    ("none", "wkdm", 1.0, false),
];

fn matches_plain_memory(name: &str) {
    matches_plain_memory_in(name, &CONFIGS, 4);
}

/// `name` in a region `times` its budget, under each of `configs`.
fn matches_plain_memory_in(name: &str, configs: &[(&str, &str, f64, bool)], times: u64) {
    // The smallest size the workloads take keeps the suite quick: at four
    // times the budget most references fault.
    let size = ccvm_workload::MIN_BYTES;
    let ram = size as u64 / times;
    {
        let w = ccvm_workload::by_name(name).unwrap();
        let mut plain = vec![0u8; size];
        let want = (w.run)(&mut plain, 11);
        drop(plain);
        for &(policy, codec, share, background) in configs {
            let config = RuntimeConfig {
                ram_bytes: ram,
                uncompressed_share: share,
                policy: policy.parse().unwrap(),
                codec: codec.parse().unwrap(),
                background_compression: background,
                ..RuntimeConfig::default()
            };
            let mut region = Region::new(size, config).unwrap();
            let t = std::time::Instant::now();
            let got = (w.run)(region.as_mut_slice(), 11);
            let stats = region.finish().unwrap();
            eprintln!(
                "{} {policy}: {:?}, cache faults {}, disk faults {}",
                w.name,
                t.elapsed(),
                stats.faults_cache,
                stats.faults_disk
            );
            assert_eq!(
                got, want,
                "{} with {policy}: checksum differs from plain memory",
                w.name
            );
            assert!(
                stats.faults_cache + stats.faults_disk > 0,
                "{}: no paging at all",
                w.name
            );
        }
    }
}
