//! Emulated device delays: the runtime's slower disk (`--disk-latency`),
//! which the `.ccz` loader uses too.

use std::time::{Duration, Instant};

/// Waits `d`: sleeping for long waits, spinning for short ones, where a
/// sleep would overshoot by its own wake-up latency.
pub fn wait(d: Duration) {
    if d >= Duration::from_micros(200) {
        std::thread::sleep(d);
    } else if !d.is_zero() {
        let until = Instant::now() + d;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }
}
