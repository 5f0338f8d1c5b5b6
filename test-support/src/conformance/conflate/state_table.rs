//! Rules 11–12: the state table of a `retain_latest` hub (`latest`,
//! `snapshot`, one instant) and snapshot receivers, born with the table pending
//! in one instant against concurrent sends.

use crate::conflate_api::*;
use crate::conformance::support::*;
use crate::threads::Crew;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

/// A hub with a state table and `merge` (for the receivers and the table).
fn table_with<I: Conflate>(merge: fn(i64, i64) -> Option<i64>) -> Hub<I, u32, i64> {
    Hub::<I, _, _>::builder()
        .merge(merge)
        .retain_latest()
        .build()
}

pub fn rule11_table_keeps_the_hub_merge_of_every_send_in_first_touch_order<I: Conflate>() {
    let hub = table_with::<I>(sum_or_annihilate);
    let tx = hub.sender();
    // No receiver: the table keeps every send all the same.
    tx.send(3, 1).unwrap();
    tx.send(1, 5).unwrap();
    tx.send(3, 2).unwrap(); // merges, keeps its place
    tx.send(2, 7).unwrap();
    assert_eq!(hub.latest(&3), Some(3));
    assert_eq!(hub.latest(&1), Some(5));
    assert_eq!(hub.latest(&9), None);
    assert_eq!(hub.snapshot(), vec![(3, 3), (1, 5), (2, 7)]);
    // `None` removes the key; a re-sent key re-enters at the back.
    tx.send(1, -5).unwrap();
    assert_eq!(hub.latest(&1), None);
    assert_eq!(hub.snapshot(), vec![(3, 3), (2, 7)]);
    tx.send(1, 4).unwrap();
    assert_eq!(hub.snapshot(), vec![(3, 3), (2, 7), (1, 4)]);
    // Receivers (with other merges) do not change the table.
    let mut rx = hub.receiver_builder().merge(|_, n| Some(n)).build();
    tx.send(2, 1).unwrap();
    assert_eq!(hub.latest(&2), Some(8));
    assert_eq!(drain(&mut rx), vec![(2, 1, 1)]);
    // A refused send changes nothing.
    tx.close();
    assert!(tx.send(2, 100).is_err());
    assert_eq!(hub.snapshot(), vec![(3, 3), (2, 8), (1, 4)]);
}

pub fn rule11_default_merge_is_newer_wins_in_the_table<I: Conflate>() {
    let hub = Hub::<I, &str, u32>::builder().retain_latest().build();
    let tx = hub.sender();
    tx.send("a", 1).unwrap();
    tx.send("a", 2).unwrap();
    assert_eq!(hub.latest(&"a"), Some(2));
    assert_eq!(hub.snapshot(), vec![("a", 2)]);
}

pub fn rule11_without_retain_latest_the_hub_keeps_nothing<I: Conflate>() {
    for hub in [
        Hub::<I, _, _>::new(),
        Hub::<I, _, _>::with_merge(sum_merge),
        Hub::<I, _, _>::builder().build(),
    ] {
        let tx = hub.sender();
        let _rx = hub.receiver();
        tx.send(1u32, 1i64).unwrap();
        assert_eq!(hub.latest(&1), None);
        assert!(hub.snapshot().is_empty());
    }
}

pub fn rule11_snapshot_is_one_instant_a_prefix_of_one_senders_keys<I: Conflate>() {
    // One sender of keys 0, 1, 2, ...: a snapshot taken at one
    // instant holds exactly the keys 0..n for some n, in order.
    const N: u32 = 10_000;
    let hub = Hub::<I, u32, u32>::builder().retain_latest().build();
    let tx = hub.sender();
    let done = AtomicBool::new(false);
    let crew = Crew::new("rule11_snapshot_is_one_instant");
    let snapshots = crew.scope(|s| {
        crew.spawn(s, || {
            for k in 0..N {
                tx.send(k, k).unwrap();
            }
            done.store(true, SeqCst);
        });
        let mut taken = 0u32;
        let mut last = 0usize;
        // A sender that panicked never sets `done`: stop looking.
        while (!done.load(SeqCst) || taken == 0) && !crew.panicked() {
            let snap = hub.snapshot();
            for (i, (k, v)) in snap.iter().enumerate() {
                assert_eq!((*k, *v), (i as u32, i as u32), "not a prefix");
            }
            assert!(snap.len() >= last, "a later snapshot lost keys");
            last = snap.len();
            taken += 1;
        }
        taken
    });
    assert!(snapshots > 0);
    assert_eq!(hub.snapshot().len(), N as usize);
}

