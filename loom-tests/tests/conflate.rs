//! Loom models of `keybus::conflate`'s protocols.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release
//! -p keybus-loom-tests --test conflate`. CI runs this file's end-to-end models
//! (and `conflate_snapshot.rs`'s) at 2 preemptions and the component models at 3
//! (`.ci/model`, `loom-tests/README.md`); every planted bug of `.ci/mutants` is
//! caught at those settings.
//! `LOOM_LOG=info` prints how many schedules each model explored; each model's
//! doc comment states its count at 3 (a model that explores a handful of
//! schedules proves little, so the small ones yield to let the other thread run
//! first too).
//!
//! Under `--cfg loom` the crate's `sync.rs` swaps every atomic, mutex and the
//! parking primitive for loom's, so each model below explores every interleaving of
//! the hub state word, the registry, the shard and queue locks and the cut epoch
//! (bounded by `LOOM_MAX_PREEMPTIONS`, 3 in CI). Each model checks conservation:
//! every send that returned `Ok` is accounted for as delivered (its `sends` count),
//! coalesced into a delivery, annihilated, or abandoned by a close.
//!
//! What loom does not check here: `event-listener` (replaced by a loom condvar
//! stand-in) and deadlines (loom has no clock).
#![cfg(loom)]

use keybus::conflate::{Hub, Receiver, Sender};
use keybus::TryRecvError;
use loom::thread;

/// Two keys that land on different shards of the hub's cells and of a
/// receiver with its own values.
fn two_shard_keys() -> (u32, u32) {
    let a = 0u32;
    let (cell_a, own_a) = keybus::conflate::__loom_shard_of(&a);
    let b = (1..1000)
        .find(|k| {
            let (cell, own) = keybus::conflate::__loom_shard_of(k);
            cell != cell_a && own != own_a
        })
        .expect("some key on other shards");
    (a, b)
}

/// `hub` with one receiver, then one sender, registered before any other
/// thread starts. A plain receiver here shares the hub's cells: a sole
/// plain receiver keeps its values itself (docs/design.md, "The sole
/// receiver owns its values"), so this one registers beside another that
/// then leaves.
fn with_rx_tx<V: Clone + Send + 'static>(
    hub: Hub<u32, V>,
) -> (Hub<u32, V>, Receiver<u32, V>, Sender<u32, V>) {
    let rx = cell_receiver(&hub);
    let tx = hub.sender();
    (hub, rx, tx)
}

/// A lone plain receiver that shares the hub's cells: registered second
/// (the first one's part became cells), then the first one leaves.
fn cell_receiver<V: Clone + Send + 'static>(hub: &Hub<u32, V>) -> Receiver<u32, V> {
    let first = hub.receiver();
    let rx = hub.receiver();
    drop(first);
    rx
}

/// `hub`'s first plain receiver (its values its own), then one sender.
fn with_sole_rx_tx(hub: Hub<u32, u32>) -> (Hub<u32, u32>, Receiver<u32, u32>, Sender<u32, u32>) {
    with_sole_rx_tx_of(hub)
}

/// [`with_sole_rx_tx`] for any value type.
fn with_sole_rx_tx_of<V: Clone + Send + 'static>(
    hub: Hub<u32, V>,
) -> (Hub<u32, V>, Receiver<u32, V>, Sender<u32, V>) {
    let rx = hub.receiver();
    let tx = hub.sender();
    (hub, rx, tx)
}

/// A `retain_latest` hub: its sole plain receiver keeps its values in places
/// the hub's cells name (docs/design.md, "The sole receiver owns its
/// values"), under the cells' shard locks.
fn table_hub() -> Hub<u32, u32> {
    Hub::builder().retain_latest().build()
}

/// Everything left after all threads joined, until `Closed` or `Empty`.
fn drain(rx: &mut Receiver<u32, u32>) -> Vec<(u32, u32, u64)> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push((e.key, e.value, e.sends));
    }
    out
}

/// Blocking receives until `Closed`.
fn recv_until_closed(rx: &mut Receiver<u32, u32>) -> Vec<(u32, u32, u64)> {
    let mut out = Vec::new();
    while let Ok(e) = rx.recv() {
        out.push((e.key, e.value, e.sends));
    }
    out
}

/// One cut (`try_recv_all`); empty when there is nothing.
fn cut(rx: &mut Receiver<u32, u32>) -> Vec<(u32, u32, u64)> {
    rx.try_recv_all()
        .map(|b| b.into_iter().map(|e| (e.key, e.value, e.sends)).collect())
        .unwrap_or_default()
}

/// docs/design.md, "Close versus send": `Sender::close` racing `send`, with the receiver
/// draining concurrently. A send that returned `Ok` is delivered before `Closed`;
/// one that returned `Err` is never delivered.
///
/// Rule: conflate 8 (close racing send). Trap: an `Ok` send lost at close, an
/// `Err` send delivered. Mutant: l (`.ci/mutants`).
#[test]
fn close_vs_send_exactly_one_outcome() {
    loom::model(|| close_vs_send(with_rx_tx(Hub::<u32, u32>::new())));
}

/// The same for a hub's sole plain receiver, whose values are its own.
///
/// Rule: conflate 8. Trap: as above, on the sole receiver's queue.
#[test]
fn close_vs_send_exactly_one_outcome_sole_receiver() {
    loom::model(|| close_vs_send(with_sole_rx_tx(Hub::<u32, u32>::new())));
}

/// The same for a `retain_latest` hub's sole plain receiver, whose places
/// the cells name.
///
/// Rule: conflate 8. Trap: as above, the part under the cells' locks.
#[test]
fn close_vs_send_exactly_one_outcome_sole_receiver_table() {
    loom::model(|| close_vs_send(with_sole_rx_tx(table_hub())));
}

