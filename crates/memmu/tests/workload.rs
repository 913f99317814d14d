//! The sensor-node work gives the same results on plain arrays, through
//! checked accesses and through pinned views, on generated 10-bit sensor
//! samples, in a memory smaller than the data; and the memory holds more
//! samples than its RAM would plain.

use ccvm_memmu::workload::{capacity, checked, pinned, plain, sensor_samples};
use ccvm_memmu::{Memmu, MemmuConfig};

fn memory(ram: usize) -> Memmu {
    Memmu::new(MemmuConfig {
        ram,
        page: 256,
        working_pages: 8,
        virtual_bytes: 4 * ram,
        codec: "delta16".parse().unwrap(),
    })
    .unwrap()
}

#[test]
fn three_ways_one_result() {
    let data = sensor_samples(3, 3000);
    let want = plain(&data);
    // 3 sensors × 2 arrays × 6000 bytes = 36 KB of arrays in 24 KiB of RAM.
    let mut m = memory(24 << 10);
    assert_eq!(checked(&mut m, &data).unwrap(), want);
    assert_eq!(m.stored_bytes(), 0, "everything freed");
    assert_eq!(pinned(&mut m, &data).unwrap(), want);
    let st = m.stats();
    assert!(st.compressions > 100 && st.decompressions > 100, "{st:?}");
}

#[test]
fn the_memory_holds_more_samples_than_its_ram() {
    let source: Vec<u16> = sensor_samples(1, 20_000).remove(0);
    let ram = 10 << 10;
    let held = capacity(&mut memory(ram), &source, 1024);
    assert!(
        held * 2 > ram * 5 / 4,
        "{held} samples ({} bytes) in {ram} bytes of RAM",
        held * 2
    );
}
