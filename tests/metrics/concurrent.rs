//! Concurrent recording from several threads, checked against a mutex-map
//! reference at a blocking consumer and at a batching one.

use super::*;

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
