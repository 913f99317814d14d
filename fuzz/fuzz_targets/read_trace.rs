//! Reads arbitrary bytes as a trace file: every outcome must be events or a
//! one-line error, never a panic or a runaway allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let source = Box::new(std::io::Cursor::new(data.to_vec()));
    let Ok(mut r) = ccvm_trace::TraceReader::from_reader(source, "fuzz".as_ref()) else {
        return;
    };
    for _ in 0..100_000 {
        match r.next_event() {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => {
                assert!(!e.to_string().contains('\n'));
                break;
            }
        }
    }
});
