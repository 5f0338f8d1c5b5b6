//! Bad input for conflate, against both implementations
//! (`keybus::baseline::conflate` and `keybus::conflate`): every case must give a
//! clear error, a documented panic, or degrade without UB, deadlock or unbounded
//! memory. The bodies are generic functions in
//! `keybus_test_support::bad_input::{conflate, conflate_state}`. Nothing asserts
//! on time; a wait that could hang on a bug has a deadline and fails instead.

use keybus_test_support::bad_input::conflate::{Collide, Silent};
use keybus_test_support::bad_input::Which;
use keybus_test_support::conflate_api::{Baseline, Lockfree};

/// Both modules' bodies.
mod suite {
    pub use keybus_test_support::bad_input::conflate::*;
    pub use keybus_test_support::bad_input::conflate_state::*;
}

keybus_test_support::tests_for! {
    suite for baseline = Baseline, lockfree = Lockfree => {
        receiver_after_hub_and_senders_dropped_drains_then_closed,
        receiver_built_after_hub_and_senders_dropped_is_closed,
        sender_kept_alive_by_a_clone_of_a_dropped_hub,
        receiver_after_hard_close_and_drop_of_everything,
        merge_panicking_on_every_call,
        merge_panicking_on_every_call_from_many_threads,
        constant_hash_keys_are_correct = colliding_keys_are_correct::<Collide>(),
        constant_hash_keys_under_threads = colliding_keys_under_threads::<Collide>(),
        empty_hash_keys_are_correct = colliding_keys_are_correct::<Silent>(),
        empty_hash_keys_under_threads = colliding_keys_under_threads::<Silent>(),
        duration_max_and_far_deadline_wait_and_wake,
        zero_timeouts_and_past_deadlines_never_wait,
        key_hash_panicking_mid_send = survives_panicking_trait(Which::Hash, false),
        key_eq_panicking_mid_send = survives_panicking_trait(Which::Eq, false),
        key_clone_panicking_mid_send = survives_panicking_trait(Which::Clone, false),
        key_clone_panic_loses_no_wakeup,
        value_clone_panicking_in_peek,
        value_clone_panicking_mid_send = survives_panicking_trait(Which::Clone, true),
        zero_sized_keys_and_values,
        // the state table, snapshot receivers, bounds and accounting
        max_pending_zero_panics_saying_what_to_do,
        snapshot_without_retain_latest_panics_saying_what_to_do,
        stats_read_never_blocks_a_sender_stuck_in_user_code,
        snapshot_filter_calling_back_into_its_hub_panics_and_the_hub_still_works,
        table_merge_calling_latest_or_snapshot_panics_instead_of_hanging,
    }
}

/// A panic planted in the first thread of each threaded case above fails that
/// test instead of hanging it (`keybus_test_support::threads`).
#[test]
fn planted_panics_fail_instead_of_hanging() {
    keybus_test_support::threads::audit_in(
        &["lockfree", "baseline"],
        &[
            "sender_kept_alive_by_a_clone_of_a_dropped_hub",
            "merge_panicking_on_every_call",
            "merge_panicking_on_every_call_from_many_threads",
            "constant_hash_keys_under_threads",
            "empty_hash_keys_under_threads",
            "duration_max_and_far_deadline_wait_and_wake",
            "stats_read_never_blocks_a_sender_stuck_in_user_code",
        ],
        1,
    );
}