fn close_vs_send((hub, mut rx, tx): (Hub<u32, u32>, Receiver<u32, u32>, Sender<u32, u32>)) {
    {
        let closer = hub.sender();
        drop(hub);
        let sender = thread::spawn(move || tx.send(7, 1).is_ok());
        let close = thread::spawn(move || closer.close());
        let got = recv_until_closed(&mut rx);
        let ok = sender.join().unwrap();
        close.join().unwrap();
        if ok {
            assert_eq!(
                got,
                vec![(7, 1, 1)],
                "an Ok send must be delivered before Closed"
            );
        } else {
            assert!(got.is_empty(), "an Err send must publish nothing");
        }
    }
}

/// A send racing the departure of a hub's sole plain receiver (no table):
/// whichever way it lands — the retired part (shut), the cell queue of the
/// receiver still listed, or a cell after the list emptied — its value is
/// dropped once the receiver has settled (its next receive), not kept in an
/// idle cell. The values are `std` `Arc` tokens, counted at the end (a loom
/// `Arc` would synchronize by itself).
///
/// Rule: conflate 3 (memory bounded by pending keys: a value pending
/// nowhere is not kept). Trap: a cell the send left idle holding its value.
/// Mutant: g5 (`.ci/mutants`).
#[test]
fn sole_receivers_departure_vs_send_keeps_no_value() {
    loom::model(|| {
        let token = std::sync::Arc::new(());
        let (_hub, mut rx, tx) = with_sole_rx_tx_of(Hub::<u32, std::sync::Arc<()>>::new());
        let sender = {
            let token = token.clone();
            thread::spawn(move || {
                let _ = tx.send(7, token);
            })
        };
        rx.close();
        sender.join().unwrap();
        assert_eq!(rx.try_recv().map(|e| e.key), Err(TryRecvError::Closed));
        assert_eq!(std::sync::Arc::strong_count(&token), 1, "a value kept");
    });
}

/// docs/design.md, "The cut is one instant": a cut while one sender sends `a` then `b` (different
/// shards) then `a` again. Every batch is one instant: a prefix of the send order.
///
/// Rule: conflate 5 (one cut), trap 13. Trap: a batch that is not a prefix of
/// the send order; a small cut taking an entry without its shard's lock.
/// Mutant: a1, a2, a3, m, p4, p6 (`.ci/mutants`; the racing cut is the
/// receiver's first, which the models take in queue order).
#[test]
fn cut_is_one_instant_across_shards() {
    loom::model(|| cut_while_sending_a_b_a(cell_receiver, false));
}

/// The same cut for a hub's sole plain receiver (docs/design.md, "The sole
/// receiver owns its values"): the epoch moved under the push lock, the
/// barrier on the shards the batch names, and sends that check the epoch and
/// the place's position under their shard lock.
///
/// Rule: conflate 5 (one cut). Trap: a send after the cut writing a place
/// the batch reads; a batch missing a key pushed before it. Mutant: s1, s2
/// (`.ci/mutants`).
#[test]
fn cut_is_one_instant_across_shards_sole_receiver() {
    loom::model(|| cut_while_sending_a_b_a(|hub| hub.receiver(), false));
}

/// The same with both keys sent and taken before: the index holds stale
/// entries for them, so the sends must tell a taken place from a pending
/// one.
///
/// Rule: conflate 5. Trap: a stale index entry taken for a pending place.
/// Mutant: s3 (`.ci/mutants`).
#[test]
fn cut_is_one_instant_across_shards_sole_receiver_warm() {
    loom::model(|| cut_while_sending_a_b_a(|hub| hub.receiver(), true));
}

/// The same cut for a `retain_latest` hub's sole plain receiver: a send
/// finds the key's place through its cell, under the cell's shard lock,
/// which is also the lock the cut's barrier takes.
///
/// Rule: conflate 5 (one cut). Trap: a send after the cut writing a place
/// the batch reads through the cell's name for it. Mutant: s2, s10
/// (`.ci/mutants`).
#[test]
fn cut_is_one_instant_across_shards_sole_receiver_table() {
    loom::model(|| cut_on_hub_while_sending_a_b_a(table_hub(), |hub| hub.receiver(), false));
}

/// The same with both keys sent and taken before: their cells name places
/// a cut took, which a send must not take for pending.
///
/// Rule: conflate 5. Trap: a cell's stale name taken for a pending place.
#[test]
fn cut_is_one_instant_across_shards_sole_receiver_table_warm() {
    loom::model(|| cut_on_hub_while_sending_a_b_a(table_hub(), |hub| hub.receiver(), true));
}

/// The same race on cells that are already there, idle: both keys were sent
/// and taken before, so the sends of `a` and `b` take the short path for the
/// first send after a take (docs/design.md, "One cell per key"), and `b`'s
/// push may land past the cut's instant before the cut moved the clock. That
/// path is for a hub's one cell receiver in a list of one: a snapshot
/// receiver here (a plain receiver alone keeps its own values, and one
/// left alone by another's departure sits in a list with a hole until the
/// next collection), so the hub keeps a table.
///
/// Rule: conflate 5 (one cut), trap 13. Trap: the short path not helping, so
/// the second send of `a` takes the fast path past the cut; a cut's group
/// taking an entry without its shard's lock (the racing cut is the
/// receiver's second, which the models take by groups). Mutant: a5, p3
/// (`.ci/mutants`).
#[test]
fn cut_is_one_instant_across_shards_warm_cells() {
    loom::model(|| {
        cut_on_hub_while_sending_a_b_a(
            table_hub(),
            |hub| hub.receiver_builder().snapshot().build(),
            true,
        )
    });
}

/// The same cut for a receiver that keeps its own values (a key filter that
/// takes everything makes it one: the slab-and-tickets core, newer wins): its
/// cut epoch and the newer-wins fast path of its core.
///
/// Rule: conflate 5, own-value receivers. Trap: a send overwriting a value the
/// cut owns. Mutant: a4, m (`.ci/mutants`).
#[test]
fn cut_is_one_instant_across_shards_own_values() {
    loom::model(|| {
        cut_while_sending_a_b_a(
            |hub| hub.receiver_builder().key_filter(|_: &u32| true).build(),
            false,
        )
    });
}

