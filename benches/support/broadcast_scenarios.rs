//! The broadcast benchmark scenarios, written once and expanded per
//! implementation by `broadcast_scenarios!` over the [`Ring`]s of
//! `broadcast_peers.rs` (`keybus::broadcast`, `keybus::baseline::broadcast`,
//! tokio broadcast, async-broadcast, bus, crossbeam-channel). Shared by
//! `benches/benches/broadcast.rs` (criterion) and `benches/src/bin/bench-report/`.
//!
//! Every ring holds [`CAPACITY`] values of [`Sample`] (32 bytes).
//!
//! - `append(readers, n)`: the writer's cost per append on a full ring with
//!   `readers` attached readers that do not read (0 to 16: the writer-cost
//!   series). Single thread.
//! - `readers(n_readers, n)`: reader throughput. One writer appends `n` values and
//!   closes; `n_readers` threads read every one of them. The writer is paced the
//!   same way for every implementation: it never runs more than [`WINDOW`] values
//!   ahead of the slowest reader (each reader publishes its progress), so no
//!   value is lost and the run measures hand-off, not how much a lossy design
//!   can skip. Timed from the first thread's start to the last reader's end;
//!   throughput is deliveries (`n × n_readers`) per second.
//! - `append_after_threads(threads, n)`: `append(0, n)` after `threads` threads
//!   read another buffer concurrently and exited: the cost of process-wide state
//!   an implementation keeps (keybus's slot cells once used arc-swap, whose debt
//!   list grows with the peak number of threads and never shrinks).
//! - `append_live_reader_threads(threads, n)`: appends on a full ring while
//!   `threads` threads, all alive at once, hold a reader of that ring, have each
//!   read a value through it, and wait (parked) until the appends are done: the
//!   writer's cost with many live reading threads. Not run where
//!   `CAPS.idle_readers` is false (a reader that waits blocks the writer).
//! - `slow_reader(n, work)`: a ring of [`SLOW_CAPACITY`], one reader that spins
//!   `work` per value; times the writer alone (the writer must not notice the
//!   reader) and reports how much the reader lost and whether it was told.

#![allow(dead_code)]

// `support/common.rs`, declared once by the including crate as `common` next to
// this module (so that a driver including both scenario files loads it once).
pub use super::common::*;

/// The implementations, behind one surface.
#[path = "broadcast_peers.rs"]
pub mod peers;
pub use peers::{sample, AsyncBroadcast, Caps, Crossbeam, Next, Ring, RingReader, Sample};

/// Ring capacity in every scenario but the slow reader.
pub const CAPACITY: usize = 1024;
/// Ring capacity in the slow-reader scenario: small, so the reader is lapped.
pub const SLOW_CAPACITY: usize = 64;
/// How far the paced writer of `readers` may run ahead of the slowest reader.
pub const WINDOW: u64 = CAPACITY as u64 / 2;

/// A reader's published progress (last sequence number read), on its own
/// cache line.
#[repr(align(128))]
#[derive(Default)]
pub struct Progress(pub std::sync::atomic::AtomicU64);

