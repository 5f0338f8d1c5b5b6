//! The conflate conformance suite (`keybus_test_support::conformance::conflate`),
//! run for both implementations: `lockfree::*` for `keybus::conflate` and
//! `baseline::*` for `keybus::baseline::conflate`. Each test is one generic
//! function there (in the file of its topic, named in the comments below),
//! written once against the public API; this file only wraps each in a
//! `#[test]` per implementation.

use keybus_test_support::conflate_api::{Baseline, Lockfree};
use keybus_test_support::conformance::conflate as suite;

keybus_test_support::tests_for! {
    suite for lockfree = Lockfree, baseline = Baseline => {
        // api.rs
        api_handles_are_send_sync_clone_debug,
        api_receiver_is_unpin,
        api_recv_async_future_is_send,
        // coalescing.rs
        rule1_coalescing_keeps_queue_position,
        rule1_delivery_is_first_touch_order,
        rule1_coalescing_happens_at_send_not_at_receive,
        rule1_hot_key_never_starves_cold_key,
        rule2_default_merge_is_newer_wins,
        rule2_merge_gets_pending_then_incoming,
        rule2_annihilation_leaves_no_residue,
        rule2_merge_runs_only_on_a_pending_key,
        rule2_sends_counts_every_merged_send,
        rule2_race_concurrent_senders_summing_merge_conserve,
        rule3_memory_is_bounded_by_pending_keys,
        rule3_key_filter_applies_at_send,
        rule3_key_takes_exactly_one_key,
        rule3_key_and_key_filter_later_call_wins,
        rule3_receiver_merge_overrides_hub_merge_for_that_receiver_only,
        // registration.rs
        rule4_receiver_starts_empty,
        rule4_send_with_no_live_receiver_is_ok,
        // cut.rs
        rule5_try_recv_all_takes_everything_in_queue_order,
        rule5_try_recv_all_error_comes_with_nothing,
        rule5_try_recv_all_after_graceful_close_returns_all_then_closed,
        rule5_race_try_recv_all_cuts_are_contiguous,
        // precedence.rs
        rule6_try_recv_closed_beats_empty_beats_value,
        rule6_peek_returns_head_without_removing_it,
        rule6_zero_or_past_deadline_returns_ready_value,
        rule6_closed_beats_timeout,
        rule6_dropped_recv_async_future_consumes_nothing,
        rule6_try_iter_ends_at_empty_or_closed,
        // close.rs
        rule7_sender_close_is_graceful,
        rule7_dropping_every_sender_and_hub_closes_gracefully,
        rule7_dropping_send_handles_wakes_a_parked_receiver,
        rule7_receiver_close_drops_pending_and_deregisters,
        rule7_receiver_drop_is_close,
        rule7_hub_close_is_hard_and_later_receivers_are_born_closed,
        rule7_close_kinds_are_idempotent_in_any_order,
        rule7_graceful_drain_reaches_a_terminal_closed,
        rule7_iter_and_stream_end_at_closed,
        // shutdown.rs
        shutdown_close_graceful_from_the_hub_drains_then_closes,
        shutdown_close_now_drops_what_is_pending_and_the_stats_say_so,
        shutdown_deprecated_close_is_still_the_hard_close,
        shutdown_receivers_closed_or_dropped_early_count_as_dropped,
        // wake.rs
        wake_blocking_recv_woken_by_send_from_another_thread,
        wake_recv_async_on_block_on_woken_by_send_from_another_thread,
        wake_parked_receivers_woken_by_every_close_kind,
        // close_race.rs
        rule8_race_sender_close_vs_send,
        rule8_race_hub_close_vs_send,
        // user_code.rs
        rule9_key_filter_panic_changes_nothing_at_that_receiver,
        rule9_merge_panic_drops_that_receivers_slot,
        rule9_race_panicking_merge_while_other_sends_continue,
        rule9_key_clone_panic_in_a_receive_keeps_the_books,
        // state_table.rs
        rule11_table_keeps_the_hub_merge_of_every_send_in_first_touch_order,
        rule11_default_merge_is_newer_wins_in_the_table,
        rule11_without_retain_latest_the_hub_keeps_nothing,
        rule11_snapshot_is_one_instant_a_prefix_of_one_senders_keys,
        rule12_snapshot_receiver_is_born_with_the_table_pending,
        rule12_snapshot_entries_annihilate_and_drop_like_any_pending_value,
        rule12_snapshot_receiver_of_a_closed_hub_is_born_closed,
        rule12_snapshot_registration_is_one_instant_against_concurrent_sends,
        // accounting.rs
        rule13_every_field_counts_what_it_names,
        rule13_hard_close_and_panicking_merge_count_as_dropped,
        rule13_conservation_holds_after_senders_of_several_threads_join,
        // bounds.rs
        rule14_max_pending_refuses_new_keys_only_and_renumbers_nothing,
        rule14_max_pending_holds_under_concurrent_sends,
        rule14_bound_holds_after_a_cut_races_an_annihilating_merge,
        rule14_bound_holds_after_a_cut_races_a_panicking_merge,
        rule14_snapshot_bound_holds_after_a_cut_races_an_annihilating_merge,
        rule14_snapshot_bound_holds_after_a_cut_races_a_panicking_merge,
        // removal.rs
        rule15_a_tombstone_removes_its_key_from_the_table,
        rule15_a_receiver_that_saw_the_life_gets_the_removal_once,
        rule15_a_receiver_that_never_saw_the_life_gets_nothing,
        rule15_a_value_after_a_removal_starts_a_new_life,
        rule15_no_merge_folds_across_a_removal,
        rule15_a_merge_that_makes_a_tombstone_removes_the_key,
        rule15_a_bounded_receiver_refuses_a_removal_it_has_no_room_for,
        rule15_without_tombstones_every_value_is_a_value,
        rule15_race_every_consumer_view_converges_to_the_table,
        // observe.rs
        observe_watch_on_another_thread_sees_backlog_grow_and_shrink,
        observe_race_watch_reads_while_sends_and_receives_run,
        observe_hub_lists_exactly_the_live_receivers_with_their_backlog,
        observe_watch_outlives_its_receiver,
        observe_watch_and_listing_agree_with_the_receiver_under_tombstones,
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
            "rule2_race_concurrent_senders_summing_merge_conserve",
            "rule5_race_try_recv_all_cuts_are_contiguous",
            "rule7_dropping_send_handles_wakes_a_parked_receiver",
            "rule7_iter_and_stream_end_at_closed",
            "wake_blocking_recv_woken_by_send_from_another_thread",
            "wake_recv_async_on_block_on_woken_by_send_from_another_thread",
            "wake_parked_receivers_woken_by_every_close_kind",
            "rule8_race_sender_close_vs_send",
            "rule8_race_hub_close_vs_send",
            "rule9_key_filter_panic_changes_nothing_at_that_receiver",
            "rule9_merge_panic_drops_that_receivers_slot",
            "rule9_race_panicking_merge_while_other_sends_continue",
            "rule11_snapshot_is_one_instant_a_prefix_of_one_senders_keys",
            "rule12_snapshot_registration_is_one_instant_against_concurrent_sends",
            "rule13_conservation_holds_after_senders_of_several_threads_join",
            "rule14_max_pending_holds_under_concurrent_sends",
            "rule14_bound_holds_after_a_cut_races_an_annihilating_merge",
            "rule14_snapshot_bound_holds_after_a_cut_races_a_panicking_merge",
            "observe_watch_on_another_thread_sees_backlog_grow_and_shrink",
            "observe_race_watch_reads_while_sends_and_receives_run",
            "rule15_race_every_consumer_view_converges_to_the_table",
        ],
        1,
    );
}