/// One model run of the tests above, with the receiver `receiver` makes;
/// `warm`: both keys are sent and taken first (their cells stay, idle).
fn cut_while_sending_a_b_a(
    receiver: impl FnOnce(&Hub<u32, u32>) -> Receiver<u32, u32>,
    warm: bool,
) {
    cut_on_hub_while_sending_a_b_a(Hub::new(), receiver, warm);
}

/// [`cut_while_sending_a_b_a`] on `hub`.
fn cut_on_hub_while_sending_a_b_a(
    hub: Hub<u32, u32>,
    receiver: impl FnOnce(&Hub<u32, u32>) -> Receiver<u32, u32>,
    warm: bool,
) {
    let (a, b) = two_shard_keys();
    let mut rx = receiver(&hub);
    let tx = hub.sender();
    if warm {
        tx.send(a, 0).unwrap();
        tx.send(b, 0).unwrap();
        assert_eq!(cut(&mut rx).len(), 2, "the warm-up batch: both keys");
    }
    let sender = thread::spawn(move || {
        tx.send(a, 1).unwrap();
        tx.send(b, 1).unwrap();
        tx.send(a, 2).unwrap();
    });
    // Without this, loom explores the cut mostly before the sends.
    thread::yield_now();
    let first = cut(&mut rx);
    sender.join().unwrap();
    let rest = cut(&mut rx);
    // The batch states that are some instant of the send sequence.
    let instants: [&[(u32, u32, u64)]; 4] = [
        &[],
        &[(a, 1, 1)],
        &[(a, 1, 1), (b, 1, 1)],
        &[(a, 2, 2), (b, 1, 1)],
    ];
    assert!(
        instants.contains(&first.as_slice()),
        "not one instant: {first:?}"
    );
    let sends: u64 = first.iter().chain(&rest).map(|e| e.2).sum();
    assert_eq!(sends, 3, "conservation: {first:?} then {rest:?}");
    let last_a = first.iter().chain(&rest).rfind(|e| e.0 == a).unwrap();
    assert_eq!(last_a.1, 2, "the latest value of a is delivered last");
}

/// The same cut on the merge path: one sender sends `a`, `b`, `a` again and `b`
/// again, one bit each, OR-merged, so a batch says exactly which sends it holds.
/// Every batch is an instant: the sends it holds are a prefix of the send order.
///
/// Rule: conflate 5 and 2. Trap: the same on the merge path.
#[test]
fn cut_is_one_instant_with_a_merge() {
    loom::model(|| {
        let (a, b) = two_shard_keys();
        let (_hub, mut rx, tx) = with_rx_tx(Hub::<u32, u32>::with_merge(|x, y| Some(x | y)));
        let sender = thread::spawn(move || {
            for (i, k) in [a, b, a, b].into_iter().enumerate() {
                tx.send(k, 1 << i).unwrap();
            }
        });
        let mut seen = 0u32;
        for _ in 0..2 {
            if let Ok(batch) = rx.try_recv_all() {
                for e in batch {
                    assert_eq!(seen & e.value, 0, "a send delivered twice");
                    seen |= e.value;
                }
            }
            assert_eq!(seen & (seen + 1), 0, "cut is not a prefix: {seen:04b}");
        }
        sender.join().unwrap();
        for e in rx.try_recv_all().unwrap_or_default() {
            assert_eq!(seen & e.value, 0, "a send delivered twice");
            seen |= e.value;
        }
        assert_eq!(seen, 0b1111, "conservation");
    });
}

/// docs/design.md, "Own-value receivers: the core": coalescing into a slot that a concurrent pop takes.
/// Four sends of one key (summing merge, values 1, 10, 100, 1000) against three
/// pops: each merge lands either in the popped value (delivered now) or in a
/// fresh slot (delivered later): never lost, never seen twice, and every
/// delivery holds the next run of sends in order.
///
/// Rule: conflate 1, 2. Trap: a merge lost or delivered twice by a concurrent
/// pop.
#[test]
fn coalesce_vs_pop_one_key() {
    loom::model(|| {
        let (_hub, mut rx, tx) = with_rx_tx(Hub::<u32, u32>::with_merge(|a, b| Some(a + b)));
        tx.send(1, 1).unwrap();
        let sender = thread::spawn(move || {
            for v in [10, 100, 1000] {
                tx.send(1, v).unwrap();
            }
        });
        let mut got = Vec::new();
        for _ in 0..3 {
            thread::yield_now();
            if let Ok(e) = rx.try_recv() {
                got.push((e.value, e.sends));
            }
        }
        sender.join().unwrap();
        got.extend(drain(&mut rx).into_iter().map(|e| (e.1, e.2)));
        let total: u32 = got.iter().map(|e| e.0).sum();
        let sends: u64 = got.iter().map(|e| e.1).sum();
        assert_eq!((total, sends), (1111, 4), "lost or doubled: {got:?}");
        // Each delivery is a contiguous run of the sends 1, 10, 100, 1000 (its
        // digits are consecutive ones), the runs in send order, and its `sends`
        // count is the run's length.
        let mut next = 1u32;
        for &(value, n) in &got {
            let run: u32 = (0..n as u32).map(|i| next * 10u32.pow(i)).sum();
            assert_eq!(value, run, "not the next run of sends: {got:?}");
            next *= 10u32.pow(n as u32);
        }
    });
}

