//! Loom models of the conflate state-table protocols: a snapshot receiver's
//! registration against a concurrent send, and a stats read against concurrent
//! sends.
//!
//! Run: `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom LOOM_MAX_PREEMPTIONS=2
//! cargo test --release -p keybus-loom-tests --test conflate_snapshot`.
//!
//! - **Registration is one instant.** The registrar sets `QUIESCE` in the hub's
//!   state word, waits until no send is in flight, copies the table into the new
//!   receiver, registers it, and clears the bit; a send enters only on a word
//!   without the bit. Copy-then-register would lose a send that lands in between;
//!   register-then-copy would count it twice. With a summing merge both show: the
//!   receiver's total for a key differs from the table's.
//! - **Stats never tear and are exact once sends stop.** The settled counters are
//!   read before `received` (each written under the shard lock, `received` first),
//!   so a read racing sends never sees more settled than received; after the join
//!   the conservation law holds exactly.
#![cfg(loom)]

use keybus::conflate::Hub;
use loom::thread;

/// Sums; zero annihilates.
fn sum_or_zero(p: i64, n: i64) -> Option<i64> {
    Some(p + n).filter(|s| *s != 0)
}

/// A send racing a snapshot registration: whichever comes first, the new
/// receiver's total equals the table's, and its stats count exactly the sends it
/// received (those after the registration).
///
/// Rule: conflate 11, 12, trap 11. Trap: copy-then-register loses a send,
/// register-then-copy counts it twice. Mutant: c3 (`.ci/mutants`).
#[test]
fn snapshot_registration_vs_send_is_one_instant() {
    loom::model(|| {
        let hub: Hub<u32, i64> = Hub::builder().merge(sum_or_zero).retain_latest().build();
        let tx = hub.sender();
        tx.send(0, 1).unwrap(); // in the table before anything races
        let sender = thread::spawn(move || {
            tx.send(0, 2).unwrap();
            tx.send(1, 5).unwrap();
        });
        // Lets the sender run first too; loom then also explores its steps
        // between the registration's.
        thread::yield_now();
        let mut rx = hub.receiver_builder().snapshot().build();
        sender.join().unwrap();
        let table = hub.snapshot();
        assert_eq!(table, vec![(0, 3), (1, 5)]);
        let got: Vec<_> = rx
            .try_recv_all()
            .unwrap()
            .into_iter()
            .map(|e| (e.key, e.value, e.sends))
            .collect();
        // Key 0 was in the table at registration (sends == 0 there); the send
        // of 2 either came before (in the copy) or after (merged in, sends 1).
        match got.as_slice() {
            [(0, 3, s0), (1, 5, s1)] => {
                assert!(*s0 <= 1 && *s1 <= 1);
                let s = rx.stats();
                assert_eq!(s.received, s0 + s1, "{s:?}");
                assert_eq!(
                    s.received,
                    s.folded + s.annihilated + s.overflowed + s.dropped + s.pending_sends
                );
            }
            other => panic!("snapshot plus live stream {other:?} is not the table {table:?}"),
        }
    });
}

/// A bounded snapshot receiver registering against a send of a new key: the
/// table order decides which keys it starts with, and a send after the
/// registration is refused when it is full.
///
/// Rule: conflate 12, 14. Trap: the table order or the bound ignored.
#[test]
fn bounded_snapshot_registration_vs_send() {
    loom::model(|| {
        let hub: Hub<u32, i64> = Hub::builder().retain_latest().build();
        let tx = hub.sender();
        tx.send(0, 1).unwrap();
        let sender = thread::spawn(move || tx.send(1, 1).unwrap());
        thread::yield_now();
        let mut rx = hub.receiver_builder().snapshot().max_pending(1).build();
        sender.join().unwrap();
        let e = rx.try_recv().unwrap();
        assert_eq!((e.key, e.value, e.sends), (0, 1, 0));
        let s = rx.stats();
        // The send of key 1 was either in the copy (not a send for the
        // receiver: the bound left it out) or refused by the bound.
        assert!(s.received == s.overflowed && s.received <= 1, "{s:?}");
        assert_eq!(s.pending, 0);
    });
}

/// Stats read while sends merge and annihilate: never more settled than
/// received, exact after the join.
///
/// Rule: conflate 13 (accounting). Trap: more settled than received; inexact
/// after the join.
#[test]
fn stats_read_vs_send_never_tears_and_is_exact_after() {
    loom::model(|| {
        let hub: Hub<u32, i64> = Hub::with_merge(sum_or_zero);
        let tx = hub.sender();
        let mut rx = hub.receiver_builder().max_pending(1).build();
        let sender = thread::spawn(move || {
            tx.send(0, 1).unwrap(); // pending
            tx.send(0, -1).unwrap(); // annihilates both
            tx.send(1, 1).unwrap(); // pending
            tx.send(2, 1).unwrap(); // overflows (1 pending)
        });
        thread::yield_now();
        let s = rx.stats();
        assert!(
            s.received >= s.folded + s.annihilated + s.overflowed + s.dropped,
            "torn read: {s:?}"
        );
        let taken = rx.try_recv().ok().map(|e| e.sends).unwrap_or(0);
        sender.join().unwrap();
        let s = rx.stats();
        assert_eq!(s.received, 4);
        // Annihilated unless the receive took key 0 in between; then the -1
        // is pending and key 1 overflows too.
        assert!(
            s.annihilated == 2 || (taken == 1 && s.overflowed == 2),
            "{s:?}"
        );
        assert_eq!(s.folded, taken);
        assert_eq!(
            s.received,
            s.folded + s.annihilated + s.overflowed + s.dropped + s.pending_sends,
            "{s:?}"
        );
        assert_eq!(hub.stats().sent, 4);
    });
}
