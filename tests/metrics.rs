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
//! Run with `cargo test --features metrics --test metrics`.

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

#[test]
fn counters_sum() {
    let recorder = KeybusRecorder::new();
    let mut rx = recorder.receiver();
    with_local_recorder(&recorder, || {
        for i in 0..100 {
            counter!("requests").increment(i);
        }
        let c = counter!("bytes");
        c.increment(7);
        c.increment(8);
    });
    let got = drain(&mut rx);
    assert_eq!(
        got,
        vec![
            (
                "requests".into(),
                Update::Counter(CounterUpdate::increment(4950)),
                100
            ),
            (
                "bytes".into(),
                Update::Counter(CounterUpdate::increment(15)),
                2
            ),
        ]
    );
    // The next batch holds only what came after the cut: increments, not totals.
    with_local_recorder(&recorder, || counter!("requests").increment(1));
    assert_eq!(
        drain(&mut rx),
        vec![(
            "requests".into(),
            Update::Counter(CounterUpdate::increment(1)),
            1
        )]
    );
}

#[test]
fn absolute_counters_replace_increments() {
    let recorder = KeybusRecorder::new();
    let mut rx = recorder.receiver();
    let mut totals = Totals::new();
    let key = Key::from_name("uptime.ticks");
    with_local_recorder(&recorder, || {
        counter!("uptime.ticks").increment(5);
        counter!("uptime.ticks").absolute(100);
        counter!("uptime.ticks").increment(2);
    });
    let batch = rx.try_recv_all().unwrap();
    let expected = CounterUpdate {
        increment: 7,
        absolute: Some(102),
    };
    assert_eq!(only_event(&batch), (3, Update::Counter(expected)));
    totals.apply_all(batch);
    assert_eq!(totals.value(&key), Some(102.0));

    // A consumer that already had a total: the absolute value replaces it...
    assert_eq!(CounterUpdate::absolute(100).apply(40), 100);
    // ...but, per the `metrics` contract for `absolute` ("at least"), an older,
    // smaller value never moves the counter back, in one batch or across two.
    with_local_recorder(&recorder, || {
        counter!("uptime.ticks").absolute(150);
        counter!("uptime.ticks").absolute(120);
    });
    totals.apply_all(rx.try_recv_all().unwrap());
    assert_eq!(totals.value(&key), Some(150.0));
    with_local_recorder(&recorder, || counter!("uptime.ticks").absolute(90));
    totals.apply_all(rx.try_recv_all().unwrap());
    assert_eq!(totals.value(&key), Some(150.0));
}

#[test]
fn gauges_follow_their_operations() {
    let recorder = KeybusRecorder::new();
    let mut rx = recorder.receiver();
    let mut totals = Totals::new();
    with_local_recorder(&recorder, || {
        gauge!("queue").increment(4.0); // before any set: a move
        gauge!("queue").set(10.0);
        gauge!("queue").increment(2.5);
        gauge!("queue").decrement(0.5);
        gauge!("inflight").increment(3.0);
        gauge!("inflight").decrement(1.0);
    });
    let batch = rx.try_recv_all().unwrap();
    let values: Vec<_> = batch
        .iter()
        .map(|e| (e.key.name(), e.value.clone()))
        .collect();
    assert_eq!(
        values,
        vec![
            ("queue", Update::Gauge(GaugeUpdate::Set(12.0))),
            ("inflight", Update::Gauge(GaugeUpdate::Add(2.0))),
        ]
    );
    totals.apply_all(batch);
    // Increments and decrements without a set move the consumer's value.
    with_local_recorder(&recorder, || {
        gauge!("inflight").increment(5.0);
        gauge!("queue").decrement(12.0);
    });
    totals.apply_all(rx.try_recv_all().unwrap());
    assert_eq!(totals.value(&Key::from_name("inflight")), Some(7.0));
    assert_eq!(totals.value(&Key::from_name("queue")), Some(0.0));
    // A set after moves wins over them.
    with_local_recorder(&recorder, || {
        gauge!("inflight").increment(100.0);
        gauge!("inflight").set(1.0);
    });
    totals.apply_all(rx.try_recv_all().unwrap());
    assert_eq!(totals.value(&Key::from_name("inflight")), Some(1.0));
}

