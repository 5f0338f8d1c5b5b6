//! Rules 1–3 (docs/design.md, "The contract"): coalescing at send in
//! first-touch order with no starvation (1); merges, annihilation and the
//! `sends` count (2); memory bounded by the pending keys, with key filters and
//! per-receiver merges decided at send (3).

use crate::conflate_api::*;
use crate::conformance::support::*;
use crate::threads::Crew;
use keybus::TryRecvError;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

pub fn rule1_coalescing_keeps_queue_position<I: Conflate>() {
    let (_hub, tx, mut rx) = bus::<I, &'static str, u32>();
    for (k, v) in [("a", 1), ("b", 1), ("c", 1), ("b", 2), ("a", 3)] {
        tx.send(k, v).unwrap();
    }
    assert_eq!(rx.len(), 3);
    assert_eq!(drain(&mut rx), vec![("a", 3, 2), ("b", 2, 2), ("c", 1, 1)]);
}

pub fn rule1_delivery_is_first_touch_order<I: Conflate>() {
    let mut rng = fastrand::Rng::with_seed(7);
    let mut order: Vec<u32> = (0..300).collect();
    rng.shuffle(&mut order);
    let (_hub, tx, mut rx) = bus::<I, u32, u32>();
    for &k in &order {
        tx.send(k, 0).unwrap();
    }
    // Touch everything again in another order: positions must not move.
    let mut again = order.clone();
    rng.shuffle(&mut again);
    for &k in &again {
        tx.send(k, 1).unwrap();
    }
    let got = drain(&mut rx);
    assert_eq!(got.iter().map(|e| e.0).collect::<Vec<_>>(), order);
    assert!(got.iter().all(|e| e.1 == 1 && e.2 == 2));
}

pub fn rule1_coalescing_happens_at_send_not_at_receive<I: Conflate>() {
    let (_hub, tx, mut rx) = open(Hub::<I, u32, i64>::with_merge(sum_merge));
    tx.send(1, 5).unwrap();
    tx.send(1, 6).unwrap();
    // Already one slot before anyone receives.
    assert_eq!(rx.len(), 1);
    assert_eq!(rx.peek().unwrap().value, 11);
    // A delivered event cannot be coalesced into: the key starts afresh.
    assert_eq!(rx.recv().unwrap().sends, 2);
    tx.send(1, 7).unwrap();
    let e = rx.try_recv().unwrap();
    assert_eq!((e.key, e.value, e.sends), (1, 7, 1));
}

pub fn rule1_hot_key_never_starves_cold_key<I: Conflate>() {
    const HOT: u32 = 0;
    const COLD: u32 = 1;
    let (_hub, tx, mut rx) = bus::<I, u32, u32>();
    tx.send(HOT, 0).unwrap();
    tx.send(COLD, 0).unwrap();
    let mut cold_seen = false;
    for round in 0..100u32 {
        for i in 0..50 {
            tx.send(HOT, round * 50 + i).unwrap();
        }
        let e = rx.try_recv().unwrap();
        if e.key == COLD {
            cold_seen = true;
            // Reached at its first-touch position: second.
            assert_eq!(round, 1);
            break;
        }
    }
    assert!(cold_seen, "the cold key starved");
    // HOT was re-appended behind COLD by the sends of round 1.
    let e = rx.try_recv().unwrap();
    assert_eq!((e.key, e.sends), (HOT, 50));
    assert_eq!(rx.try_recv().err(), Some(TryRecvError::Empty));
}

pub fn rule2_default_merge_is_newer_wins<I: Conflate>() {
    let (_hub, tx, mut rx) = bus::<I, u8, String>();
    for v in ["one", "two", "three"] {
        tx.send(9, v.to_string()).unwrap();
    }
    let e = rx.try_recv().unwrap();
    assert_eq!((e.key, e.value.as_str(), e.sends), (9, "three", 3));
}

pub fn rule2_merge_gets_pending_then_incoming<I: Conflate>() {
    let (_hub, tx, mut rx) = open(Hub::<I, u8, String>::with_merge(|p: String, n: String| {
        Some(p + &n)
    }));
    for v in ["a", "b", "c"] {
        tx.send(1, v.to_string()).unwrap();
    }
    assert_eq!(rx.try_recv().unwrap().value, "abc");
}

