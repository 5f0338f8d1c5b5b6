//! What a receiver sees: labels make distinct keys, filters select at send, a
//! receiver starts empty and a close drains then ends, descriptions are kept,
//! and a late snapshot receiver is born with the state (which needs
//! `retain_latest`).

use super::*;

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
