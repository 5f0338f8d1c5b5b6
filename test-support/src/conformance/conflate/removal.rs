//! Rule 15: removal. A hub built with `tombstones(is_tombstone)` treats the
//! values the test accepts as the removal of their key: the state table
//! forgets the key, a receiver that delivered an event of the key's current
//! life gets the tombstone once, a receiver that did not gets nothing, and no
//! merge folds across a removal.
//!
//! Values here are `i64`; a negative value is a tombstone.

use crate::conflate_api::*;
use crate::conformance::support::*;
use crate::threads::Crew;
use keybus::TryRecvError;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

/// The tombstone test of every hub in this suite.
fn gone(v: &i64) -> bool {
    *v < 0
}

/// A hub with a state table, newer wins, negative values remove.
fn informer<I: Conflate>() -> Hub<I, u32, i64> {
    Hub::<I, _, _>::builder()
        .retain_latest()
        .tombstones(gone)
        .build()
}

/// Every receive form finds nothing pending, and the receiver is still open.
fn assert_nothing<K: Key, V: Value>(rx: &mut impl ReceiverApi<K, V>) {
    assert_eq!(rx.peek().err(), Some(TryRecvError::Empty));
    assert_eq!(rx.try_recv().err(), Some(TryRecvError::Empty));
    assert_eq!(rx.try_recv_all().err(), Some(TryRecvError::Empty));
    assert_eq!(rx.len(), 0);
    assert!(!rx.is_closed());
}

pub fn rule15_a_tombstone_removes_its_key_from_the_table<I: Conflate>() {
    let hub = informer::<I>();
    let tx = hub.sender();
    tx.send(1, 10).unwrap();
    tx.send(2, 20).unwrap();
    tx.send(3, 30).unwrap();
    tx.send(2, -1).unwrap();
    assert_eq!(hub.latest(&2), None);
    assert_eq!(hub.snapshot(), vec![(1, 10), (3, 30)]);
    // A tombstone for a key the table does not hold changes nothing.
    tx.send(9, -1).unwrap();
    assert_eq!(hub.snapshot(), vec![(1, 10), (3, 30)]);
    // A later value starts a new life at the back.
    tx.send(2, 21).unwrap();
    assert_eq!(hub.snapshot(), vec![(1, 10), (3, 30), (2, 21)]);
    // A snapshot receiver is born with the table: no removed key, no
    // tombstone.
    tx.send(1, -1).unwrap();
    let mut late = hub.receiver_builder().snapshot().build();
    assert_eq!(drain(&mut late), vec![(3, 30, 0), (2, 21, 0)]);
    assert_eq!(hub.stats().sent, 7);
}

pub fn rule15_a_receiver_that_saw_the_life_gets_the_removal_once<I: Conflate>() {
    let hub = informer::<I>();
    let tx = hub.sender();
    let mut rx = hub.receiver();
    let mut own = hub.receiver_builder().merge(|_, n| Some(n)).build();
    tx.send(1, 10).unwrap();
    assert_eq!(drain(&mut rx), vec![(1, 10, 1)]);
    assert_eq!(drain(&mut own), vec![(1, 10, 1)]);
    tx.send(1, 11).unwrap();
    tx.send(1, -1).unwrap();
    // The modification and the removal fold into one removal event.
    assert_eq!(rx.peek().unwrap().value, -1);
    assert_eq!(drain(&mut rx), vec![(1, -1, 2)]);
    assert_eq!(own.try_recv_all().unwrap().len(), 1);
    // Once told, a second tombstone of the same key is not news.
    tx.send(1, -2).unwrap();
    assert_nothing(&mut rx);
    assert_nothing(&mut own);
    for rx in [&rx, &own] {
        let s = conserved_stats(rx);
        assert_eq!(
            (s.received, s.delivered, s.folded, s.annihilated),
            (4, 2, 3, 1)
        );
    }
}

