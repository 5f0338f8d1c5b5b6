//! Decodes the input into a conflate op sequence (the generator the differential
//! test uses) and runs it on two implementations in lockstep, panicking on the
//! first difference. The ops include hubs with a state table (`retain_latest`),
//! snapshot and bounded (`max_pending`) receivers, `latest`, `snapshot` and
//! `stats`; every receiver's and the hub's stats are compared after every step,
//! and each side's receivers must keep the conservation law after every step.
//! See `test-support/src/conflate_ops.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

use keybus_test_support::harness;

use keybus_test_support::conflate_ops;

use conflate_ops::{Baseline, Lockfree, Scenario};

fuzz_target!(|data: &[u8]| {
    // libFuzzer's hook aborts on any panic; let the expected ones (user merges and
    // key filters) unwind to the runner's `catch_unwind`.
    harness::quiet_expected_panics();
    let scenario = Scenario::generate(&mut harness::Bytes::new(data), harness::FUZZ_MAX_OPS);
    if let Err(report) = conflate_ops::check::<Lockfree, Baseline>(&scenario) {
        panic!("{report}\n{scenario}");
    }
});
