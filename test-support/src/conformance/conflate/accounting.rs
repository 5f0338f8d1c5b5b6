//! Rule 13: accounting. Every field of `ReceiverStats` and `HubStats` counts
//! what it names, and conservation holds once the senders have joined.

use crate::conflate_api::*;
use crate::conformance::support::*;
use crate::threads::Crew;
use keybus::{RecvTimeoutError, TryRecvError};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

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
