//! The cost of one `metrics` update through `keybus::metrics` against the floor
//! (`metrics-util`'s atomic registry: one `AtomicU64` per key) and the facade's
//! no-op recorder, in the same run. Needs the `metrics` feature:
//!
//! ```text
//! cargo bench -p keybus-benches --features metrics --bench metrics
//! ```
//!
//! Groups `metrics/counter_macro` (`counter!("requests").increment(1)` per update),
//! `metrics/counter_handle` (a kept handle's `increment(1)`) and
//! `metrics/histogram_handle` (a kept handle's `record(v)`), each with keybus
//! at 0 receivers, 2 idle receivers (every update coalesces) and 2 receivers
//! cutting every 1 ms on their own threads; see `support/metrics_scenarios.rs`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::time::Duration;

#[path = "../support/metrics_scenarios.rs"]
mod scenarios;
use scenarios::*;

/// Updates per criterion iteration in the threaded (cutting) runs: spawning the
/// receiver threads is noise against it.
const BATCH: u64 = 200_000;

fn counters(c: &mut Criterion) {
    for path in Path::ALL {
        let mut g = c.benchmark_group(format!("metrics/{}", path.name()));
        g.throughput(Throughput::Elements(1))
            .measurement_time(Duration::from_secs(3));
        for imp in METRICS_IMPLS {
            g.bench_function(imp.name, |b| {
                b.iter_custom(|iters| {
                    // Whole batches, so each run pays its setup once per BATCH.
                    let batches = iters.div_ceil(BATCH);
                    let per = iters.div_ceil(batches);
                    let d: Duration = (0..batches).map(|_| (imp.run)(path, per)).sum();
                    // Scale to exactly `iters` updates.
                    d.mul_f64(iters as f64 / (per * batches) as f64)
                })
            });
        }
        g.finish();
    }
}

criterion_group!(benches, counters);
criterion_main!(benches);
