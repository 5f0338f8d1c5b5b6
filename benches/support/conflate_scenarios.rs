//! The conflate benchmark scenarios, written once and expanded per implementation
//! (`keybus::conflate`, `keybus::baseline::conflate`) by `conflate_scenarios!`.
//! Shared by `benches/conflate.rs` (criterion) and `examples/bench-report.rs`.
//!
//! Every scenario returns the wall time of `sends` sends *including* the receivers'
//! drain after a graceful close, so a design cannot look fast by leaving work
//! behind in its queues.

#![allow(dead_code)]

use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Percentiles of publisher send latency, in nanoseconds.
#[derive(Debug, Clone, Copy)]
pub struct Latency {
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
    pub samples: usize,
}

impl Latency {
    pub fn from_samples(mut ns: Vec<u64>) -> Latency {
        ns.sort_unstable();
        let at = |q: f64| ns[((ns.len() - 1) as f64 * q) as usize];
        Latency {
            p50: at(0.50),
            p99: at(0.99),
            max: *ns.last().unwrap(),
            samples: ns.len(),
        }
    }
}

/// Splits `total` sends over `senders` as evenly as possible.
pub fn share(total: u64, senders: u64, i: u64) -> u64 {
    total / senders + u64::from(i < total % senders)
}

/// Runs `senders` producer threads and `receivers` consumer threads around one
/// start barrier; returns the time from the barrier to the last consumer's end.
pub fn timed_run(
    senders: Vec<Box<dyn FnOnce() + Send>>,
    receivers: Vec<Box<dyn FnOnce() + Send>>,
    after_senders: impl FnOnce(),
) -> Duration {
    let barrier = Barrier::new(senders.len() + receivers.len() + 1);
    std::thread::scope(|s| {
        let producers: Vec<_> = senders
            .into_iter()
            .map(|f| {
                let b = &barrier;
                s.spawn(move || {
                    b.wait();
                    f()
                })
            })
            .collect();
        let consumers: Vec<_> = receivers
            .into_iter()
            .map(|f| {
                let b = &barrier;
                s.spawn(move || {
                    b.wait();
                    f()
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        for p in producers {
            p.join().unwrap();
        }
        after_senders();
        for c in consumers {
            c.join().unwrap();
        }
        start.elapsed()
    })
}

/// Expands the scenarios for one implementation module.
macro_rules! conflate_scenarios {
    ($name:ident, $($m:tt)::+) => {
        pub mod $name {
            use super::*;
            use $($m)::+ as imp;
            use std::time::{Duration, Instant};

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
}
