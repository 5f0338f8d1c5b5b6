//! Soak of conflate, against both implementations (`keybus::baseline::conflate`
//! and `keybus::conflate`): a bounded stress run, epoch after epoch, checking
//! per-receiver and global conservation of every send and memory bounds. The
//! bodies are in `keybus_test_support::soak::conflate`; the budget
//! (`KEYBUS_SOAK_SECS`, shared with `soak_broadcast`) and the seed
//! (`KEYBUS_SOAK_SEED`) in `keybus_test_support::soak`.
//!
//! `cargo test --release --test soak_conflate -- --nocapture` prints the totals.

use keybus_test_support::conflate_api::{Baseline, Lockfree};
use keybus_test_support::counting::Counting;
use keybus_test_support::soak::conflate as suite;

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
