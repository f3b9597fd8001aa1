//! Recovery over arbitrary bytes: the input becomes the only segment file of a log, which is
//! opened, read, reopened and appended to. Open and read must succeed or return a typed error;
//! the harness panics on anything else. An odd first byte asks the harness to fix the header and
//! record checksums first, so the fuzzer also explores the record-level rules. Run from `wal/`:
//! `RUSTC_BOOTSTRAP=1 cargo fuzz run recover -- -max_total_time=30`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    wal::fuzzing::recover_from_fuzz_input(data);
});