pub fn rule15_a_receiver_that_never_saw_the_life_gets_nothing<I: Conflate>() {
    let hub = informer::<I>();
    let tx = hub.sender();
    // Pending and never taken: the value and its tombstone leave nothing.
    let mut rx = hub.receiver();
    let mut filtered = hub
        .receiver_builder()
        .key_filter(|k: &u32| *k < 100)
        .build();
    tx.send(1, 10).unwrap();
    tx.send(1, 11).unwrap();
    tx.send(1, -1).unwrap();
    assert_nothing(&mut rx);
    assert_nothing(&mut filtered);
    for rx in [&rx, &filtered] {
        let s = conserved_stats(rx);
        assert_eq!(
            (s.received, s.delivered, s.folded, s.annihilated, s.pending),
            (3, 0, 0, 3, 0)
        );
    }
    // Registered after the life began, not seeded: the removal is not news.
    tx.send(2, 20).unwrap();
    let mut late = hub.receiver();
    tx.send(2, -1).unwrap();
    assert_nothing(&mut late);
    // A receiver whose filter rejects the key sees neither.
    let mut other = hub.receiver_builder().key_filter(|k: &u32| *k != 3).build();
    tx.send(3, 30).unwrap();
    tx.send(3, -1).unwrap();
    assert_nothing(&mut other);
    assert_eq!(other.stats().filtered, 2);
    // The batch and peek forms drop it too, between values that stay.
    tx.send(4, 40).unwrap();
    tx.send(5, 50).unwrap();
    tx.send(6, 60).unwrap();
    tx.send(5, -1).unwrap();
    assert_eq!(
        rx.try_recv_all()
            .unwrap()
            .into_iter()
            .map(|e| e.key)
            .collect::<Vec<_>>(),
        vec![4, 6]
    );
    tx.send(7, 70).unwrap();
    tx.send(7, -1).unwrap();
    tx.send(8, 80).unwrap();
    assert_eq!(late.peek().unwrap().key, 4);
    assert_eq!(late.try_recv().unwrap().key, 4);
    assert_eq!(late.peek().unwrap().key, 6);
    assert_eq!(keys_of(&mut late), vec![6, 8]);
    conserved_stats(&late);
}

pub fn rule15_a_value_after_a_removal_starts_a_new_life<I: Conflate>() {
    let hub = informer::<I>();
    let tx = hub.sender();
    let mut saw = hub.receiver();
    tx.send(1, 10).unwrap();
    assert_eq!(drain(&mut saw), vec![(1, 10, 1)]);
    let mut fresh = hub.receiver();
    // Removed and re-created before either looked: latest value wins, as for
    // any pending key; each receiver gets the new life's value.
    tx.send(1, -1).unwrap();
    tx.send(1, 12).unwrap();
    assert_eq!(drain(&mut saw), vec![(1, 12, 2)]);
    assert_eq!(drain(&mut fresh), vec![(1, 12, 2)]);
    assert_eq!(hub.snapshot(), vec![(1, 12)]);
    // Both saw the new life now: both are told of its end.
    tx.send(1, -1).unwrap();
    assert_eq!(drain(&mut saw), vec![(1, -1, 1)]);
    assert_eq!(drain(&mut fresh), vec![(1, -1, 1)]);
}

pub fn rule15_no_merge_folds_across_a_removal<I: Conflate>() {
    // The hub's merge sums (the table and receivers without their own).
    let hub = Hub::<I, u32, i64>::builder()
        .merge(sum_merge)
        .retain_latest()
        .tombstones(gone)
        .build();
    let tx = hub.sender();
    let mut hub_merge = hub.receiver();
    let mut own_merge = hub
        .receiver_builder()
        .merge(|p: i64, n: i64| Some(p.max(n)))
        .build();
    tx.send(1, 1).unwrap();
    tx.send(1, 2).unwrap();
    assert_eq!(hub.latest(&1), Some(3));
    assert_eq!(drain(&mut hub_merge), vec![(1, 3, 2)]);
    assert_eq!(drain(&mut own_merge), vec![(1, 2, 2)]);
    // Pending, then removed and re-created: the tombstone replaces the
    // pending value and the new value replaces the tombstone; no merge sees
    // either pair.
    tx.send(1, 4).unwrap();
    tx.send(1, -1).unwrap();
    assert_eq!(hub.latest(&1), None);
    tx.send(1, 5).unwrap();
    assert_eq!(hub.latest(&1), Some(5));
    assert_eq!(drain(&mut hub_merge), vec![(1, 5, 3)]);
    assert_eq!(drain(&mut own_merge), vec![(1, 5, 3)]);
    // A merge whose result is a tombstone removes the key from the table.
    tx.send(1, -5).unwrap();
    tx.send(2, 3).unwrap();
    tx.send(2, -4).unwrap(); // a tombstone: removes, not summed to -1
    assert!(hub.snapshot().is_empty());
}

