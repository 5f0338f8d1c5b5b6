//! keybus::conflate against keybus::baseline::conflate and the peers a user would
//! write instead (a hand-rolled `Mutex<HashMap + VecDeque> + Condvar` per
//! receiver, one `tokio::sync::watch` per key, `tokio::sync::broadcast` with
//! drop-oldest), all in the same run.
//!
//! `cargo bench -p keybus-benches --bench conflate`. Each criterion iteration of the threaded
//! scenarios is a batch of sends including the receivers' drain; compare the
//! lines of each group (the ratios carry across machines). Groups:
//!
//! - `no_receiver_send`;
//! - `SxR_hotN` / `SxR_coldN`: S sender threads, R receiver threads, sends
//!   cycling over N keys (hot: 64 keys, coalescing; cold: 10,000 and 1,000,000
//!   keys, every key fresh). `4x4_*` are 8 threads on this 2-core machine
//!   (oversubscribed);
//! - `try_recv_all/N`: one cut of an N-key backlog;
//! - `register_drop/N`: register and drop one receiver while N stay registered
//!   (keybus and the baseline only);
//! - `*_try_recv_all`: the same threaded fan-outs with consumers that take
//!   whole backlogs with `try_recv_all` (64 hot keys, or 4,096 keys);
//! - `new_key_try_recv`: one thread, a send of a key that is not pending
//!   (cycling over 4,096) and its `try_recv`;
//! - `coalescing_send/R`: one thread, every one of 64 keys already pending at
//!   each of R idle receivers, one send (keybus and the baseline only);
//!   `coalescing_send/mixed_4_kinds_hot8`: four kinds of receiver (every key,
//!   `.key(3)`, an even-key filter, an own summing merge), 8 hot keys;
//! - after criterion, publisher latency percentiles while a receiver cuts a
//!   100,000-key backlog (not a criterion measurement).
//!
//! Peers skip what they cannot express (see `support/conflate_peers.rs`):
//! tokio watch above 100,000 keys and in the cut-latency run; tokio broadcast
//! for backlogs above its 1,024 capacity.

use criterion::{criterion_group, BenchmarkId, Criterion, SamplingMode, Throughput};
use std::time::Duration;

#[macro_use]
#[path = "../support/common.rs"]
mod common;

#[macro_use]
#[path = "../support/conflate_scenarios.rs"]
mod scenarios;
use scenarios::*;

conflate_suite!();

/// Sends per criterion iteration in the threaded scenarios: large enough that
/// spawning the threads is noise.
const BATCH: u64 = 100_000;

fn no_receiver(c: &mut Criterion) {
    let mut g = c.benchmark_group("conflate/no_receiver_send");
    g.throughput(Throughput::Elements(1));
    for imp in CONFLATE_IMPLS {
        g.bench_function(imp.name, |b| b.iter_custom(imp.no_receiver));
    }
    g.finish();
}

/// A threaded fan-out: `run` is `fan_out` (`recv` consumers) or
/// `fan_out_try_all` (`try_recv_all` consumers).
type FanOutFn = fn(&ConflateImpl, u64, u64, u64, u64) -> Duration;

fn threaded(c: &mut Criterion, name: &str, senders: u64, receivers: u64, keys: u64, batch: u64) {
    threaded_with(
        c,
        name,
        [senders, receivers, keys, batch],
        |imp, s, r, k, n| (imp.fan_out)(s, r, k, n),
    );
}

fn threaded_with(c: &mut Criterion, name: &str, shape: [u64; 4], run: FanOutFn) {
    let [senders, receivers, keys, batch] = shape;
    let mut g = c.benchmark_group(format!("conflate/{name}"));
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(batch));
    for imp in CONFLATE_IMPLS {
        if imp.runs_keys(keys) {
            g.bench_function(imp.name, |b| {
                b.iter_custom(|iters| {
                    sum_of_runs(iters, || run(&imp, senders, receivers, keys, batch))
                })
            });
        }
    }
    g.finish();
}

