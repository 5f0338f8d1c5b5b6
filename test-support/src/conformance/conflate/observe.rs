//! Observability: a receiver's watch, read by a thread that does not own the
//! receiver, and the hub's listing of its live receivers with their backlog.

use crate::conflate_api::*;
use crate::conformance::support::*;
use crate::threads::{hang_bound, Crew};
use keybus::ReceiverStats;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::mpsc;

/// A receiver of each kind: every key with the hub's merge (the lock-free
/// implementation's cell receiver) and one with a key filter (its own values).
fn receiver_of_kind<I: Conflate>(hub: &Hub<I, u32, u64>, own: bool) -> Receiver<I, u32, u64> {
    let b = hub
        .receiver_builder()
        .name(if own { "own" } else { "plain" });
    if own {
        b.key_filter(|_: &u32| true).build()
    } else {
        b.build()
    }
}

pub fn observe_watch_on_another_thread_sees_backlog_grow_and_shrink<I: Conflate>() {
    // 40 keys: past one block of the lock-free queue's entries (31).
    const KEYS: u32 = 40;
    for own in [false, true] {
        let hub = Hub::<I, u32, u64>::new();
        let tx = hub.sender();
        let mut rx = receiver_of_kind::<I>(&hub, own);
        let watch = rx.watch();
        let crew = Crew::new("observe_watch");
        crew.on_panic(|| hub.close_now());
        let (ask, asked) = mpsc::channel::<()>();
        let (answer, answers) = mpsc::channel::<(ReceiverStats, bool, Option<String>)>();
        crew.scope(|s| {
            crew.spawn(s, move || {
                for () in asked {
                    let seen = (
                        watch.stats(),
                        watch.is_closed(),
                        watch.name().map(Into::into),
                    );
                    answer.send(seen).unwrap();
                }
            });
            let look = || {
                ask.send(()).unwrap();
                let (stats, closed, name) = crew.recv_timeout(&answers, hang_bound()).unwrap();
                assert_eq!(name.as_deref(), Some(if own { "own" } else { "plain" }));
                assert_conserved(&stats);
                (stats, closed)
            };
            let (s, closed) = look();
            assert_eq!((s.pending, s.pending_sends, closed), (0, 0, false));
            for i in 0..100u64 {
                tx.send(i as u32 % KEYS, i).unwrap();
            }
            let (s, _) = look();
            assert_eq!(
                (s.received, s.pending, s.pending_sends),
                (100, 40, 100),
                "grew"
            );
            for _ in 0..10 {
                rx.try_recv().unwrap();
            }
            let (s, _) = look();
            assert_eq!((s.delivered, s.pending), (10, 30), "shrank");
            assert_eq!(s.pending_sends, 100 - s.folded);
            for k in 0..KEYS {
                tx.send(k, 0).unwrap();
            }
            let (s, _) = look();
            assert_eq!(
                (s.received, s.pending),
                (140, 40),
                "the keys taken are back"
            );
            assert_eq!(rx.try_recv_all().unwrap().len(), 40);
            let (s, closed) = look();
            assert_eq!((s.pending, s.pending_sends, closed), (0, 0, false));
            hub.close_graceful();
            assert!(rx.recv().is_err());
            let (s, closed) = look();
            assert!(closed);
            assert_eq!(
                (s.received, s.delivered, s.folded, s.dropped),
                (140, 50, 140, 0)
            );
            drop(ask);
        });
    }
}

pub fn observe_race_watch_reads_while_sends_and_receives_run<I: Conflate>() {
    const KEYS: u32 = 300;
    let sends = tsan_scaled(30_000, 3_000);
    for own in [false, true] {
        let hub = Hub::<I, u32, u64>::new();
        let tx = hub.sender();
        let mut rx = receiver_of_kind::<I>(&hub, own);
        let watch = rx.watch();
        let done = AtomicBool::new(false);
        let crew = Crew::new("observe_race");
        crew.on_panic(|| hub.close_now());
        let (events, folded) = crew.scope(|s| {
            crew.spawn(s, || {
                for i in 0..sends {
                    tx.send(i as u32 % KEYS, i).unwrap();
                }
                tx.close();
            });
            let watcher = crew.spawn(s, || {
                let mut reads = 0u64;
                while !done.load(SeqCst) && !crew.panicked() {
                    let s = watch.stats();
                    assert!(s.received <= sends, "{s:?}");
                    assert!(s.delivered <= s.folded, "every event folds a send: {s:?}");
                    if !own {
                        // One pending entry per key, even while a cut is
                        // taking entries whose keys were sent again since.
                        assert!(s.pending <= u64::from(KEYS), "{s:?}");
                    }
                    reads += 1;
                }
                reads
            });
            let (mut events, mut folded) = (0u64, 0u64);
            let mut turn = 0u32;
            loop {
                turn += 1;
                let got = if turn % 3 == 0 {
                    rx.try_recv_all()
                        .map(|b| b.into_iter().map(|e| e.sends).collect())
                } else {
                    rx.try_recv().map(|e| vec![e.sends])
                };
                match got {
                    Ok(batch) => {
                        events += batch.len() as u64;
                        folded += batch.iter().sum::<u64>();
                    }
                    Err(keybus::TryRecvError::Empty) => std::thread::yield_now(),
                    Err(keybus::TryRecvError::Closed) => break,
                }
            }
            done.store(true, SeqCst);
            watcher.join().unwrap();
            (events, folded)
        });
        let s = watch.stats();
        assert_conserved(&s);
        assert_eq!((s.received, s.folded, s.pending_sends), (sends, sends, 0));
        assert_eq!(
            (s.delivered, s.folded),
            (events, folded),
            "the consumer's own tally"
        );
        assert!(watch.is_closed());
    }
}

