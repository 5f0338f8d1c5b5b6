//! The conflate benchmark scenarios, written once and expanded per implementation
//! by `conflate_scenarios!`: `keybus::conflate`, `keybus::baseline::conflate`, and
//! the peers of `conflate_peers.rs` (hand-rolled mutex map, tokio watch per key,
//! tokio broadcast), which expose the same small surface. Shared by
//! `benches/conflate.rs` (criterion) and `examples/bench-report.rs`.
//!
//! Every throughput scenario returns the wall time of `sends` sends *including*
//! the receivers' drain after a graceful close, so a design cannot look fast by
//! leaving work behind in its queues.
//!
//! Each expansion carries `CAPS` ([`peers::Caps`]): which key sets and backlogs the
//! implementation takes part in. keybus and the baseline take part in everything;
//! each peer's module says what it skips and why.

#![allow(dead_code)]

#[path = "common.rs"]
mod common;
pub use common::*;

/// The peers (`mutex_map`, `tokio_watch`, `tokio_broadcast`) and their `Caps`.
#[path = "conflate_peers.rs"]
pub mod peers;

/// Expands the scenarios for one implementation module:
/// `conflate_scenarios!(name, path::to::module)` (takes part in everything) or
/// `conflate_scenarios!(name, path::to::module, caps = EXPR)`.
macro_rules! conflate_scenarios {
    ($name:ident, $($m:tt)::+, caps = $caps:expr) => {
        pub mod $name {
            use super::*;
            use $($m)::+ as imp;
            use std::time::{Duration, Instant};

            /// What this implementation takes part in.
            pub const CAPS: peers::Caps = $caps;

            /// Whether `fan_out` over `keys` keys runs here.
            pub fn runs_keys(keys: u64) -> bool {
                keys <= CAPS.max_keys
            }

            /// Whether a `backlog`-key backlog (`drain_cost`, `cut_latency`) runs here.
            pub fn runs_backlog(backlog: u64) -> bool {
                backlog <= CAPS.max_backlog.min(CAPS.max_keys)
            }

            /// `sends` sends on a hub with no receiver.
            pub fn no_receiver(sends: u64) -> Duration {
                let hub: imp::Hub<u64, u64> = imp::Hub::new();
                let tx = hub.sender();
                let start = Instant::now();
                for i in 0..sends {
                    tx.send(std::hint::black_box(i & 63), i).unwrap();
                }
                start.elapsed()
            }

            /// `senders` threads send `sends` in all over `keys` keys (each sender
            /// cycles through them); `receivers` threads `recv` until closed.
            /// With `keys` >= `sends` every send is a fresh (cold) key.
            pub fn fan_out(senders: u64, receivers: u64, keys: u64, sends: u64) -> Duration {
                let hub: imp::Hub<u64, u64> = imp::Hub::new();
                let rxs: Vec<_> = (0..receivers).map(|_| hub.receiver()).collect();
                let txs: Vec<_> = (0..senders).map(|_| hub.sender()).collect();
                drop(hub);
                let producers = txs
                    .into_iter()
                    .enumerate()
                    .map(|(i, tx)| {
                        let n = share(sends, senders, i as u64);
                        Box::new(move || {
                            let mut k = (i as u64 * 7919) % keys;
                            for v in 0..n {
                                tx.send(k, v).unwrap();
                                k += 1;
                                if k == keys {
                                    k = 0;
                                }
                            }
                        }) as Box<dyn FnOnce() + Send>
                    })
                    .collect();
                let consumers = rxs
                    .into_iter()
                    .map(|mut rx| {
                        Box::new(move || {
                            let mut folded = 0u64;
                            while let Ok(e) = rx.recv() {
                                folded += e.sends;
                            }
                            std::hint::black_box(folded);
                        }) as Box<dyn FnOnce() + Send>
                    })
                    .collect();
                // Senders are dropped by their threads: the send side closes then.
                timed_run(producers, consumers, || {})
            }

            /// The cost of `try_recv_all` alone over a `backlog`-key backlog,
            /// `iters` times: each round refills keys `0..backlog` (not timed) and
            /// times one cut. Warm: the same keys every round.
            pub fn drain_cost(backlog: u64, iters: u64) -> Duration {
                let hub: imp::Hub<u64, u64> = imp::Hub::new();
                let mut rx = hub.receiver();
                let tx = hub.sender();
                let mut total = Duration::ZERO;
                for round in 0..iters.max(1) {
                    for k in 0..backlog {
                        tx.send(k, round).unwrap();
                    }
                    let start = Instant::now();
                    let batch = rx.try_recv_all().unwrap();
                    total += start.elapsed();
                    assert_eq!(batch.len() as u64, backlog, "one entry per pending key");
                    drop(std::hint::black_box(batch));
                }
                total
            }

            /// Publisher send latency while one receiver repeatedly takes
            /// `try_recv_all` of a `backlog`-key backlog: the publisher refills the
            /// backlog (`backlog` fresh keys per round) and times every send.
            pub fn cut_latency(backlog: u64, rounds: u64) -> Latency {
                let hub: imp::Hub<u64, u64> = imp::Hub::new();
                let mut rx = hub.receiver();
                let tx = hub.sender();
                drop(hub);
                for k in 0..backlog {
                    tx.send(k, k).unwrap();
                }
                let mut samples = Vec::with_capacity((backlog * rounds) as usize);
                std::thread::scope(|s| {
                    let consumer = s.spawn(move || {
                        let mut taken = 0u64;
                        loop {
                            match rx.try_recv_all() {
                                Ok(batch) => taken += batch.len() as u64,
                                Err(keybus::TryRecvError::Closed) => break,
                                Err(keybus::TryRecvError::Empty) => std::thread::yield_now(),
                            }
                        }
                        taken
                    });
                    for round in 0..rounds {
                        for k in 0..backlog {
                            let key = (round + 1) * backlog + k;
                            let t = Instant::now();
                            tx.send(key, k).unwrap();
                            samples.push(t.elapsed().as_nanos() as u64);
                        }
                    }
                    drop(tx);
                    std::hint::black_box(consumer.join().unwrap());
                });
                Latency::from_samples(samples)
            }
        }
    };
    ($name:ident, $($m:tt)::+) => {
        conflate_scenarios!($name, $($m)::+, caps = peers::Caps::ALL);
    };
}