/// Annihilation racing pops: the sender annihilates a pending key and sends it
/// again, then sends a second key. Each value is delivered or annihilated, never
/// both: per key the delivered values sum to what was sent, deliveries keep send
/// order, and nothing is left behind (`len()` 0, no stale delivery).
///
/// Rule: conflate 2 (annihilation). Trap: a value both delivered and
/// annihilated, residue left.
#[test]
fn annihilate_vs_pop() {
    loom::model(|| {
        let (_hub, mut rx, tx) = with_rx_tx(Hub::<u32, i32>::with_merge(|a, b| {
            Some(a + b).filter(|s| *s != 0)
        }));
        tx.send(1, 5).unwrap();
        let sender = thread::spawn(move || {
            tx.send(1, -5).unwrap();
            tx.send(1, 7).unwrap();
            tx.send(2, 1).unwrap();
        });
        thread::yield_now();
        let mut got = Vec::new();
        for _ in 0..2 {
            if let Ok(e) = rx.try_recv() {
                got.push((e.key, e.value));
            }
        }
        sender.join().unwrap();
        got.extend(std::iter::from_fn(|| rx.try_recv().ok()).map(|e| (e.key, e.value)));
        let key1: Vec<i32> = got.iter().filter(|e| e.0 == 1).map(|e| e.1).collect();
        // 5, -5, 7 with every pop possible in between.
        assert!(
            [&[7][..], &[5, 2], &[5, -5, 7]].contains(&key1.as_slice()),
            "key 1 lost, doubled or reordered: {got:?}"
        );
        assert_eq!(
            got.iter().filter(|e| e.0 == 2).count(),
            1,
            "key 2 exactly once: {got:?}"
        );
        assert_eq!(rx.len(), 0, "residue after annihilation: {got:?}");
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    });
}

/// docs/design.md, "Parking without lost wake-ups": a blocking `recv` is woken by a send that lands
/// between its check and its park (loom reports the lost wake-up as a deadlock).
///
/// Rule: "Parking without lost wake-ups". Trap: a lost wake-up for data.
/// Mutant: e2 (`.ci/mutants`).
#[test]
fn park_vs_wake_send() {
    loom::model(|| {
        let (_hub, mut rx, tx) = with_rx_tx(Hub::<u32, u32>::new());
        let sender = thread::spawn(move || tx.send(3, 4).unwrap());
        let e = rx.recv().unwrap();
        assert_eq!((e.key, e.value), (3, 4));
        sender.join().unwrap();
    });
}

/// The same for a hub's sole plain receiver: the parked flag under its push
/// lock.
///
/// Rule: the same. Trap: the same. Mutant: s4 (`.ci/mutants`).
#[test]
fn park_vs_wake_send_sole_receiver() {
    loom::model(|| {
        let (_hub, mut rx, tx) = with_sole_rx_tx(Hub::<u32, u32>::new());
        let sender = thread::spawn(move || tx.send(3, 4).unwrap());
        let e = rx.recv().unwrap();
        assert_eq!((e.key, e.value), (3, 4));
        sender.join().unwrap();
    });
}

/// Pops of a hub's sole plain receiver racing sends of the same key: a pop
/// marks its place taken under the key's shard lock, so a later send in the
/// same epoch starts a new place instead of writing the taken one. Every send
/// is delivered exactly once and the latest value last.
///
/// Rule: conflate 1, 13. Trap: a send written into a place a pop took.
/// Mutant: s3 (`.ci/mutants`).
#[test]
fn pop_vs_send_sole_receiver() {
    loom::model(|| pop_vs_send(Hub::new()));
}

/// The same for a `retain_latest` hub's sole plain receiver: the pop takes
/// the cells' shard lock, under which sends find the place the cell names.
///
/// Rule: conflate 1, 13. Trap: a send written into a place a pop took.
/// Mutant: s11 (`.ci/mutants`).
#[test]
fn pop_vs_send_sole_receiver_table() {
    loom::model(|| pop_vs_send(table_hub()));
}

/// One model run of the two tests above on `hub`.
fn pop_vs_send(hub: Hub<u32, u32>) {
    {
        let (_hub, mut rx, tx) = with_sole_rx_tx(hub);
        tx.send(1, 1).unwrap();
        let sender = thread::spawn(move || {
            tx.send(1, 2).unwrap();
            tx.send(1, 3).unwrap();
        });
        let mut got = Vec::new();
        for _ in 0..2 {
            thread::yield_now();
            if let Ok(e) = rx.try_recv() {
                got.push((e.key, e.value, e.sends));
            }
        }
        sender.join().unwrap();
        got.extend(drain(&mut rx));
        let sends: u64 = got.iter().map(|e| e.2).sum();
        assert_eq!(sends, 3, "lost or doubled: {got:?}");
        assert_eq!(
            got.last().map(|e| e.1),
            Some(3),
            "the latest value last: {got:?}"
        );
        let s = rx.stats();
        assert_eq!((s.received, s.folded, s.pending), (3, 3, 0), "{s:?}");
    }
}

/// Pops empty a block of the sole receiver's queue, which goes back to the
/// producer (loom builds have two places a block); the sender then pushes
/// into it while the consumer pops on. A place of the recycled block must
/// read not ready until its push: one the consumer took for ready reads
/// the place while the push writes it. Every send arrives once, in order.
///
/// Rule: conflate 1, 13. Trap: a recycled place that still reads taken from
/// its last round. Mutant: s9 (`.ci/mutants`).
#[test]
fn pop_vs_send_through_a_recycled_block_sole_receiver() {
    loom::model(|| {
        let (_hub, mut rx, tx) = with_sole_rx_tx(Hub::<u32, u32>::new());
        for k in 1..=3 {
            tx.send(k, k).unwrap();
        }
        let mut got = Vec::new();
        for _ in 0..3 {
            let e = rx.try_recv().unwrap();
            got.push(e.key);
        }
        // The first block is spent (by the third pop) and free again.
        let sender = thread::spawn(move || {
            tx.send(4, 4).unwrap();
            tx.send(5, 5).unwrap();
        });
        for _ in 0..2 {
            thread::yield_now();
            if let Ok(e) = rx.try_recv() {
                got.push(e.key);
            }
        }
        sender.join().unwrap();
        got.extend(drain(&mut rx).iter().map(|e| e.0));
        assert_eq!(got, [1, 2, 3, 4, 5], "once each, in order");
    });
}

/// A second plain receiver registers while the sole receiver's consumer cuts
/// twice: the sole receiver's entries become cells under the registration
/// (sends held off), racing the cuts. Every batch of the first receiver is
/// an instant of the send order and all its sends arrive exactly once; the
/// second receiver gets exactly the sends after its registration, one entry
/// each, in order; both end with nothing pending and their stats conserved.
///
/// Rule: conflate 4, 5, 13. Trap: an entry lost, doubled or reordered by the
/// conversion; a cut that reads a converted place. Mutant: s5, s6
/// (`.ci/mutants`).
#[test]
fn conversion_vs_cuts_of_the_sole_receiver() {
    loom::model(|| conversion_vs_cuts(Hub::new()));
}

