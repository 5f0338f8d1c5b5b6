//! The bound on metric keys (`max_keys`): new metrics refused and counted,
//! exactly, also under concurrent registration.

use super::*;

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
