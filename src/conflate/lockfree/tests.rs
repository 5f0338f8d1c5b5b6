//! Unit tests of the lock-free conflate internals, small enough for miri (which
//! checks the crates underneath too: hashbrown, event-listener).

use super::Hub;
use crate::TryRecvError;
use std::thread;

#[test]
fn coalesce_pop_and_cut_single_thread() {
    let hub: Hub<u32, u32> = Hub::with_merge(|a, b| Some(a + b));
    let tx = hub.sender();
    let mut rx = hub.receiver();
    for k in [1, 2, 1, 3, 2, 1] {
        tx.send(k, 1).unwrap();
    }
    assert_eq!(rx.len(), 3);
    let head = rx.peek().unwrap();
    assert_eq!((head.key, head.value, head.sends), (1, 3, 3));
    let first = rx.try_recv().unwrap();
    assert_eq!(first, head);
    let rest: Vec<_> = rx
        .try_recv_all()
        .unwrap()
        .into_iter()
        .map(|e| e.key)
        .collect();
    assert_eq!(rest, vec![2, 3]);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
}

#[test]
fn annihilation_unlinks_from_shared_and_private_lists() {
    let hub: Hub<u32, i32> = Hub::with_merge(|a, b| Some(a + b).filter(|s| *s != 0));
    let tx = hub.sender();
    let mut rx = hub.receiver();
    tx.send(1, 1).unwrap();
    tx.send(2, 1).unwrap();
    tx.send(3, 1).unwrap();
    // Move the tickets into the private list, then annihilate the middle one.
    assert_eq!(rx.try_recv().unwrap().key, 1);
    tx.send(2, -1).unwrap();
    assert_eq!(rx.len(), 1);
    // Annihilate a key still in the shared list.
    tx.send(4, 1).unwrap();
    tx.send(4, -1).unwrap();
    assert_eq!(rx.len(), 1);
    let keys: Vec<_> = rx.try_iter().map(|e| e.key).collect();
    assert_eq!(keys, vec![3]);
}

/// A ticket left stale in the consumer's private list names a slab index that a
/// new entry reuses, with the same ticket index in the next list: only the
/// segment tells them apart. Neither a cut (ticket by ticket, or taking the
/// slabs whole) nor a pop may take the new entry for the stale ticket.
#[test]
fn stale_tickets_never_claim_a_reused_slab_index() {
    use super::core::shard_index;
    for (fillers, cut) in [(0, true), (200, true), (200, false)] {
        let hub: Hub<u32, i32> = Hub::with_merge(|a, b| Some(a + b).filter(|s| *s != 0));
        let shard = |k: &u32| shard_index(hub.shared.hash(k));
        let mut in_0 = (0..).filter(|k| shard(k) == 0);
        let [a0, a1, a2, b0, b1] = std::array::from_fn(|_| in_0.next().unwrap());
        let filler: Vec<u32> = (0..).filter(|k| shard(k) != 0).take(fillers).collect();
        let tx = hub.sender();
        let mut rx = hub.receiver();
        // Shard 0: a0, a1, a2 at slab indices 0, 1, 2, tickets 0, 1, 2.
        for &k in [a0, a1, a2].iter().chain(&filler) {
            tx.send(k, 1).unwrap();
        }
        // Every ticket moves to the private list; a0 is taken (slab index 0 free).
        assert_eq!(rx.try_recv().unwrap().key, a0);
        // b0: slab index 0, ticket 0 of the new list. a1 annihilated: its
        // ticket (private, index 1) goes stale, slab index 1 free. b1: slab
        // index 1, ticket 1 of the new list.
        tx.send(b0, 1).unwrap();
        tx.send(a1, -1).unwrap();
        tx.send(b1, 1).unwrap();
        let got: Vec<u32> = if cut {
            rx.try_recv_all()
                .unwrap()
                .into_iter()
                .map(|e| e.key)
                .collect()
        } else {
            rx.try_iter().map(|e| e.key).collect()
        };
        let want: Vec<u32> = [a2].into_iter().chain(filler).chain([b0, b1]).collect();
        assert_eq!(got, want, "cut: {cut}");
        assert_eq!(rx.len(), 0);
    }
}

#[test]
fn two_threads_conserve_sends() {
    let hub: Hub<u32, u64> = Hub::with_merge(|a, b| Some(a + b));
    let mut rx = hub.receiver();
    let tx = hub.sender();
    drop(hub);
    let sender = thread::spawn(move || {
        for i in 0..200u64 {
            tx.send((i % 5) as u32, 1).unwrap();
        }
    });
    let (mut sum, mut sends) = (0, 0);
    let mut cut = false;
    loop {
        cut = !cut;
        let got = if cut {
            rx.try_recv_all()
        } else {
            rx.try_recv().map(|e| vec![e])
        };
        match got {
            Ok(batch) => {
                for e in batch {
                    sum += e.value;
                    sends += e.sends;
                }
            }
            Err(TryRecvError::Empty) => thread::yield_now(),
            Err(TryRecvError::Closed) => break,
        }
    }
    sender.join().unwrap();
    assert_eq!((sum, sends), (200, 200));
}

