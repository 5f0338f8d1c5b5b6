//! keybus::conflate against keybus::baseline::conflate, in the same run.
//!
//! `cargo bench --bench conflate`. Each criterion iteration is a batch of sends
//! including the receivers' drain; compare the two lines of each group (the ratio
//! is what carries across machines). After criterion, the publisher-latency-during-
//! a-cut scenario prints its percentiles for both.

use criterion::{criterion_group, Criterion, SamplingMode, Throughput};
use std::time::Duration;

#[macro_use]
#[path = "support/conflate_scenarios.rs"]
mod scenarios;
use scenarios::*;

conflate_scenarios!(keybus_impl, keybus::conflate);
conflate_scenarios!(baseline_impl, keybus::baseline::conflate);

/// Sends per criterion iteration in the threaded scenarios: large enough that
/// spawning the threads is noise.
const BATCH: u64 = 100_000;

fn no_receiver(c: &mut Criterion) {
    let mut g = c.benchmark_group("conflate/no_receiver_send");
    g.throughput(Throughput::Elements(1));
    g.bench_function("keybus", |b| b.iter_custom(keybus_impl::no_receiver));
    g.bench_function("baseline", |b| b.iter_custom(baseline_impl::no_receiver));
    g.finish();
}

fn threaded(c: &mut Criterion, name: &str, senders: u64, receivers: u64, keys: u64) {
    let mut g = c.benchmark_group(format!("conflate/{name}"));
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(BATCH));
    g.bench_function("keybus", |b| {
        b.iter_custom(|iters| keybus_impl::fan_out(senders, receivers, keys, iters * BATCH))
    });
    g.bench_function("baseline", |b| {
        b.iter_custom(|iters| baseline_impl::fan_out(senders, receivers, keys, iters * BATCH))
    });
    g.finish();
}

fn fan_outs(c: &mut Criterion) {
    threaded(c, "1x1_hot64", 1, 1, 64);
    threaded(c, "2x4_hot64", 2, 4, 64);
    threaded(c, "4x4_oversubscribed_1k_keys", 4, 4, 1_000);
}

criterion_group!(benches, no_receiver, fan_outs);

fn main() {
    benches();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
    // Not a criterion measurement: percentiles of individual send latencies.
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    println!("\nconflate/publisher latency while a receiver cuts a 100,000-key backlog");
    for (name, lat) in [
        ("keybus", keybus_impl::cut_latency(100_000, 5)),
        ("baseline", baseline_impl::cut_latency(100_000, 5)),
    ] {
        println!(
            "  {name:<9} p50 {:>7} ns  p99 {:>9} ns  max {:>10} ns  ({} sends)",
            lat.p50, lat.p99, lat.max, lat.samples
        );
    }
}
