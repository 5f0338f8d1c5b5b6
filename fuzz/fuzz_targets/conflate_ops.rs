//! `keybus::conflate` against `keybus::baseline::conflate` in lockstep (see
//! `keybus_fuzz::lockstep` and `test-support/src/conflate_ops.rs`). The ops include
//! hubs with a state table (`retain_latest`) and with tombstones (removal), snapshot and bounded
//! (`max_pending`) receivers, `latest`, `snapshot` and `stats`; every receiver's
//! and the hub's stats are compared after every step, and each side's receivers
//! must keep the conservation law after every step.
#![no_main]

use keybus_test_support::conflate_ops::{check, Baseline, Lockfree, Scenario};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    keybus_fuzz::lockstep(data, Scenario::generate, check::<Lockfree, Baseline>);
});