#[test]
fn histograms_fold_into_a_summary() {
    let recorder = KeybusRecorder::new();
    let mut rx = recorder.receiver();
    with_local_recorder(&recorder, || {
        for v in [3.0, 1.0, 4.0, 1.0, 5.0] {
            histogram!("latency").record(v);
        }
        histogram!("latency").record_many(9.0, 2);
        histogram!("latency").record_many(100.0, 0); // no samples: no update
    });
    let (sends, update) = only_event(&rx.try_recv_all().unwrap());
    assert_eq!(sends, 6);
    let Update::Histogram(s) = update else {
        panic!("a histogram's update is a summary: {update:?}")
    };
    assert_eq!((s.count, s.sum, s.min, s.max), (7, 32.0, 1.0, 9.0));
    assert_eq!(s.mean(), 32.0 / 7.0);
    // The samples 1 1 3 4 5 9 9: the median is 4, within the sketch's error.
    let p50 = s.quantile(0.5).unwrap();
    assert!(
        (p50 - 4.0).abs() <= 4.0 * QUANTILE_RELATIVE_ERROR,
        "p50 {p50}"
    );
    assert_eq!((s.quantile(0.0), s.quantile(1.0)), (Some(1.0), Some(9.0)));
}

/// The true `q`-quantile by the sketch's rank rule: the sample of rank
/// `floor(q * (n - 1))` in increasing order.
fn exact_quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[(q * (sorted.len() - 1) as f64) as usize]
}

/// `s` against the samples it summarizes: count, sum, min and max exactly, p50,
/// p90 and p99 within the sketch's stated relative error.
fn assert_summarizes(s: &Summary, sorted: &[f64], who: &str) {
    let sum: f64 = sorted.iter().sum();
    assert_eq!(
        (s.count, s.sum, s.min, s.max),
        (
            sorted.len() as u64,
            sum,
            sorted[0],
            sorted[sorted.len() - 1]
        ),
        "{who}: exact statistics"
    );
    for q in [0.5, 0.9, 0.99] {
        let want = exact_quantile(sorted, q);
        let got = s.quantile(q).unwrap_or_else(|| panic!("{who}: no p{q}"));
        assert!(
            (got - want).abs() <= want.abs() * QUANTILE_RELATIVE_ERROR,
            "{who}: quantile {q} is {got}, the true one {want}"
        );
    }
}

/// Known samples (a skewed spread of whole numbers from 1 to 250,001, shuffled)
/// recorded through the macros reach three consumers: one that takes a cut every
/// 250 samples and folds the cuts' summaries with `Totals`, one that takes
/// everything at the end, and a snapshot receiver made halfway (the state table's
/// summary, then the rest). Each answers p50, p90 and p99 within the sketch's
/// stated error, keeps count, sum, min and max exact (whole numbers: sums are
/// exact in any order), and the three summaries are equal.
#[test]
fn histogram_quantiles_are_within_the_sketch_error() {
    let mut samples: Vec<f64> = (1..=5000u64).map(|i| (i * i / 100 + 1) as f64).collect();
    fastrand::Rng::with_seed(7).shuffle(&mut samples);
    let recorder = KeybusRecorder::builder().retain_latest().build();
    let mut cutting = recorder.receiver();
    let mut whole = recorder.receiver();
    let mut cut_totals = Totals::new();
    let mut snapshot = None;
    with_local_recorder(&recorder, || {
        for (i, v) in samples.iter().enumerate() {
            histogram!("latency").record(*v);
            if i % 250 == 249 {
                cut_totals.apply_all(cutting.try_recv_all().unwrap());
            }
            if i == samples.len() / 2 {
                snapshot = Some(recorder.snapshot_receiver());
            }
        }
    });
    let mut snapshot_totals = Totals::new();
    snapshot_totals.apply_all(snapshot.unwrap().try_recv_all().unwrap());
    let (sends, whole) = only_event(&whole.try_recv_all().unwrap());
    assert_eq!(sends, samples.len() as u64);
    let key = Key::from_name("latency");
    let summary = |u: Option<&Update>| match u {
        Some(Update::Histogram(s)) => s.clone(),
        other => panic!("not a histogram: {other:?}"),
    };
    samples.sort_by(f64::total_cmp);
    let (cut, snap, whole) = (
        summary(cut_totals.get(&key)),
        summary(snapshot_totals.get(&key)),
        summary(Some(&whole)),
    );
    assert_summarizes(&whole, &samples, "one cut at the end");
    assert_summarizes(&cut, &samples, "20 cuts folded");
    assert_summarizes(&snap, &samples, "snapshot receiver");
    assert_eq!(cut, whole);
    assert_eq!(snap, whole);
}

