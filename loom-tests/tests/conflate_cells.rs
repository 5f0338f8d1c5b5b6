//! Loom models of the hub's cells and the registry around them
//! (`src/conflate/lockfree/cells/`, `registry.rs`, `shared.rs`; docs/design.md, "One
//! cell per key"), through the public API: receiver ids reused only after the
//! marks of their last owner are gone, and a snapshot registration that holds
//! off every send in flight, also one that entered before a plain
//! registration.
//!
//! Run one: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release
//! -p keybus-loom-tests --test conflate_cells MODEL`.
#![cfg(loom)]

use keybus::conflate::{Hub, Receiver};
use keybus::TryRecvError;
use loom::thread;

/// Explores `f` with room for the hub's whole send path in one execution.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.max_branches = 50_000;
    b.check(f);
}

/// Trap 14 (per-receiver marks in a shared cell reuse receiver ids): a cell
/// receiver dropped while a send for a key is in flight, then a new receiver
/// that may take the dropped one's id. The new receiver must not be born with
/// the key pending (a mark a send in flight left for the old owner): a later
/// send of the key reaches it as a fresh entry, with `sends == 1` (or 2 if the
/// racing send reached it too), and nothing else is pending.
///
/// Rule: conflate 4, trap 14. Trap: a reused receiver id born with the old
/// owner's marks. Mutant: c2 (`.ci/mutants`).
#[test]
fn a_reused_receiver_id_starts_with_nothing_pending() {
    model(|| {
        let hub = Hub::<u32, u32>::new();
        let tx = hub.sender();
        // Registered first and kept: `old` and `new` then share the cells (a
        // plain receiver alone keeps its own values, and no marks).
        let _first = hub.receiver();
        let old = hub.receiver();
        let sender = {
            let tx = tx.clone();
            thread::spawn(move || tx.send(5, 1).unwrap())
        };
        // Let the send start first (read the list with `old` in it).
        thread::yield_now();
        drop(old);
        let mut new = hub.receiver();
        sender.join().unwrap();
        // The racing send reached `new` (registered before it read the list)
        // or not; either way exactly what reached it is pending.
        let raced = new.len();
        assert!(raced <= 1, "at most the racing send: {raced}");
        tx.send(5, 2).unwrap();
        let e = new
            .try_recv()
            .expect("the later send reaches the new receiver");
        assert_eq!((e.key, e.value), (5, 2));
        assert_eq!(
            e.sends,
            1 + raced as u64,
            "sends counts only what reached it"
        );
        assert_eq!(new.try_recv().err(), Some(TryRecvError::Empty));
        let s = new.stats();
        assert_eq!(s.received, 1 + raced as u64);
    });
}

/// Snapshot registration after a plain registration, with a send in flight
/// across both (issue 18's first hole): the snapshot receiver (one with its
/// own values, `max_pending`, which copies the table) must hold the send
/// exactly once — in its snapshot (`sends == 0`, the table had it) or as a
/// delivery (`sends == 1`) — never both, never neither.
///
/// Rule: conflate 12. Trap: a send in flight held twice or not at all. Mutant:
/// c3 (`.ci/mutants`).
#[test]
fn snapshot_registration_holds_off_a_send_in_flight_across_a_plain_one() {
    model(|| {
        snapshot_registration_vs_send(|hub| {
            hub.receiver_builder().max_pending(4).snapshot().build()
        })
    });
}

/// The same for a snapshot receiver that shares the hub's cells.
///
/// Rule: conflate 12. Trap: the same, cell-sharing snapshot receiver. Mutant:
/// c3 (`.ci/mutants`).
#[test]
fn cell_snapshot_registration_holds_the_send_exactly_once() {
    model(|| snapshot_registration_vs_send(|hub| hub.receiver_builder().snapshot().build()));
}

/// One model run of the two tests above, with the snapshot receiver
/// `snapshot` registers.
fn snapshot_registration_vs_send(snapshot: impl FnOnce(&Hub<u32, u32>) -> Receiver<u32, u32>) {
    let hub = Hub::<u32, u32>::builder().retain_latest().build();
    let tx = hub.sender();
    let sender = {
        let tx = tx.clone();
        thread::spawn(move || tx.send(3, 7).unwrap())
    };
    let _plain = hub.receiver();
    let mut snap = snapshot(&hub);
    sender.join().unwrap();
    let got: Vec<_> = std::iter::from_fn(|| snap.try_recv().ok())
        .map(|e| (e.key, e.value, e.sends))
        .collect();
    assert!(
        got == vec![(3, 7, 0)] || got == vec![(3, 7, 1)],
        "the send exactly once: {got:?}"
    );
    assert_eq!(hub.latest(&3), Some(7));
}
