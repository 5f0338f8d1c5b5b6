//! Soak of both buses against both implementations: a bounded stress run,
//! epoch after epoch, of `keybus::conflate` and `keybus::baseline::conflate`
//! (per-receiver and global conservation of every send, memory bounds) and of
//! `keybus::broadcast` and `keybus::baseline::broadcast` (per-reader
//! accounting, values under the right revisions, memory bounds). The bodies are
//! in `keybus_test_support::soak::{conflate, broadcast}`; the budget
//! (`KEYBUS_SOAK_SECS`, for the four runs together) and the seed
//! (`KEYBUS_SOAK_SEED`) in `keybus_test_support::soak`. The four runs take
//! turns: they share the counting allocator's process-wide counts.
//!
//! `cargo test --release --test soak -- --nocapture` prints the totals;
//! `--test soak conflate::` runs one bus.

use keybus_test_support::counting::Counting;

/// Counts live heap bytes for the memory bounds.
#[global_allocator]
static ALLOC: Counting = Counting;

/// `conflate::{lockfree, baseline}::soak`.
mod conflate {
    use keybus_test_support::conflate_api::{Baseline, Lockfree};

    keybus_test_support::tests_for! {
        keybus_test_support::soak::conflate for lockfree = Lockfree, baseline = Baseline => {
            soak,
        }
    }

    /// A panic planted in each of the soak's first 8 threads in turn (its
    /// consumers, readers, churn or join-late thread and writers or producers:
    /// which is which depends on the epoch's shape) fails the soak instead of
    /// hanging it (`keybus_test_support::threads`).
    #[test]
    fn planted_panics_fail_instead_of_hanging() {
        keybus_test_support::threads::audit_in(
            &["conflate::lockfree", "conflate::baseline"],
            &["soak"],
            8,
        );
    }
}

/// `broadcast::{lockfree, baseline}::soak`.
mod broadcast {
    use keybus_test_support::broadcast_api::{Baseline, Lockfree};

    keybus_test_support::tests_for! {
        keybus_test_support::soak::broadcast for lockfree = Lockfree, baseline = Baseline => {
            soak,
        }
    }

    /// The same audit as `conflate::planted_panics_fail_instead_of_hanging`,
    /// for the broadcast soak.
    #[test]
    fn planted_panics_fail_instead_of_hanging() {
        keybus_test_support::threads::audit_in(
            &["broadcast::lockfree", "broadcast::baseline"],
            &["soak"],
            8,
        );
    }
}
