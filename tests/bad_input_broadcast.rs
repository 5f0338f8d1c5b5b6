//! Bad input for broadcast, against both implementations
//! (`keybus::baseline::broadcast` and `keybus::broadcast`): every case must give a
//! clear error, a documented panic, or degrade without UB, deadlock or unbounded
//! memory. The bodies are generic functions in
//! `keybus_test_support::bad_input::broadcast`. Nothing asserts on time.

use keybus_test_support::bad_input::broadcast as suite;
use keybus_test_support::broadcast_api::{Baseline, Lockfree};

keybus_test_support::tests_for! {
    suite for baseline = Baseline, lockfree = Lockfree => {
        #[should_panic(expected = "capacity must be at least 1")]
        capacity_zero_is_a_documented_panic,
        #[should_panic]
        capacity_usize_max_panics,
        #[should_panic(expected = "limit must be at least 1")]
        limit_zero_try_read,
        #[should_panic(expected = "limit must be at least 1")]
        limit_zero_read,
        #[should_panic(expected = "limit must be at least 1")]
        limit_zero_read_timeout,
        #[should_panic(expected = "limit must be at least 1")]
        limit_zero_read_async,
        #[should_panic(expected = "limit must be at least 1")]
        limit_zero_on_an_empty_closed_buffer_still_panics,
        limit_usize_max_reads_what_is_there,
        far_future_cursor_is_future_in_every_form,
        cursor_from_another_buffer,
        cursor_from_the_other_implementation,
        made_up_cursors_are_foreign_in_every_form,
        reader_after_every_buffer_handle_dropped_drains_then_closed,
        reader_after_close_and_drop_of_every_handle_drains_then_closed,
        duration_max_and_zero_timeouts,
        value_clone_panicking_in_a_read_leaves_everything_usable,
        value_eq_panicking_in_append_if_changed_changes_nothing,
        zero_sized_values,
    }
}

/// A panic planted in the first thread of each threaded case above fails that
/// test instead of hanging it (`keybus_test_support::threads`).
#[test]
fn planted_panics_fail_instead_of_hanging() {
    keybus_test_support::threads::audit_in(
        &["lockfree", "baseline"],
        &[
            "duration_max_and_zero_timeouts",
            "value_eq_panicking_in_append_if_changed_changes_nothing",
        ],
        1,
    );
}
