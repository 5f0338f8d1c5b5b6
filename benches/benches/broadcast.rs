//! keybus::broadcast against keybus::baseline::broadcast and the peers a user
//! would pick instead (tokio::sync::broadcast, async-broadcast, bus, one
//! crossbeam-channel per reader), all in the same run, same capacity (1,024),
//! same 32-byte value.
//!
//! `cargo bench -p keybus-benches --bench broadcast`. Groups:
//!
//! - `broadcast/append/{0,1,2,4,8,16}_readers`: writer cost per append on a full
//!   ring, with that many attached readers that do not read. `bus` runs only
//!   with 0 readers (its writer blocks on a full reader).
//! - `broadcast/readers/{1,4,16}`: reader throughput, in deliveries (appends ×
//!   readers) until every reader saw `Closed`; one writer paced to stay within
//!   512 values of the slowest reader, so nothing is lost (checked after
//!   criterion).
//! - `broadcast/slow_reader`: writer time with one slow reader on a 64-slot
//!   ring; what the reader lost (and whether it was told) is printed after.
//! - `broadcast/append_64_live_reader_threads`: writer cost per append on a full
//!   ring while 64 threads, all alive at once, hold a reader of it and have each
//!   read through it (they park until the appends are done). `bus` skipped.
//! - `broadcast/append_after_64_threads/0_readers`: as `append/0_readers`, after
//!   64 threads read another buffer at once and exited: process-wide state an
//!   implementation keeps (keybus keeps none since its slots stopped using
//!   arc-swap). Last, as it was when keybus did.
//!
//! Compare lines within a group: ratios carry across machines, absolute numbers
//! do not.

use criterion::{criterion_group, BenchmarkId, Criterion, SamplingMode, Throughput};
use std::time::Duration;

#[macro_use]
#[path = "../support/common.rs"]
mod common;

#[macro_use]
#[path = "../support/broadcast_scenarios.rs"]
mod scenarios;
use scenarios::*;

broadcast_suite!();

/// Appends per criterion iteration in the threaded scenarios.
const BATCH: u64 = 100_000;
/// Work steps per value of the slow reader.
const SLOW_WORK: u64 = 2_000;

fn append(c: &mut Criterion) {
    for readers in [0usize, 1, 2, 4, 8, 16] {
        let mut g = c.benchmark_group(format!("broadcast/append/{readers}_readers"));
        g.throughput(Throughput::Elements(1));
        for imp in BROADCAST_IMPLS {
            // bus: a reader that does not read blocks the writer (skipped).
            if imp.runs_append(readers) {
                g.bench_function(imp.name, |b| b.iter_custom(|n| (imp.append)(readers, n)));
            }
        }
        g.finish();
    }
}

fn readers(c: &mut Criterion) {
    let mut g = c.benchmark_group("broadcast/readers");
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .measurement_time(Duration::from_secs(3));
    for n in [1usize, 4, 16] {
        g.throughput(Throughput::Elements(BATCH * n as u64));
        for imp in BROADCAST_IMPLS {
            g.bench_with_input(BenchmarkId::new(imp.name, n), &n, |b, &n| {
                b.iter_custom(|iters| sum_of_runs(iters, || (imp.readers)(n, BATCH).elapsed))
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
    for imp in BROADCAST_IMPLS {
        // bus: no drop-oldest mode, its writer would run at the reader's pace.
        if imp.runs_slow_reader() {
            g.bench_function(imp.name, |b| {
                b.iter_custom(|iters| {
                    sum_of_runs(iters, || (imp.slow_reader)(BATCH, SLOW_WORK).elapsed)
                })
            });
        }
    }
    g.finish();
}

fn append_live_reader_threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("broadcast/append_64_live_reader_threads");
    g.throughput(Throughput::Elements(1));
    for imp in BROADCAST_IMPLS {
        // bus: a reader that does not read blocks the writer (skipped).
        if imp.runs_append(64) {
            g.bench_function(imp.name, |b| {
                b.iter_custom(|n| (imp.append_live_reader_threads)(64, n))
            });
        }
    }
    g.finish();
}

/// Last (see the scenario's docs).
fn append_after_threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("broadcast/append_after_64_threads/0_readers");
    g.throughput(Throughput::Elements(1));
    for imp in BROADCAST_IMPLS {
        g.bench_function(imp.name, |b| {
            b.iter_custom(|n| (imp.append_after_threads)(64, n))
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    append,
    append_live_reader_threads,
    slow_reader,
    readers,
    append_after_threads
);

fn main() {
    if !run_criterion(benches) {
        return;
    }
    // Not criterion measurements: what the readers got, one run each.
    println!(
        "\nbroadcast/readers: share of appends x readers delivered (one run, {BATCH} appends, paced: 100% expected)"
    );
    for n in [1usize, 4, 16] {
        for imp in BROADCAST_IMPLS {
            let o = (imp.readers)(n, BATCH);
            println!(
                "  {n:>2} readers  {:<16} delivered {:>6.2}%  gap reports {:>6}",
                imp.name,
                o.delivered_pct(BATCH * n as u64),
                o.gaps
            );
        }
    }
    println!("\nbroadcast/slow_reader: what the slow reader got (one run, {BATCH} appends)");
    for imp in BROADCAST_IMPLS {
        if imp.runs_slow_reader() {
            let o = (imp.slow_reader)(BATCH, SLOW_WORK);
            println!(
                "  {:<16} delivered {:>6.2}%  lost {:>6}  told by {:>5} gap reports",
                imp.name,
                o.delivered_pct(BATCH),
                o.lost,
                o.gaps
            );
        }
    }
}
