//! The cost of one `metrics` update recorded into `keybus::metrics`, against the
//! floor a user compares with, shared by `benches/benches/metrics.rs` and
//! `benches/src/bin/bench-report/`.
//!
//! Every measurement records `n` updates of one metric on the calling thread,
//! inside `metrics::with_local_recorder`, in one of three ways:
//!
//! - [`Path::Macro`]: `counter!("requests").increment(1)` each time, so the
//!   recorder's handle lookup (`register_counter`) is part of every update, as in
//!   code that calls the macro inline;
//! - [`Path::Handle`]: `let c = counter!("requests");` once, then
//!   `c.increment(1)`: only the handle's update;
//! - [`Path::HistogramHandle`]: `let h = histogram!("latency");` once, then
//!   `h.record(v)` with `v` cycling through 64 values from 1 to 1,000 (a pending
//!   keybus summary folds each into its quantile sketch).
//!
//! Implementations ([`METRICS_IMPLS`]):
//!
//! - `keybus` with no receiver, with 2 receivers that do not read during the
//!   run (every update coalesces into the pending slot: the steady hot path), and
//!   with 2 receivers that take a cut (`try_recv_all`) every 1 ms on their own
//!   threads, like exporters (the key is re-inserted after each cut, and their
//!   threads compete for the cores);
//! - `registry (floor)`: `metrics-util`'s `Registry<Key, AtomicStorage>`, one
//!   `AtomicU64` per key behind a sharded map, the storage of the usual exporters
//!   (Prometheus and friends): what a recorder costs that only counts;
//! - `noop`: `metrics::NoopRecorder`, the facade's own dispatch with no storage.

#![allow(dead_code)]

use keybus::metrics::KeybusRecorder;
use metrics::{
    counter, histogram, Counter, Gauge, Histogram, Key, KeyName, Metadata, SharedString, Unit,
};
use metrics_util::registry::{AtomicStorage, Registry};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How each update reaches the recorder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// `counter!(..).increment(1)` per update.
    Macro,
    /// One `counter!(..)`, then `increment(1)` per update.
    Handle,
    /// One `histogram!(..)`, then `record(v)` per update.
    HistogramHandle,
}

impl Path {
    pub const ALL: [Path; 3] = [Path::Macro, Path::Handle, Path::HistogramHandle];

    /// The scenario's name after `metrics/`.
    pub fn name(self) -> &'static str {
        match self {
            Path::Macro => "counter_macro",
            Path::Handle => "counter_handle",
            Path::HistogramHandle => "histogram_handle",
        }
    }
}

/// The samples [`Path::HistogramHandle`] cycles through: 1 to 1,000, spread
/// geometrically (about 5 of the 1 % sketch bins apart, so no two share one).
/// A table, so that the timed loop does no `powf`.
fn histogram_samples() -> [f64; 64] {
    std::array::from_fn(|k| 1000f64.powf(k as f64 / 63.0))
}

/// Which side of the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Keybus,
    /// The floor a user compares with.
    Floor,
    /// For reference.
    Other,
}

pub struct MetricsImpl {
    pub name: &'static str,
    pub role: Role,
    /// Time to record `n` updates along `path`.
    pub run: fn(Path, u64) -> Duration,
}

pub const METRICS_IMPLS: &[MetricsImpl] = &[
    MetricsImpl {
        name: "keybus, 0 rx",
        role: Role::Keybus,
        run: |p, n| keybus(p, n, 0, false),
    },
    MetricsImpl {
        name: "keybus, 2 rx idle",
        role: Role::Keybus,
        run: |p, n| keybus(p, n, 2, false),
    },
    MetricsImpl {
        name: "keybus, 2 rx cutting",
        role: Role::Keybus,
        run: |p, n| keybus(p, n, 2, true),
    },
    MetricsImpl {
        name: "registry (floor)",
        role: Role::Floor,
        run: registry,
    },
    MetricsImpl {
        name: "noop",
        role: Role::Other,
        run: noop,
    },
];

/// Records `n` updates through `recorder` along `path`; the timed part.
fn record(recorder: &dyn metrics::Recorder, path: Path, n: u64) -> Duration {
    metrics::with_local_recorder(recorder, || {
        // Warm: registration and the first send happen before the clock starts.
        counter!("requests").increment(1);
        let samples = histogram_samples();
        histogram!("latency").record(samples[0]);
        let start = Instant::now();
        match path {
            Path::Macro => {
                for _ in 0..n {
                    counter!("requests").increment(black_box(1));
                }
            }
            Path::Handle => {
                let c = counter!("requests");
                for _ in 0..n {
                    c.increment(black_box(1));
                }
            }
            Path::HistogramHandle => {
                let h = histogram!("latency");
                for i in 0..n {
                    h.record(black_box(samples[i as usize % samples.len()]));
                }
            }
        }
        start.elapsed()
    })
}

/// `keybus::metrics` with `receivers` receivers, cutting every 1 ms if `cutting`.
pub fn keybus(path: Path, n: u64, receivers: usize, cutting: bool) -> Duration {
    let recorder = KeybusRecorder::new();
    let mut rxs: Vec<_> = (0..receivers).map(|_| recorder.receiver()).collect();
    if !cutting {
        let d = record(&recorder, path, n);
        let folded: u64 = rxs
            .iter_mut()
            .map(|rx| {
                rx.try_recv_all()
                    .map_or(0, |b| b.iter().map(|e| e.sends).sum())
            })
            .sum();
        // n + 1 updates of the metric measured, 1 of the other (warm-up).
        assert_eq!(folded, (n + 2) * receivers as u64, "every update delivered");
        return d;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = rxs
        .into_iter()
        .map(|mut rx| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut folded = 0u64;
                loop {
                    // Read before the cut: after `stop`, one more cut takes the rest.
                    let last = stop.load(Ordering::Acquire);
                    if let Ok(batch) = rx.try_recv_all() {
                        folded += batch.iter().map(|e| e.sends).sum::<u64>();
                    }
                    if last {
                        return folded;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
        })
        .collect();
    let d = record(&recorder, path, n);
    stop.store(true, Ordering::Release);
    for t in threads {
        assert_eq!(t.join().unwrap(), n + 2, "every update delivered");
    }
    d
}

/// `metrics-util`'s atomic registry as a recorder: what exporters store into.
struct RegistryRecorder(Registry<Key, AtomicStorage>);

impl metrics::Recorder for RegistryRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        self.0
            .get_or_create_counter(key, |c| Counter::from_arc(c.clone()))
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        self.0
            .get_or_create_gauge(key, |g| Gauge::from_arc(g.clone()))
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        self.0
            .get_or_create_histogram(key, |h| Histogram::from_arc(h.clone()))
    }
}

pub fn registry(path: Path, n: u64) -> Duration {
    let recorder = RegistryRecorder(Registry::atomic());
    let d = record(&recorder, path, n);
    let (counted, sampled) = match path {
        Path::Macro | Path::Handle => (n + 1, 1),
        Path::HistogramHandle => (1, n + 1),
    };
    let total = recorder
        .0
        .get_counter(&Key::from_name("requests"))
        .map(|c| c.load(Ordering::Relaxed));
    assert_eq!(total, Some(counted), "every update counted");
    let mut samples = 0u64;
    if let Some(h) = recorder.0.get_histogram(&Key::from_name("latency")) {
        h.clear_with(|block| samples += block.len() as u64);
    }
    assert_eq!(samples, sampled, "every sample kept");
    d
}

pub fn noop(path: Path, n: u64) -> Duration {
    record(&metrics::NoopRecorder, path, n)
}