#[test]
fn hard_close_during_sends_frees_everything() {
    let token = std::sync::Arc::new(());
    let hub: Hub<u32, std::sync::Arc<()>> = Hub::new();
    let mut rx = hub.receiver();
    let tx = hub.sender();
    let t = token.clone();
    let sender = thread::spawn(move || {
        for k in 0..100 {
            let _ = tx.send(k, t.clone());
        }
    });
    hub.close_now();
    sender.join().unwrap();
    assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
    drop((rx, hub));
    assert_eq!(std::sync::Arc::strong_count(&token), 1);
}

#[test]
fn large_cut_grouped_by_shard_is_one_instant() {
    // A large backlog, cut while one sender keeps adding keys in order and
    // re-sending old ones (OR-merged bits), so that the cut meets shards it
    // takes whole and shards where the sender already made entries of the new
    // epoch (claimed ticket by ticket). The sends, in order:
    //   new 0, .., new n-1, then for j in 0..n: new n+j, again j (bit 2).
    // A cut is one instant, so after every batch what was received in total is
    // a prefix of that sequence: new keys 0..N, and the re-sends of exactly
    // 0..R, where R is N-1-n or N-n (the prefix ends after "new n+R" or after
    // "again R"), or 0 while N <= n. Any batch that holds a later send without
    // an earlier one breaks this.
    //
    // The first cut waits until the sender is running, so that the sender's
    // re-sends meet the cut's drain of the backlog; a few rounds, because
    // whether they meet on real threads is up to the scheduler.
    let (n, rounds): (u64, u32) = if cfg!(miri) { (600, 1) } else { (5_000, 16) };
    for _ in 0..rounds {
        large_cut_round(n);
    }
}

fn large_cut_round(n: u64) {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use std::sync::Arc;
    let hub: Hub<u64, u64> = Hub::with_merge(|a, b| Some(a | b));
    let mut rx = hub.receiver();
    let tx = hub.sender();
    drop(hub);
    for k in 0..n {
        tx.send(k, 1).unwrap();
    }
    let progress = Arc::new(AtomicU64::new(0));
    let sent = progress.clone();
    let sender = thread::spawn(move || {
        for k in n..2 * n {
            tx.send(k, 1).unwrap();
            tx.send(k - n, 2).unwrap(); // re-send an old key: second bit
            sent.store(k - n + 1, Relaxed);
        }
    });
    while progress.load(Relaxed) < n.min(16) {
        thread::yield_now();
    }
    let mut next_new = 0u64;
    let mut second = vec![false; n as usize];
    let mut seen_second = 0u64;
    let mut batches = 0u32;
    loop {
        match rx.try_recv_all() {
            Ok(batch) => {
                batches += 1;
                for e in batch {
                    if e.value & 1 == 1 {
                        assert_eq!(e.key, next_new, "first touches in order, no hole");
                        next_new += 1;
                    }
                    if e.value & 2 == 2 {
                        assert!(!second[e.key as usize], "a re-send delivered twice");
                        second[e.key as usize] = true;
                        seen_second += 1;
                    }
                }
                // The prefix property, after every batch.
                let allowed: &[u64] = if next_new <= n {
                    &[0]
                } else {
                    &[next_new - 1 - n, next_new - n]
                };
                assert!(
                    allowed.contains(&seen_second),
                    "batch {batches} is not one instant: {next_new} new keys but \
                     {seen_second} re-sends received (allowed: {allowed:?})"
                );
                assert!(
                    second[..seen_second as usize].iter().all(|&s| s),
                    "batch {batches}: the re-sends received are not 0..{seen_second}"
                );
            }
            Err(TryRecvError::Empty) => thread::yield_now(),
            Err(TryRecvError::Closed) => break,
        }
    }
    sender.join().unwrap();
    assert_eq!(next_new, 2 * n);
    assert_eq!(seen_second, n);
}

#[test]
fn send_without_receiver_takes_no_lock_and_a_closed_hub_still_refuses() {
    use super::shared::WRITER_LOCKS;
    let hub: Hub<u32, u32> = Hub::new();
    let tx = hub.sender();
    let before = WRITER_LOCKS.with(|n| n.get());
    for k in 0..1_000 {
        tx.send(k, k).unwrap();
    }
    // No receiver exists, so there is no shard or queue lock to take either: the
    // hub's writer lock is the only lock a send could reach.
    assert_eq!(
        WRITER_LOCKS.with(|n| n.get()),
        before,
        "a send took the hub lock"
    );
    tx.close();
    let closed = WRITER_LOCKS.with(|n| n.get());
    assert_eq!(tx.send(1, 1).unwrap_err().into_inner(), (1, 1));
    assert_eq!(
        WRITER_LOCKS.with(|n| n.get()),
        closed,
        "a refused send took the hub lock"
    );
}

