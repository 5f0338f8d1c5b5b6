//! The conflate benchmark scenarios, written once and expanded per implementation
//! by `conflate_scenarios!`: `keybus::conflate`, `keybus::baseline::conflate`, and
//! the peers of `conflate_peers.rs` (hand-rolled mutex map, tokio watch per key,
//! tokio broadcast), which expose the same small surface. Shared by
//! `benches/benches/conflate.rs` (criterion) and `benches/src/bin/bench-report/`.
//!
//! Every throughput scenario returns the wall time of `sends` sends *including*
//! the receivers' drain after a graceful close, so a design cannot look fast by
//! leaving work behind in its queues; its consumers either `recv` or take whole
//! backlogs with `try_recv_all` (yielding when empty).
//!
//! `builder_scenarios!` (`conflate_builder_scenarios.rs`) adds the scenarios
//! that need receiver filters, per-receiver merges or `HubStats`, for keybus
//! and the baseline only.
//!
//! Each expansion carries `CAPS` ([`peers::Caps`]): which key sets and backlogs the
//! implementation takes part in. keybus and the baseline take part in everything;
//! each peer's module says what it skips and why.

#![allow(dead_code)]

// `support/common.rs`, declared once by the including crate as `common` next to
// this module (so that a driver including both scenario files loads it once).
pub use super::common::*;

/// The peers (`mutex_map`, `tokio_watch`, `tokio_broadcast`) and their `Caps`.
#[path = "conflate_peers.rs"]
pub mod peers;

