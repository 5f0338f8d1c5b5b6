//! The broadcast contract (docs/design.md, "The contract", broadcast rules 1–8,
//! and the API docs), run against both implementations: `keybus::baseline::broadcast`
//! (one mutex) and `keybus::broadcast` (lock-free readers). The bodies are
//! generic functions in `keybus_test_support::conformance::broadcast`; tests named
//! `ruleN_*` pin broadcast rule N. No test asserts on timing.

use keybus_test_support::broadcast_api::{Baseline, Lockfree};
use keybus_test_support::conformance::broadcast as suite;

keybus_test_support::tests_for! {
    suite for baseline = Baseline, lockfree = Lockfree => {
        rule1_revisions_start_at_one_and_rise_by_one,
        rule1_boundary_retained_101_to_132,
        rule1_future_cursor,
        rule1_empty_buffer_bounds,
        rule1_reads_are_oldest_first_and_capped_by_limit,
        rule1_reader_gap_moves_cursor_to_oldest_minus_one,
        rule2_writer_never_waits_for_parked_or_idle_readers,
        rule2_race_no_torn_values_and_gaps_are_explicit,
        rule3_each_reader_gets_its_own_copy,
        rule4_snapshot_then_subscribe_loses_nothing,
        rule4_snapshot_evicted_before_subscribe_is_a_gap,
        rule4_reader_starts_at_tail_and_sees_only_new_values,
        rule5_concurrent_appenders_get_unique_gap_free_revisions,
        rule6_close_is_idempotent_and_append_returns_the_value,
        rule6_readers_drain_then_closed,
        rule6_close_wakes_blocked_readers,
        rule7_generation_identifies_the_buffer_instance,
        rule7_foreign_cursor_is_refused_by_every_use,
        rule7_foreign_is_checked_before_future_gap_and_closed,
        rule7_own_cursor_round_trips_and_resumes,
        reader_seek_moves_to_a_checked_cursor,
        reader_seek_to_tail_and_to_oldest,
        reader_stream_yields_entries_and_gaps_then_ends_at_closed,
        reader_stream_foreign_and_future_end_it_until_a_seek,
        reader_stream_is_woken_by_appends_and_close_from_another_thread,
        append_if_changed_skips_a_value_equal_to_the_latest,
        append_if_changed_compares_across_wraparound,
        #[should_panic(expected = "capacity must be at least 1")]
        capacity_zero_panics,
        #[should_panic(expected = "limit must be at least 1")]
        limit_zero_panics_in_try_read,
        #[should_panic(expected = "limit must be at least 1")]
        limit_zero_panics_in_read,
        #[should_panic(expected = "limit must be at least 1")]
        limit_zero_panics_in_read_timeout,
        #[should_panic(expected = "limit must be at least 1")]
        limit_zero_panics_in_read_async_when_called,
        read_timeout_times_out_and_a_ready_answer_wins,
        read_blocks_until_an_append_from_another_thread,
        reader_next_is_woken_by_an_append_from_another_thread,
        read_async_is_woken_by_an_append_from_another_thread,
        pending_async_reads_consume_nothing_when_dropped,
        handles_are_send_sync_and_debug,
    }
}

/// A panic planted in the first thread of each threaded test above fails that
/// test instead of hanging it (`keybus_test_support::threads`;
/// `KEYBUS_PLANT_AUDIT=all` plants into every thread of every test).
#[test]
fn planted_panics_fail_instead_of_hanging() {
    keybus_test_support::threads::audit_in(
        &["lockfree", "baseline"],
        &[
            "rule2_writer_never_waits_for_parked_or_idle_readers",
            "rule2_race_no_torn_values_and_gaps_are_explicit",
            "rule5_concurrent_appenders_get_unique_gap_free_revisions",
            "rule6_close_wakes_blocked_readers",
            "read_blocks_until_an_append_from_another_thread",
            "reader_next_is_woken_by_an_append_from_another_thread",
            "read_async_is_woken_by_an_append_from_another_thread",
            "reader_stream_is_woken_by_appends_and_close_from_another_thread",
        ],
        1,
    );
}