#[test]
fn receiver_churn_during_sends_frees_lists_only_after_their_grace_period() {
    // Registry writers rewrite the receiver list while sends read it and deliver
    // into every listed receiver; under miri a list rewritten, or a dropped
    // receiver's core freed, before the last send that could read it left is a
    // data race or use-after-free report.
    let rounds = if cfg!(miri) { 20 } else { 2_000 };
    let hub: Hub<u32, u32> = Hub::new();
    let mut stays = hub.receiver();
    let tx = hub.sender();
    let churn_hub = hub.clone();
    let churn = thread::spawn(move || {
        for _ in 0..rounds {
            let rx = churn_hub.receiver();
            drop(rx);
        }
    });
    for k in 0..rounds * 2 {
        tx.send(k as u32, 1).unwrap();
    }
    churn.join().unwrap();
    drop((hub, tx));
    let delivered = stays.iter().count();
    assert_eq!(delivered, rounds * 2, "the stable receiver got every send");
}

/// A cell receiver released by a collection is renewed in place for the next
/// registration: the new one shares nothing with its predecessor's life but
/// the allocation. The old one was closed, named, had consumed and given up
/// entries over several queue blocks, and parked; the new one starts open,
/// unnamed, with no entry, no counts and epoch 0, and gets what is sent after
/// it registered (unit tests collect at every retirement).
#[test]
fn a_renewed_cell_receiver_starts_as_new() {
    use super::receiver::Kind;
    let cell_rx = |rx: &super::Receiver<u32, u32>| match &rx.kind {
        Kind::Cells(shared, _) => crate::sync::Arc::as_ptr(shared),
        Kind::Own(..) => panic!("a plain receiver shares the cells"),
    };
    let hub: Hub<u32, u32> = Hub::new();
    let tx = hub.sender();
    // A sole plain receiver keeps its values itself (`solo.rs`): `other`
    // stays registered, so `old` and `new` share the cells.
    let _other = hub.receiver_builder().name("other").build();
    let mut old = hub.receiver_builder().name("old").build();
    let n = if cfg!(miri) { 140 } else { 400 };
    for k in 0..n {
        tx.send(k, 1).unwrap();
    }
    assert_eq!(old.try_recv().unwrap().key, 0);
    assert_eq!(old.try_recv_all().unwrap().len() as u32, n - 1);
    for k in 0..n {
        tx.send(k, 2).unwrap();
    }
    let old_serial = hub.receivers()[1].id;
    old.close();
    let was = cell_rx(&old);
    drop(old);
    // The collection at its drop released it into the spares.
    assert_eq!(hub.shared.spare_cell_rxs(), 1);
    let mut new = hub.receiver();
    assert_eq!(hub.shared.spare_cell_rxs(), 0);
    assert_eq!(cell_rx(&new), was, "the released allocation is reused");
    assert!(!new.is_closed());
    assert_eq!(new.len(), 0);
    assert_eq!(new.try_recv(), Err(TryRecvError::Empty));
    let info = hub.receivers();
    assert_eq!(info.len(), 2);
    assert_eq!(info[1].name, None);
    assert_ne!(info[1].id, old_serial, "a new receiver's number");
    // SAFETY: `was` is `new`'s shared part (asserted above), which `new`
    // keeps alive; only its atomics are read, through a shared reference.
    let renewed = unsafe { &*was };
    // No cut announced yet: a send seeing epoch 1 before the first cut
    // announces it must help (`cells::help`).
    assert_eq!(renewed.announced.load(crate::sync::Ordering::Relaxed), 0);
    assert!(
        renewed.queue.tail().is_new(),
        "an empty queue at position 0"
    );
    let stats = new.stats();
    assert_eq!(
        (
            stats.received,
            stats.delivered,
            stats.folded,
            stats.dropped,
            stats.pending
        ),
        (0, 0, 0, 0, 0)
    );
    for k in [7, 3, 7] {
        tx.send(k, 5).unwrap();
    }
    let batch: Vec<_> = new
        .try_recv_all()
        .unwrap()
        .into_iter()
        .map(|e| (e.key, e.value, e.sends))
        .collect();
    assert_eq!(batch, vec![(7, 5, 2), (3, 5, 1)]);
    tx.send(1, 9).unwrap();
    assert_eq!(new.recv().unwrap().key, 1);
    drop(tx);
    drop(hub);
    assert!(new.recv().is_err(), "closed once the last sender went");
}