/// The same for a `retain_latest` hub's sole plain receiver: the conversion
/// finds the pending places through the cells' names for them, and sends
/// them into the cells with the shard locks let go (the push lock held).
///
/// Rule: conflate 4, 5, 13. Trap: as above. Mutant: s5 (`.ci/mutants`).
#[test]
fn conversion_vs_cuts_of_the_sole_receiver_table() {
    loom::model(|| conversion_vs_cuts(table_hub()));
}

/// One model run of the two tests above on `hub`.
fn conversion_vs_cuts(hub: Hub<u32, u32>) {
    {
        let (a, b) = two_shard_keys();
        let (hub, mut first, tx) = with_sole_rx_tx(hub);
        tx.send(a, 1).unwrap();
        tx.send(b, 1).unwrap();
        tx.send(a, 2).unwrap();
        let consumer = thread::spawn(move || {
            let c1 = cut(&mut first);
            let c2 = cut(&mut first);
            (first, c1, c2)
        });
        let mut second = hub.receiver();
        tx.send(b, 2).unwrap();
        let (mut first, c1, c2) = consumer.join().unwrap();
        let c3 = cut(&mut first);
        let all: Vec<_> = c1.iter().chain(&c2).chain(&c3).copied().collect();
        // Before the registration: a (two sends) and b pending; after it, b
        // again: the first batch is the three sends or all four.
        assert!(
            c1 == [(a, 2, 2), (b, 1, 1)] || c1 == [(a, 2, 2), (b, 2, 2)],
            "not one instant: {c1:?}"
        );
        let sends: u64 = all.iter().map(|e| e.2).sum();
        assert_eq!(sends, 4, "conservation: {all:?}");
        assert_eq!(
            all.iter().rfind(|e| e.0 == b).unwrap().1,
            2,
            "b's latest last"
        );
        assert_eq!(
            drain(&mut second),
            [(b, 2, 1)],
            "exactly what came after it"
        );
        let s = first.stats();
        assert_eq!((s.received, s.folded, s.pending), (4, 4, 0), "{s:?}");
        assert_eq!(first.try_recv(), Err(TryRecvError::Empty));
    }
}

/// A second plain receiver registers while the consumer of a
/// `retain_latest` hub's sole receiver pops: the conversion marks the
/// pending places taken, lets the cells' shard locks go to send them into
/// the cells, and marks the part converted under the push lock. A pop that
/// finds its head place taken meanwhile must not answer `Empty` (the key is
/// pending all along): it waits for the mark and goes on with the cells.
///
/// Rule: conflate 1 (a receive sees what is pending), 4. Trap: a pop
/// between the conversion's take and its mark reading an empty queue.
/// Mutant: s12 (`.ci/mutants`).
#[test]
fn conversion_vs_pops_of_the_sole_receiver_table() {
    loom::model(|| {
        let (a, b) = two_shard_keys();
        let (hub, mut first, tx) = with_sole_rx_tx(table_hub());
        tx.send(a, 1).unwrap();
        tx.send(b, 1).unwrap();
        let consumer = thread::spawn(move || {
            let mut got = Vec::new();
            for _ in 0..2 {
                match first.try_recv() {
                    Ok(e) => got.push((e.key, e.value, e.sends)),
                    Err(e) => panic!("{e:?} with a key pending, after {got:?}"),
                }
            }
            first
        });
        let mut second = hub.receiver();
        let mut first = consumer.join().unwrap();
        assert_eq!(first.try_recv(), Err(TryRecvError::Empty));
        let s = first.stats();
        assert_eq!((s.received, s.delivered, s.pending), (2, 2, 0), "{s:?}");
        assert_eq!(second.try_recv(), Err(TryRecvError::Empty));
        assert_eq!(hub.latest(&a), Some(1));
    });
}

/// The sole receiver leaves while a send is in flight and a new plain
/// receiver registers alone: it gets a solo part of its own, and the old
/// part is only retired (docs/design.md, "The sole receiver owns its
/// values"), so a send that still reaches it writes memory that is there.
/// The send reaches at most one of the two receivers; the new one gets
/// every later send; the old one's stats end with what it held dropped.
///
/// Rule: conflate 4 ("Registration versus send"), 12. Trap: a retired solo
/// part let go of while a send still reaches it. Mutant: s7
/// (`.ci/mutants`).
#[test]
fn sole_receiver_leaves_and_another_comes_vs_send() {
    loom::model(|| leaves_and_another_comes_vs_send(Hub::new()));
}

/// The same for a `retain_latest` hub: the new receiver's part is a new
/// part, and the key's cell still names the old part's place, which a send
/// must not follow (its blocks go with the old consumer).
///
/// Rule: conflate 4, 12. Trap: a cell's name of a retired part's place
/// followed. Mutant: s7 (`.ci/mutants`).
#[test]
fn sole_receiver_leaves_and_another_comes_vs_send_table() {
    loom::model(|| leaves_and_another_comes_vs_send(table_hub()));
}

/// One model run of the two tests above on `hub`.
fn leaves_and_another_comes_vs_send(hub: Hub<u32, u32>) {
    {
        let (hub, first, tx) = with_sole_rx_tx(hub);
        let watch = first.watch();
        let tx2 = tx.clone();
        let sender = thread::spawn(move || tx2.send(7, 1).unwrap());
        drop(first);
        let mut second = hub.receiver();
        sender.join().unwrap();
        tx.send(7, 2).unwrap();
        let got = drain(&mut second);
        assert!(
            got == [(7, 2, 1)] || got == [(7, 2, 2)],
            "the new receiver gets every later send: {got:?}"
        );
        let s = watch.stats();
        assert_eq!(s.pending, 0, "{s:?}");
        assert_eq!(s.received, s.dropped, "what it held is dropped: {s:?}");
        assert!(
            s.received + got[0].2 <= 2,
            "the first send reached both receivers: {s:?} {got:?}"
        );
        assert_eq!(second.try_recv(), Err(TryRecvError::Empty));
    }
}

