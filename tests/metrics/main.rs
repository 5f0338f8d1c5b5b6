//! `keybus::metrics`: the `metrics` facade recorded into a conflate hub.
//!
//! Every test installs its recorder with `metrics::with_local_recorder`, so no
//! global state is shared between tests. Checked: how each kind folds (counters
//! sum, absolute counters, gauges in order, histograms into a summary), that
//! labels make distinct keys, that filters select at send, histogram quantiles
//! within the sketch's error, the `max_keys` bound, that a coalescing
//! update allocates nothing, and that concurrent recording from several threads
//! arrives exactly, against a mutex-map reference, at a blocking consumer and at a
//! batching one.
//!
//! Run with `cargo test --features metrics --test metrics`. One module per job:
//! `fold` (what each kind of update folds into), `max_keys` (the bound on
//! metric keys), `receivers` (labels, filters, closing, descriptions, snapshot
//! receivers), `alloc` (updates that allocate nothing) and `concurrent` (many
//! threads against a mutex-map reference).

use keybus_test_support::counting::{self, Counting};

#[global_allocator]
static ALLOC: Counting = Counting;

use keybus::metrics::{
    CounterUpdate, GaugeUpdate, KeybusRecorder, Kind, Summary, Totals, Update,
    QUANTILE_RELATIVE_ERROR,
};
use keybus::{RecvTimeoutError, TryRecvError};
use keybus_test_support::threads::{self, Crew};
use metrics::{counter, gauge, histogram, with_local_recorder, Key, Label};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod alloc;
mod concurrent;
mod fold;
mod max_keys;
mod receivers;

/// Everything pending at `rx`, as (name, labels, update, sends), in queue order.
fn drain(rx: &mut keybus::conflate::Receiver<Key, Update>) -> Vec<(String, Update, u64)> {
    match rx.try_recv_all() {
        Ok(batch) => batch
            .into_iter()
            .map(|e| (e.key.name().to_owned(), e.value, e.sends))
            .collect(),
        Err(TryRecvError::Empty) => Vec::new(),
        Err(e) => panic!("receiver closed: {e}"),
    }
}

/// The one event of `batch`, as (sends, update).
fn only_event(batch: &[keybus::Event<Key, Update>]) -> (u64, Update) {
    assert_eq!(batch.len(), 1, "one key, one event");
    (batch[0].sends, batch[0].value.clone())
}

/// A thread of the threaded test of `concurrent` panicking (planted) fails it.
#[test]
fn planted_panics_fail_instead_of_hanging() {
    threads::audit(&["concurrent::concurrent_recording_matches_a_mutex_map_reference"]);
}