/// A recorder built with `max_keys(3)` admits the first three metrics (a key
/// counts once per kind) and refuses every new one after, whatever its kind:
/// refused updates reach no receiver and no state table, and are counted, through
/// the macros and through a kept handle; admitted metrics keep working.
#[test]
fn max_keys_refuses_new_metrics_and_counts_them() {
    let recorder = KeybusRecorder::builder()
        .retain_latest()
        .max_keys(3)
        .build();
    assert_eq!(recorder.max_keys(), Some(3));
    let mut rx = recorder.receiver();
    with_local_recorder(&recorder, || {
        counter!("requests", "route" => "/").increment(1);
        gauge!("queue").set(2.0);
        histogram!("latency").record(3.0);
        // Past the bound: refused, whatever the kind, however it is called.
        counter!("requests", "route" => "/login").increment(10);
        counter!("requests", "route" => "/login").increment(10);
        gauge!("requests", "route" => "/").set(1.0); // admitted key, new kind
        let kept = histogram!("other");
        kept.record(1.0);
        kept.record_many(2.0, 5);
        // Admitted metrics still work, by macro or kept handle.
        counter!("requests", "route" => "/").increment(1);
        gauge!("queue").increment(1.0);
    });
    assert_eq!(recorder.registered(), 3);
    assert_eq!(recorder.refused_registrations(), 4);
    assert_eq!(recorder.refused_updates(), 5);
    assert_eq!(
        drain(&mut rx),
        vec![
            (
                "requests".into(),
                Update::Counter(CounterUpdate::increment(2)),
                2
            ),
            ("queue".into(), Update::Gauge(GaugeUpdate::Set(3.0)), 2),
            ("latency".into(), Update::Histogram(Summary::of(3.0, 1)), 1),
        ]
    );
    assert_eq!(
        recorder.hub().snapshot().len(),
        3,
        "the state table holds 3"
    );
    // No bound: nothing refused.
    let unbounded = KeybusRecorder::new();
    with_local_recorder(&unbounded, || {
        for i in 0..10 {
            counter!("c", "i" => i.to_string()).increment(1);
        }
    });
    assert_eq!((unbounded.max_keys(), unbounded.registered()), (None, 10));
    assert_eq!(unbounded.refused_registrations(), 0);
}

/// Threads register new metrics at once, each its own keys and keys every thread
/// shares: exactly `max_keys` metrics are admitted, and every update is either
/// delivered or counted as refused (none lost silently).
#[test]
fn max_keys_is_exact_under_concurrent_registration() {
    const THREADS: usize = 4;
    const KEYS: usize = 300;
    const MAX: usize = 500;
    let recorder = KeybusRecorder::builder().max_keys(MAX).build();
    let mut rx = recorder.receiver();
    let crew = Crew::new("max_keys_concurrent");
    let start = crew.barrier(THREADS);
    crew.scope(|s| {
        for t in 0..THREADS {
            let (recorder, start) = (recorder.clone(), &start);
            crew.spawn(s, move || {
                start.wait();
                with_local_recorder(&recorder, || {
                    for i in 0..KEYS {
                        counter!("shared", "i" => i.to_string()).increment(1);
                        counter!("own", "key" => format!("{t}-{i}")).increment(1);
                    }
                });
            });
        }
    });
    let distinct = KEYS + THREADS * KEYS;
    let updates = 2 * THREADS * KEYS;
    assert_eq!(recorder.registered(), MAX);
    let delivered: u64 = drain(&mut rx).iter().map(|(_, _, sends)| sends).sum();
    assert_eq!(delivered + recorder.refused_updates(), updates as u64);
    // Each refused metric was registered once per update made to it.
    assert_eq!(recorder.refused_registrations(), recorder.refused_updates());
    assert!(recorder.refused_updates() >= (distinct - MAX) as u64);
}

