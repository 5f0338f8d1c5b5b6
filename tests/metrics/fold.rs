//! What each kind of update folds into: counters sum, absolute counters replace
//! increments, gauges follow their operations in order, histograms fold into a
//! summary whose quantiles are within the sketch's error.

use super::*;

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
