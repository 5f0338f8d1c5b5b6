//! keybus::broadcast against keybus::baseline::broadcast and the peers a user
//! would pick instead (tokio::sync::broadcast, async-broadcast, bus, one
//! crossbeam-channel per reader), all in the same run, same capacity (1,024),
//! same 32-byte value.
//!
//! `cargo bench --bench broadcast`. Groups:
//!
//! - `broadcast/append/{0,1,2,4,8,16}_readers`: writer cost per append on a full
//!   ring, with that many attached readers that do not read. `bus` runs only
//!   with 0 readers (its writer blocks on a full reader).
//! - `broadcast/readers/{1,4,16}`: one writer and that many reading threads;
//!   throughput in appends until every reader saw `Closed`. After criterion, the
//!   share of values each implementation delivered is printed (lossy ones let
//!   the writer run ahead and readers skip).
//! - `broadcast/slow_reader`: writer time with one slow reader on a 64-slot
//!   ring; what the reader lost (and whether it was told) is printed after.
//!
//! Compare lines within a group: ratios carry across machines, absolute numbers
//! do not.

use criterion::{criterion_group, BenchmarkId, Criterion, SamplingMode, Throughput};
use std::time::Duration;

#[macro_use]
#[path = "support/broadcast_scenarios.rs"]
mod scenarios;
use scenarios::*;

broadcast_scenarios!(keybus_impl, peers::keybus_broadcast);
broadcast_scenarios!(baseline_impl, peers::baseline_broadcast);
broadcast_scenarios!(tokio_impl, peers::tokio_broadcast);
broadcast_scenarios!(async_broadcast_impl, peers::async_broadcast);
broadcast_scenarios!(bus_impl, peers::bus);
broadcast_scenarios!(crossbeam_impl, peers::crossbeam);

/// Appends per criterion iteration in the threaded scenarios.
const BATCH: u64 = 100_000;
/// Work steps per value of the slow reader.
const SLOW_WORK: u64 = 2_000;

/// Every implementation: (name, append, readers, slow_reader, runs_append).
type Impl = (
    &'static str,
    fn(usize, u64) -> Duration,
    fn(usize, u64) -> Outcome,
    fn(u64, u64) -> Outcome,
    fn(usize) -> bool,
);

const IMPLS: [Impl; 6] = [
    (
        "keybus",
        keybus_impl::append,
        keybus_impl::readers,
        keybus_impl::slow_reader,
        keybus_impl::runs_append,
    ),
    (
        "baseline",
        baseline_impl::append,
        baseline_impl::readers,
        baseline_impl::slow_reader,
        baseline_impl::runs_append,
    ),
    (
        "tokio",
        tokio_impl::append,
        tokio_impl::readers,
        tokio_impl::slow_reader,
        tokio_impl::runs_append,
    ),
    (
        "async-broadcast",
        async_broadcast_impl::append,
        async_broadcast_impl::readers,
        async_broadcast_impl::slow_reader,
        async_broadcast_impl::runs_append,
    ),
    (
        "bus",
        bus_impl::append,
        bus_impl::readers,
        bus_impl::slow_reader,
        bus_impl::runs_append,
    ),
    (
        "crossbeam",
        crossbeam_impl::append,
        crossbeam_impl::readers,
        crossbeam_impl::slow_reader,
        crossbeam_impl::runs_append,
    ),
];

fn append(c: &mut Criterion) {
    for readers in [0usize, 1, 2, 4, 8, 16] {
        let mut g = c.benchmark_group(format!("broadcast/append/{readers}_readers"));
        g.throughput(Throughput::Elements(1));
        for (name, append, _, _, runs) in IMPLS {
            // bus: a reader that does not read blocks the writer (skipped).
            if runs(readers) {
                g.bench_function(name, |b| b.iter_custom(|n| append(readers, n)));
            }
        }
        g.finish();
    }
}

fn readers(c: &mut Criterion) {
    let mut g = c.benchmark_group("broadcast/readers");
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(BATCH));
    for n in [1usize, 4, 16] {
        for (name, _, readers, _, _) in IMPLS {
            g.bench_with_input(BenchmarkId::new(name, n), &n, |b, &n| {
                b.iter_custom(|iters| {
                    (0..iters)
                        .map(|_| readers(n, BATCH).elapsed)
                        .sum::<Duration>()
                })
            });
        }
    }
    g.finish();
}

fn slow_reader(c: &mut Criterion) {
    let mut g = c.benchmark_group("broadcast/slow_reader");
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(BATCH));
    for (name, _, _, slow, runs) in IMPLS {
        // bus: no drop-oldest mode, its writer would run at the reader's pace.
        if runs(1) {
            g.bench_function(name, |b| {
                b.iter_custom(|iters| {
                    (0..iters)
                        .map(|_| slow(BATCH, SLOW_WORK).elapsed)
                        .sum::<Duration>()
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, append, readers, slow_reader);

fn main() {
    benches();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    // Not criterion measurements: what the readers got, one run each.
    println!(
        "\nbroadcast/readers: share of appends x readers delivered (one run, {BATCH} appends)"
    );
    for n in [1usize, 4, 16] {
        for (name, _, readers, _, _) in IMPLS {
            let o = readers(n, BATCH);
            println!(
                "  {n:>2} readers  {name:<16} delivered {:>6.2}%  gap reports {:>6}",
                o.delivered_pct(BATCH * n as u64),
                o.gaps
            );
        }
    }
    println!("\nbroadcast/slow_reader: what the slow reader got (one run, {BATCH} appends)");
    for (name, _, _, slow, runs) in IMPLS {
        if runs(1) {
            let o = slow(BATCH, SLOW_WORK);
            println!(
                "  {name:<16} delivered {:>6.2}%  lost {:>6}  told by {:>5} gap reports",
                o.delivered_pct(BATCH),
                o.lost,
                o.gaps
            );
        }
    }
}