fn fan_outs(c: &mut Criterion) {
    threaded(c, "1x1_hot64", 1, 1, 64, BATCH);
    threaded(c, "1x1_cold10k", 1, 1, 10_000, BATCH);
    // Short: one pass over a million fresh keys per iteration.
    threaded(c, "1x1_cold1M", 1, 1, 1_000_000, 1_000_000);
    threaded(c, "1x4_hot64", 1, 4, 64, BATCH);
    threaded(c, "1x4_cold10k", 1, 4, 10_000, BATCH);
    threaded(c, "1x16_hot64", 1, 16, 64, BATCH);
    threaded(c, "2x2_hot64", 2, 2, 64, BATCH);
    threaded(c, "2x4_hot64", 2, 4, 64, BATCH);
    threaded(c, "4x4_hot64", 4, 4, 64, BATCH);
    threaded(c, "4x4_oversubscribed_1k_keys", 4, 4, 1_000, BATCH);
    // Consumers taking whole backlogs with `try_recv_all` (yielding when empty).
    let try_all: FanOutFn = |imp, s, r, k, n| (imp.fan_out_try_all)(s, r, k, n).0;
    threaded_with(c, "1x16_hot64_try_recv_all", [1, 16, 64, BATCH], try_all);
    threaded_with(
        c,
        "2x4_4096_keys_try_recv_all",
        [2, 4, 4_096, BATCH],
        try_all,
    );
    threaded_with(
        c,
        "4x4_4096_keys_try_recv_all",
        [4, 4, 4_096, BATCH],
        try_all,
    );
}

/// One thread, one receiver: send a key that is not pending (cycling over
/// 4,096) and `try_recv` it; per iteration one send and one pop.
fn new_key_try_recv(c: &mut Criterion) {
    let mut g = c.benchmark_group("conflate/new_key_try_recv");
    g.throughput(Throughput::Elements(1));
    for imp in CONFLATE_IMPLS {
        g.bench_function(imp.name, |b| {
            b.iter_custom(|iters| (imp.new_key_cycle)(4_096, iters))
        });
    }
    g.finish();
}

fn drain(c: &mut Criterion) {
    let mut g = c.benchmark_group("conflate/try_recv_all");
    g.sampling_mode(SamplingMode::Flat).sample_size(10);
    for backlog in [100u64, 1_000, 10_000, 100_000] {
        g.throughput(Throughput::Elements(backlog));
        for imp in CONFLATE_IMPLS {
            if imp.runs_backlog(backlog) {
                g.bench_with_input(BenchmarkId::new(imp.name, backlog), &backlog, |b, &n| {
                    b.iter_custom(|iters| (imp.drain_cost)(n, iters))
                });
            }
        }
    }
    g.finish();
}

/// A scenario timing `iters` operations with one parameter: `(param, iters)`.
type OpsFn = fn(u64, u64) -> Duration;

/// A group of keybus and the baseline only (the peers have no such operation),
/// one op per iteration: `scenario(imp)(n, iters)` for each `n` of `inputs`.
fn keybus_and_baseline(
    c: &mut Criterion,
    group: &str,
    inputs: &[u64],
    scenario: fn(&ConflateImpl) -> OpsFn,
) {
    let mut g = c.benchmark_group(group);
    g.sampling_mode(SamplingMode::Flat).sample_size(10);
    g.throughput(Throughput::Elements(1));
    for &input in inputs {
        for imp in CONFLATE_IMPLS.iter().filter(|i| i.role != Role::Peer) {
            let f = scenario(imp);
            g.bench_with_input(BenchmarkId::new(imp.name, input), &input, |b, &n| {
                b.iter_custom(|iters| f(n, iters))
            });
        }
    }
    g.finish();
}

fn registration(c: &mut Criterion) {
    keybus_and_baseline(c, "conflate/register_drop", &[10, 1_000, 10_000], |imp| {
        imp.register_drop
    });
}

fn coalescing_send(c: &mut Criterion) {
    keybus_and_baseline(c, "conflate/coalescing_send", &[1, 4, 16, 1_000], |imp| {
        imp.coalescing_send
    });
    // Four kinds of receiver (every key, one key, a filter, an own merge), 8 hot
    // keys; keybus and the baseline (the peers have no receiver builder).
    let mut g = c.benchmark_group("conflate/coalescing_send/mixed_4_kinds_hot8");
    g.throughput(Throughput::Elements(1));
    g.bench_function("keybus", |b| b.iter_custom(keybus_builder::mixed_receivers));
    g.bench_function("baseline", |b| {
        b.iter_custom(baseline_builder::mixed_receivers)
    });
    g.finish();
}

criterion_group!(
    benches,
    no_receiver,
    fan_outs,
    new_key_try_recv,
    drain,
    registration,
    coalescing_send
);

fn main() {
    // After criterion, not a criterion measurement: percentiles of individual
    // send latencies.
    if !run_criterion(benches) {
        return;
    }
    println!("\nconflate/publisher latency while a receiver cuts a 100,000-key backlog");
    for imp in CONFLATE_IMPLS {
        let name = imp.name;
        if !imp.caps.cut_latency {
            println!("  {name:<16} skipped (see support/conflate_peers.rs)");
            continue;
        }
        let lat = (imp.cut_latency)(100_000, 5);
        println!(
            "  {name:<16} p50 {:>7} ns  p99 {:>9} ns  max {:>10} ns  ({} sends)",
            lat.p50, lat.p99, lat.max, lat.samples
        );
    }
}