/// A cut whose `V::clone` panics in its second group of entries (a
/// `retain_latest` hub: the cut clones what the table keeps): the events
/// written before the panic, in the first group and in its own (the shards
/// it took before the panicking entry's), are dropped with the batch (miri
/// checks they are neither leaked nor dropped twice), every entry not taken
/// is given up (so each key sent again is pending again, and delivered), the
/// batch's sends are counted as dropped, the caller's `Vec` is as it was,
/// and the receiver goes on.
#[test]
fn a_clone_panicking_mid_cut_drops_the_batch_whole() {
    // 1,100 keys: two groups of the cut (1,024 and 76 entries); the panic at
    // the 41st clone of the second group, whatever order its shards are
    // taken in, so that group has events written when it unwinds.
    clone_panicking_mid_cut(1_100, 1_024 + 40);
}

/// The same for a cut small enough to take its entries in queue order (50
/// entries, the panic at the 21st): the events pushed before it are dropped
/// with the batch, the entry it was taking and those after it are given up,
/// and the shard it held is let go of (the sends after it lock it again).
#[test]
fn a_clone_panicking_mid_small_cut_drops_the_batch_whole() {
    clone_panicking_mid_cut(50, 20);
}

/// A `retain_latest` hub's cell receiver cuts `keys` keys, one sent each,
/// with `V::clone` planted to panic after `clones` clones: the checks of
/// [`a_clone_panicking_mid_cut_drops_the_batch_whole`].
fn clone_panicking_mid_cut(keys: u32, clones: i64) {
    use std::cell::Cell;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    thread_local! {
        /// Value clones left before the planted panic, on this test's
        /// thread (the cut's); negative: none planted.
        static CLONES_LEFT: Cell<i64> = const { Cell::new(-1) };
    }
    #[derive(Debug, PartialEq)]
    struct Brittle(String);
    impl Clone for Brittle {
        fn clone(&self) -> Self {
            let left = CLONES_LEFT.get();
            if left >= 0 {
                CLONES_LEFT.set(left - 1);
                assert_ne!(left, 0, "a planted clone panic");
            }
            Brittle(self.0.clone())
        }
    }
    let hub: Hub<u32, Brittle> = Hub::builder().retain_latest().build();
    let tx = hub.sender();
    // A cell receiver: a sole one keeps its values itself, so it registers
    // beside another that then leaves.
    let first = hub.receiver();
    let mut rx = hub.receiver();
    drop(first);
    // The table keeps every value, so the cut clones each one it takes.
    for k in 0..keys {
        tx.send(k, Brittle(format!("v{k}"))).unwrap();
    }
    CLONES_LEFT.set(clones);
    let mut out = vec![];
    let cut = catch_unwind(AssertUnwindSafe(|| rx.try_recv_all_into(&mut out)));
    assert!(
        cut.is_err(),
        "the planted clone panic unwinds out of the cut"
    );
    CLONES_LEFT.set(-1);
    assert!(out.is_empty(), "{out:?}");
    let stats = rx.stats();
    let keys64 = u64::from(keys);
    assert_eq!(
        (stats.received, stats.delivered, stats.dropped),
        (keys64, 0, keys64)
    );
    assert_eq!(stats.pending, 0);
    tx.send(7, Brittle("after".into())).unwrap();
    assert_eq!(
        rx.try_recv_all_into(&mut out).map(|_| &out[..]),
        Ok(&[crate::Event {
            key: 7,
            value: Brittle("after".into()),
            sends: 1
        }][..])
    );
    // Every key given up is a first touch again: none is left marked
    // pending with no entry behind it.
    out.clear();
    for k in 0..keys {
        tx.send(k, Brittle(format!("w{k}"))).unwrap();
    }
    assert_eq!(rx.try_recv_all_into(&mut out), Ok(keys as usize));
    let got: Vec<u32> = out.iter().map(|e| e.key).collect();
    assert_eq!(got, (0..keys).collect::<Vec<_>>(), "in first-touch order");
    assert!(out
        .iter()
        .all(|e| e.sends == 1 && e.value.0 == format!("w{}", e.key)));
}

