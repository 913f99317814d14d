//! Replay speed on a trace: the LRU stack pass and policy simulations, in
//! references per second (median of 5 runs).
//!
//! `cargo run --release -p ccvm-sim --example replay_speed -- TRACE`

use std::time::Instant;

use ccvm_policy::{Budget, Costs, Params};
use ccvm_sim::{lru_faults, simulate, CodecCosts, SimConfig, Trace};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let path = std::env::args().nth(1).expect("usage: replay_speed TRACE");
    let trace = Trace::load(path.as_ref()).unwrap();
    let costs = CodecCosts::measure(path.as_ref(), "wkdm".parse().unwrap(), 1).unwrap();
    let n = trace.refs.len() as f64;
    let footprint = trace.pages();
    let rate = |f: &mut dyn FnMut()| {
        median(
            (0..5)
                .map(|_| {
                    let t = Instant::now();
                    f();
                    n / t.elapsed().as_secs_f64() / 1e6
                })
                .collect(),
        )
    };
    let stack = rate(&mut || {
        std::hint::black_box(lru_faults(&trace.refs, trace.pages(), footprint + 1));
    });
    println!(
        "{} references; stack-distance pass: {stack:.1} M refs/s",
        trace.refs.len()
    );
    for policy in ["none", "fixed", "adaptive", "zswap", "douglis"] {
        let r = rate(&mut || {
            let budget = Budget {
                ram_bytes: (footprint as u64 / 2) * 4096,
                page_size: 4096,
            };
            let params = Params {
                uncompressed_share: 0.5,
                costs: Costs {
                    disk_ns: 5e6,
                    codec_ns: 5e3,
                    compress_share: 0.5,
                },
            };
            let mut p = ccvm_policy::by_name(policy, budget, params).unwrap();
            std::hint::black_box(simulate(&trace, &costs, p.as_mut(), &SimConfig::default()));
        });
        println!("{policy:<9} simulation at half the footprint: {r:.1} M refs/s");
    }
}
