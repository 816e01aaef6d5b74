//! The change feed's inputs: a change log file read back from the cache folder, a
//! `changes_since` cursor and `since`. None may panic; a log read back names no hidden path.
#![no_main]

use capvault::engine::changes::{ChangeLog, parse_log};
use capvault::notes::changes::parse_since;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(read) = parse_log(data) {
        let mut last = read.floor;
        for e in &read.entries {
            assert!(e.seq > last, "numbers increase");
            last = e.seq;
            assert!(!e.path.as_str().split('/').any(|c| c.starts_with('.')));
        }
    }
    if let Ok(s) = std::str::from_utf8(data) {
        let log = ChangeLog::in_memory();
        let _ = log.resolve(s);
        let _ = parse_since(s);
    }
});