/// Cell receivers past the four whose marks fit in a cell: every cell's
/// marks live in its vector then, and pops, cuts and re-pends take the
/// common paths there too. Every receiver gets every key once per round,
/// with its sends counted, and the books balance.
#[test]
fn receivers_past_the_inline_marks_take_and_re_pend_exactly() {
    let hub: Hub<u32, String> = Hub::new();
    let tx = hub.sender();
    let mut rxs: Vec<_> = (0..6).map(|_| hub.receiver()).collect();
    for round in 0..3u32 {
        for k in 0..5u32 {
            tx.send(k, format!("{round}.{k}.a")).unwrap();
            tx.send(k, format!("{round}.{k}")).unwrap();
        }
        for (i, rx) in rxs.iter_mut().enumerate() {
            let got: Vec<_> = if i % 2 == 0 {
                std::iter::from_fn(|| rx.try_recv().ok()).collect()
            } else {
                rx.try_recv_all().unwrap()
            };
            let want: Vec<_> = (0..5u32)
                .map(|k| crate::Event {
                    key: k,
                    value: format!("{round}.{k}"),
                    sends: 2,
                })
                .collect();
            assert_eq!(got, want, "receiver {i}, round {round}");
        }
    }
    // A key taken at a receiver past the inline four while the others still
    // have it pending, then sent again: the send re-pends it there only.
    tx.send(9, "old".into()).unwrap();
    assert_eq!(rxs[5].try_recv_all().unwrap()[0].value, "old");
    tx.send(9, "new".into()).unwrap();
    for rx in rxs.iter_mut() {
        let last = std::iter::from_fn(|| rx.try_recv().ok()).last().unwrap();
        assert_eq!((last.key, last.value.as_str()), (9, "new"));
    }
    let stats: Vec<_> = rxs.iter().map(|rx| rx.stats()).collect();
    for s in &stats {
        assert_eq!(s.pending, 0);
        assert_eq!(
            s.received,
            s.folded + s.dropped + s.annihilated + s.overflowed
        );
    }
    drop(rxs);
    assert_eq!(tx.send(1, "x".into()), Ok(()));
}

/// A hub's sole plain receiver keeps its values in its queue (`solo.rs`):
/// pops and cuts across block boundaries, keys that come back after a take
/// (stale index entries), the index compacted after enough takes, then a
/// second plain receiver converts the pending entries into cells in
/// first-touch order with the sends they folded; the first receiver goes on
/// from the cells, the second gets only what came after it, and the stats
/// keep their law. Heap values, so miri sees every value dropped once.
#[test]
fn a_sole_receivers_entries_become_cells_in_first_touch_order() {
    sole_receivers_entries_become_cells(false);
}

/// The same for a `retain_latest` hub's sole plain receiver, whose places
/// the cells name: the conversion finds them through the cells, sends them
/// in with the table's values and first-touch order left as they were, and
/// the table reads the latest value of every key throughout.
#[test]
fn a_table_hubs_sole_receivers_entries_become_cells_in_first_touch_order() {
    sole_receivers_entries_become_cells(true);
}

fn sole_receivers_entries_become_cells(table: bool) {
    let hub: Hub<u32, String> = if table {
        Hub::builder().retain_latest().build()
    } else {
        Hub::new()
    };
    let tx = hub.sender();
    let n: u32 = match (cfg!(miri), table) {
        (true, true) => 100,
        (true, false) => 300,
        _ => 3_000,
    };
    if table {
        // Keys in the table before the receiver: their cells name no place.
        for k in (0..n).rev() {
            tx.send(k, "before".to_string()).unwrap();
        }
    }
    let mut first = hub.receiver();
    for round in 0..3u32 {
        for k in 0..n {
            tx.send(k + round * n, round.to_string()).unwrap();
        }
        let taken = if round == 1 {
            std::iter::from_fn(|| first.try_recv().ok()).count()
        } else {
            first.try_recv_all().unwrap().len()
        };
        assert_eq!(taken as u32, n, "round {round}");
    }
    // Keys that come back (their index entries, or their cells' names for
    // their places, are stale), some twice.
    for k in 0..n {
        tx.send(k, format!("a{k}")).unwrap();
    }
    for k in 0..n / 2 {
        tx.send(k, format!("b{k}")).unwrap();
    }
    assert_eq!(first.len() as u32, n);
    let head = first.peek().unwrap();
    assert_eq!((head.key, head.value.as_str(), head.sends), (0, "b0", 2));
    let popped = first.try_recv().unwrap();
    assert_eq!(popped, head);
    let mut second = hub.receiver();
    tx.send(n, "late".to_string()).unwrap();
    assert_eq!(first.len() as u32, n, "n - 1 converted, and the late key");
    let batch = first.try_recv_all().unwrap();
    let keys: Vec<u32> = batch.iter().map(|e| e.key).collect();
    assert_eq!(keys, (1..=n).collect::<Vec<_>>(), "first-touch order");
    for e in &batch[..batch.len() - 1] {
        let (value, sends) = if e.key < n / 2 {
            (format!("b{}", e.key), 2)
        } else {
            (format!("a{}", e.key), 1)
        };
        assert_eq!((&e.value, e.sends), (&value, sends), "key {}", e.key);
        if table {
            assert_eq!(hub.latest(&e.key), Some(value), "the table's value");
        }
    }
    let late = second.try_recv().unwrap();
    assert_eq!((late.key, late.value.as_str(), late.sends), (n, "late", 1));
    assert_eq!(second.try_recv(), Err(TryRecvError::Empty));
    if table {
        // The table's first-touch order: the keys as first sent.
        let order: Vec<u32> = hub.snapshot().into_iter().map(|(k, _)| k).collect();
        let want: Vec<u32> = (0..n).rev().chain(n..3 * n).collect();
        assert_eq!(order, want);
    }
    tx.send(7, "after".to_string()).unwrap();
    assert_eq!(first.try_recv().unwrap().key, 7);
    let s = first.stats();
    let sent = u64::from(4 * n + n / 2 + 2);
    assert_eq!(
        (s.received, s.folded, s.pending, s.dropped),
        (sent, sent, 0, 0)
    );
}

