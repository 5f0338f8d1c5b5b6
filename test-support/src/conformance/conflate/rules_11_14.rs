//! Rules 11–14: the state table, snapshot receivers, accounting and bounded
//! receivers.

use crate::conflate_api::*;
use crate::conformance::support::*;
use crate::threads::Crew;
use keybus::{RecvTimeoutError, TryRecvError};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

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

pub fn rule13_every_field_counts_what_it_names<I: Conflate>() {
    let hub = Hub::<I, u32, i64>::with_merge(sum_or_annihilate);
    let tx = hub.sender();
    assert_eq!(hub.stats().sent, 0);
    tx.send(0, 1).unwrap(); // no receiver: sent all the same
    let mut rx = hub
        .receiver_builder()
        .key_filter(|k: &u32| *k < 10)
        .max_pending(3)
        .build();
    tx.send(1, 1).unwrap();
    tx.send(1, 1).unwrap(); // folded
    tx.send(2, 4).unwrap();
    tx.send(2, -4).unwrap(); // annihilates 2 (2 sends)
    tx.send(3, 1).unwrap();
    tx.send(4, 1).unwrap();
    tx.send(5, 1).unwrap(); // overflows: 1, 3, 4 pending
    tx.send(50, 1).unwrap(); // filtered
    tx.send(4, 1).unwrap(); // still merges
    let s = conserved_stats(&rx);
    assert_eq!(
        (
            s.received,
            s.filtered,
            s.annihilated,
            s.overflowed,
            s.pending,
            s.pending_sends
        ),
        (8, 1, 2, 1, 3, 5)
    );
    let e = rx.try_recv().unwrap();
    assert_eq!((e.key, e.sends), (1, 2));
    let s = conserved_stats(&rx);
    assert_eq!(
        (s.delivered, s.folded, s.pending, s.pending_sends),
        (1, 2, 2, 3)
    );
    let batch = rx.try_recv_all().unwrap();
    assert_eq!(batch.len(), 2);
    let s = conserved_stats(&rx);
    assert_eq!(
        (s.delivered, s.folded, s.pending, s.pending_sends),
        (3, 5, 0, 0)
    );
    tx.send(6, 1).unwrap();
    tx.send(6, 1).unwrap();
    rx.close(); // drops the pending 6 (2 sends)
    let s = conserved_stats(&rx);
    assert_eq!(
        (s.dropped, s.pending, s.pending_sends, s.received),
        (2, 0, 0, 10)
    );
    tx.close();
    assert!(tx.send(1, 1).is_err());
    assert!(tx.send(1, 1).is_err());
    let h = hub.stats();
    assert_eq!((h.sent, h.refused, h.receivers), (12, 2, 0));
}

pub fn rule13_hard_close_and_panicking_merge_count_as_dropped<I: Conflate>() {
    #[derive(Debug)]
    struct Boom;
    let hub = Hub::<I, u32, i64>::new();
    let tx = hub.sender();
    let mut faulty = hub
        .receiver_builder()
        .merge(|p: i64, n: i64| {
            if n == 99 {
                std::panic::panic_any(Boom);
            }
            Some(p + n)
        })
        .build();
    // With its own values too, so that it comes after `faulty` in the fan-out
    // (plain receivers come first) and misses the panicking send.
    let mut other = hub.receiver_builder().key_filter(|_: &u32| true).build();
    tx.send(1, 1).unwrap();
    tx.send(1, 1).unwrap();
    tx.send(2, 1).unwrap();
    let r = catch_unwind(AssertUnwindSafe(|| tx.send(1, 99)));
    assert!(r.is_err());
    let s = conserved_stats(&faulty);
    assert_eq!(
        (s.received, s.dropped, s.pending, s.pending_sends),
        (4, 3, 1, 1)
    );
    hub.close_now();
    for rx in [&mut faulty, &mut other] {
        let s = conserved_stats(rx);
        assert_eq!((s.pending, s.pending_sends), (0, 0));
        assert_fully_closed(rx);
    }
    assert_eq!(
        other.stats().dropped,
        3,
        "other had 1 (twice) and 2 pending"
    );
    assert_eq!(hub.stats().receivers, 0);
}