pub fn observe_hub_lists_exactly_the_live_receivers_with_their_backlog<I: Conflate>() {
    let hub = Hub::<I, u32, u32>::new();
    let tx = hub.sender();
    let a = hub.receiver_builder().name("a").build();
    let mut b = hub
        .receiver_builder()
        .name("b")
        .key_filter(|k: &u32| k % 2 == 0)
        .build();
    let c = hub.receiver_builder().max_pending(2).build();
    assert_eq!([a.watch().id(), b.watch().id(), c.watch().id()], [0, 1, 2]);
    for k in 0..5 {
        tx.send(k, k).unwrap();
    }
    tx.send(0, 0).unwrap();
    let list = |hub: &Hub<I, u32, u32>| -> Vec<(u64, Option<String>, u64, u64)> {
        hub.receivers()
            .into_iter()
            .map(|r| {
                assert_conserved(&r.stats);
                let name = r.name.as_deref().map(str::to_owned);
                (r.id, name, r.stats.pending, r.stats.pending_sends)
            })
            .collect()
    };
    let name = |n: &str| Some(n.to_owned());
    assert_eq!(
        list(&hub),
        vec![(0, name("a"), 5, 6), (1, name("b"), 3, 4), (2, None, 2, 3)]
    );
    assert_eq!(
        hub.receivers()[1].stats,
        b.stats(),
        "the receiver's own stats"
    );
    b.try_recv().unwrap();
    drop(a);
    let mut late = hub.receiver();
    assert_eq!(
        list(&hub),
        vec![(1, name("b"), 2, 2), (2, None, 2, 3), (3, None, 0, 0)]
    );
    hub.close_graceful();
    assert_eq!(drain(&mut b).len(), 2);
    assert!(b.try_recv().is_err(), "b drained: no longer listed");
    assert!(late.try_recv().is_err());
    assert_eq!(list(&hub), vec![(2, None, 2, 3)], "c has not drained");
    hub.close_now();
    assert!(hub.receivers().is_empty());
    let s = hub.stats();
    assert_eq!(
        (
            s.receivers_drained,
            s.receivers_dropped,
            s.receivers_hard_closed
        ),
        (2, 1, 1)
    );
    drop(c);
}

pub fn observe_watch_outlives_its_receiver<I: Conflate>() {
    let hub = Hub::<I, u32, u32>::new();
    let tx = hub.sender();
    let rx = hub.receiver_builder().name("short-lived").build();
    let watch = rx.watch();
    let copy = watch.clone();
    tx.send(1, 1).unwrap();
    tx.send(1, 2).unwrap();
    drop(rx);
    for w in [&watch, &copy] {
        assert!(w.is_closed());
        let s = w.stats();
        assert_conserved(&s);
        assert_eq!((s.received, s.dropped, s.pending), (2, 2, 0));
        assert_eq!(w.name(), Some("short-lived"));
    }
    drop(hub);
    drop(tx);
    assert_eq!(watch.stats().dropped, 2, "readable after the hub is gone");
}

pub fn observe_watch_and_listing_agree_with_the_receiver_under_tombstones<I: Conflate>() {
    let hub = Hub::<I, u32, i64>::builder()
        .tombstones(|v: &i64| *v < 0)
        .build();
    let tx = hub.sender();
    let mut rxs = [
        hub.receiver(),
        hub.receiver_builder()
            .key_filter(|k: &u32| *k < 100)
            .build(),
    ];
    // A life this receiver never saw: its tombstone is taken and dropped.
    tx.send(1, 10).unwrap();
    tx.send(1, 11).unwrap();
    tx.send(1, -1).unwrap();
    tx.send(2, 20).unwrap();
    for (i, rx) in rxs.iter_mut().enumerate() {
        let e = rx.try_recv().unwrap();
        assert_eq!((e.key, e.value), (2, 20));
        let own = conserved_stats(rx);
        assert_eq!((own.delivered, own.folded, own.annihilated), (1, 1, 3));
        assert_eq!(
            rx.watch().stats(),
            own,
            "the watch applies the same correction"
        );
        assert_eq!(hub.receivers()[i].stats, own, "and so does the listing");
    }
}