/// A `retain_latest` hub's sole receiver leaves with a key pending, and the
/// next one registers alone: the key's cell still names the first part's
/// place, whose blocks went with the first consumer. The new part must not
/// follow that name (its blocks may sit where the old ones were: a send of
/// another key then takes the first place, the one the stale name points
/// at; under miri any read of the freed block fails).
#[test]
fn a_table_hubs_next_sole_receiver_never_follows_the_last_ones_places() {
    let hub: Hub<u32, String> = Hub::builder().retain_latest().build();
    let tx = hub.sender();
    let first = hub.receiver();
    tx.send(1, "a".into()).unwrap();
    drop(first);
    let mut second = hub.receiver();
    tx.send(2, "x".into()).unwrap();
    tx.send(1, "b".into()).unwrap();
    let got: Vec<_> = second
        .try_recv_all()
        .unwrap()
        .into_iter()
        .map(|e| (e.key, e.value, e.sends))
        .collect();
    assert_eq!(got, [(2, "x".to_string(), 1), (1, "b".to_string(), 1)]);
    assert_eq!(hub.latest(&1).as_deref(), Some("b"));
}

/// A second `Hub::close_now` after the sole receiver of a `retain_latest`
/// hub let go of its part (its receive after the first close tore the part
/// down and freed its blocks): the hub still holds the part, and the cells
/// still name its places, which the second close must not follow (under
/// miri, a read of a freed block fails; CI's differential run once ended on
/// such a read with SIGSEGV).
#[test]
fn a_second_hard_close_after_the_table_hubs_sole_receiver_let_go() {
    let hub: Hub<u32, String> = Hub::builder().retain_latest().build();
    let tx = hub.sender();
    let mut rx = hub.receiver();
    for k in 0..3 {
        tx.send(k, format!("v{k}")).unwrap();
    }
    hub.close_now();
    assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
    hub.close_now();
    assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
    let s = rx.stats();
    assert_eq!((s.received, s.dropped, s.pending), (3, 3, 0), "{s:?}");
    assert_eq!(hub.latest(&1).as_deref(), Some("v1"));
}

/// The sole receiver's values go when it closes, and when the hub closes
/// hard, also with a send racing the close; the stats count them dropped.
#[test]
fn a_sole_receivers_values_go_at_its_close_and_the_hubs() {
    sole_receivers_values_go_at_its_close_and_the_hubs(false);
}

/// The same in a `retain_latest` hub, whose table keeps its own copy of
/// every value: the receiver's copies go, the table's stay.
#[test]
fn a_table_hubs_sole_receivers_values_go_at_its_close_and_the_hubs() {
    sole_receivers_values_go_at_its_close_and_the_hubs(true);
}

fn sole_receivers_values_go_at_its_close_and_the_hubs(table: bool) {
    let token = std::sync::Arc::new(());
    for hard in [false, true] {
        let hub: Hub<u32, std::sync::Arc<()>> = if table {
            Hub::builder().retain_latest().build()
        } else {
            Hub::new()
        };
        let tx = hub.sender();
        let mut rx = hub.receiver();
        for k in 0..300 {
            tx.send(k % 200, token.clone()).unwrap();
        }
        let racing = {
            let (tx, token) = (tx.clone(), token.clone());
            thread::spawn(move || {
                let _ = tx.send(1_000, token);
            })
        };
        if hard {
            hub.close_now();
        } else {
            rx.close();
        }
        racing.join().unwrap();
        // The racing send may have found the part retired and the receiver
        // still listed, and pushed to its cell queue after the close walked
        // it: the receiver's next receive gives that up (its settling).
        assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
        let kept = hub.snapshot().len();
        assert_eq!(kept, if table { 200 + kept % 200 } else { 0 });
        assert_eq!(
            std::sync::Arc::strong_count(&token),
            1 + kept,
            "hard {hard}"
        );
        let s = rx.stats();
        assert_eq!(s.received, s.dropped, "hard {hard}: {s:?}");
        assert!(s.received >= 300 && s.pending == 0, "hard {hard}: {s:?}");
    }
}

