//! The floor region (`ccvm_runtime::floor`): every touch served with the
//! data's bytes by trap and moves alone. In a process of its own, since it
//! installs a SIGBUS handler for the whole process.

use ccvm_runtime::floor::FloorRegion;
use ccvm_runtime::PAGE_SIZE;

#[test]
fn a_floor_region_serves_every_touch_with_the_datas_bytes() {
    let data: Vec<u8> = (0..32 * PAGE_SIZE).map(|i| (i / PAGE_SIZE * 3 + i % 7) as u8).collect();
    let region = match FloorRegion::new(&data, 4) {
        Ok(r) => r,
        Err(e) => return eprintln!("skipped: {e}"),
    };
    for round in 0..3 {
        for page in 0..32 {
            let at = page * PAGE_SIZE + round;
            // SAFETY: within the region, touched by this thread alone.
            assert_eq!(unsafe { region.as_ptr().add(at).read_volatile() }, data[at]);
        }
    }
    // A ring of 4 over 32 pages touched in order: every touch faults,
    // the 4 resident at the start included, since the first faults
    // evicted them.
    assert_eq!(region.finish().unwrap(), 3 * 32);
    let again = FloorRegion::new(&data, 32).expect("a finished region frees its place");
    let other = FloorRegion::new(&data, 32);
    assert!(other.is_err(), "one floor region at a time");
    // SAFETY: as above.
    assert_eq!(unsafe { again.as_ptr().read_volatile() }, data[0]);
    assert_eq!(again.finish().unwrap(), 0, "all pages resident: no fault");
}