/// The same for a receiver that keeps its own values: its core's wake-up.
///
/// Rule: the same, own-value receivers. Trap: the same. Mutant: e3
/// (`.ci/mutants`).
#[test]
fn park_vs_wake_send_own_values() {
    loom::model(|| {
        let hub = Hub::<u32, u32>::new();
        let mut rx = hub.receiver_builder().key_filter(|_: &u32| true).build();
        let tx = hub.sender();
        let sender = thread::spawn(move || tx.send(3, 4).unwrap());
        let e = rx.recv().unwrap();
        assert_eq!((e.key, e.value), (3, 4));
        sender.join().unwrap();
    });
}

/// A blocking `recv` is woken by a graceful close (and by the last send in flight
/// after it), and reports `Closed` only after the drain.
///
/// Rule: conflate 7 (graceful close). Trap: a lost wake-up for a close;
/// `Closed` before the drain. Mutant: l (`.ci/mutants`).
#[test]
fn park_vs_wake_close() {
    loom::model(|| {
        let (hub, mut rx, tx) = with_rx_tx(Hub::<u32, u32>::new());
        drop(hub);
        let closer = thread::spawn(move || drop(tx));
        assert!(rx.recv().is_err());
        closer.join().unwrap();
    });
}

/// docs/design.md, "Registration versus send": a receiver registering or dropping while a send fans
/// out. The send is `Ok`; a receiver alive for the whole send gets it; a dropped
/// one is freed (loom checks every `Arc` is released) and nothing is delivered to
/// a handle that is gone. The two registry writes flip the list slot twice while
/// the send may still be in flight on the first: the registry asserts (under
/// loom) that it rewrites a view or releases a core only when no send is in
/// flight on that slot, so a missing grace period fails here with "registry:
/// rewriting the view of slot ... while 1 send(s) in flight", not with a crash
/// on reused memory.
///
/// Rule: conflate 4, "Registration versus send". Trap: a send reading a
/// receiver or array already released. Mutant: c (`.ci/mutants`).
#[test]
fn register_and_deregister_vs_send() {
    loom::model(|| {
        let hub: Hub<u32, u32> = Hub::new();
        let mut stays = hub.receiver();
        let leaves = hub.receiver();
        let tx = hub.sender();
        let h2 = hub.clone();
        let sender = thread::spawn(move || tx.send(1, 1).unwrap());
        let joiner = thread::spawn(move || {
            drop(leaves);
            let mut late = h2.receiver();
            // Registered concurrently with the send: it may or may not see it, but
            // never anything else.
            late.try_recv().ok().map(|e| (e.key, e.value))
        });
        sender.join().unwrap();
        let late = joiner.join().unwrap();
        assert!(late.is_none() || late == Some((1, 1)));
        let e = stays.try_recv().unwrap();
        assert_eq!((e.key, e.value, e.sends), (1, 1, 1));
        assert_eq!(stays.try_recv(), Err(TryRecvError::Empty));
    });
}

/// docs/design.md, "Registration versus send", for a `retain_latest` hub with
/// no receiver: a send whose state word counts no receiver folds into the
/// table alone, without reading the receiver lists. A receiver with its own
/// values registers meanwhile: if its registration happened before the send
/// (the sending thread saw the registrar's flag first), it gets the send;
/// otherwise it may or may not, and never twice. The table holds the value
/// either way.
///
/// Rule: conflate 4 and the state table. Trap: a table-only send skipping a
/// receiver its word counts. Mutant: t3 (`.ci/mutants`).
#[test]
fn table_only_send_vs_registration() {
    use loom::sync::atomic::{AtomicBool, Ordering};
    use loom::sync::Arc;
    loom::model(|| {
        let hub: Hub<u32, u32> = Hub::builder().retain_latest().build();
        let tx = hub.sender();
        let registrar_hub = hub.clone();
        let registered = Arc::new(AtomicBool::new(false));
        let flag = registered.clone();
        let registrar = thread::spawn(move || {
            let rx = registrar_hub
                .receiver_builder()
                .key_filter(|_: &u32| true)
                .build();
            // Release: the registration happens-before a send that sees it.
            flag.store(true, Ordering::Release);
            rx
        });
        let after = registered.load(Ordering::Acquire);
        tx.send(1, 1).unwrap();
        let mut rx = registrar.join().unwrap();
        let got = rx.try_recv().ok().map(|e| (e.key, e.value, e.sends));
        if after {
            assert_eq!(got, Some((1, 1, 1)), "registered before the send");
        } else {
            assert!(got.is_none() || got == Some((1, 1, 1)));
        }
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        assert_eq!(hub.latest(&1), Some(1));
    });
}

/// conflate rule 8, docs/design.md: `Hub::close` racing `send`. The send answers `Ok` or
/// `Err`, the receiver ends closed with nothing half-delivered, and every value is
/// freed.
///
/// Rule: conflate 8 (`Hub::close`). Trap: half-delivered or leaked values.
#[test]
fn hub_close_vs_send() {
    loom::model(|| close_now_vs_send(with_rx_tx(Hub::<u32, u32>::new())));
}

/// The same for a hub's sole plain receiver: the hard close shuts its
/// index shards and takes its values under every shard lock; a send in
/// flight finds them shut.
///
/// Rule: conflate 8 (`Hub::close`). Trap: a value pushed past the close and
/// left behind.
#[test]
fn hub_close_vs_send_sole_receiver() {
    loom::model(|| close_now_vs_send(with_sole_rx_tx(Hub::<u32, u32>::new())));
}

/// The same for a `retain_latest` hub's sole plain receiver: the hard close
/// takes the places the cells name under the cells' shard locks.
///
/// Rule: conflate 8 (`Hub::close`). Trap: as above.
#[test]
fn hub_close_vs_send_sole_receiver_table() {
    loom::model(|| close_now_vs_send(with_sole_rx_tx(table_hub())));
}

