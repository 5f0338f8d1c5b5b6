//! The conflate scenarios that need more than the peers' small surface: receiver
//! filters and per-receiver merges (`Hub::receiver_builder`) and the hub's send
//! count (`Hub::stats`), which only `keybus::conflate` and
//! `keybus::baseline::conflate` have. Written once, expanded for both by
//! `builder_scenarios!(name, path::to::module)` (from `conflate_suite!`).
//!
//! Both are one-thread scenarios: every number is the send path alone, and each
//! checks after the timed part (untimed) that the work was really done, so a
//! design cannot look fast by skipping it.

/// `builder_scenarios!(name, path::to::module)`: the scenarios below for one
/// implementation with `receiver_builder` and `stats`.
macro_rules! builder_scenarios {
    ($name:ident, $($m:tt)::+) => {
        #[allow(dead_code)]
        pub mod $name {
            use $($m)::+ as imp;
            use std::time::{Duration, Instant};

            /// The hot keys of [`mixed_receivers`].
            pub const MIXED_KEYS: u64 = 8;

            /// One thread, four idle receivers of four kinds on one hub: every
            /// key; `.key(3)`; `.key_filter(even)`; every key with its own
            /// summing merge. Each of the 8 hot keys is already pending at every
            /// receiver that takes it (filled untimed), then `sends` coalescing
            /// sends cycle over the 8 keys. Per op: one send, which coalesces at
            /// the receivers that take its key and is filtered out at the
            /// others.
            ///
            /// Checked afterwards (untimed): each receiver holds exactly the
            /// keys it takes, their `sends` add up to every send it took, and
            /// the summing receiver's values are the sums of what was sent.
            pub fn mixed_receivers(sends: u64) -> Duration {
                let hub: imp::Hub<u64, u64> = imp::Hub::new();
                let mut every = hub.receiver();
                let mut one = hub.receiver_builder().key(3).build();
                let mut even = hub
                    .receiver_builder()
                    .key_filter(|k: &u64| k % 2 == 0)
                    .build();
                let mut summing = hub
                    .receiver_builder()
                    .merge(|a: u64, b: u64| Some(a.wrapping_add(b)))
                    .build();
                let tx = hub.sender();
                for k in 0..MIXED_KEYS {
                    tx.send(k, k).unwrap();
                }
                let start = Instant::now();
                for i in 0..sends {
                    tx.send(std::hint::black_box(i % MIXED_KEYS), i).unwrap();
                }
                let elapsed = start.elapsed();

                // What each key got: sends (the fill included) and their sum.
                let mut got = [(0u64, 0u64); MIXED_KEYS as usize];
                for (k, slot) in got.iter_mut().enumerate() {
                    *slot = (1, k as u64);
                }
                for i in 0..sends {
                    let slot = &mut got[(i % MIXED_KEYS) as usize];
                    *slot = (slot.0 + 1, slot.1.wrapping_add(i));
                }
                let check = |rx: &mut imp::Receiver<u64, u64>, takes: &dyn Fn(u64) -> bool| {
                    let batch = rx.try_recv_all().unwrap();
                    let keys: Vec<u64> = batch.iter().map(|e| e.key).collect();
                    let want: Vec<u64> = (0..MIXED_KEYS).filter(|&k| takes(k)).collect();
                    assert_eq!(keys, want, "one pending entry per key taken, in order");
                    for e in &batch {
                        assert_eq!(e.sends, got[e.key as usize].0, "every send accounted");
                    }
                    batch
                };
                check(&mut every, &|_| true);
                check(&mut one, &|k| k == 3);
                check(&mut even, &|k| k % 2 == 0);
                for e in check(&mut summing, &|_| true) {
                    assert_eq!(e.value, got[e.key as usize].1, "the receiver's own merge");
                }
                elapsed
            }

            /// `sends` sends over 64 keys on a hub with no receiver, then
            /// (untimed) a check that `HubStats::sent` counted every one: the
            /// no-receiver send is not allowed to skip its accounting.
            pub fn no_receiver_counted(sends: u64) -> Duration {
                let hub: imp::Hub<u64, u64> = imp::Hub::new();
                let tx = hub.sender();
                let start = Instant::now();
                for i in 0..sends {
                    tx.send(std::hint::black_box(i & 63), i).unwrap();
                }
                let elapsed = start.elapsed();
                assert_eq!(hub.stats().sent, sends, "HubStats::sent counts every send");
                elapsed
            }
        }
    };
}
