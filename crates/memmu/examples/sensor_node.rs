//! MEMMU on a sensor node's work (paper 003 §5.5): how much more memory it
//! makes usable, and what each access costs.
//!
//! `cargo run --release -p ccvm-memmu --example sensor_node`
//!
//! 1. Usable memory: buffers of 1024 generated 10-bit samples are filled
//!    until the memory refuses, for a 10 KiB node (the TelosB's RAM) and
//!    other sizes, page sizes and codecs; the samples held against the
//!    RAM's bytes.
//! 2. Cost: sampling, filtering, aggregation and covariance over 4 sensors'
//!    samples on plain arrays, through checked accesses and through pinned
//!    views, in a memory with two thirds of the data's bytes, and in one
//!    with a working slot for every page (the handles' cost alone);
//!    medians of 5 runs.

use std::time::Instant;

use ccvm_memmu::workload::{capacity, checked, pinned, plain, sensor_samples};
use ccvm_memmu::{Memmu, MemmuConfig};

fn median(mut runs: Vec<f64>) -> f64 {
    runs.sort_by(f64::total_cmp);
    runs[runs.len() / 2]
}

fn main() {
    usable_memory();
    access_cost();
}

/// Part 1: samples held against the RAM's bytes.
fn usable_memory() {
    let source = sensor_samples(1, 1 << 16).remove(0);
    println!("usable memory: samples held in buffers of 1024 (2 KiB each)");
    println!(
        "{:>8} {:>6} {:>6} {:>8} {:>10} {:>8}",
        "RAM", "page", "slots", "codec", "held KiB", "gain"
    );
    for (ram, page, slots, codec) in [
        (10 << 10, 256, 4, "delta16"),
        (10 << 10, 128, 8, "delta16"),
        (10 << 10, 512, 4, "delta16"),
        (10 << 10, 256, 4, "wkdm"),
        (10 << 10, 256, 4, "lz4"),
        (64 << 10, 256, 8, "delta16"),
    ] {
        let mut m = Memmu::new(MemmuConfig {
            ram,
            page,
            working_pages: slots,
            virtual_bytes: 4 * ram,
            codec: codec.parse().unwrap(),
        })
        .expect("a valid configuration");
        let held = capacity(&mut m, &source, 1024) * 2;
        println!(
            "{:>8} {:>6} {:>6} {:>8} {:>10.1} {:>7.0}%",
            ram,
            page,
            slots,
            codec,
            held as f64 / 1024.0,
            (held as f64 / ram as f64 - 1.0) * 100.0
        );
    }
}

/// Part 2: what each access costs, against plain arrays.
fn access_cost() {
    let (sensors, n) = (4, 16_384);
    let data = sensor_samples(sensors, n);
    let bytes = sensors * n * 2 * 2;
    let ram = bytes * 2 / 3;
    let want = plain(&data);
    println!(
        "\ncost: {sensors} sensors x {n} samples, {bytes} bytes of arrays in {ram} bytes of RAM (page 256, 16 slots)"
    );
    // With paging (two thirds of the data's bytes of RAM, 16 slots), and
    // without (a slot for every page): the cost of compression, and the
    // cost of the handles alone.
    let slots_all = bytes / 256 + 16;
    let configs = [
        (
            "paging",
            MemmuConfig {
                ram,
                page: 256,
                working_pages: 16,
                virtual_bytes: 2 * bytes,
                codec: "delta16".parse().unwrap(),
            },
        ),
        (
            "no paging",
            MemmuConfig {
                ram: slots_all * 256 + 2 * bytes / 256 * 4 + 4096,
                page: 256,
                working_pages: slots_all,
                virtual_bytes: 2 * bytes,
                codec: "delta16".parse().unwrap(),
            },
        ),
    ];
    let mut times = vec![Vec::new(); 5];
    for _ in 0..5 {
        let t = Instant::now();
        assert_eq!(std::hint::black_box(plain(&data)), want);
        times[0].push(t.elapsed().as_secs_f64());
        for (c, (_, config)) in configs.iter().enumerate() {
            for (k, way) in [(0, checked as fn(&mut Memmu, &[Vec<u16>]) -> _), (1, pinned)] {
                let mut m = Memmu::new(config.clone()).expect("a valid configuration");
                let t = Instant::now();
                assert_eq!(way(&mut m, &data).expect("fits"), want);
                times[1 + 2 * c + k].push(t.elapsed().as_secs_f64());
            }
        }
    }
    let base = median(times[0].clone());
    let names = [
        "plain arrays",
        "checked, paging",
        "pinned, paging",
        "checked, no paging",
        "pinned, no paging",
    ];
    for (name, t) in names.iter().zip(times) {
        let m = median(t);
        println!(
            "{name:>18}: {:>8.2} ms  {:>6.1} ns/sample  {:>6.2}x plain",
            m * 1e3,
            m * 1e9 / (sensors * n) as f64,
            m / base
        );
    }
}