pub fn rule2_annihilation_leaves_no_residue<I: Conflate>() {
    let (_hub, tx, mut rx) = open(Hub::<I, &'static str, i64>::with_merge(annihilating));
    for k in ["a", "b", "c", "d"] {
        tx.send(k, 1).unwrap();
    }
    tx.send("b", -1).unwrap(); // middle
    assert_eq!(rx.len(), 3);
    tx.send("a", -1).unwrap(); // head
    assert_eq!(rx.len(), 2);
    assert_eq!(rx.peek().unwrap().key, "c");
    tx.send("d", -1).unwrap(); // tail
    assert_eq!(rx.len(), 1);
    // Re-sent keys start afresh at the back with sends == 1.
    tx.send("b", 2).unwrap();
    tx.send("a", 3).unwrap();
    tx.send("c", 4).unwrap(); // coalesces, keeps its place
    assert_eq!(drain(&mut rx), vec![("c", 4, 2), ("b", 2, 1), ("a", 3, 1)]);

    // Annihilate everything: nothing left, and the queue still works.
    for k in ["x", "y"] {
        tx.send(k, 1).unwrap();
    }
    tx.send("y", -1).unwrap();
    tx.send("x", -1).unwrap();
    assert_eq!(rx.len(), 0);
    assert!(rx.is_empty());
    assert_eq!(rx.try_recv().err(), Some(TryRecvError::Empty));
    assert_eq!(rx.try_recv_all().err(), Some(TryRecvError::Empty));
    tx.send("y", 5).unwrap();
    tx.send("x", 6).unwrap();
    assert_eq!(drain(&mut rx), vec![("y", 5, 1), ("x", 6, 1)]);
}

pub fn rule2_merge_runs_only_on_a_pending_key<I: Conflate>() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let hub = Hub::<I, u8, i64>::with_merge(move |p, n| {
        c.fetch_add(1, SeqCst);
        annihilating(p, n)
    });
    let tx = hub.sender();
    let mut rx = hub.receiver();
    // Not pending: appended as is, even a would-be annihilator.
    tx.send(1, -1).unwrap();
    assert_eq!(calls.load(SeqCst), 0);
    assert_eq!(drain(&mut rx), vec![(1, -1, 1)]);
    tx.send(1, 2).unwrap();
    assert_eq!(calls.load(SeqCst), 0);
    tx.send(1, 3).unwrap();
    assert!(calls.load(SeqCst) >= 1);
    assert_eq!(drain(&mut rx), vec![(1, 3, 2)]);
}

pub fn rule2_sends_counts_every_merged_send<I: Conflate>() {
    let (_hub, tx, mut rx) = bus::<I, u8, u32>();
    for i in 0..5 {
        tx.send(1, i).unwrap();
    }
    tx.send(2, 0).unwrap();
    for i in 0..3 {
        tx.send(1, i).unwrap();
    }
    assert_eq!(drain(&mut rx), vec![(1, 2, 8), (2, 0, 1)]);
    // Counting restarts once the key was delivered.
    tx.send(1, 9).unwrap();
    assert_eq!(drain(&mut rx), vec![(1, 9, 1)]);
}

pub fn rule2_race_concurrent_senders_summing_merge_conserve<I: Conflate>() {
    const SENDERS: usize = 4;
    const PER: u64 = 4_000;
    type W = (u64, u64); // (sum of values, number of sends)
    let hub = Hub::<I, u8, W>::with_merge(|p: W, n: W| Some((p.0 + n.0, p.1 + n.1)));
    let tx = hub.sender();
    let mut live = hub.receiver();
    let mut idle = hub.receiver();
    let crew = Crew::new("rule2_race_summing_senders");
    crew.on_panic(|| hub.close_now());
    let sent: u64 = crew.scope(|s| {
        let consumer = crew.spawn(s, || {
            let (mut sum, mut sends) = (0u64, 0u64);
            while let Ok(e) = live.recv() {
                assert_eq!(e.key, 0);
                assert_eq!(e.sends, e.value.1);
                sum += e.value.0;
                sends += e.sends;
            }
            (sum, sends)
        });
        let senders: Vec<_> = (0..SENDERS)
            .map(|_| {
                let tx = tx.clone();
                crew.spawn(s, move || {
                    let mut sum = 0;
                    for _ in 0..PER {
                        let v = fastrand::u64(1..100);
                        sum += v;
                        tx.send(0, (v, 1)).unwrap();
                    }
                    sum
                })
            })
            .collect();
        let sent: u64 = senders.into_iter().map(|h| h.join().unwrap()).sum();
        tx.close();
        let (sum, sends) = consumer.join().unwrap();
        assert_eq!(sum, sent, "sum in != sum out");
        assert_eq!(sends, SENDERS as u64 * PER);
        sent
    });
    let batch = idle.try_recv_all().unwrap();
    assert_eq!(batch.len(), 1);
    assert_eq!(batch[0].value, (sent, SENDERS as u64 * PER));
    assert_eq!(batch[0].sends, SENDERS as u64 * PER);
    assert_eq!(idle.try_recv().err(), Some(TryRecvError::Closed));
}

