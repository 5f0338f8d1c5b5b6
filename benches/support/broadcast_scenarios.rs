//! The broadcast benchmark scenarios, written once and expanded per
//! implementation by `broadcast_scenarios!` over the adapters of
//! `broadcast_peers.rs` (`keybus::broadcast`, `keybus::baseline::broadcast`,
//! tokio broadcast, async-broadcast, bus, crossbeam-channel). Shared by
//! `benches/broadcast.rs` (criterion) and `examples/bench-report.rs`.
//!
//! Every ring holds [`CAPACITY`] values of [`Sample`] (32 bytes).
//!
//! - `append(readers, n)`: the writer's cost per append on a full ring with
//!   `readers` attached readers that do not read (0 to 16: the writer-cost
//!   series). Single thread.
//! - `readers(n_readers, n)`: one writer appends `n` values as fast as it can and
//!   closes; `n_readers` threads read until closed. Timed from the start barrier
//!   to the last reader's end; reports what was delivered and what was lost
//!   (lossy implementations let the writer run ahead; `bus` makes it wait).
//! - `slow_reader(n, work)`: a ring of [`SLOW_CAPACITY`], one reader that spins
//!   `work` per value; times the writer alone (the writer must not notice the
//!   reader) and reports how much the reader lost and whether it was told.

#![allow(dead_code)]

#[path = "common.rs"]
mod common;
pub use common::*;

/// The implementations, behind one surface.
#[path = "broadcast_peers.rs"]
#[macro_use]
pub mod peers;
pub use peers::{sample, Caps, Next};

/// Ring capacity in every scenario but the slow reader.
pub const CAPACITY: usize = 1024;
/// Ring capacity in the slow-reader scenario: small, so the reader is lapped.
pub const SLOW_CAPACITY: usize = 64;

/// What the readers of one run got.
#[derive(Debug, Clone, Copy, Default)]
pub struct Outcome {
    /// The timed part (see each scenario).
    pub elapsed: std::time::Duration,
    /// Values handed to readers, over all readers.
    pub delivered: u64,
    /// Values the readers missed (from sequence numbers), over all readers.
    pub lost: u64,
    /// `Gap`/`Lagged` reports the readers received.
    pub gaps: u64,
}

impl Outcome {
    /// Delivered over offered (`appends × readers`), in percent.
    pub fn delivered_pct(&self, offered: u64) -> f64 {
        100.0 * self.delivered as f64 / offered.max(1) as f64
    }
}

/// Busy work of about `iters` short steps, that the optimizer cannot remove.
#[inline]
pub fn spin_work(iters: u64) {
    let mut x = 0u64;
    for i in 0..iters {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
    }
    std::hint::black_box(x);
}

/// Expands the scenarios for one adapter module of `peers`.
macro_rules! broadcast_scenarios {
    ($name:ident, $($m:tt)::+) => {
        pub mod $name {
            use super::*;
            use $($m)::+ as imp;
            use std::time::{Duration, Instant};

            /// What this implementation takes part in.
            pub const CAPS: Caps = imp::CAPS;

            /// Whether `append` with `readers` idle readers runs here.
            pub fn runs_append(readers: usize) -> bool {
                readers == 0 || CAPS.idle_readers
            }

            /// Reads until closed; counts deliveries, losses and gap reports.
            fn drain(mut r: imp::Reader, last: u64, work: u64) -> Outcome {
                let mut out = Outcome::default();
                let mut seen = 0u64;
                loop {
                    match r.next() {
                        Next::Value(v) => {
                            out.delivered += 1;
                            out.lost += v[0] - seen - 1;
                            seen = v[0];
                            if work > 0 {
                                spin_work(work);
                            }
                        }
                        Next::Gap => out.gaps += 1,
                        Next::Closed => break,
                    }
                }
                out.lost += last - seen;
                out
            }

            /// `appends` appends on a full ring with `readers` readers attached
            /// that never read.
            pub fn append(readers: usize, appends: u64) -> Duration {
                let mut w = imp::Writer::new(CAPACITY);
                let idle: Vec<_> = (0..readers).map(|_| w.reader()).collect();
                let mut seq = 0;
                for _ in 0..CAPACITY {
                    seq += 1;
                    w.append(sample(seq));
                }
                let start = Instant::now();
                for _ in 0..appends {
                    seq += 1;
                    w.append(std::hint::black_box(sample(seq)));
                }
                let elapsed = start.elapsed();
                w.close();
                drop(idle);
                elapsed
            }

            /// One writer, `n_readers` reading threads, `appends` values.
            pub fn readers(n_readers: usize, appends: u64) -> Outcome {
                let mut w = imp::Writer::new(CAPACITY);
                let rs: Vec<_> = (0..n_readers).map(|_| w.reader()).collect();
                let results = std::sync::Mutex::new(Vec::new());
                let consumers = rs
                    .into_iter()
                    .map(|r| {
                        let results = &results;
                        Box::new(move || {
                            let o = drain(r, appends, 0);
                            results.lock().unwrap().push(o);
                        }) as Box<dyn FnOnce() + Send + '_>
                    })
                    .collect();
                let producer = Box::new(move || {
                    for seq in 1..=appends {
                        w.append(sample(seq));
                    }
                    w.close();
                }) as Box<dyn FnOnce() + Send + '_>;
                let elapsed = timed_run(vec![producer], consumers, || {});
                let mut out = Outcome {
                    elapsed,
                    ..Outcome::default()
                };
                for o in results.into_inner().unwrap() {
                    out.delivered += o.delivered;
                    out.lost += o.lost;
                    out.gaps += o.gaps;
                }
                out
            }

            /// `appends` values into a [`SLOW_CAPACITY`] ring with one reader that
            /// spins `work` steps per value. `elapsed` is the writer's time alone.
            /// Not run where `CAPS.idle_readers` is false (the writer would wait).
            pub fn slow_reader(appends: u64, work: u64) -> Outcome {
                let mut w = imp::Writer::new(SLOW_CAPACITY);
                let r = w.reader();
                std::thread::scope(|s| {
                    let reader = s.spawn(move || drain(r, appends, work));
                    let start = Instant::now();
                    for seq in 1..=appends {
                        w.append(std::hint::black_box(sample(seq)));
                    }
                    let elapsed = start.elapsed();
                    w.close();
                    Outcome {
                        elapsed,
                        ..reader.join().unwrap()
                    }
                })
            }
        }
    };
}