#[test]
fn labels_make_distinct_keys() {
    let recorder = KeybusRecorder::new();
    let mut rx = recorder.receiver();
    let host = String::from("b");
    with_local_recorder(&recorder, || {
        counter!("hits").increment(1);
        counter!("hits", "host" => "a").increment(10);
        counter!("hits", "host" => host.clone()).increment(100);
        counter!("hits", "host" => "a", "dc" => "x").increment(1000);
        // Same labels in another order, and an owned label equal to a static one:
        // the same keys as above.
        counter!("hits", "dc" => "x", "host" => "a").increment(2000);
        counter!("hits", "host" => String::from("a")).increment(20);
    });
    let batch = rx.try_recv_all().unwrap();
    let got: Vec<(Vec<Label>, Update)> = batch
        .iter()
        .map(|e| (e.key.labels().cloned().collect(), e.value.clone()))
        .collect();
    let l = |pairs: &[(&'static str, &'static str)]| -> Vec<Label> {
        pairs.iter().map(|(k, v)| Label::new(*k, *v)).collect()
    };
    let c = |n| Update::Counter(CounterUpdate::increment(n));
    assert_eq!(
        got,
        vec![
            (l(&[]), c(1)),
            (l(&[("host", "a")]), c(30)),
            (l(&[("host", "b")]), c(100)),
            (l(&[("host", "a"), ("dc", "x")]), c(3000)),
        ]
    );
    assert_eq!(recorder.registered(), 4);
}

#[test]
fn filters_select_at_send() {
    let recorder = KeybusRecorder::new();
    let mut http = recorder
        .receiver_builder()
        .key_filter(|k: &Key| k.name().starts_with("http."))
        .build();
    let mut one = recorder
        .receiver_builder()
        .key(Key::from_parts("db.queries", &[("table", "users")]))
        .build();
    let mut all = recorder.receiver();
    with_local_recorder(&recorder, || {
        counter!("http.requests").increment(1);
        counter!("db.queries", "table" => "users").increment(2);
        counter!("db.queries", "table" => "orders").increment(3);
        gauge!("http.inflight").set(4.0);
        histogram!("gc.pause").record(5.0);
    });
    let names = |rx: &mut keybus::conflate::Receiver<Key, Update>| -> Vec<String> {
        drain(rx).into_iter().map(|(n, ..)| n).collect()
    };
    assert_eq!(names(&mut http), ["http.requests", "http.inflight"]);
    let got = one.try_recv_all().unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].value, Update::Counter(CounterUpdate::increment(2)));
    assert_eq!(names(&mut all).len(), 5);
}

#[test]
fn a_receiver_starts_empty_and_close_drains_then_ends() {
    let recorder = KeybusRecorder::new();
    with_local_recorder(&recorder, || counter!("early").increment(1)); // nobody listens
    let mut rx = recorder.receiver();
    assert!(matches!(rx.try_recv(), Err(TryRecvError::Empty)));
    with_local_recorder(&recorder, || counter!("late").increment(1));
    recorder.close();
    assert!(recorder.is_closed());
    with_local_recorder(&recorder, || counter!("after").increment(1)); // goes nowhere
    assert_eq!(rx.try_recv().unwrap().key.name(), "late");
    assert!(matches!(rx.try_recv(), Err(TryRecvError::Closed)));
}