pub fn rule3_memory_is_bounded_by_pending_keys<I: Conflate>() {
    let token = Arc::new(());
    let (_hub, tx, mut rx) = bus::<I, u64, Arc<()>>();
    for i in 0..20_000u64 {
        tx.send(i % 16, token.clone()).unwrap();
        if i % 997 == 0 {
            assert!(rx.len() <= 16);
            // Only the pending values are alive: one per key.
            assert!(Arc::strong_count(&token) <= 17);
        }
    }
    assert_eq!(rx.len(), 16);
    assert_eq!(Arc::strong_count(&token), 17);
    let all = rx.try_recv_all().unwrap();
    assert_eq!(all.len(), 16);
    assert!(all.iter().all(|e| e.sends == 20_000 / 16));
    drop(all);
    assert_eq!(Arc::strong_count(&token), 1);
}

pub fn rule3_key_filter_applies_at_send<I: Conflate>() {
    let token = Arc::new(());
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let hub = Hub::<I, u32, Arc<()>>::new();
    let tx = hub.sender();
    let mut even = hub
        .receiver_builder()
        .key_filter(move |k: &u32| {
            c.fetch_add(1, SeqCst);
            k % 2 == 0
        })
        .build();
    send_each(&tx, 0..10, &token);
    // Decided at send: the filter already ran, odd keys took no slot.
    assert!(calls.load(SeqCst) >= 10);
    assert_eq!(even.len(), 5);
    assert_eq!(Arc::strong_count(&token), 1 + 5);
    send_each(&tx, (1..100).step_by(2), &token);
    assert_eq!(even.len(), 5);
    assert_eq!(Arc::strong_count(&token), 1 + 5);
    assert_eq!(keys_of(&mut even), vec![0, 2, 4, 6, 8]);
}

pub fn rule3_key_takes_exactly_one_key<I: Conflate>() {
    let hub = Hub::<I, u32, u32>::new();
    let tx = hub.sender();
    let mut one = hub.receiver_builder().key(7).build();
    let mut zero = hub.receiver_builder().key(0).build();
    for k in 0..20 {
        tx.send(k, k).unwrap();
        tx.send(k, k + 100).unwrap();
    }
    assert_eq!(drain(&mut one), vec![(7, 107, 2)]);
    assert_eq!(drain(&mut zero), vec![(0, 100, 2)]);
}

pub fn rule3_key_and_key_filter_later_call_wins<I: Conflate>() {
    let hub = Hub::<I, u32, u32>::new();
    let tx = hub.sender();
    let mut filter_last = hub
        .receiver_builder()
        .key(1)
        .key_filter(|k: &u32| *k >= 5)
        .build();
    let mut key_last = hub
        .receiver_builder()
        .key_filter(|k: &u32| *k >= 5)
        .key(1)
        .build();
    let mut key_twice = hub.receiver_builder().key(2).key(3).build();
    for k in 0..8 {
        tx.send(k, k).unwrap();
    }
    assert_eq!(keys_of(&mut filter_last), vec![5, 6, 7]);
    assert_eq!(keys_of(&mut key_last), vec![1]);
    assert_eq!(keys_of(&mut key_twice), vec![3]);
}

pub fn rule3_receiver_merge_overrides_hub_merge_for_that_receiver_only<I: Conflate>() {
    let hub = Hub::<I, u8, i64>::with_merge(sum_merge);
    let tx = hub.sender();
    let mut sum_a = hub.receiver();
    let mut max = hub
        .receiver_builder()
        .merge(|p: i64, n: i64| Some(p.max(n)))
        .build();
    let mut sum_b = hub.receiver();
    let mut filtered_max = hub
        .receiver_builder()
        .merge(|p: i64, n: i64| Some(p.max(n)))
        .key(1)
        .build();
    for v in [3, 9, 4] {
        tx.send(1, v).unwrap();
    }
    assert_eq!(drain(&mut sum_a), vec![(1, 16, 3)]);
    assert_eq!(drain(&mut max), vec![(1, 9, 3)]);
    assert_eq!(drain(&mut sum_b), vec![(1, 16, 3)]);
    assert_eq!(drain(&mut filtered_max), vec![(1, 9, 3)]);

    // On a newer-wins hub, a receiver's own merge applies to it alone.
    let hub = Hub::<I, u8, i64>::new();
    let tx = hub.sender();
    let mut newer = hub.receiver();
    let mut summing = hub.receiver_builder().merge(sum_merge).build();
    for v in [3, 9, 4] {
        tx.send(1, v).unwrap();
    }
    assert_eq!(drain(&mut newer), vec![(1, 4, 3)]);
    assert_eq!(drain(&mut summing), vec![(1, 16, 3)]);
}
