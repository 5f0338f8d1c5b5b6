//! The `metrics` facade on keybus: workers record through `counter!`, `gauge!` and
//! `histogram!`; a live dashboard and a batching exporter consume the same
//! updates, each at its own pace; at the end every consumer's view is checked
//! against what the workers recorded.
//!
//! ```text
//! cargo run --release --features metrics --example metrics
//! cargo run --release --features metrics --example metrics -- --workers 8 --updates 500000
//! ```
//!
//! `--workers` threads each make `--updates` updates to an HTTP-like service's
//! metrics: `http.requests{route}` counters, `http.errors{route}` counters, an
//! `http.inflight` gauge every worker moves up and down, a `worker.queue{worker}`
//! gauge each worker sets, and `http.latency_ms{route}` histograms. Each worker
//! also tallies what it recorded, on the side.
//!
//! - The **dashboard** blocks in `recv`, folds every event into its running state
//!   (`Totals`) and prints the current values every 100 ms.
//! - The **exporter** wakes every 20 ms and takes a cut of everything pending with
//!   `try_recv_all`, as a Prometheus push or a storage write would; it gets one
//!   entry per metric however many updates happened in between.
//! - The **errors alert** takes only `http.errors*` (a key filter, applied at send).
//!
//! After the workers stop, `KeybusRecorder::close` closes the send side: every
//! consumer drains what is pending, then sees `Closed`. The `check` lines compare
//! each consumer's final state with the workers' tallies: counter totals, gauge
//! values, histogram counts, sums, minima and maxima must match exactly (and their
//! quantile sketches answer every percentile alike), and the
//! updates folded into the events it received (`Event::sends`) must equal the
//! updates recorded. A mismatch exits with status 1.

use keybus::metrics::{KeybusRecorder, Totals, Update};
use keybus::RecvTimeoutError;
use metrics::{counter, gauge, histogram, Key};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const ROUTES: [&str; 4] = ["/", "/login", "/search", "/cart"];

struct Config {
    workers: usize,
    updates: u64,
}

fn config() -> Config {
    let mut cfg = Config {
        workers: 4,
        updates: 200_000,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = || pair.get(1).and_then(|v| v.parse().ok()).expect("a number");
        match pair[0].as_str() {
            "--workers" => cfg.workers = value() as usize,
            "--updates" => cfg.updates = value(),
            other => panic!("unknown option {other} (--workers N, --updates N)"),
        }
    }
    cfg
}

/// What the workers recorded, by the same fold the consumers use.
type Expected = Totals;

/// One worker: `updates` updates through the macros; returns its own tally.
fn work(id: usize, updates: u64) -> (Expected, u64) {
    let mut rng = fastrand::Rng::with_seed(id as u64);
    let mut tally = Totals::new();
    let mut note = |key: Key, update: Update| tally.fold(key, update);
    use keybus::metrics::{CounterUpdate, GaugeUpdate, Summary};
    let worker = id.to_string();
    let mut recorded = 0;
    while recorded < updates {
        let route = ROUTES[rng.usize(..ROUTES.len())];
        gauge!("http.inflight").increment(1.0);
        counter!("http.requests", "route" => route).increment(1);
        let latency = rng.u32(1..200) as f64; // whole milliseconds: exact sums
        histogram!("http.latency_ms", "route" => route).record(latency);
        if rng.u8(..100) == 0 {
            counter!("http.errors", "route" => route).increment(1);
            note(
                Key::from_parts("http.errors", &[("route", route)]),
                Update::Counter(CounterUpdate::increment(1)),
            );
            recorded += 1;
        }
        gauge!("http.inflight").decrement(1.0);
        let queue = rng.u32(..50) as f64;
        gauge!("worker.queue", "worker" => worker.clone()).set(queue);
        recorded += 5;

        let inflight = Key::from_name("http.inflight");
        note(inflight.clone(), Update::Gauge(GaugeUpdate::Add(1.0)));
        note(
            Key::from_parts("http.requests", &[("route", route)]),
            Update::Counter(CounterUpdate::increment(1)),
        );
        note(
            Key::from_parts("http.latency_ms", &[("route", route)]),
            Update::Histogram(Summary::of(latency, 1)),
        );
        note(inflight, Update::Gauge(GaugeUpdate::Add(-1.0)));
        note(
            Key::from_parts("worker.queue", &[("worker", worker.clone())]),
            Update::Gauge(GaugeUpdate::Set(queue)),
        );
    }
    (tally, recorded)
}

/// What one consumer ended with.
struct Seen {
    name: &'static str,
    totals: Totals,
    events: u64,
    folded: u64,
    batches: u64,
}

impl Seen {
    fn new(name: &'static str) -> Seen {
        Seen {
            name,
            totals: Totals::new(),
            events: 0,
            folded: 0,
            batches: 0,
        }
    }

    /// Folds one event, counting it and the updates it stands for.
    fn take(&mut self, e: keybus::Event<Key, Update>) {
        self.events += 1;
        self.folded += e.sends;
        self.totals.apply(e);
    }
}

fn label(key: &Key) -> String {
    let labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    if labels.is_empty() {
        key.name().to_owned()
    } else {
        format!("{}{{{}}}", key.name(), labels.join(","))
    }
}

fn show(update: &Update) -> String {
    match update {
        Update::Counter(c) => format!("{}", c.apply(0)),
        Update::Gauge(g) => format!("{}", g.apply(0.0)),
        Update::Histogram(s) => {
            let q = |q| s.quantile(q).unwrap_or(f64::NAN);
            format!(
                "n={} mean={:.1} min={} max={} p50~{:.0} p99~{:.0}",
                s.count,
                s.mean(),
                s.min,
                s.max,
                q(0.5),
                q(0.99)
            )
        }
    }
}