#[test]
fn descriptions_are_kept() {
    let recorder = KeybusRecorder::new();
    with_local_recorder(&recorder, || {
        metrics::describe_counter!("requests", metrics::Unit::Count, "requests served");
        metrics::describe_histogram!("latency", metrics::Unit::Seconds, "time to serve");
        metrics::describe_gauge!("queue", "items waiting");
    });
    let d = recorder.descriptions();
    let got: Vec<_> = d
        .iter()
        .map(|d| (d.kind, d.name.as_str(), d.unit, &*d.text))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                Kind::Counter,
                "requests",
                Some(metrics::Unit::Count),
                "requests served"
            ),
            (Kind::Gauge, "queue", None, "items waiting"),
            (
                Kind::Histogram,
                "latency",
                Some(metrics::Unit::Seconds),
                "time to serve"
            ),
        ]
    );
}

/// A late consumer built as a snapshot receiver starts with the whole state:
/// totals, not the updates since it was made.
#[test]
fn a_late_snapshot_receiver_sees_the_state() {
    let recorder = KeybusRecorder::builder().retain_latest().build();
    let mut early = recorder.receiver();
    with_local_recorder(&recorder, || {
        counter!("requests").increment(3);
        counter!("requests").increment(4);
        gauge!("queue").set(5.0);
        gauge!("queue").increment(1.0);
        histogram!("latency").record(2.0);
        histogram!("latency").record(8.0);
    });
    let _ = early.try_recv_all().unwrap(); // taking it changes nothing in the table
    let mut late = recorder.snapshot_receiver();
    let snap = late.try_recv_all().unwrap();
    let got: Vec<_> = snap
        .iter()
        .map(|e| (e.key.name(), e.value.clone(), e.sends))
        .collect();
    assert_eq!(
        got,
        vec![
            ("requests", Update::Counter(CounterUpdate::increment(7)), 0),
            ("queue", Update::Gauge(GaugeUpdate::Set(6.0)), 0),
            (
                "latency",
                Update::Histogram(Summary::of(2.0, 1).then(Summary::of(8.0, 1))),
                0
            ),
        ]
    );
    // Then it follows like any receiver, and its running totals stay exact.
    let mut totals = Totals::new();
    totals.apply_all(snap);
    with_local_recorder(&recorder, || counter!("requests").increment(1));
    totals.apply_all(late.try_recv_all().unwrap());
    assert_eq!(totals.value(&Key::from_name("requests")), Some(8.0));
}

#[test]
#[should_panic(expected = "retain_latest")]
fn a_snapshot_receiver_needs_retain_latest() {
    let _ = KeybusRecorder::new().snapshot_receiver();
}

/// An update that coalesces into a pending slot allocates nothing, through the
/// macros (a handle looked up per call) and through a kept handle, for every kind,
/// with static and with owned (dynamic) labels.
#[test]
fn a_coalescing_update_allocates_nothing() {
    let recorder = KeybusRecorder::new();
    let rxs: Vec<_> = (0..2).map(|_| recorder.receiver()).collect();
    let host = String::from("host-1");
    with_local_recorder(&recorder, || {
        let owned = counter!("owned.labels", "host" => host.clone());
        let run = || {
            counter!("c").increment(1);
            counter!("c", "route" => "/").increment(1);
            gauge!("g").increment(1.0);
            gauge!("g").set(2.0);
            histogram!("h").record(3.0);
            // Varied samples: once the pending sketch has their bins, folding
            // more of them allocates nothing either.
            for v in [0.5, 2.0, 40.0, 900.0] {
                histogram!("h.varied").record(v);
            }
            owned.increment(1);
        };
        // Warm up: registration, first sends, every table at its size.
        for _ in 0..4 {
            run();
        }
        let n = counting::allocations_in(|| {
            for _ in 0..1_000 {
                run();
            }
        });
        assert_eq!(n, 0, "coalescing updates allocated {n} times");
    });
    assert!(rxs.iter().all(|rx| rx.len() == 6));
}

