//! Randomized schedules (shuttle) of the conflate state table: more threads and
//! operations than the loom models of `loom-tests/tests/conflate_snapshot.rs` can
//! afford.
//!
//! Run: `RUSTFLAGS="--cfg shuttle" CARGO_TARGET_DIR=target/shuttle cargo test
//! --release -p keybus-loom-tests --test shuttle_conflate_state` (`KEYBUS_SHUTTLE_ITERS` sets schedules
//! per scenario; default 10,000).
#![cfg(shuttle)]

use keybus::conflate::{Hub, Receiver};
use keybus::TryRecvError;
use shuttle::thread;
use std::collections::BTreeMap;

use keybus_loom_tests::shuttle_iterations as iterations;

/// Two sender threads over keys `0..keys`: sender `t` sends each key once,
/// starting at key `t`, the `i`th send with value `value(i)`.
fn two_senders(
    hub: &Hub<u32, i64>,
    keys: u32,
    value: fn(u32) -> i64,
) -> [thread::JoinHandle<()>; 2] {
    [0, 1].map(|t| {
        let tx = hub.sender();
        thread::spawn(move || {
            for i in 0..keys {
                tx.send((i + t) % keys, value(i)).unwrap();
            }
        })
    })
}

fn assert_conserved(rx: &Receiver<u32, i64>) {
    let s = rx.stats();
    assert_eq!(
        s.received,
        s.folded + s.annihilated + s.overflowed + s.dropped + s.pending_sends,
        "{s:?}"
    );
}

/// Two senders (summing merge) race two snapshot registrations and a consumer
/// that drains one of them: every snapshot receiver's totals equal the table's,
/// whatever came before and after its instant, and the counts balance.
///
/// Rule: conflate 11, 12, 14. Trap: a snapshot registration that is not one
/// instant against the sends (a send lost or counted twice).
#[test]
fn snapshot_registrations_race_several_senders() {
    shuttle::check_random(
        || {
            let hub: Hub<u32, i64> = Hub::builder()
                .merge(|p: i64, n: i64| Some(p + n))
                .retain_latest()
                .build();
            let senders = two_senders(&hub, 3, |_| 1);
            let registrar = {
                let hub = hub.clone();
                thread::spawn(move || {
                    let first = hub.receiver_builder().snapshot().build();
                    thread::yield_now();
                    let second = hub.receiver_builder().snapshot().max_pending(2).build();
                    (first, second)
                })
            };
            for s in senders {
                s.join().unwrap();
            }
            let (mut first, mut second) = registrar.join().unwrap();
            let table: BTreeMap<u32, i64> = hub.snapshot().into_iter().collect();
            assert_eq!(table.values().sum::<i64>(), 6);
            let got: BTreeMap<u32, i64> = first
                .try_recv_all()
                .unwrap_or_default()
                .into_iter()
                .map(|e| (e.key, e.value))
                .collect();
            assert_eq!(got, table, "snapshot plus live stream is not the table");
            assert_conserved(&first);
            // The bounded one holds at most 2 keys; what it holds is the table's
            // value unless a send for a third key was refused.
            assert!(second.len() <= 2);
            let s = second.stats();
            let batch = second.try_recv_all().unwrap_or_default();
            for e in &batch {
                assert!(e.value <= table[&e.key]);
            }
            assert_eq!(s.pending_sends, batch.iter().map(|e| e.sends).sum::<u64>());
            assert_conserved(&second);
            hub.close_now();
            assert_eq!(first.try_recv(), Err(TryRecvError::Closed));
        },
        iterations(),
    );
}

/// Senders with annihilation and a bounded receiver race a consumer and a stats
/// reader: no read ever sees more settled than received; after the join the law
/// holds and `received + filtered` is every send.
///
/// Rule: conflate 13 (accounting). Trap: a stats read that tears, or counts
/// inexact after the join.
#[test]
fn stats_reads_race_senders_and_a_consumer() {
    shuttle::check_random(
        || {
            let hub: Hub<u32, i64> =
                Hub::with_merge(|p: i64, n: i64| Some(p + n).filter(|s| *s != 0));
            let mut rx = hub
                .receiver_builder()
                .key_filter(|k: &u32| *k != 3)
                .max_pending(2)
                .build();
            let senders = two_senders(&hub, 4, |i| if i % 2 == 0 { 1 } else { -1 });
            let consumer = thread::spawn(move || {
                let mut taken = 0u64;
                for _ in 0..4 {
                    let s = rx.stats();
                    assert!(
                        s.received >= s.folded + s.annihilated + s.overflowed + s.dropped,
                        "torn: {s:?}"
                    );
                    if let Ok(e) = rx.try_recv() {
                        taken += e.sends;
                    }
                    thread::yield_now();
                }
                (rx, taken)
            });
            for s in senders {
                s.join().unwrap();
            }
            let (rx, taken) = consumer.join().unwrap();
            let s = rx.stats();
            assert_eq!(s.folded, taken);
            assert_eq!(s.received + s.filtered, 8);
            assert_conserved(&rx);
            assert_eq!(hub.stats().sent, 8);
        },
        iterations(),
    );
}