pub fn rule13_conservation_holds_after_senders_of_several_threads_join<I: Conflate>() {
    const SENDERS: u64 = 3;
    // Under ThreadSanitizer the spinning consumers slow the senders to a
    // crawl: a smaller run exercises the same races.
    let per = tsan_scaled(5_000, 300);
    let hub = Hub::<I, u32, i64>::builder()
        .merge(|p: i64, n: i64| Some(p + n).filter(|s| *s % 5 != 0))
        .retain_latest()
        .build();
    let tx = hub.sender();
    let rxs: Vec<Receiver<I, u32, i64>> = vec![
        hub.receiver(),
        hub.receiver_builder()
            .key_filter(|k: &u32| k % 3 != 0)
            .build(),
        hub.receiver_builder().max_pending(4).build(),
        hub.receiver_builder()
            .merge(|_, n| Some(n))
            .max_pending(2)
            .build(),
    ];
    let torn = AtomicBool::new(false);
    let finished = AtomicUsize::new(0);
    let crew = Crew::new("rule13_conservation_after_join");
    // A sender that panics never gets to `tx.close()`: close the hub for it,
    // or the consumers would wait for `Closed` forever.
    crew.on_panic(|| hub.close_now());
    let results: Vec<Receiver<I, u32, i64>> = crew.scope(|s| {
        let consumers: Vec<_> = rxs
            .into_iter()
            .enumerate()
            .map(|(i, mut rx)| {
                let (torn, finished) = (&torn, &finished);
                crew.spawn(s, move || {
                    let mut turn = 0u64;
                    loop {
                        let s = rx.stats();
                        if s.received < s.folded + s.annihilated + s.overflowed + s.dropped {
                            torn.store(true, SeqCst);
                        }
                        let gone = match (i + turn as usize) % 3 {
                            0 => rx.try_recv().err() == Some(TryRecvError::Closed),
                            1 => rx.try_recv_all().err() == Some(TryRecvError::Closed),
                            _ => {
                                rx.recv_timeout(Duration::from_micros(50)).err()
                                    == Some(RecvTimeoutError::Closed)
                            }
                        };
                        if gone {
                            break;
                        }
                        turn += 1;
                    }
                    finished.fetch_add(1, SeqCst);
                    rx
                })
            })
            .collect();
        let senders: Vec<_> = (0..SENDERS)
            .map(|t| {
                let tx = tx.clone();
                crew.spawn(s, move || {
                    for i in 0..per {
                        let k = (fastrand::u32(0..12) + t as u32) % 12;
                        tx.send(k, (i % 7) as i64 - 2).unwrap();
                    }
                })
            })
            .collect();
        for h in senders {
            h.join().unwrap();
        }
        tx.close();
        consumers.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(!torn.load(SeqCst), "a stats read tore: settled > received");
    let total = SENDERS * per;
    assert_eq!(hub.stats().sent, total);
    for rx in &results {
        let s = conserved_stats(rx);
        assert_eq!(s.received + s.filtered, total, "{s:?}");
        assert_eq!((s.pending, s.pending_sends, s.dropped), (0, 0, 0));
    }
    assert_eq!(results[0].stats().filtered, 0);
    assert!(results[2].stats().overflowed > 0 || results[3].stats().overflowed > 0);
}

pub fn rule14_max_pending_refuses_new_keys_only_and_renumbers_nothing<I: Conflate>() {
    let hub = Hub::<I, u32, u32>::new();
    let tx = hub.sender();
    let mut rx = hub.receiver_builder().max_pending(2).build();
    let mut free = hub.receiver();
    for k in [5, 3, 8, 5, 9, 3] {
        tx.send(k, k * 10).unwrap();
    }
    assert_eq!(rx.len(), 2);
    assert_eq!(drain(&mut rx), vec![(5, 50, 2), (3, 30, 2)]);
    assert_eq!(
        keys_of(&mut free),
        vec![5, 3, 8, 9],
        "other receivers unaffected"
    );
    assert_eq!(rx.stats().overflowed, 2);
    // Taking frees the slots, and a cut frees all of them at once.
    tx.send(1, 1).unwrap();
    tx.send(2, 2).unwrap();
    tx.send(3, 3).unwrap();
    assert_eq!(rx.try_recv_all().unwrap().len(), 2);
    tx.send(4, 4).unwrap();
    tx.send(6, 6).unwrap();
    tx.send(7, 7).unwrap();
    assert_eq!(keys_of(&mut rx), vec![4, 6]);
    tx.send(7, 7).unwrap();
    assert_eq!(keys_of(&mut rx), vec![7]);
    let s = conserved_stats(&rx);
    assert_eq!((s.overflowed, s.received), (4, 13));
}

pub fn rule14_max_pending_holds_under_concurrent_sends<I: Conflate>() {
    const MAX: usize = 5;
    const SENDERS: u64 = 3;
    let per = tsan_scaled(8_000, 500);
    let hub = Hub::<I, u32, u64>::new();
    let tx = hub.sender();
    let mut rx = hub.receiver_builder().max_pending(MAX).build();
    let crew = Crew::new("rule14_max_pending_concurrent");
    crew.on_panic(|| hub.close_now());
    let (most, rx) = crew.scope(|s| {
        let consumer = crew.spawn(s, move || {
            let mut most = 0;
            loop {
                most = most.max(rx.len());
                match fastrand::u8(0..3) {
                    0 => match rx.try_recv_all() {
                        Ok(batch) => most = most.max(batch.len()),
                        Err(TryRecvError::Closed) => break,
                        Err(TryRecvError::Empty) => {}
                    },
                    _ => {
                        if let Err(TryRecvError::Closed) = rx.try_recv() {
                            break;
                        }
                    }
                }
            }
            (most, rx)
        });
        let senders: Vec<_> = (0..SENDERS)
            .map(|_| {
                let tx = tx.clone();
                crew.spawn(s, move || {
                    for i in 0..per {
                        tx.send(fastrand::u32(0..64), i).unwrap();
                    }
                })
            })
            .collect();
        for h in senders {
            h.join().unwrap();
        }
        tx.close();
        consumer.join().unwrap()
    });
    assert!(most <= MAX, "{most} keys pending with max_pending({MAX})");
    let s = conserved_stats(&rx);
    assert_eq!(s.received, SENDERS * per);
    assert!(s.overflowed > 0, "the bound was never reached");
}