pub fn rule12_snapshot_receiver_is_born_with_the_table_pending<I: Conflate>() {
    let hub = table_with::<I>(sum_merge);
    let tx = hub.sender();
    tx.send(4, 1).unwrap();
    tx.send(2, 10).unwrap();
    tx.send(4, 1).unwrap();
    tx.send(7, 3).unwrap();
    let mut all = hub.receiver_builder().snapshot().build();
    let mut even = hub
        .receiver_builder()
        .key_filter(|k: &u32| k % 2 == 0)
        .merge(|_, n| Some(n))
        .snapshot()
        .build();
    let mut two = hub.receiver_builder().snapshot().max_pending(2).build();
    let mut plain = hub.receiver();
    assert_eq!(all.len(), 3);
    assert_eq!(all.peek().unwrap().sends, 0);
    // Later sends merge into snapshot entries with each receiver's
    // merge, and count from there.
    tx.send(2, 5).unwrap();
    tx.send(9, 1).unwrap();
    assert_eq!(
        drain(&mut all),
        vec![(4, 2, 0), (2, 15, 1), (7, 3, 0), (9, 1, 1)]
    );
    assert_eq!(drain(&mut even), vec![(4, 2, 0), (2, 5, 1)]);
    // The first two in table order; the rest were not sends.
    assert_eq!(drain(&mut two), vec![(4, 2, 0), (2, 15, 1)]);
    assert_eq!(drain(&mut plain), vec![(2, 5, 1), (9, 1, 1)]);
    let s = conserved_stats(&two);
    assert_eq!(
        (s.received, s.overflowed, s.folded, s.delivered),
        (2, 1, 1, 2)
    );
    let s = conserved_stats(&all);
    assert_eq!((s.received, s.folded, s.delivered), (2, 2, 4));
}

pub fn rule12_snapshot_entries_annihilate_and_drop_like_any_pending_value<I: Conflate>() {
    let hub = table_with::<I>(sum_or_annihilate);
    let tx = hub.sender();
    tx.send(1, 5).unwrap();
    tx.send(2, 1).unwrap();
    let rx = hub.receiver_builder().snapshot().build();
    tx.send(1, -5).unwrap(); // annihilates the snapshot entry
    assert_eq!(rx.len(), 1);
    let s = rx.stats();
    assert_eq!(
        (s.received, s.annihilated, s.pending, s.pending_sends),
        (1, 1, 1, 0)
    );
    rx.close(); // drops the other snapshot entry: no send to count
    let s = conserved_stats(&rx);
    assert_eq!((s.dropped, s.pending, s.pending_sends), (0, 0, 0));
}

pub fn rule12_snapshot_receiver_of_a_closed_hub_is_born_closed<I: Conflate>() {
    let hub = table_with::<I>(sum_merge);
    hub.sender().send(1, 1).unwrap();
    hub.close_now();
    let mut rx = hub.receiver_builder().snapshot().build();
    assert_fully_closed(&mut rx);
    assert_eq!(rx.stats().pending, 0);
}

pub fn rule12_snapshot_registration_is_one_instant_against_concurrent_sends<I: Conflate>() {
    // Summing merge everywhere: a send missing between the snapshot
    // and the live stream makes a key's total too small, one counted
    // twice makes it too big.
    const SENDERS: usize = 3;
    const PER: u64 = 5_000;
    const KEYS: u32 = 16;
    let hub = table_with::<I>(sum_merge);
    let stop = AtomicBool::new(false);
    let crew = Crew::new("rule12_snapshot_registration");
    let receivers = crew.scope(|s| {
        let senders: Vec<_> = (0..SENDERS)
            .map(|t| {
                let tx = hub.sender();
                crew.spawn(s, move || {
                    for i in 0..PER {
                        tx.send(((i as u32).wrapping_mul(7) + t as u32) % KEYS, 1)
                            .unwrap();
                    }
                })
            })
            .collect();
        let registrar = crew.spawn(s, || {
            let mut made = Vec::new();
            // At least a few, even if the senders finish first.
            while (!stop.load(SeqCst) || made.len() < 3) && made.len() < 50 {
                made.push(hub.receiver_builder().snapshot().build());
                jitter(2_000);
            }
            made
        });
        for h in senders {
            h.join().unwrap();
        }
        stop.store(true, SeqCst);
        registrar.join().unwrap()
    });
    let table: std::collections::HashMap<u32, i64> = hub.snapshot().into_iter().collect();
    assert_eq!(table.values().sum::<i64>(), (SENDERS as u64 * PER) as i64);
    assert!(!receivers.is_empty());
    for mut rx in receivers {
        let got = rx.try_recv_all().unwrap_or_default();
        let mut sends_after = 0u64;
        for e in &got {
            assert_eq!(
                Some(&e.value),
                table.get(&e.key),
                "key {} missing or doubled",
                e.key
            );
            sends_after += e.sends;
        }
        assert_eq!(got.len(), table.len(), "a key of the table is missing");
        let s = conserved_stats(&rx);
        assert_eq!(s.received, sends_after);
    }
}