/// With no receiver an update is one atomic load, and allocates nothing either.
#[test]
fn an_update_with_no_receiver_allocates_nothing() {
    let recorder = KeybusRecorder::new();
    with_local_recorder(&recorder, || {
        counter!("c").increment(1);
        let n = counting::allocations_in(|| {
            for _ in 0..1_000 {
                counter!("c").increment(1);
            }
        });
        assert_eq!(n, 0);
    });
}

/// What the reference keeps per metric.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ref {
    Counter(u64),
    Gauge(f64),
    Histogram {
        count: u64,
        sum: f64,
        min: f64,
        max: f64,
    },
}

/// Several threads record counters, gauges and histograms through the macros (one
/// hot key each kind shared by every thread, plus per-thread keys that use
/// `absolute` and `set`, whose order is only defined within one thread), and
/// mirror every update into a mutex-map reference. A blocking consumer and a
/// batching one run all along; after a graceful close each has, folded with
/// `Totals`, exactly the reference. Amounts are small integers, so float sums are
/// exact in any order.
#[test]
fn concurrent_recording_matches_a_mutex_map_reference() {
    const THREADS: usize = 4;
    const UPDATES: usize = 20_000;
    let deadline = Instant::now() + Duration::from_secs(60);
    let recorder = KeybusRecorder::new();
    let reference: Arc<Mutex<HashMap<(Kind, String), Ref>>> = Arc::default();
    let sent = Arc::new(Mutex::new(0u64));
    let crew = Crew::new("concurrent_recording");
    // A worker that panics would leave the consumers waiting for the close.
    crew.on_panic(|| recorder.close());
    let start = crew.barrier(THREADS);
    crew.scope(|s| {
        let mut dashboard_rx = recorder.receiver();
        let dashboard = crew.spawn(s, move || {
            let mut totals = Totals::new();
            let mut events = 0u64;
            loop {
                match dashboard_rx.recv_deadline(deadline) {
                    Ok(e) => {
                        events += e.sends;
                        totals.apply(e);
                    }
                    Err(RecvTimeoutError::Closed) => return (totals, events),
                    Err(RecvTimeoutError::Timeout) => panic!("dashboard: no close by the deadline"),
                }
            }
        });
        let mut exporter_rx = recorder.receiver();
        let exporter = crew.spawn(s, move || {
            let mut totals = Totals::new();
            let mut events = 0u64;
            loop {
                match exporter_rx.try_recv_all() {
                    Ok(batch) => {
                        events += batch.iter().map(|e| e.sends).sum::<u64>();
                        totals.apply_all(batch);
                    }
                    Err(TryRecvError::Empty) => {
                        assert!(
                            Instant::now() < deadline,
                            "exporter: no close by the deadline"
                        );
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    Err(TryRecvError::Closed) => return (totals, events),
                }
            }
        });

        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let recorder = recorder.clone();
                let reference = reference.clone();
                let sent = sent.clone();
                let start = &start;
                crew.spawn(s, move || {
                    let mut rng = fastrand::Rng::with_seed(t as u64);
                    let mine = format!("worker-{t}");
                    // The per-thread metrics' values, as this thread knows them.
                    let (mut external, mut level) = (0u64, 0.0f64);
                    // Folds one update into the reference, after it was recorded (no
                    // lock is held while recording: the threads record concurrently).
                    let note = |name: String, init: Ref, f: &dyn Fn(Ref) -> Ref| {
                        let kind = match init {
                            Ref::Counter(_) => Kind::Counter,
                            Ref::Gauge(_) => Kind::Gauge,
                            Ref::Histogram { .. } => Kind::Histogram,
                        };
                        let mut map = reference.lock().unwrap();
                        let slot = map.entry((kind, name)).or_insert(init);
                        *slot = f(*slot);
                    };
                    let mut n = 0u64;
                    start.wait();
                    with_local_recorder(&recorder, || {
                        for _ in 0..UPDATES {
                            let amount = rng.u64(1..10);
                            match rng.u8(0..6) {
                                0 => {
                                    counter!("hot.counter").increment(amount);
                                    note("hot.counter".into(), Ref::Counter(0), &|r| match r {
                                        Ref::Counter(c) => Ref::Counter(c + amount),
                                        r => r,
                                    });
                                }
                                1 => {
                                    // Mirrored from an "external" source, sometimes
                                    // stale: an absolute value never moves it back.
                                    let v = if rng.bool() {
                                        external + amount
                                    } else {
                                        external.saturating_sub(amount)
                                    };
                                    counter!("ext", "worker" => mine.clone()).absolute(v);
                                    external = external.max(v);
                                    let now = external;
                                    note(format!("{mine}.external"), Ref::Counter(0), &|_| {
                                        Ref::Counter(now)
                                    });
                                }
                                2 => {
                                    let d = if rng.bool() {
                                        gauge!("hot.gauge").increment(amount as f64);
                                        amount as f64
                                    } else {
                                        gauge!("hot.gauge").decrement(amount as f64);
                                        -(amount as f64)
                                    };
                                    note("hot.gauge".into(), Ref::Gauge(0.0), &|r| match r {
                                        Ref::Gauge(g) => Ref::Gauge(g + d),
                                        r => r,
                                    });
                                }
                                3 => {
                                    if rng.bool() {
                                        gauge!("level", "worker" => mine.clone())
                                            .set(amount as f64);
                                        level = amount as f64;
                                    } else {
                                        gauge!("level", "worker" => mine.clone()).increment(1.0);
                                        level += 1.0;
                                    }
                                    let now = level;
                                    note(format!("{mine}.level"), Ref::Gauge(0.0), &|_| {
                                        Ref::Gauge(now)
                                    });
                                }
                                _ => {
                                    let v = amount as f64;
                                    histogram!("hot.histogram").record(v);
                                    let empty = Ref::Histogram {
                                        count: 0,
                                        sum: 0.0,
                                        min: f64::INFINITY,
                                        max: f64::NEG_INFINITY,
                                    };
                                    note("hot.histogram".into(), empty, &|r| match r {
                                        Ref::Histogram {
                                            count,
                                            sum,
                                            min,
                                            max,
                                        } => Ref::Histogram {
                                            count: count + 1,
                                            sum: sum + v,
                                            min: min.min(v),
                                            max: max.max(v),
                                        },
                                        r => r,
                                    });
                                }
                            }
                            n += 1;
                        }
                    });
                    *sent.lock().unwrap() += n;
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        recorder.close();
        let sent = *sent.lock().unwrap();
        let reference = reference.lock().unwrap().clone();

        for (who, handle) in [("dashboard", dashboard), ("exporter", exporter)] {
            let (totals, events) = handle.join().unwrap();
            assert_eq!(
                events, sent,
                "{who}: every update folded into exactly one event"
            );
            assert_eq!(totals.len(), reference.len(), "{who}: one entry per metric");
            for ((kind, name), want) in &reference {
                let key = match name.split_once('.') {
                    Some((w, "external")) => Key::from_parts("ext", &[("worker", w.to_owned())]),
                    Some((w, "level")) => Key::from_parts("level", &[("worker", w.to_owned())]),
                    _ => Key::from_name(name.clone()),
                };
                let got = totals
                    .get(&key)
                    .unwrap_or_else(|| panic!("{who}: {name} missing"));
                let got = match got {
                    Update::Counter(c) => Ref::Counter(c.apply(0)),
                    Update::Gauge(g) => Ref::Gauge(g.apply(0.0)),
                    Update::Histogram(s) => Ref::Histogram {
                        count: s.count,
                        sum: s.sum,
                        min: s.min,
                        max: s.max,
                    },
                };
                assert_eq!((kind, &got), (kind, want), "{who}: {name}");
            }
        }
    });
}

/// A thread of the threaded test above panicking (planted) fails it.
#[test]
fn planted_panics_fail_instead_of_hanging() {
    threads::audit(&["concurrent_recording_matches_a_mutex_map_reference"]);
}