fn close_now_vs_send((hub, mut rx, tx): (Hub<u32, u32>, Receiver<u32, u32>, Sender<u32, u32>)) {
    {
        let h2 = hub.clone();
        let sender = thread::spawn(move || tx.send(1, 1).is_ok());
        let closer = thread::spawn(move || h2.close_now());
        let _ = sender.join().unwrap();
        closer.join().unwrap();
        assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
        assert_eq!(rx.len(), 0);
        assert!(hub.sender().send(2, 2).is_err());
        let s = rx.stats();
        assert_eq!(s.received, s.dropped, "undelivered is dropped: {s:?}");
    }
}

/// A hard close racing a send and a consumer: what the consumer gets is a prefix
/// of the send order (the close never leaves a hole that a later value is
/// delivered past).
///
/// Rule: conflate 7, 8. Trap: a hard close leaving a hole a later value passes.
#[test]
fn hub_close_never_delivers_past_a_hole() {
    loom::model(|| close_now_vs_send_and_recv(with_rx_tx(Hub::<u32, u32>::new())));
}

fn close_now_vs_send_and_recv(
    (hub, mut rx, tx): (Hub<u32, u32>, Receiver<u32, u32>, Sender<u32, u32>),
) {
    {
        let (a, b) = two_shard_keys();
        tx.send(a, 1).unwrap();
        let h2 = hub.clone();
        let sender = thread::spawn(move || {
            let _ = tx.send(b, 1);
        });
        let closer = thread::spawn(move || h2.close_now());
        let got: Vec<u32> = recv_until_closed(&mut rx).iter().map(|e| e.0).collect();
        sender.join().unwrap();
        closer.join().unwrap();
        assert!(
            got.is_empty() || got == [a] || got == [a, b],
            "delivered past a hole: {got:?}"
        );
    }
}

/// `Receiver::len()` polled while one key is pushed, annihilated, pushed again
/// and annihilated again: at most one key is ever pending, so `len()` is 0 or 1.
/// A count read as two loads tears either way here: pushed-then-retired wraps
/// below zero, retired-then-pushed counts the key twice.
///
/// Rule: `Receiver::len`. Trap: a count that tears (two loads). Mutant: g1, g2
/// (`.ci/mutants`).
#[test]
fn len_stays_within_the_pending_keys() {
    loom::model(|| {
        let hub = Hub::<u32, u64>::with_merge(|_pending, _incoming| None);
        let tx = hub.sender();
        let rx = hub.receiver();
        let sender = thread::spawn(move || {
            for _ in 0..4 {
                tx.send(0, 0).unwrap(); // pending, then annihilated
            }
        });
        thread::yield_now();
        let polled = rx.len();
        assert!(polled <= 1, "len() = {polled} with at most one key pending");
        sender.join().unwrap();
        assert_eq!(rx.len(), 0);
    });
}

/// The hub's sole plain receiver's `pending`, read by a watch on another
/// thread while one key is sent, taken and sent again: at most one key is
/// ever pending, so the watch reads 0 or 1. Pops read before pushes count
/// the key's second place against its first's pop not yet seen: 2.
///
/// Rule: conflate 13 (`ReceiverStats::pending`). Trap: a count read as two
/// loads that tears. Mutant: g4 (`.ci/mutants`).
#[test]
fn sole_receivers_pending_stays_within_its_keys() {
    loom::model(|| {
        let (_hub, mut rx, tx) = with_sole_rx_tx(Hub::new());
        let watch = rx.watch();
        let watcher = thread::spawn(move || watch.stats().pending);
        tx.send(0, 1).unwrap();
        assert_eq!(rx.try_recv().map(|e| e.value), Ok(1));
        tx.send(0, 2).unwrap();
        let pending = watcher.join().unwrap();
        assert!(pending <= 1, "pending = {pending} with one key");
    });
}

// ---------------------------------------------------------------------------
// The registry's receiver arrays (docs/design.md, "The registry"): a
// registration stores the receiver's pointer in a hole or at the length and
// then publishes the length; a deregistration nulls the entry and retires the
// receiver; growth and compaction publish a new array and retire the old one.
// What is retired is released (and a cell receiver's id handed out again)
// only after a grace period, so no send can still read it. Under loom the
// array starts at 2 entries, compacts at 1 hole and one retirement is enough
// for the next deregistration to run a grace period (`RETIRE_BATCH`), so these
// small models reach a growth, a compaction and a release.

/// Every `(key, value, sends)` a receiver holds now.
fn registry_drain(rx: &mut keybus::conflate::Receiver<u32, u32>) -> Vec<(u32, u32, u64)> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push((e.key, e.value, e.sends));
    }
    out
}

/// Registration racing a send, through a growth of the cell-receiver array
/// (the joiner's second registration finds it full: the entries are copied
/// into an array twice as large, which is published, and the old array is
/// retired, not freed, since the send may still be reading it): a receiver
/// registered before the send began gets it exactly once; one registering
/// meanwhile gets it once or not at all (the send loaded the array, the length
/// and the entry before or after the registration stored them); every receiver
/// registered before a later send gets that one.
///
/// Rule: conflate 4, "The registry". Trap: an array freed or rewritten while a
/// send reads it.
#[test]
fn registry_register_and_grow_vs_send() {
    loom::model(|| {
        let hub: Hub<u32, u32> = Hub::new();
        let mut stays = hub.receiver();
        let tx = hub.sender();
        let tx2 = tx.clone();
        let h2 = hub.clone();
        let sender = thread::spawn(move || tx2.send(1, 1).unwrap());
        let joiner = thread::spawn(move || (h2.receiver(), h2.receiver()));
        sender.join().unwrap();
        let (mut late, mut grown) = joiner.join().unwrap();
        tx.send(2, 2).unwrap();
        assert_eq!(registry_drain(&mut stays), [(1, 1, 1), (2, 2, 1)]);
        for rx in [&mut late, &mut grown] {
            let got = registry_drain(rx);
            assert!(
                got == [(2, 2, 1)] || got == [(1, 1, 1), (2, 2, 1)],
                "a receiver registered during a send got {got:?}"
            );
        }
    });
}

