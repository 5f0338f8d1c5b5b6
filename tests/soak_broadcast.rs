//! Soak of broadcast, against both implementations (`keybus::baseline::broadcast`
//! and `keybus::broadcast`): a bounded stress run, epoch after epoch, checking
//! per-reader accounting, values under the right revisions and memory bounds.
//! The bodies are in `keybus_test_support::soak::broadcast`; the budget
//! (`KEYBUS_SOAK_SECS`, shared with `soak_conflate`) and the seed
//! (`KEYBUS_SOAK_SEED`) in `keybus_test_support::soak`.
//!
//! `cargo test --release --test soak_broadcast -- --nocapture` prints the totals.

use keybus_test_support::broadcast_api::{Baseline, Lockfree};
use keybus_test_support::counting::Counting;
use keybus_test_support::soak::broadcast as suite;

/// Counts live heap bytes for the memory bounds.
#[global_allocator]
static ALLOC: Counting = Counting;

keybus_test_support::tests_for! {
    suite for baseline = Baseline, lockfree = Lockfree => {
        soak,
    }
}

/// A panic planted in each of the soak's first 8 threads in turn (its
/// consumers, readers, churn or join-late thread and writers or producers:
/// which is which depends on the epoch's shape) fails the soak instead of
/// hanging it (`keybus_test_support::threads`).
#[test]
fn planted_panics_fail_instead_of_hanging() {
    keybus_test_support::threads::audit_in(&["lockfree", "baseline"], &["soak"], 8);
}