pub fn rule15_a_merge_that_makes_a_tombstone_removes_the_key<I: Conflate>() {
    let hub = Hub::<I, u32, i64>::builder()
        .merge(|p: i64, n: i64| Some(p - n))
        .retain_latest()
        .tombstones(gone)
        .build();
    let tx = hub.sender();
    tx.send(1, 3).unwrap();
    tx.send(1, 5).unwrap(); // 3 - 5 < 0: a tombstone
    assert_eq!(hub.latest(&1), None);
    assert!(hub.snapshot().is_empty());
}

pub fn rule15_a_bounded_receiver_refuses_a_removal_it_has_no_room_for<I: Conflate>() {
    let hub = informer::<I>();
    let tx = hub.sender();
    let mut rx = hub.receiver_builder().max_pending(1).build();
    tx.send(1, 10).unwrap();
    assert_eq!(drain(&mut rx), vec![(1, 10, 1)]);
    tx.send(2, 20).unwrap();
    // No room: refused at this receiver and counted, never silent.
    tx.send(1, -1).unwrap();
    let s = conserved_stats(&rx);
    assert_eq!(s.overflowed, 1);
    assert_eq!(drain(&mut rx), vec![(2, 20, 1)]);
}

/// Without `tombstones`, a negative value is a value like any other.
pub fn rule15_without_tombstones_every_value_is_a_value<I: Conflate>() {
    let hub = Hub::<I, u32, i64>::builder().retain_latest().build();
    let tx = hub.sender();
    let mut rx = hub.receiver();
    tx.send(1, -1).unwrap();
    assert_eq!(hub.latest(&1), Some(-1));
    assert_eq!(drain(&mut rx), vec![(1, -1, 1)]);
}

/// Senders remove and re-create keys while consumers follow: every removal a
/// consumer gets is of a key it holds, and once everything is drained each
/// consumer's view is the table.
pub fn rule15_race_every_consumer_view_converges_to_the_table<I: Conflate>() {
    const KEYS: u32 = 32;
    let sends = tsan_scaled(20_000, 2_000) as u32;
    let hub = informer::<I>();
    let done = AtomicBool::new(false);
    let crew = Crew::new("rule15_race_every_consumer_view_converges_to_the_table");
    let follow = |mut rx: Receiver<I, u32, i64>, batch: bool| {
        let mut view: HashMap<u32, i64> = HashMap::new();
        let mut apply = |k: u32, v: i64| {
            if gone(&v) {
                assert!(view.remove(&k).is_some(), "removal of {k}, never seen");
            } else {
                view.insert(k, v);
            }
        };
        loop {
            let finished = done.load(SeqCst);
            if batch {
                match rx.try_recv_all() {
                    Ok(events) => events.into_iter().for_each(|e| apply(e.key, e.value)),
                    Err(TryRecvError::Empty) if finished => break,
                    Err(TryRecvError::Empty) => std::thread::yield_now(),
                    Err(TryRecvError::Closed) => break,
                }
            } else {
                match rx.try_recv() {
                    Ok(e) => apply(e.key, e.value),
                    Err(TryRecvError::Empty) if finished => break,
                    Err(TryRecvError::Empty) => {
                        let _ = rx.peek();
                        std::thread::yield_now()
                    }
                    Err(TryRecvError::Closed) => break,
                }
            }
            if crew.panicked() {
                break;
            }
        }
        conserved_stats(&rx);
        view
    };
    let one = hub.receiver();
    let two = hub.receiver_builder().merge(|_, n| Some(n)).build();
    let views = crew.scope(|s| {
        let a = crew.spawn(s, move || follow(one, true));
        let b = crew.spawn(s, move || follow(two, false));
        let tx = hub.sender();
        let mut late = None;
        let mut rng = fastrand::Rng::with_seed(15);
        for i in 0..sends {
            let k = rng.u32(0..KEYS);
            let v = if rng.u8(0..4) == 0 { -1 } else { i64::from(i) };
            tx.send(k, v).unwrap();
            if i == sends / 2 {
                let rx = hub.receiver_builder().snapshot().build();
                late = Some(crew.spawn(s, move || follow(rx, true)));
            }
        }
        done.store(true, SeqCst);
        let mut views = vec![a.join().unwrap(), b.join().unwrap()];
        views.push(late.expect("spawned").join().unwrap());
        views
    });
    let table: HashMap<u32, i64> = hub.snapshot().into_iter().collect();
    for view in views {
        assert_eq!(view, table, "a consumer's view is not the table");
    }
}