/// Deregistration racing a send, then the freed index reused by a new
/// receiver: the leaving core is released only after the send left (loom
/// checks every `Arc` is released), the
/// new receiver at the same index gets the racing send once or not at all, and
/// the receivers that stay get every send once. 10,190 schedules at 3
/// preemptions; with the second grace period left out, loom reports a
/// causality violation on the released core.
///
/// Rule: conflate 4, "The registry". Trap: a core released before the send left
/// it.
#[test]
fn registry_deregister_and_reuse_index_vs_send() {
    loom::model(|| {
        let hub: Hub<u32, u32> = Hub::new();
        let mut first = hub.receiver();
        let leaves = hub.receiver();
        let tx = hub.sender();
        let tx2 = tx.clone();
        let h2 = hub.clone();
        let sender = thread::spawn(move || tx2.send(1, 1).unwrap());
        let churn = thread::spawn(move || {
            drop(leaves);
            // The trailing index `leaves` held is free again: reused here.
            h2.receiver()
        });
        sender.join().unwrap();
        let mut reused = churn.join().unwrap();
        tx.send(2, 2).unwrap();
        assert_eq!(registry_drain(&mut first), [(1, 1, 1), (2, 2, 1)]);
        let got = registry_drain(&mut reused);
        assert!(
            got == [(2, 2, 1)] || got == [(1, 1, 1), (2, 2, 1)],
            "the receiver at a reused index got {got:?}"
        );
        assert_eq!(hub.stats().receivers, 2);
    });
}

/// A compaction racing a send: with one hole already made, dropping a second
/// receiver before the last one moves the last one into a new array while a
/// send may be reading the old one. The receiver that stays gets the send
/// exactly once (neither skipped nor seen at two indices), and a later send
/// reaches it through the new array. 6,257 schedules at 3 preemptions; a
/// compaction done in place, in the array sends read, delivers the send twice
/// here (`sends == 2`).
///
/// Rule: conflate 4, "The registry". Trap: compaction in place: a send
/// delivered twice.
#[test]
fn registry_compaction_vs_send() {
    loom::model(|| {
        let hub: Hub<u32, u32> = Hub::new();
        let a = hub.receiver();
        let b = hub.receiver();
        let mut stays = hub.receiver();
        drop(a); // one hole, below the compaction threshold
        let tx = hub.sender();
        let tx2 = tx.clone();
        let sender = thread::spawn(move || tx2.send(1, 1).unwrap());
        let churn = thread::spawn(move || drop(b)); // two holes: compaction
        sender.join().unwrap();
        churn.join().unwrap();
        tx.send(2, 2).unwrap();
        assert_eq!(registry_drain(&mut stays), [(1, 1, 1), (2, 2, 1)]);
        assert_eq!(hub.stats().receivers, 1);
    });
}

/// docs/design.md, "One lock while one thread sends": a `retain_latest`
/// hub's cells start with one lock for every shard and the sole receiver's
/// push side, owned by the first thread that sends. Here a thread sends `a`
/// while the receiver's thread sends `b` and then cuts: whichever sends
/// second, or first finds the one lock held, splits the cells for good,
/// under the one lock, possibly while the other's send or cut waits for it
/// or holds it. Every send is delivered
/// once, by value, and the table holds both.
///
/// Rule: conflate 5 and 6, the state table. Trap: a holder that read the
/// cells merged and keeps the one lock after the split (the push side then
/// has two holders); a split not published to the holders of the other
/// locks. Mutant: s16, s17 (`.ci/mutants`).
#[test]
fn a_second_sending_thread_splits_the_merged_cells_table() {
    loom::model(|| {
        let (a, b) = two_shard_keys();
        let hub = table_hub();
        let mut rx = hub.receiver();
        let tx = hub.sender();
        let other = tx.clone();
        let sender = thread::spawn(move || other.send(a, 1).unwrap());
        tx.send(b, 2).unwrap();
        let mut got = cut(&mut rx);
        sender.join().unwrap();
        got.extend(cut(&mut rx));
        got.sort_unstable();
        let mut want = vec![(a, 1, 1), (b, 2, 1)];
        want.sort_unstable();
        assert_eq!(got, want, "each send delivered once");
        let mut table = hub.snapshot();
        table.sort_unstable();
        let mut want = vec![(a, 1), (b, 2)];
        want.sort_unstable();
        assert_eq!(table, want, "the table");
    });
}

/// The same split seen by a third party: two threads send to a
/// `retain_latest` hub with no receiver (the table alone) while the table is
/// read. The reader may find the cells split by a thread other than the
/// one whose merged send wrote the key it reads: it must still see that
/// write (the split's Release, its Acquire).
///
/// Three threads: explored at one preemption whatever `LOOM_MAX_PREEMPTIONS`
/// says (at two it runs for many minutes). One suffices for the order that
/// matters, the two sends before the read, each send whole.
///
/// Rule: the state table. Trap: a reader that saw the split takes its own
/// shard's lock without the merged holder's writes ordered before it.
/// Mutant: s17 (`.ci/mutants`).
#[test]
fn a_split_by_another_thread_orders_the_merged_writes_before_a_reader_table() {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(1);
    model.check(|| {
        let (a, b) = two_shard_keys();
        let hub = table_hub();
        let tx1 = hub.sender();
        let tx2 = tx1.clone();
        let first = thread::spawn(move || tx1.send(a, 1).unwrap());
        let second = thread::spawn(move || tx2.send(b, 2).unwrap());
        // Without this, loom explores the read mostly before the sends.
        thread::yield_now();
        let seen = hub.latest(&a);
        assert!(seen.is_none() || seen == Some(1), "{seen:?}");
        first.join().unwrap();
        second.join().unwrap();
        assert_eq!((hub.latest(&a), hub.latest(&b)), (Some(1), Some(2)));
    });
}