/// Blocks (spin, then yield) until every reader is within `WINDOW` of `seq`;
/// returns the slowest reader's progress.
pub fn wait_for_readers(progress: &[Progress], seq: u64) -> u64 {
    use std::sync::atomic::Ordering;
    let mut spins = 0u32;
    loop {
        let floor = progress
            .iter()
            .map(|p| p.0.load(Ordering::Acquire))
            .min()
            .unwrap_or(u64::MAX);
        if seq <= floor.saturating_add(WINDOW) {
            return floor;
        }
        spins += 1;
        if spins < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

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

/// Expands the scenarios for one [`Ring`] of `peers`.
macro_rules! broadcast_scenarios {
    ($name:ident, $ring:ty) => {
        pub mod $name {
            use super::*;
            use std::time::{Duration, Instant};

            /// The writer.
            type W = $ring;
            /// Its reader.
            type R = <W as Ring>::Reader;

            /// What this implementation takes part in.
            pub const CAPS: Caps = W::CAPS;

            /// Reads until closed; counts deliveries, losses and gap reports, and
            /// publishes its progress to `progress`.
            fn drain(mut r: R, last: u64, work: u64, progress: Option<&Progress>) -> Outcome {
                let mut out = Outcome::default();
                let mut seen = 0u64;
                loop {
                    match r.next_sample() {
                        Next::Value(v) => {
                            out.delivered += 1;
                            out.lost += v[0] - seen - 1;
                            seen = v[0];
                            if let Some(p) = progress {
                                p.0.store(seen, std::sync::atomic::Ordering::Release);
                            }
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

            /// A ring of [`CAPACITY`] with `readers` readers attached, then
            /// filled (untimed): the writer, the readers, the last sequence
            /// number appended.
            fn full_ring(readers: usize) -> (W, Vec<R>, u64) {
                let mut w = W::with_capacity(CAPACITY);
                let rs: Vec<_> = (0..readers).map(|_| w.attach()).collect();
                let mut seq = 0;
                for _ in 0..CAPACITY {
                    seq += 1;
                    w.publish(sample(seq));
                }
                (w, rs, seq)
            }

            /// Times `appends` appends after sequence number `seq`.
            fn timed_appends(w: &mut W, mut seq: u64, appends: u64) -> Duration {
                let start = Instant::now();
                for _ in 0..appends {
                    seq += 1;
                    w.publish(std::hint::black_box(sample(seq)));
                }
                start.elapsed()
            }

            /// `appends` appends on a full ring with `readers` readers attached
            /// that never read.
            pub fn append(readers: usize, appends: u64) -> Duration {
                let (mut w, idle, seq) = full_ring(readers);
                let elapsed = timed_appends(&mut w, seq, appends);
                w.shut();
                drop(idle);
                elapsed
            }

            /// `append(0, appends)` in a process where `threads` threads have
            /// read (another buffer of) this implementation at the same time,
            /// then exited. Nothing of theirs is left but what the
            /// implementation keeps process-wide.
            pub fn append_after_threads(threads: usize, appends: u64) -> Duration {
                let mut other = W::with_capacity(16);
                let rs: Vec<_> = (0..threads).map(|_| other.attach()).collect();
                other.publish(sample(1));
                let all_reading = std::sync::Barrier::new(threads);
                std::thread::scope(|s| {
                    for mut r in rs {
                        let all_reading = &all_reading;
                        s.spawn(move || {
                            all_reading.wait();
                            assert!(matches!(r.next_sample(), Next::Value(_)));
                            // Every thread is alive while every other reads.
                            all_reading.wait();
                        });
                    }
                });
                other.shut();
                append(0, appends)
            }

            /// `appends` appends on a full ring while `threads` threads, all alive,
            /// each hold a reader of it and have read one value through it.
            /// Only the appends are timed; the threads park on a barrier meanwhile.
            pub fn append_live_reader_threads(threads: usize, appends: u64) -> Duration {
                let (mut w, rs, seq) = full_ring(threads);
                let gate = std::sync::Barrier::new(threads + 1);
                let elapsed = std::thread::scope(|s| {
                    for mut r in rs {
                        let gate = &gate;
                        s.spawn(move || {
                            assert!(matches!(r.next_sample(), Next::Value(_)));
                            gate.wait(); // every thread has read and is alive
                            gate.wait(); // the appends are done
                            drop(r);
                        });
                    }
                    gate.wait();
                    let elapsed = timed_appends(&mut w, seq, appends);
                    gate.wait();
                    elapsed
                });
                w.shut();
                elapsed
            }

            /// One paced writer, `n_readers` reading threads, `appends` values.
            pub fn readers(n_readers: usize, appends: u64) -> Outcome {
                let mut w = W::with_capacity(CAPACITY);
                let rs: Vec<_> = (0..n_readers).map(|_| w.attach()).collect();
                let progress: Vec<Progress> = (0..n_readers).map(|_| Progress::default()).collect();
                let results = std::sync::Mutex::new(Vec::new());
                let consumers = rs
                    .into_iter()
                    .zip(&progress)
                    .map(|(r, p)| {
                        let results = &results;
                        Box::new(move || {
                            let o = drain(r, appends, 0, Some(p));
                            results.lock().unwrap().push(o);
                        }) as Box<dyn FnOnce() + Send + '_>
                    })
                    .collect();
                let progress = &progress;
                let producer = Box::new(move || {
                    let mut floor = 0;
                    for seq in 1..=appends {
                        if seq > floor + WINDOW {
                            floor = wait_for_readers(progress, seq);
                        }
                        w.publish(sample(seq));
                    }
                    w.shut();
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
                let mut w = W::with_capacity(SLOW_CAPACITY);
                let r = w.attach();
                std::thread::scope(|s| {
                    let reader = s.spawn(move || drain(r, appends, work, None));
                    let start = Instant::now();
                    for seq in 1..=appends {
                        w.publish(std::hint::black_box(sample(seq)));
                    }
                    let elapsed = start.elapsed();
                    w.shut();
                    Outcome {
                        elapsed,
                        ..reader.join().unwrap()
                    }
                })
            }
        }
    };
}

/// One implementation's scenarios, as plain function pointers.
#[derive(Clone, Copy)]
pub struct BroadcastImpl {
    pub name: &'static str,
    pub role: Role,
    pub caps: Caps,
    pub append: fn(usize, u64) -> std::time::Duration,
    pub append_after_threads: fn(usize, u64) -> std::time::Duration,
    pub append_live_reader_threads: fn(usize, u64) -> std::time::Duration,
    pub readers: fn(usize, u64) -> Outcome,
    pub slow_reader: fn(u64, u64) -> Outcome,
}

impl BroadcastImpl {
    /// Whether `append` with `readers` idle readers runs here.
    pub fn runs_append(&self, readers: usize) -> bool {
        readers == 0 || self.caps.idle_readers
    }

    /// Whether `slow_reader` runs here.
    pub fn runs_slow_reader(&self) -> bool {
        self.caps.idle_readers
    }
}

/// Expands the scenarios for keybus, the baseline and every peer, and lists them
/// in `BROADCAST_IMPLS` (keybus first, then the baseline, then the peers).
macro_rules! broadcast_suite {
    () => {
        broadcast_scenarios!(keybus_impl, keybus::broadcast::Buffer<Sample>);
        broadcast_scenarios!(baseline_impl, keybus::baseline::broadcast::Buffer<Sample>);
        broadcast_scenarios!(tokio_impl, tokio::sync::broadcast::Sender<Sample>);
        broadcast_scenarios!(async_broadcast_impl, AsyncBroadcast);
        broadcast_scenarios!(bus_impl, ::bus::Bus<Sample>);
        broadcast_scenarios!(crossbeam_impl, Crossbeam);

        pub const BROADCAST_IMPLS: [BroadcastImpl; 6] = impl_table!(BroadcastImpl {
            append,
            append_after_threads,
            append_live_reader_threads,
            readers,
            slow_reader,
        }:
            "keybus" => Keybus, keybus_impl;
            "baseline" => Baseline, baseline_impl;
            "tokio" => Peer, tokio_impl;
            "async-broadcast" => Peer, async_broadcast_impl;
            "bus" => Peer, bus_impl;
            "crossbeam" => Peer, crossbeam_impl;
        );
    };
}