fn main() {
    let cfg = config();
    let recorder = KeybusRecorder::new();
    // Consumers first: a receiver sees the updates made after it exists.
    let mut dashboard_rx = recorder.receiver();
    let mut exporter_rx = recorder.receiver();
    let mut alert_rx = recorder
        .receiver_builder()
        .key_filter(|k: &Key| k.name().starts_with("http.errors"))
        .build();
    metrics::set_global_recorder(recorder.clone()).expect("no other global recorder");

    let start = Instant::now();
    let dashboard = std::thread::spawn(move || {
        let mut seen = Seen::new("dashboard");
        let mut next_frame = Instant::now() + Duration::from_millis(100);
        loop {
            match dashboard_rx.recv_deadline(next_frame) {
                Ok(e) => seen.take(e),
                Err(RecvTimeoutError::Timeout) => {
                    next_frame += Duration::from_millis(100);
                    let get = |k: &Key| seen.totals.value(k).unwrap_or(0.0);
                    let requests: f64 = ROUTES
                        .iter()
                        .map(|r| get(&Key::from_parts("http.requests", &[("route", *r)])))
                        .sum();
                    println!(
                        "dashboard {:>6.0} ms  requests {:>9}  inflight {:>3}  /search latency {}",
                        start.elapsed().as_secs_f64() * 1e3,
                        requests,
                        get(&Key::from_name("http.inflight")),
                        seen.totals
                            .get(&Key::from_parts("http.latency_ms", &[("route", "/search")]))
                            .map_or("-".into(), show),
                    );
                }
                Err(RecvTimeoutError::Closed) => return seen,
            }
        }
    });
    let exporter = std::thread::spawn(move || {
        let mut seen = Seen::new("exporter");
        loop {
            std::thread::sleep(Duration::from_millis(20));
            match exporter_rx.try_recv_all() {
                Ok(batch) => {
                    seen.batches += 1;
                    seen.events += batch.len() as u64;
                    seen.folded += batch.iter().map(|e| e.sends).sum::<u64>();
                    seen.totals.apply_all(batch);
                }
                Err(keybus::TryRecvError::Empty) => {}
                Err(keybus::TryRecvError::Closed) => return seen,
            }
        }
    });
    let alert = std::thread::spawn(move || {
        let mut seen = Seen::new("errors alert");
        for e in alert_rx.iter() {
            seen.take(e);
        }
        seen
    });

    let workers: Vec<_> = (0..cfg.workers)
        .map(|id| std::thread::spawn(move || work(id, cfg.updates)))
        .collect();
    let mut expected = Expected::new();
    let mut recorded = 0;
    for w in workers {
        let (tally, n) = w.join().unwrap();
        recorded += n;
        for (key, update) in tally.iter() {
            expected.fold(key.clone(), update.clone());
        }
    }
    let record_time = start.elapsed();
    recorder.close();
    let seen = [dashboard, exporter, alert].map(|t| t.join().unwrap());

    println!();
    println!(
        "recorded {} updates from {} workers in {:.1} ms ({:.2} M updates/s), {} metrics",
        recorded,
        cfg.workers,
        record_time.as_secs_f64() * 1e3,
        recorded as f64 / record_time.as_secs_f64() / 1e6,
        expected.len(),
    );
    println!();
    let sorted: BTreeMap<String, &Update> = expected.iter().map(|(k, u)| (label(k), u)).collect();
    for (name, update) in &sorted {
        println!("  {:<34} {:<9} {}", name, update.kind(), show(update));
    }
    println!();
    println!(
        "{:<13} {:>10} {:>12} {:>12} {:>9}",
        "consumer", "events", "updates", "upd/event", "batches"
    );
    for s in &seen {
        println!(
            "{:<13} {:>10} {:>12} {:>12.1} {:>9}",
            s.name,
            s.events,
            s.folded,
            s.folded as f64 / s.events.max(1) as f64,
            if s.batches > 0 {
                s.batches.to_string()
            } else {
                "-".into()
            },
        );
    }
    println!();
    let mut ok = true;
    for s in &seen {
        let wanted = |key: &Key| s.name != "errors alert" || key.name().starts_with("http.errors");
        // (kind, metrics checked, metrics matching)
        let mut by_kind: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
        for (key, want) in expected.iter().filter(|(k, _)| wanted(k)) {
            let n = by_kind.entry(want.kind()).or_default();
            n.0 += 1;
            if s.totals.get(key) == Some(want) {
                n.1 += 1;
            } else {
                ok = false;
            }
        }
        let extra = s.totals.iter().filter(|(k, _)| !wanted(k)).count();
        ok &= extra == 0;
        let want_folded = if s.name == "errors alert" {
            expected
                .iter()
                .filter(|(k, _)| k.name().starts_with("http.errors"))
                .map(|(_, u)| u.value() as u64)
                .sum()
        } else {
            recorded
        };
        ok &= s.folded == want_folded;
        let kinds: Vec<String> = by_kind
            .iter()
            .map(|(kind, (n, good))| format!("{kind}s {good}/{n} exact"))
            .collect();
        println!(
            "check  {:<13} updates folded {:>10} == {:>10} recorded; {}{}",
            s.name,
            s.folded,
            want_folded,
            kinds.join(", "),
            if extra > 0 {
                format!("; {extra} unexpected metrics")
            } else {
                String::new()
            },
        );
    }
    if !ok {
        println!("MISMATCH");
        std::process::exit(1);
    }
    println!("ok: counters, gauges and histograms came through exactly at every consumer");
}