/// A plain receiver alone again on its hub keeps its values itself, as the
/// hub's first one did: after the sole receiver left, and after a second
/// one converted the first and both left. A departed receiver's watch keeps
/// its final stats while the next one runs, and the hub lets go of the
/// parts it retired at the next grace period (unit tests collect at every
/// retirement). Heap values, so miri sees every value dropped once.
#[test]
fn a_receiver_alone_again_keeps_its_values_itself() {
    use super::receiver::Kind;
    let sole = |rx: &super::Receiver<u32, String>| match &rx.kind {
        Kind::Cells(_, local) => local.counted_solo().is_some(),
        Kind::Own(..) => panic!("a plain receiver shares the cells"),
    };
    let hub: Hub<u32, String> = Hub::new();
    let tx = hub.sender();
    let first = hub.receiver();
    assert!(sole(&first));
    tx.send(1, "a".into()).unwrap();
    tx.send(1, "b".into()).unwrap();
    let first_watch = first.watch();
    drop(first);
    let mut second = hub.receiver();
    assert!(sole(&second), "alone again after the first left");
    tx.send(2, "c".into()).unwrap();
    tx.send(2, "d".into()).unwrap();
    tx.send(4, "x".into()).unwrap();
    let s = first_watch.stats();
    assert_eq!((s.received, s.dropped, s.pending), (2, 2, 0), "{s:?}");
    assert!(first_watch.is_closed());
    let second_watch = second.watch();
    assert_eq!(second_watch.stats().pending, 2);
    let e = second.try_recv().unwrap();
    assert_eq!((e.key, e.value.as_str(), e.sends), (2, "d", 2));
    // A third converts the second's part; both leave; a fourth is alone.
    let mut third = hub.receiver();
    assert!(!sole(&third));
    tx.send(5, "y".into()).unwrap();
    let keys: Vec<u32> = second
        .try_recv_all()
        .unwrap()
        .iter()
        .map(|e| e.key)
        .collect();
    assert_eq!(keys, [4, 5]);
    assert_eq!(third.try_recv().unwrap().key, 5);
    drop(second);
    drop(third);
    assert_eq!(
        hub.shared.retired_solos(),
        0,
        "let go of at the collections"
    );
    let mut fourth = hub.receiver();
    assert!(sole(&fourth), "alone again after a conversion");
    tx.send(3, "e".into()).unwrap();
    tx.send(3, "f".into()).unwrap();
    let e = fourth.try_recv().unwrap();
    assert_eq!((e.key, e.value.as_str(), e.sends), (3, "f", 2));
    let s = second_watch.stats();
    assert_eq!(
        (s.received, s.delivered, s.folded, s.dropped, s.pending),
        (4, 3, 4, 0, 0),
        "the second's final stats, from its cells"
    );
    let s = fourth.stats();
    assert_eq!((s.received, s.delivered, s.pending), (2, 1, 0), "{s:?}");
}

/// A `K::clone` that panics while the sole receiver's entries become cells
/// (the second plain receiver's registration): that entry is dropped and
/// counted so, the others become cells in order, and the registration
/// panics with the hub usable.
#[test]
fn a_conversion_that_panics_drops_that_entry_and_counts_it() {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    static PANIC: AtomicBool = AtomicBool::new(false);
    #[derive(PartialEq, Eq, Hash, Debug)]
    struct Key(u32);
    impl Clone for Key {
        fn clone(&self) -> Self {
            assert!(!(PANIC.load(Relaxed) && self.0 == 1), "planted clone panic");
            Key(self.0)
        }
    }
    let hub: Hub<Key, u32> = Hub::new();
    let tx = hub.sender();
    let mut first = hub.receiver();
    for k in 0..3 {
        tx.send(Key(k), 1).unwrap();
    }
    tx.send(Key(1), 2).unwrap();
    PANIC.store(true, Relaxed);
    let registered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hub.receiver()));
    PANIC.store(false, Relaxed);
    assert!(registered.is_err(), "the registration panics");
    let keys: Vec<u32> = first
        .try_recv_all()
        .unwrap()
        .iter()
        .map(|e| e.key.0)
        .collect();
    assert_eq!(keys, [0, 2]);
    let s = first.stats();
    assert_eq!((s.received, s.folded, s.dropped, s.pending), (4, 2, 2, 0));
    tx.send(Key(5), 1).unwrap();
    assert_eq!(first.try_recv().unwrap().key, Key(5));
}

