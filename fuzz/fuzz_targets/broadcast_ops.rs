//! Decodes the input into a broadcast op sequence (the generator the differential
//! test uses) and runs it on two implementations in lockstep, panicking on the
//! first difference. See `test-support/src/broadcast_ops.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

use keybus_test_support::harness;

use keybus_test_support::broadcast_ops;

use broadcast_ops::{Baseline, Lockfree, Scenario};

fuzz_target!(|data: &[u8]| {
    // libFuzzer's hook aborts on any panic; let the expected ones (a read with
    // `limit == 0`) unwind to the runner's `catch_unwind`.
    harness::quiet_expected_panics();
    let scenario = Scenario::generate(&mut harness::Bytes::new(data), harness::FUZZ_MAX_OPS);
    if let Err(report) = broadcast_ops::check::<Lockfree, Baseline>(&scenario) {
        panic!("{report}\n{scenario}");
    }
});
