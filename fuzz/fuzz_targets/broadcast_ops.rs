//! `keybus::broadcast` against `keybus::baseline::broadcast` in lockstep (see
//! `keybus_fuzz::lockstep` and `test-support/src/broadcast_ops.rs`).
#![no_main]

use keybus_test_support::broadcast_ops::{check, Baseline, Lockfree, Scenario};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    keybus_fuzz::lockstep(data, Scenario::generate, check::<Lockfree, Baseline>);
});