/// The sole receiver's blocks come back round: a cut resets each place it
/// takes and the head resets the blocks a pop took from as it passes them, so a recycled block's
/// places read not ready until their push, and a consumer that reaches one
/// ahead of the producer finds nothing there. Three rounds: blocks spent by
/// a cut, by pops, and by both. Heap values, so miri sees each value moved
/// out once.
#[test]
fn the_sole_receivers_recycled_blocks_hold_nothing_ready() {
    use super::solo::BLOCK;
    let hub: Hub<usize, String> = Hub::new();
    let tx = hub.sender();
    let mut rx = hub.receiver();
    let mut next = 0;
    let mut send = |n: usize| {
        let first = next;
        for k in first..first + n {
            tx.send(k, k.to_string()).unwrap();
        }
        next += n;
        (first..first + n).collect::<Vec<_>>()
    };
    for round in 0..3 {
        // Fill whole blocks and empty them: they are spent and go to the
        // free list, the first one by a cut in round 0, by pops in round 1.
        let sent = send(3 * BLOCK);
        let taken: Vec<usize> = if round == 1 {
            std::iter::from_fn(|| rx.try_recv().ok().map(|e| e.key)).collect()
        } else {
            let mut keys: Vec<usize> = Vec::new();
            if round == 2 {
                keys.push(rx.try_recv().unwrap().key);
            }
            keys.extend(rx.try_recv_all().unwrap().iter().map(|e| e.key));
            keys
        };
        assert_eq!(taken, sent, "round {round}");
        // One block and one place more: the producer moves into a recycled
        // block and writes its first place only.
        let sent = send(BLOCK + 1);
        let mut taken = Vec::new();
        while let Ok(e) = rx.try_recv() {
            assert_eq!(e.value, e.key.to_string(), "round {round}");
            taken.push(e.key);
        }
        assert_eq!(taken, sent, "round {round}: nothing read past the tail");
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    }
    let s = rx.stats();
    assert_eq!((s.received, s.pending), (next as u64, 0), "{s:?}");
}

/// The keys of one `try_recv_all` batch, in order.
fn cut_keys<V: Clone + Send + 'static>(rx: &mut super::Receiver<u32, V>) -> Vec<u32> {
    rx.try_recv_all()
        .unwrap()
        .into_iter()
        .map(|e| e.key)
        .collect()
}

/// docs/design.md, "One lock while one thread sends": a table hub's cells
/// stay merged while one thread sends, also with its receiver and the
/// table's readers on other threads; a send from a second thread splits
/// them for good; every value arrives either way, in first-touch order.
#[test]
fn a_table_hubs_cells_stay_merged_for_one_sending_thread_only() {
    let hub: Hub<u32, u32> = Hub::builder().retain_latest().build();
    assert!(
        hub.shared.cells.is_merged(),
        "a newer-wins table hub starts merged"
    );
    let tx = hub.sender();
    let mut rx = hub.receiver();
    for k in 0..40 {
        tx.send(k, k).unwrap();
    }
    let reader = thread::scope(|s| s.spawn(|| hub.latest(&7)).join().unwrap());
    assert_eq!(reader, Some(7));
    let first = thread::scope(|s| s.spawn(|| cut_keys(&mut rx)).join().unwrap());
    assert_eq!(first, (0..40).collect::<Vec<_>>());
    assert!(
        hub.shared.cells.is_merged(),
        "readers and the consumer do not split"
    );
    let other = tx.clone();
    thread::spawn(move || other.send(100, 1).unwrap())
        .join()
        .unwrap();
    assert!(
        !hub.shared.cells.is_merged(),
        "a second sending thread splits"
    );
    tx.send(3, 33).unwrap();
    let second: Vec<_> = rx
        .try_recv_all()
        .unwrap()
        .into_iter()
        .map(|e| (e.key, e.value))
        .collect();
    assert_eq!(second, [(100, 1), (3, 33)]);
    assert_eq!((hub.latest(&3), hub.latest(&100)), (Some(33), Some(1)));
}

/// A snapshot receiver (a cell receiver besides the sole one) splits the
/// cells at its registration, and a hub that keeps no table, or has its
/// own merge, never merges.
#[test]
fn a_cell_receiver_splits_the_merged_cells_and_only_newer_wins_tables_merge() {
    let hub: Hub<u32, u32> = Hub::builder().retain_latest().build();
    let tx = hub.sender();
    let mut rx = hub.receiver();
    tx.send(1, 1).unwrap();
    let mut snap = hub.receiver_builder().snapshot().build();
    assert!(!hub.shared.cells.is_merged());
    tx.send(2, 2).unwrap();
    assert_eq!(cut_keys(&mut rx), [1, 2]);
    assert_eq!(cut_keys(&mut snap), [1, 2]);
    assert!(!Hub::<u32, u32>::new().shared.cells.is_merged());
    let merging: Hub<u32, u32> = Hub::builder()
        .merge(|a, b| Some(a + b))
        .retain_latest()
        .build();
    assert!(!merging.shared.cells.is_merged());
}