/// `builder_scenarios!`: the scenarios only keybus and the baseline can run
/// (receiver filters and merges, `HubStats`).
#[macro_use]
#[path = "conflate_builder_scenarios.rs"]
mod builder;

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
                fan_out_counted(senders, receivers, keys, sends).0
            }

            /// [`fan_out`], also returning the sends the receivers' events stand
            /// for (the sum of `Event::sends`, over every receiver): `sends ×
            /// receivers` where every send is accounted for.
            pub fn fan_out_counted(
                senders: u64,
                receivers: u64,
                keys: u64,
                sends: u64,
            ) -> (Duration, u64) {
                fan_out_with(senders, receivers, keys, sends, |rx| {
                    let mut folded = 0u64;
                    while let Ok(e) = rx.recv() {
                        folded += e.sends;
                    }
                    folded
                })
            }

            /// [`fan_out_counted`] with consumers that take whole backlogs:
            /// each receiver thread loops on `try_recv_all`, yields the core
            /// when it finds nothing pending, and stops at `Closed` (after the
            /// graceful close has handed it the last backlog), so the drain
            /// after the close is timed as with `recv`.
            pub fn fan_out_try_all(
                senders: u64,
                receivers: u64,
                keys: u64,
                sends: u64,
            ) -> (Duration, u64) {
                fan_out_with(senders, receivers, keys, sends, |rx| {
                    let mut folded = 0u64;
                    loop {
                        match rx.try_recv_all() {
                            Ok(batch) => folded += batch.iter().map(|e| e.sends).sum::<u64>(),
                            Err(keybus::TryRecvError::Empty) => std::thread::yield_now(),
                            Err(keybus::TryRecvError::Closed) => break folded,
                        }
                    }
                })
            }

            /// The threaded fan-out: `senders` threads send `sends` in all over
            /// `keys` keys (each sender cycling through them from its own
            /// offset), one thread per receiver runs `consume` until closed and
            /// returns the sends its events stood for. The time runs from the
            /// first thread's start to the last consumer's end, the drain after
            /// the close included; returns it and the sum of `consume`'s counts.
            fn fan_out_with(
                senders: u64,
                receivers: u64,
                keys: u64,
                sends: u64,
                consume: fn(&mut imp::Receiver<u64, u64>) -> u64,
            ) -> (Duration, u64) {
                let accounted = std::sync::atomic::AtomicU64::new(0);
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
                        let accounted = &accounted;
                        Box::new(move || {
                            let folded = consume(&mut rx);
                            accounted.fetch_add(folded, std::sync::atomic::Ordering::Relaxed);
                        }) as Box<dyn FnOnce() + Send + '_>
                    })
                    .collect();
                // Senders are dropped by their threads: the send side closes then.
                let elapsed = timed_run(producers, consumers, || {});
                (elapsed, accounted.into_inner())
            }

            /// One thread, one receiver: `iters` times, send a key that is not
            /// pending and take it back with `try_recv` (per op: one send of a
            /// new key, its queue push, one pop). The keys cycle over `keys`
            /// (4,096 in the reports): enough that a one-entry or small cache of
            /// the last key cannot serve the send, few enough that the keys'
            /// state stays in cache, so this times the code path rather than
            /// memory misses. One untimed pass over the keys first, so every
            /// timed send is for a key the hub has seen but the receiver does
            /// not hold (nothing is allocated for a never-seen key in the loop).
            pub fn new_key_cycle(keys: u64, iters: u64) -> Duration {
                let hub: imp::Hub<u64, u64> = imp::Hub::new();
                let mut rx = hub.receiver();
                let tx = hub.sender();
                for k in 0..keys {
                    tx.send(k, k).unwrap();
                    rx.try_recv().unwrap();
                }
                let mut k = 0;
                let start = Instant::now();
                for i in 0..iters {
                    tx.send(std::hint::black_box(k), i).unwrap();
                    let e = rx.try_recv().unwrap();
                    assert!(e.key == k && e.sends == 1, "the key just sent, alone");
                    k += 1;
                    if k == keys {
                        k = 0;
                    }
                }
                let elapsed = start.elapsed();
                assert!(rx.try_recv().is_err(), "nothing left behind");
                elapsed
            }

            /// The cost of `try_recv_all` alone over a `backlog`-key backlog,
            /// `iters` times: each round refills keys `0..backlog` (not timed) and
            /// times one cut. Warm: the same keys every round.
            pub fn drain_cost(backlog: u64, iters: u64) -> Duration {
                let hub: imp::Hub<u64, u64> = imp::Hub::new();
                let rx = hub.receiver();
                drain_cost_of(rx, hub.sender(), backlog, iters)
            }

            /// [`drain_cost`] for a consumer that reconnected: the hub's
            /// receiver is dropped and a new one registered, alone again,
            /// before the timed cuts.
            pub fn drain_cost_reconnected(backlog: u64, iters: u64) -> Duration {
                let hub: imp::Hub<u64, u64> = imp::Hub::new();
                drop(hub.receiver());
                let rx = hub.receiver();
                drain_cost_of(rx, hub.sender(), backlog, iters)
            }

            fn drain_cost_of(
                mut rx: imp::Receiver<u64, u64>,
                tx: imp::Sender<u64, u64>,
                backlog: u64,
                iters: u64,
            ) -> Duration {
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

            /// Registration churn: with `standing` receivers registered (and
            /// idle), `iters` times register one more receiver and drop it.
            /// Per op: one register plus one deregister.
            pub fn register_drop(standing: u64, iters: u64) -> Duration {
                let hub: imp::Hub<u64, u64> = imp::Hub::new();
                let standing: Vec<_> = (0..standing).map(|_| hub.receiver()).collect();
                let start = Instant::now();
                for _ in 0..iters {
                    drop(std::hint::black_box(hub.receiver()));
                }
                let elapsed = start.elapsed();
                drop(standing);
                elapsed
            }

            /// One thread, `receivers` idle receivers, every key of 64 already
            /// pending at each of them (filled untimed): `sends` coalescing
            /// sends over those 64 keys. Per op: one send delivered to every
            /// receiver.
            pub fn coalescing_send(receivers: u64, sends: u64) -> Duration {
                let hub: imp::Hub<u64, u64> = imp::Hub::new();
                let rxs: Vec<_> = (0..receivers).map(|_| hub.receiver()).collect();
                let tx = hub.sender();
                for k in 0..64 {
                    tx.send(k, k).unwrap();
                }
                let start = Instant::now();
                for i in 0..sends {
                    tx.send(std::hint::black_box(i & 63), i).unwrap();
                }
                let elapsed = start.elapsed();
                drop(rxs);
                elapsed
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

/// The state-table scenarios, for the implementations with `Hub::builder()`
/// (keybus and the baseline): the same work with and without `retain_latest`,
/// so the table's cost on the send path shows as a same-run ratio.
/// `retain_scenarios!(name, path::to::module)`.
macro_rules! retain_scenarios {
    ($name:ident, $($m:tt)::+) => {
        #[allow(dead_code)]
        pub mod $name {
            use $($m)::+ as imp;
            use std::time::{Duration, Instant};

            fn hub(retain: bool) -> imp::Hub<u64, u64> {
                if retain {
                    imp::Hub::builder().retain_latest().build()
                } else {
                    imp::Hub::new()
                }
            }

            /// `sends` sends over 64 keys on a hub with no receiver.
            pub fn no_receiver(retain: bool, sends: u64) -> Duration {
                let hub = hub(retain);
                let tx = hub.sender();
                let start = Instant::now();
                for i in 0..sends {
                    tx.send(std::hint::black_box(i & 63), i).unwrap();
                }
                start.elapsed()
            }

            /// One sender thread, one receiver thread (`recv` until closed), 64
            /// hot keys; includes the drain after the close.
            pub fn hot_1x1(retain: bool, sends: u64) -> Duration {
                let hub = hub(retain);
                let tx = hub.sender();
                let mut rx = hub.receiver();
                drop(hub);
                let start = Instant::now();
                std::thread::scope(|s| {
                    s.spawn(move || while rx.recv().is_ok() {});
                    s.spawn(move || {
                        for i in 0..sends {
                            tx.send(i & 63, i).unwrap();
                        }
                    });
                });
                start.elapsed()
            }

            /// One thread: `sends` sends over 64 keys into one receiver, which
            /// takes the backlog with `try_recv_all` every 64 sends. The send
            /// path alone, without a second core's noise.
            pub fn hot_1thread(retain: bool, sends: u64) -> Duration {
                let hub = hub(retain);
                let tx = hub.sender();
                let mut rx = hub.receiver();
                let start = Instant::now();
                for i in 0..sends {
                    tx.send(i & 63, i).unwrap();
                    if i & 63 == 63 {
                        std::hint::black_box(rx.try_recv_all().unwrap());
                    }
                }
                start.elapsed()
            }

            /// [`hot_1thread`]'s work, its two halves timed apart: the time
            /// of its sends alone (`cuts: false`) or of its `try_recv_all`
            /// cuts alone (`cuts: true`; one entry per send), so that what a
            /// send and what a consumed entry cost show side by side. Two
            /// clock reads per 64 sends on top.
            fn hot_1thread_half(retain: bool, sends: u64, cuts: bool) -> Duration {
                let hub = hub(retain);
                let tx = hub.sender();
                let mut rx = hub.receiver();
                let mut spent = Duration::ZERO;
                let mut i = 0;
                while i < sends {
                    let start = Instant::now();
                    for k in 0..64.min(sends - i) {
                        tx.send(k, i + k).unwrap();
                    }
                    let sent = Instant::now();
                    std::hint::black_box(rx.try_recv_all().unwrap());
                    spent += if cuts { sent.elapsed() } else { sent - start };
                    i += 64;
                }
                spent
            }

            /// [`hot_1thread`]'s sends alone (see `hot_1thread_half`).
            pub fn hot_1thread_sends(retain: bool, sends: u64) -> Duration {
                hot_1thread_half(retain, sends, false)
            }

            /// [`hot_1thread`]'s cuts alone, per entry taken (see
            /// `hot_1thread_half`).
            pub fn hot_1thread_cuts(retain: bool, sends: u64) -> Duration {
                hot_1thread_half(retain, sends, true)
            }
        }
    };
}

/// One implementation's scenarios, as plain function pointers.
#[derive(Clone, Copy)]
pub struct ConflateImpl {
    pub name: &'static str,
    pub role: Role,
    pub caps: peers::Caps,
    pub no_receiver: fn(u64) -> std::time::Duration,
    pub fan_out: fn(u64, u64, u64, u64) -> std::time::Duration,
    pub fan_out_counted: fn(u64, u64, u64, u64) -> (std::time::Duration, u64),
    pub fan_out_try_all: fn(u64, u64, u64, u64) -> (std::time::Duration, u64),
    pub new_key_cycle: fn(u64, u64) -> std::time::Duration,
    pub drain_cost: fn(u64, u64) -> std::time::Duration,
    pub drain_cost_reconnected: fn(u64, u64) -> std::time::Duration,
    pub cut_latency: fn(u64, u64) -> Latency,
    pub register_drop: fn(u64, u64) -> std::time::Duration,
    pub coalescing_send: fn(u64, u64) -> std::time::Duration,
}

impl ConflateImpl {
    /// Whether `fan_out` over `keys` keys runs here.
    pub fn runs_keys(&self, keys: u64) -> bool {
        keys <= self.caps.max_keys
    }

    /// Whether a `backlog`-key `drain_cost` runs here.
    pub fn runs_backlog(&self, backlog: u64) -> bool {
        backlog <= self.caps.max_backlog.min(self.caps.max_keys)
    }
}

/// Expands the scenarios for keybus, the baseline and every peer, and lists them
/// in `CONFLATE_IMPLS` (keybus first, then the baseline, then the peers).
macro_rules! conflate_suite {
    () => {
        retain_scenarios!(keybus_retain, keybus::conflate);
        retain_scenarios!(baseline_retain, keybus::baseline::conflate);
        builder_scenarios!(keybus_builder, keybus::conflate);
        builder_scenarios!(baseline_builder, keybus::baseline::conflate);
        conflate_scenarios!(keybus_impl, keybus::conflate);
        conflate_scenarios!(baseline_impl, keybus::baseline::conflate);
        conflate_scenarios!(
            mutex_map_impl,
            peers::mutex_map,
            caps = peers::mutex_map::CAPS
        );
        conflate_scenarios!(
            watch_impl,
            peers::tokio_watch,
            caps = peers::tokio_watch::CAPS
        );
        conflate_scenarios!(
            tokio_broadcast_impl,
            peers::tokio_broadcast,
            caps = peers::tokio_broadcast::CAPS
        );

        pub const CONFLATE_IMPLS: [ConflateImpl; 5] = impl_table!(ConflateImpl {
            no_receiver,
            fan_out,
            fan_out_counted,
            fan_out_try_all,
            new_key_cycle,
            drain_cost,
            drain_cost_reconnected,
            cut_latency,
            register_drop,
            coalescing_send,
        }:
            "keybus" => Keybus, keybus_impl;
            "baseline" => Baseline, baseline_impl;
            "mutex-map" => Peer, mutex_map_impl;
            "tokio-watch" => Peer, watch_impl;
            "tokio-broadcast" => Peer, tokio_broadcast_impl;
        );
    };
}
