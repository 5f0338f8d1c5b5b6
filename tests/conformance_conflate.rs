//! The conflate conformance suite: every rule of the conflate contract (docs/design.md, "The contract")
//! (1–9) pinned by at least one test named `ruleN_...`, written once against the
//! public API and instantiated per implementation with
//! `conflate_conformance!(name, path::to::module)`.
//!
//! Race tests use real threads and bounded loops. Nothing here asserts on time,
//! and no sleep stands in for synchronization: where a deadline appears it is
//! the API under test (`recv_timeout` returning `Timeout`), except the stall
//! watchdog of the `wake_*` and `rule8_race_*` tests, which turns a receiver
//! never woken into a failure instead of a hang.

macro_rules! conflate_conformance {
    ($name:ident, $($m:tt)::+) => {
        mod $name {
            use $($m)::+ as imp;
            use futures::stream::StreamExt;
            use imp::{Hub, Receiver, RecvError, RecvTimeoutError, TryRecvError};
            use std::collections::HashSet;
            use std::future::Future;
            use std::hash::Hash;
            use std::panic::{catch_unwind, AssertUnwindSafe};
            use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::SeqCst};
            use std::sync::{mpsc, Arc, Barrier};
            use std::task::{Context, Poll};
            use std::thread;
            use std::time::{Duration, Instant};

            // ---------------------------------------------------------------
            // helpers

            /// Everything pending now, as `(key, value, sends)`, via `try_iter`.
            fn drain<K, V>(rx: &mut Receiver<K, V>) -> Vec<(K, V, u64)>
            where
                K: Hash + Eq + Clone + Send + Sync + 'static,
                V: Clone + Send + 'static,
            {
                rx.try_iter().map(|e| (e.key, e.value, e.sends)).collect()
            }

            fn keys_of<K, V>(rx: &mut Receiver<K, V>) -> Vec<K>
            where
                K: Hash + Eq + Clone + Send + Sync + 'static,
                V: Clone + Send + 'static,
            {
                rx.try_iter().map(|e| e.key).collect()
            }

            /// Every receive form answers `Closed`, and the receiver says so.
            fn assert_fully_closed<K, V>(rx: &mut Receiver<K, V>)
            where
                K: Hash + Eq + Clone + Send + Sync + 'static,
                V: Clone + Send + 'static,
            {
                assert!(rx.is_closed());
                assert_eq!(rx.len(), 0);
                assert!(rx.is_empty());
                assert_eq!(rx.try_recv().err(), Some(TryRecvError::Closed));
                assert_eq!(rx.try_recv_all().err(), Some(TryRecvError::Closed));
                assert_eq!(rx.peek().err(), Some(TryRecvError::Closed));
                assert_eq!(rx.recv().err(), Some(RecvError));
                assert_eq!(rx.recv_timeout(Duration::ZERO).err(), Some(RecvTimeoutError::Closed));
                assert_eq!(
                    rx.recv_deadline(past()).err(),
                    Some(RecvTimeoutError::Closed)
                );
                assert_eq!(futures::executor::block_on(rx.recv_async()).err(), Some(RecvError));
                assert_eq!(rx.try_iter().count(), 0);
                assert_eq!(rx.iter().count(), 0);
                assert!(futures::executor::block_on(rx.next()).is_none());
            }

            fn past() -> Instant {
                let now = Instant::now();
                now.checked_sub(Duration::from_millis(50)).unwrap_or(now)
            }

            /// Busy-waits a random, short while, to spread where a racing
            /// operation lands. Never used to order anything.
            fn jitter(max: u32) {
                for _ in 0..fastrand::u32(0..max) {
                    std::hint::spin_loop();
                }
            }

            /// Waits until a racing sender has started send number `target`
            /// (it always runs to `sends`, so this ends), then a little more,
            /// so the close lands in the middle of the stream while still
            /// racing the send in flight. Ordering by an atomic, not by time.
            fn close_near(progress: &AtomicU32, target: u32, sends: u32) {
                while progress.load(SeqCst) < target.min(sends - 1) {
                    std::hint::spin_loop();
                }
                jitter(200);
            }

            fn sum_merge(p: i64, n: i64) -> Option<i64> {
                Some(p + n)
            }

            /// `n < 0` annihilates the pending slot; otherwise newer wins.
            fn annihilating(_p: i64, n: i64) -> Option<i64> {
                if n < 0 {
                    None
                } else {
                    Some(n)
                }
            }

            // ---------------------------------------------------------------
            // API shape

            #[test]
            fn api_handles_are_send_sync_clone_debug() {
                fn send_sync<T: Send + Sync>() {}
                fn clone_debug<T: Clone + std::fmt::Debug>() {}
                send_sync::<Hub<String, Vec<u8>>>();
                send_sync::<imp::Sender<String, Vec<u8>>>();
                send_sync::<Receiver<String, Vec<u8>>>();
                clone_debug::<Hub<String, Vec<u8>>>();
                clone_debug::<imp::Sender<String, Vec<u8>>>();

                // Debug needs no K: Debug / V: Debug.
                struct Opaque;
                impl Clone for Opaque {
                    fn clone(&self) -> Self {
                        Opaque
                    }
                }
                let hub: Hub<u8, Opaque> = Hub::default();
                let mut rx = hub.receiver();
                let text = format!(
                    "{:?} {:?} {:?} {:?}",
                    hub,
                    hub.sender(),
                    hub.receiver_builder().key(1),
                    rx
                );
                assert!(!text.is_empty());
                assert_eq!(rx.try_iter().count(), 0);
            }

            /// `Receiver: Unpin`, so `rx.next().await` (`StreamExt::next`) works
            /// without pinning, as with every common channel receiver.
            #[test]
            fn api_receiver_is_unpin() {
                fn unpin<T: Unpin>() {}
                unpin::<Receiver<String, Vec<u8>>>();
            }

            #[test]
            fn api_recv_async_future_is_send() {
                fn send<T: Send>(_: &T) {}
                let hub: Hub<String, Vec<u8>> = Hub::new();
                let mut rx = hub.receiver();
                let fut = rx.recv_async();
                send(&fut);
            }

            // ---------------------------------------------------------------
            // rule 1: coalescing at send, first-touch order, no starvation

            #[test]
            fn rule1_coalescing_keeps_queue_position() {
                let hub: Hub<&'static str, u32> = Hub::new();
                let tx = hub.sender();
                let mut rx = hub.receiver();
                for (k, v) in [("a", 1), ("b", 1), ("c", 1), ("b", 2), ("a", 3)] {
                    tx.send(k, v).unwrap();
                }
                assert_eq!(rx.len(), 3);
                assert_eq!(drain(&mut rx), vec![("a", 3, 2), ("b", 2, 2), ("c", 1, 1)]);
            }

            #[test]
            fn rule1_delivery_is_first_touch_order() {
                let mut rng = fastrand::Rng::with_seed(7);
                let mut order: Vec<u32> = (0..300).collect();
                rng.shuffle(&mut order);
                let hub: Hub<u32, u32> = Hub::new();
                let tx = hub.sender();
                let mut rx = hub.receiver();
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

            #[test]
            fn rule1_coalescing_happens_at_send_not_at_receive() {
                let hub: Hub<u32, i64> = Hub::with_merge(sum_merge);
                let tx = hub.sender();
                let mut rx = hub.receiver();
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

            #[test]
            fn rule1_hot_key_never_starves_cold_key() {
                const HOT: u32 = 0;
                const COLD: u32 = 1;
                let hub: Hub<u32, u32> = Hub::new();
                let tx = hub.sender();
                let mut rx = hub.receiver();
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

            // ---------------------------------------------------------------
            // rule 2: merge, annihilation, sends

            #[test]
            fn rule2_default_merge_is_newer_wins() {
                let hub: Hub<u8, String> = Hub::new();
                let tx = hub.sender();
                let mut rx = hub.receiver();
                for v in ["one", "two", "three"] {
                    tx.send(9, v.to_string()).unwrap();
                }
                let e = rx.try_recv().unwrap();
                assert_eq!((e.key, e.value.as_str(), e.sends), (9, "three", 3));
            }

            #[test]
            fn rule2_merge_gets_pending_then_incoming() {
                let hub: Hub<u8, String> = Hub::with_merge(|p: String, n: String| Some(p + &n));
                let tx = hub.sender();
                let mut rx = hub.receiver();
                for v in ["a", "b", "c"] {
                    tx.send(1, v.to_string()).unwrap();
                }
                assert_eq!(rx.try_recv().unwrap().value, "abc");
            }

            #[test]
            fn rule2_annihilation_leaves_no_residue() {
                let hub: Hub<&'static str, i64> = Hub::with_merge(annihilating);
                let tx = hub.sender();
                let mut rx = hub.receiver();
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

            #[test]
            fn rule2_merge_runs_only_on_a_pending_key() {
                let calls = Arc::new(AtomicUsize::new(0));
                let c = calls.clone();
                let hub: Hub<u8, i64> = Hub::with_merge(move |p, n| {
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

            #[test]
            fn rule2_sends_counts_every_merged_send() {
                let hub: Hub<u8, u32> = Hub::new();
                let tx = hub.sender();
                let mut rx = hub.receiver();
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

            #[test]
            fn rule2_race_concurrent_senders_summing_merge_conserve() {
                const SENDERS: usize = 4;
                const PER: u64 = 4_000;
                type W = (u64, u64); // (sum of values, number of sends)
                let hub: Hub<u8, W> = Hub::with_merge(|p: W, n: W| Some((p.0 + n.0, p.1 + n.1)));
                let tx = hub.sender();
                let mut live = hub.receiver();
                let mut idle = hub.receiver();
                let sent: u64 = thread::scope(|s| {
                    let consumer = s.spawn(|| {
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
                            s.spawn(move || {
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

            // ---------------------------------------------------------------
            // rule 3: bounded memory, filters at send, per-receiver merge

            #[test]
            fn rule3_memory_is_bounded_by_pending_keys() {
                let token = Arc::new(());
                let hub: Hub<u64, Arc<()>> = Hub::new();
                let tx = hub.sender();
                let mut rx = hub.receiver();
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

            #[test]
            fn rule3_key_filter_applies_at_send() {
                let token = Arc::new(());
                let calls = Arc::new(AtomicUsize::new(0));
                let c = calls.clone();
                let hub: Hub<u32, Arc<()>> = Hub::new();
                let tx = hub.sender();
                let mut even = hub
                    .receiver_builder()
                    .key_filter(move |k: &u32| {
                        c.fetch_add(1, SeqCst);
                        k % 2 == 0
                    })
                    .build();
                for k in 0..10 {
                    tx.send(k, token.clone()).unwrap();
                }
                // Decided at send: the filter already ran, odd keys took no slot.
                assert!(calls.load(SeqCst) >= 10);
                assert_eq!(even.len(), 5);
                assert_eq!(Arc::strong_count(&token), 1 + 5);
                for k in (1..100).step_by(2) {
                    tx.send(k, token.clone()).unwrap();
                }
                assert_eq!(even.len(), 5);
                assert_eq!(Arc::strong_count(&token), 1 + 5);
                assert_eq!(keys_of(&mut even), vec![0, 2, 4, 6, 8]);
            }

            #[test]
            fn rule3_key_takes_exactly_one_key() {
                let hub: Hub<u32, u32> = Hub::new();
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

            #[test]
            fn rule3_key_and_key_filter_later_call_wins() {
                let hub: Hub<u32, u32> = Hub::new();
                let tx = hub.sender();
                let mut filter_last =
                    hub.receiver_builder().key(1).key_filter(|k: &u32| *k >= 5).build();
                let mut key_last =
                    hub.receiver_builder().key_filter(|k: &u32| *k >= 5).key(1).build();
                let mut key_twice = hub.receiver_builder().key(2).key(3).build();
                for k in 0..8 {
                    tx.send(k, k).unwrap();
                }
                assert_eq!(keys_of(&mut filter_last), vec![5, 6, 7]);
                assert_eq!(keys_of(&mut key_last), vec![1]);
                assert_eq!(keys_of(&mut key_twice), vec![3]);
            }

            #[test]
            fn rule3_receiver_merge_overrides_hub_merge_for_that_receiver_only() {
                let hub: Hub<u8, i64> = Hub::with_merge(sum_merge);
                let tx = hub.sender();
                let mut sum_a = hub.receiver();
                let mut max = hub.receiver_builder().merge(|p: i64, n: i64| Some(p.max(n))).build();
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
                let hub: Hub<u8, i64> = Hub::new();
                let tx = hub.sender();
                let mut newer = hub.receiver();
                let mut summing = hub.receiver_builder().merge(sum_merge).build();
                for v in [3, 9, 4] {
                    tx.send(1, v).unwrap();
                }
                assert_eq!(drain(&mut newer), vec![(1, 4, 3)]);
                assert_eq!(drain(&mut summing), vec![(1, 16, 3)]);
            }

            // ---------------------------------------------------------------
            // rule 4: receivers start empty; sending to nobody

            #[test]
            fn rule4_receiver_starts_empty() {
                let hub: Hub<u32, u32> = Hub::new();
                let tx = hub.sender();
                tx.send(1, 1).unwrap();
                let mut early = hub.receiver();
                assert_eq!(early.len(), 0);
                assert_eq!(early.try_recv().err(), Some(TryRecvError::Empty));
                tx.send(2, 2).unwrap();
                let mut late = hub.receiver();
                assert_eq!(late.try_recv().err(), Some(TryRecvError::Empty));
                tx.send(2, 3).unwrap();
                tx.send(3, 3).unwrap();
                assert_eq!(drain(&mut early), vec![(2, 3, 2), (3, 3, 1)]);
                // `late` saw only what came after it, not the pending slot's past.
                assert_eq!(drain(&mut late), vec![(2, 3, 1), (3, 3, 1)]);
            }

            #[test]
            fn rule4_send_with_no_live_receiver_is_ok() {
                let token = Arc::new(());
                let hub: Hub<u32, Arc<()>> = Hub::new();
                let tx = hub.sender();
                for k in 0..1_000 {
                    tx.send(k, token.clone()).unwrap();
                }
                let rx = hub.receiver();
                rx.close();
                let gone = hub.receiver();
                drop(gone);
                for k in 0..1_000 {
                    tx.send(k, token.clone()).unwrap();
                }
                // Nothing was kept anywhere.
                assert_eq!(Arc::strong_count(&token), 1);
                tx.close();
                let (k, v) = tx.send(5, token.clone()).unwrap_err().into_inner();
                assert_eq!(k, 5);
                assert!(Arc::ptr_eq(&v, &token));
                drop(v);
                assert_eq!(Arc::strong_count(&token), 1);
            }

            // ---------------------------------------------------------------
            // rule 5: try_recv_all is one cut

            #[test]
            fn rule5_try_recv_all_takes_everything_in_queue_order() {
                let hub: Hub<u32, u32> = Hub::new();
                let tx = hub.sender();
                let mut rx = hub.receiver();
                assert_eq!(rx.try_recv_all().err(), Some(TryRecvError::Empty));
                for k in [5, 1, 4, 1, 5, 9, 2, 6, 5] {
                    tx.send(k, k * 10).unwrap();
                }
                let all = rx.try_recv_all().unwrap();
                let keys: Vec<u32> = all.iter().map(|e| e.key).collect();
                assert_eq!(keys, vec![5, 1, 4, 9, 2, 6]);
                let distinct: HashSet<u32> = keys.iter().copied().collect();
                assert_eq!(distinct.len(), keys.len(), "one entry per key");
                assert_eq!(all.iter().map(|e| e.sends).sum::<u64>(), 9);
                assert_eq!(rx.len(), 0);
                assert_eq!(rx.try_recv_all().err(), Some(TryRecvError::Empty));
            }

            #[test]
            fn rule5_try_recv_all_error_comes_with_nothing() {
                let token = Arc::new(());
                let hub: Hub<u32, Arc<()>> = Hub::new();
                let tx = hub.sender();
                let mut rx_closed = hub.receiver();
                let mut rx_torn = hub.receiver();
                for k in 0..3 {
                    tx.send(k, token.clone()).unwrap();
                }
                rx_closed.close();
                assert_eq!(rx_closed.try_recv_all().err(), Some(TryRecvError::Closed));
                hub.close();
                assert_eq!(rx_torn.try_recv_all().err(), Some(TryRecvError::Closed));
                assert_eq!(Arc::strong_count(&token), 1);
            }

            #[test]
            fn rule5_try_recv_all_after_graceful_close_returns_all_then_closed() {
                let hub: Hub<u32, u32> = Hub::new();
                let tx = hub.sender();
                let mut rx = hub.receiver();
                for k in [3, 1, 2, 1] {
                    tx.send(k, k).unwrap();
                }
                tx.close();
                let all = rx.try_recv_all().unwrap();
                assert_eq!(all.iter().map(|e| e.key).collect::<Vec<_>>(), vec![3, 1, 2]);
                assert_eq!(rx.try_recv_all().err(), Some(TryRecvError::Closed));
                assert_eq!(rx.try_recv_all().err(), Some(TryRecvError::Closed));
            }

            /// Distinct keys 0, 1, 2, … sent in order: the queue is always one
            /// contiguous run, so every cut must continue exactly where the
            /// previous one ended — no key skipped and seen later, none twice.
            #[test]
            fn rule5_race_try_recv_all_cuts_are_contiguous() {
                const N: u32 = 20_000;
                let hub: Hub<u32, u32> = Hub::new();
                let tx = hub.sender();
                let mut rx = hub.receiver();
                thread::scope(|s| {
                    s.spawn(|| {
                        for k in 0..N {
                            tx.send(k, k).unwrap();
                        }
                        tx.close();
                    });
                    let mut next = 0u32;
                    loop {
                        match rx.try_recv_all() {
                            Ok(batch) => {
                                assert!(!batch.is_empty(), "Ok with an empty batch");
                                for (i, e) in batch.iter().enumerate() {
                                    assert_eq!(e.key, next + i as u32, "cut is not contiguous");
                                    assert_eq!((e.value, e.sends), (e.key, 1));
                                }
                                next += batch.len() as u32;
                            }
                            Err(TryRecvError::Empty) => thread::yield_now(),
                            Err(TryRecvError::Closed) => break,
                        }
                    }
                    assert_eq!(next, N);
                });
            }

            // ---------------------------------------------------------------
            // rule 6: precedence

            #[test]
            fn rule6_try_recv_closed_beats_empty_beats_value() {
                let hub: Hub<u32, u32> = Hub::new();
                let tx = hub.sender();
                let mut rx = hub.receiver();
                assert_eq!(rx.try_recv().err(), Some(TryRecvError::Empty));
                tx.send(1, 1).unwrap();
                assert_eq!(rx.try_recv().unwrap().key, 1);
                assert_eq!(rx.try_recv().err(), Some(TryRecvError::Empty));

                // Receiver closed with a value pending: Closed.
                tx.send(2, 2).unwrap();
                rx.close();
                assert_eq!(rx.try_recv().err(), Some(TryRecvError::Closed));

                // Hub closed with a value pending: Closed.
                let mut rx = hub.receiver();
                tx.send(3, 3).unwrap();
                hub.close();
                assert_eq!(rx.try_recv().err(), Some(TryRecvError::Closed));

                // Send side closed: value first, then Closed, never Empty.
                let hub: Hub<u32, u32> = Hub::new();
                let tx = hub.sender();
                let mut rx = hub.receiver();
                tx.send(4, 4).unwrap();
                tx.close();
                assert_eq!(rx.try_recv().unwrap().key, 4);
                assert_eq!(rx.try_recv().err(), Some(TryRecvError::Closed));
            }

            #[test]
            fn rule6_peek_returns_head_without_removing_it() {
                let hub: Hub<&'static str, i64> = Hub::with_merge(annihilating);
                let tx = hub.sender();
                let mut rx = hub.receiver();
                assert_eq!(rx.peek().err(), Some(TryRecvError::Empty));
                tx.send("a", 1).unwrap();
                tx.send("b", 2).unwrap();
                let p = rx.peek().unwrap();
                assert_eq!((p.key, p.value, p.sends), ("a", 1, 1));
                assert_eq!(rx.len(), 2);
                // Coalescing changes value and sends, not the head.
                tx.send("a", 5).unwrap();
                let p = rx.peek().unwrap();
                assert_eq!((p.key, p.value, p.sends), ("a", 5, 2));
                let p2 = rx.peek().unwrap();
                assert_eq!((p2.key, p2.value, p2.sends), (p.key, p.value, p.sends));
                // The peeked event is what the next receive takes.
                let t = rx.try_recv().unwrap();
                assert_eq!((t.key, t.value, t.sends), ("a", 5, 2));
                // Annihilating the head moves it on.
                tx.send("c", 3).unwrap();
                tx.send("b", -1).unwrap();
                assert_eq!(rx.peek().unwrap().key, "c");
                // Graceful close: value while pending, then Closed.
                tx.close();
                assert_eq!(rx.peek().unwrap().key, "c");
                rx.try_recv().unwrap();
                assert_eq!(rx.peek().err(), Some(TryRecvError::Closed));
                // A closed receiver answers Closed even with a value pending.
                let hub: Hub<u8, u8> = Hub::new();
                let tx = hub.sender();
                let mut rx = hub.receiver();
                tx.send(1, 1).unwrap();
                rx.close();
                assert_eq!(rx.peek().err(), Some(TryRecvError::Closed));
            }

            #[test]
            fn rule6_zero_or_past_deadline_returns_ready_value() {
                let hub: Hub<u32, u32> = Hub::new();
                let tx = hub.sender();
                let mut rx = hub.receiver();
                tx.send(1, 1).unwrap();
                tx.send(2, 2).unwrap();
                assert_eq!(rx.recv_timeout(Duration::ZERO).unwrap().key, 1);
                assert_eq!(rx.recv_deadline(past()).unwrap().key, 2);
                // Nothing ready: the timeout forms time out (not terminal).
                assert_eq!(rx.recv_timeout(Duration::ZERO).err(), Some(RecvTimeoutError::Timeout));
                assert_eq!(rx.recv_deadline(past()).err(), Some(RecvTimeoutError::Timeout));
                assert_eq!(
                    rx.recv_timeout(Duration::from_millis(2)).err(),
                    Some(RecvTimeoutError::Timeout)
                );
                tx.send(3, 3).unwrap();
                assert_eq!(rx.recv_timeout(Duration::MAX).unwrap().key, 3);
            }

            #[test]
            fn rule6_closed_beats_timeout() {
                let hub: Hub<u32, u32> = Hub::new();
                let tx = hub.sender();
                let mut closed = hub.receiver();
                let mut drained = hub.receiver();
                tx.send(1, 1).unwrap();
                closed.close();
                assert_eq!(closed.recv_timeout(Duration::ZERO).err(), Some(RecvTimeoutError::Closed));
                assert_eq!(closed.recv_deadline(past()).err(), Some(RecvTimeoutError::Closed));
                assert_eq!(
                    closed.recv_timeout(Duration::from_millis(2)).err(),
                    Some(RecvTimeoutError::Closed)
                );
                tx.close();
                assert_eq!(drained.recv_timeout(Duration::ZERO).unwrap().key, 1);
                assert_eq!(drained.recv_timeout(Duration::ZERO).err(), Some(RecvTimeoutError::Closed));
                assert_eq!(drained.recv_deadline(past()).err(), Some(RecvTimeoutError::Closed));
                let hub: Hub<u32, u32> = Hub::new();
                let tx = hub.sender();
                let mut torn = hub.receiver();
                tx.send(1, 1).unwrap();
                hub.close();
                assert_eq!(torn.recv_timeout(Duration::ZERO).err(), Some(RecvTimeoutError::Closed));
                assert_eq!(torn.recv().err(), Some(RecvError));
            }

            #[test]
            fn rule6_dropped_recv_async_future_consumes_nothing() {
                let hub: Hub<u32, u32> = Hub::new();
                let tx = hub.sender();
                let mut rx = hub.receiver();
                let mut cx = Context::from_waker(futures::task::noop_waker_ref());
                {
                    let mut fut = Box::pin(rx.recv_async());
                    assert!(fut.as_mut().poll(&mut cx).is_pending());
                    tx.send(1, 10).unwrap();
                    drop(fut);
                }
                assert_eq!(rx.len(), 1);
                {
                    // Created while a value is ready, dropped unpolled.
                    let fut = rx.recv_async();
                    drop(fut);
                }
                let e = rx.peek().unwrap();
                assert_eq!((e.key, e.value, e.sends), (1, 10, 1));
                // A poll that completes is what takes it.
                let mut fut = Box::pin(rx.recv_async());
                match fut.as_mut().poll(&mut cx) {
                    Poll::Ready(Ok(e)) => assert_eq!((e.key, e.value), (1, 10)),
                    other => panic!("expected the ready value, got {:?}", other.map(|r| r.map(|e| e.key))),
                }
                drop(fut);
                assert_eq!(rx.try_recv().err(), Some(TryRecvError::Empty));
            }

            #[test]
            fn rule6_try_iter_ends_at_empty_or_closed() {
                let hub: Hub<u32, u32> = Hub::new();
                let tx = hub.sender();
                let mut rx = hub.receiver();
                assert_eq!(rx.try_iter().count(), 0);
                for k in 0..3 {
                    tx.send(k, k).unwrap();
                }
                assert_eq!(rx.try_iter().map(|e| e.key).collect::<Vec<_>>(), vec![0, 1, 2]);
                // Ended at Empty, not terminal.
                tx.send(7, 7).unwrap();
                assert_eq!(rx.try_iter().map(|e| e.key).collect::<Vec<_>>(), vec![7]);
                tx.send(8, 8).unwrap();
                tx.close();
                assert_eq!(rx.try_iter().map(|e| e.key).collect::<Vec<_>>(), vec![8]);
                assert_eq!(rx.try_recv().err(), Some(TryRecvError::Closed));
            }

            // ---------------------------------------------------------------
            // rule 7: close kinds

            #[test]
            fn rule7_sender_close_is_graceful() {
                let hub: Hub<u32, u32> = Hub::new();
                let tx = hub.sender();
                let tx2 = tx.clone();
                let mut a = hub.receiver();
                let mut b = hub.receiver_builder().key(2).build();
                for k in [1, 2, 3, 2] {
                    tx.send(k, k).unwrap();
                }
                assert!(!tx.is_closed());
                tx.close();
                assert!(tx.is_closed() && tx2.is_closed());
                assert_eq!(tx2.send(4, 4).unwrap_err().into_inner(), (4, 4));
                assert!(!a.is_closed(), "pending values still to deliver");
                assert_eq!(a.len(), 3);
                assert_eq!(a.recv().unwrap().key, 1);
                assert_eq!(a.iter().map(|e| e.key).collect::<Vec<_>>(), vec![2, 3]);
                assert_fully_closed(&mut a);
                assert_eq!(drain(&mut b), vec![(2, 2, 2)]);
                assert_fully_closed(&mut b);
            }

            #[test]
            fn rule7_dropping_every_sender_and_hub_closes_gracefully() {
                let hub: Hub<u32, u32> = Hub::new();
                let hub2 = hub.clone();
                let tx = hub.sender();
                let tx2 = tx.clone();
                let mut rx = hub.receiver();
                tx.send(1, 1).unwrap();
                drop(hub);
                drop(tx);
                // Handles remain: still open.
                tx2.send(2, 2).unwrap();
                assert!(!rx.is_closed());
                drop(tx2);
                assert!(!rx.is_closed());
                assert_eq!(rx.try_recv().unwrap().key, 1);
                let tx3 = hub2.sender();
                tx3.send(3, 3).unwrap();
                drop(tx3);
                drop(hub2);
                // Only the receiver is left: the send side is closed, drain then Closed.
                assert!(!rx.is_closed());
                assert_eq!(keys_of(&mut rx), vec![2, 3]);
                assert_fully_closed(&mut rx);
            }

            #[test]
            fn rule7_dropping_send_handles_wakes_a_parked_receiver() {
                for _ in 0..100 {
                    let hub: Hub<u32, u32> = Hub::new();
                    let tx = hub.sender();
                    let mut rx = hub.receiver();
                    thread::scope(|s| {
                        let waiter = s.spawn(move || rx.recv());
                        jitter(2_000);
                        drop(tx);
                        drop(hub);
                        assert_eq!(waiter.join().unwrap().err(), Some(RecvError));
                    });
                }
            }

            #[test]
            fn rule7_receiver_close_drops_pending_and_deregisters() {
                let token = Arc::new(());
                let hub: Hub<u32, Arc<()>> = Hub::new();
                let tx = hub.sender();
                let mut closing = hub.receiver();
                let mut other = hub.receiver();
                for k in 0..4 {
                    tx.send(k, token.clone()).unwrap();
                }
                assert_eq!(Arc::strong_count(&token), 1 + 2 * 4);
                closing.close();
                assert_eq!(Arc::strong_count(&token), 1 + 4, "pending values not dropped");
                assert_fully_closed(&mut closing);
                closing.close(); // idempotent
                // Deregistered: new sends do not visit it.
                for k in 4..8 {
                    tx.send(k, token.clone()).unwrap();
                }
                assert_eq!(Arc::strong_count(&token), 1 + 8);
                // Nobody else is affected.
                assert!(!tx.is_closed());
                assert_eq!(keys_of(&mut other), (0..8).collect::<Vec<_>>());
                drop(other);
                tx.send(9, token.clone()).unwrap();
                assert_eq!(Arc::strong_count(&token), 1);
            }

            #[test]
            fn rule7_receiver_drop_is_close() {
                let token = Arc::new(());
                let hub: Hub<u32, Arc<()>> = Hub::new();
                let tx = hub.sender();
                let rx = hub.receiver();
                let mut other = hub.receiver();
                tx.send(1, token.clone()).unwrap();
                drop(rx);
                assert_eq!(Arc::strong_count(&token), 2);
                tx.send(2, token.clone()).unwrap();
                assert_eq!(Arc::strong_count(&token), 3);
                assert_eq!(keys_of(&mut other), vec![1, 2]);
                assert!(!tx.is_closed());
            }

            #[test]
            fn rule7_hub_close_is_hard_and_later_receivers_are_born_closed() {
                let token = Arc::new(());
                let hub: Hub<u32, Arc<()>> = Hub::new();
                let tx = hub.sender();
                let mut a = hub.receiver();
                let mut b = hub.receiver_builder().key(1).build();
                for k in 0..3 {
                    tx.send(k, token.clone()).unwrap();
                }
                assert!(!hub.is_closed());
                hub.close();
                assert!(hub.is_closed());
                assert!(tx.is_closed());
                assert_eq!(Arc::strong_count(&token), 1, "nothing drains after Hub::close");
                assert_fully_closed(&mut a);
                assert_fully_closed(&mut b);
                let (k, v) = tx.send(7, token.clone()).unwrap_err().into_inner();
                assert_eq!(k, 7);
                drop(v);
                let mut born = hub.receiver();
                let mut born_keyed = hub.receiver_builder().key(3).merge(|_, n| Some(n)).build();
                assert!(tx.send(3, token.clone()).is_err());
                assert_fully_closed(&mut born);
                assert_fully_closed(&mut born_keyed);
                assert_eq!(Arc::strong_count(&token), 1);
            }

            #[test]
            fn rule7_close_kinds_are_idempotent_in_any_order() {
                // Sender::close twice, then Hub::close: still hard, drops what was pending.
                let token = Arc::new(());
                let hub: Hub<u32, Arc<()>> = Hub::new();
                let tx = hub.sender();
                let mut rx = hub.receiver();
                tx.send(1, token.clone()).unwrap();
                tx.close();
                tx.close();
                assert!(!rx.is_closed());
                assert_eq!(Arc::strong_count(&token), 2);
                hub.close();
                hub.close();
                assert_eq!(Arc::strong_count(&token), 1);
                assert_fully_closed(&mut rx);
                rx.close();
                rx.close();
                tx.close();
                assert_fully_closed(&mut rx);

                // Hub::close first, then Sender::close and Receiver::close are no-ops.
                let hub: Hub<u32, u32> = Hub::new();
                let tx = hub.sender();
                let mut rx = hub.receiver();
                tx.send(1, 1).unwrap();
                hub.close();
                tx.close();
                rx.close();
                hub.close();
                assert!(tx.is_closed() && hub.is_closed());
                assert_fully_closed(&mut rx);
            }

            #[test]
            fn rule7_graceful_drain_reaches_a_terminal_closed() {
                let hub: Hub<u32, u32> = Hub::new();
                let tx = hub.sender();
                let mut rx = hub.receiver();
                tx.send(1, 1).unwrap();
                tx.close();
                // Made after the send side closed: nothing can ever arrive.
                let mut late = hub.receiver();
                assert_fully_closed(&mut late);
                assert!(!rx.is_closed());
                assert_eq!(rx.recv().unwrap().key, 1);
                assert!(rx.is_closed());
                // Terminal and stable, from every form, repeatedly (the receiver
                // deregistered itself on reaching Closed).
                assert_fully_closed(&mut rx);
                assert_fully_closed(&mut rx);
                // A hard close afterwards changes nothing.
                hub.close();
                assert_fully_closed(&mut rx);
            }

            #[test]
            fn rule7_iter_and_stream_end_at_closed() {
                let hub: Hub<u32, u32> = Hub::new();
                let tx = hub.sender();
                let mut it = hub.receiver();
                let mut st = hub.receiver();
                for k in [1, 2, 1, 3] {
                    tx.send(k, k).unwrap();
                }
                tx.close();
                assert_eq!(it.iter().map(|e| e.key).collect::<Vec<_>>(), vec![1, 2, 3]);
                assert_eq!(it.iter().count(), 0);
                let got: Vec<u32> =
                    futures::executor::block_on((&mut st).map(|e| e.key).collect::<Vec<_>>());
                assert_eq!(got, vec![1, 2, 3]);
                assert!(futures::executor::block_on(st.next()).is_none());

                // Across threads: a consumer iterating until Closed gets everything.
                let hub: Hub<u32, u32> = Hub::new();
                let tx = hub.sender();
                let mut rx = hub.receiver();
                let mut srx = hub.receiver();
                thread::scope(|s| {
                    let it = s.spawn(move || rx.iter().map(|e| e.sends).sum::<u64>());
                    let st = s.spawn(move || {
                        futures::executor::block_on(srx.by_ref().map(|e| e.sends).fold(0, |a, b| async move { a + b }))
                    });
                    for k in 0..2_000 {
                        tx.send(k % 8, k).unwrap();
                    }
                    drop(tx);
                    drop(hub);
                    assert_eq!(it.join().unwrap(), 2_000);
                    assert_eq!(st.join().unwrap(), 2_000);
                });
            }

            // ---------------------------------------------------------------
            // wake-ups: blocking and async receives parked on another thread
            //
            // These catch a wake-up that is never sent (and fail, through the
            // watchdog below, instead of hanging). A wake-up lost in a window a
            // few instructions wide (a receiver that registers its listener after
            // its last look) mostly survives real threads; loom
            // `park_vs_wake_send` and shuttle `recv_woken_by_data_without_close`
            // carry that guarantee (docs/verification.md, "Mutation audit").

            /// Runs `body` on a thread of its own and fails the test if it makes
            /// no progress for `STALL`: `body` calls `beat(round)` once per round,
            /// from the thread that would block behind a receiver that was never
            /// woken. A lost wake-up then fails, naming the last round that
            /// finished, instead of hanging the test binary (libtest's "has been
            /// running for over 60 seconds" never ends). `STALL` is a watchdog,
            /// not a timing assertion: a healthy round takes microseconds, even
            /// under ThreadSanitizer.
            fn with_stall_watchdog(
                what: &'static str,
                body: impl FnOnce(&(dyn Fn(u32) + Sync)) + Send + 'static,
            ) {
                const STALL: Duration = Duration::from_secs(30);
                let (beat_tx, beat_rx) = mpsc::channel::<u32>();
                let worker = thread::spawn(move || {
                    body(&move |round| {
                        let _ = beat_tx.send(round);
                    });
                });
                let mut last = None;
                loop {
                    match beat_rx.recv_timeout(STALL) {
                        Ok(round) => last = Some(round),
                        Err(mpsc::RecvTimeoutError::Disconnected) => break,
                        Err(mpsc::RecvTimeoutError::Timeout) => panic!(
                            "{what}: no progress for {STALL:?} (last round started: {last:?}): \
                             a receiver is parked and was never woken (lost wake-up)"
                        ),
                    }
                }
                if let Err(panic) = worker.join() {
                    std::panic::resume_unwind(panic);
                }
            }

            #[test]
            fn wake_blocking_recv_woken_by_send_from_another_thread() {
                with_stall_watchdog("wake_blocking_recv_woken_by_send_from_another_thread", move |beat| {
                    const ROUNDS: u32 = 2_000;
                    let hub: Hub<u32, u32> = Hub::new();
                    let tx = hub.sender();
                    let mut rx = hub.receiver();
                    let (ready_tx, ready_rx) = mpsc::channel::<()>();
                    thread::scope(|s| {
                        s.spawn(move || {
                            for round in 0..ROUNDS {
                                ready_tx.send(()).unwrap();
                                // Parks on an empty queue unless the send already landed.
                                let e = rx.recv().unwrap();
                                assert_eq!((e.key, e.sends), (round, 1));
                            }
                            assert_eq!(rx.recv().err(), Some(RecvError));
                        });
                        for round in 0..ROUNDS {
                            ready_rx.recv().unwrap();
                            beat(round);
                            if round % 16 == 0 {
                                // Long enough for the receiver's backoff (a few
                                // microseconds) to run out, so it parks and only
                                // the send's wake-up can end its wait. Not
                                // synchronization: any delay is correct.
                                thread::sleep(Duration::from_millis(1));
                            } else {
                                jitter(500);
                            }
                            tx.send(round, round).unwrap();
                        }
                        tx.close();
                    });
                });
            }

            #[test]
            fn wake_recv_async_on_block_on_woken_by_send_from_another_thread() {
                with_stall_watchdog("wake_recv_async_on_block_on_woken_by_send_from_another_thread", move |beat| {
                    const ROUNDS: u32 = 1_000;
                    let hub: Hub<u32, u32> = Hub::new();
                    let tx = hub.sender();
                    let mut rx = hub.receiver();
                    let (ready_tx, ready_rx) = mpsc::channel::<()>();
                    thread::scope(|s| {
                        s.spawn(move || {
                            for round in 0..ROUNDS {
                                ready_tx.send(()).unwrap();
                                let e = futures::executor::block_on(rx.recv_async()).unwrap();
                                assert_eq!((e.key, e.sends), (round, 1));
                            }
                            assert_eq!(futures::executor::block_on(rx.recv_async()).err(), Some(RecvError));
                        });
                        for round in 0..ROUNDS {
                            ready_rx.recv().unwrap();
                            beat(round);
                            jitter(500);
                            tx.send(round, round).unwrap();
                        }
                        tx.close();
                    });
                });
            }

            #[test]
            fn wake_parked_receivers_woken_by_every_close_kind() {
                with_stall_watchdog("wake_parked_receivers_woken_by_every_close_kind", move |beat| {
                    for round in 0..300u32 {
                        beat(round);
                        let hub: Hub<u32, u32> = Hub::new();
                        let tx = hub.sender();
                        let mut blocking = hub.receiver();
                        let mut asynchronous = hub.receiver();
                        let mut timed = hub.receiver();
                        thread::scope(|s| {
                            let a = s.spawn(move || blocking.recv());
                            let b = s.spawn(move || futures::executor::block_on(asynchronous.recv_async()));
                            let c = s.spawn(move || timed.recv_timeout(Duration::MAX));
                            jitter(2_000);
                            if round % 2 == 0 {
                                tx.close();
                            } else {
                                hub.close();
                            }
                            assert_eq!(a.join().unwrap().err(), Some(RecvError));
                            assert_eq!(b.join().unwrap().err(), Some(RecvError));
                            assert_eq!(c.join().unwrap().err(), Some(RecvTimeoutError::Closed));
                        });
                    }
                });
            }

            // ---------------------------------------------------------------
            // rule 8: close racing send
            //
            // What these real-thread races can and cannot catch: they check the
            // whole implementation end to end, on the real primitives, over
            // hundreds of rounds with the close landing near a random send. They
            // are NOT what guarantees the close/send/drain protocol: the window
            // in which a send can decide on a stale snapshot of the hub's state
            // word is a few instructions wide, and a planted bug there ("enter
            // the send with fetch_add instead of the CAS") survives them (see
            // docs/verification.md, "Mutation audit"). That guarantee is carried by the
            // models, which explore the interleaving itself: loom
            // `close_vs_send_exactly_one_outcome` and `hub_close_vs_send`, and
            // shuttle `close_races_many_senders` and
            // `hub_close_races_senders_and_consumers`, each of which catches that
            // bug at CI settings.

            /// Every `Ok` send is delivered before `Closed` by every receiver
            /// (one consuming concurrently, one drained afterwards); no `Err`
            /// send is ever delivered; once a send fails, all later ones do.
            #[test]
            fn rule8_race_sender_close_vs_send() {
                with_stall_watchdog("rule8_race_sender_close_vs_send", move |beat| {
                    const ROUNDS: usize = 600;
                    const SENDS: u32 = 200;
                    let (mut mixed, mut both_sides) = (0, 0);
                    for round in 0..ROUNDS {
                        beat(round as u32);
                        let hub: Hub<u32, u32> = Hub::new();
                        let tx = hub.sender();
                        let closer = hub.sender();
                        let mut live = hub.receiver();
                        let mut after = hub.receiver();
                        let progress = AtomicU32::new(0);
                        let target = fastrand::u32(0..SENDS);
                        let start = Barrier::new(2);
                        let (oks, errs, consumed) = thread::scope(|s| {
                            let consumer = s.spawn(move || {
                                let mut got = Vec::new();
                                while let Ok(e) = live.recv() {
                                    assert_eq!(e.sends, 1);
                                    got.push(e.key);
                                }
                                got
                            });
                            let sender = s.spawn(|| {
                                let (mut oks, mut errs) = (Vec::new(), Vec::new());
                                start.wait();
                                for k in 0..SENDS {
                                    progress.store(k, SeqCst);
                                    match tx.send(k, k) {
                                        Ok(()) => {
                                            assert!(errs.is_empty(), "Ok after Err");
                                            oks.push(k);
                                        }
                                        Err(e) => {
                                            assert_eq!(e.into_inner(), (k, k));
                                            errs.push(k);
                                        }
                                    }
                                }
                                (oks, errs)
                            });
                            start.wait();
                            close_near(&progress, target, SENDS);
                            closer.close();
                            let (oks, errs) = sender.join().unwrap();
                            (oks, errs, consumer.join().unwrap())
                        });
                        assert_eq!(oks.len() + errs.len(), SENDS as usize);
                        assert_eq!(consumed, oks, "round {round}: concurrent consumer");
                        let drained: Vec<u32> = after.iter().map(|e| e.key).collect();
                        assert_eq!(drained, oks, "round {round}: drained after close");
                        assert_fully_closed(&mut after);
                        if !oks.is_empty() && !errs.is_empty() {
                            mixed += 1;
                        }
                        both_sides += usize::from(!oks.is_empty()) + usize::from(!errs.is_empty());
                    }
                    // Not an assertion on timing: a sanity note when run with --nocapture.
                    println!("sender close vs send: {mixed}/{ROUNDS} rounds split, {both_sides} sides seen");
                });
            }

            /// `Hub::close` racing `send`: only `Ok`/`Err`, no hang, every
            /// receiver ends `Closed`, what was delivered is a prefix of the
            /// `Ok` sends, and nothing is leaked.
            #[test]
            fn rule8_race_hub_close_vs_send() {
                with_stall_watchdog("rule8_race_hub_close_vs_send", move |beat| {
                    const ROUNDS: usize = 400;
                    const SENDS: u32 = 200;
                    let token = Arc::new(());
                    for round in 0..ROUNDS {
                        beat(round as u32);
                        let hub: Hub<u32, Arc<()>> = Hub::new();
                        let tx = hub.sender();
                        let mut live = hub.receiver();
                        let mut idle = hub.receiver();
                        let progress = AtomicU32::new(0);
                        let target = fastrand::u32(0..SENDS);
                        let start = Barrier::new(2);
                        let (oks, consumed) = thread::scope(|s| {
                            let consumer = s.spawn(move || {
                                let mut got = Vec::new();
                                while let Ok(e) = live.recv() {
                                    got.push(e.key);
                                }
                                assert_fully_closed(&mut live);
                                got
                            });
                            let sender = s.spawn(|| {
                                let mut oks = Vec::new();
                                let mut failed = false;
                                start.wait();
                                for k in 0..SENDS {
                                    progress.store(k, SeqCst);
                                    match tx.send(k, token.clone()) {
                                        Ok(()) => {
                                            assert!(!failed, "Ok after Err");
                                            oks.push(k);
                                        }
                                        Err(e) => {
                                            failed = true;
                                            assert_eq!(e.into_inner().0, k);
                                        }
                                    }
                                }
                                oks
                            });
                            start.wait();
                            close_near(&progress, target, SENDS);
                            hub.close();
                            (sender.join().unwrap(), consumer.join().unwrap())
                        });
                        assert!(
                            consumed.len() <= oks.len() && consumed[..] == oks[..consumed.len()],
                            "round {round}: delivered {consumed:?} is not a prefix of Ok sends {oks:?}"
                        );
                        assert_fully_closed(&mut idle);
                        assert!(hub.is_closed() && tx.is_closed());
                        assert!(tx.send(0, token.clone()).is_err());
                        drop((hub, tx, idle));
                        assert_eq!(Arc::strong_count(&token), 1, "round {round}: a value leaked");
                    }
                });
            }

            // ---------------------------------------------------------------
            // rule 9: panics in user code

            #[test]
            fn rule9_key_filter_panic_changes_nothing_at_that_receiver() {
                let armed = Arc::new(AtomicBool::new(false));
                let a = armed.clone();
                let hub: Hub<u32, u32> = Hub::new();
                let tx = hub.sender();
                let mut before = hub.receiver();
                let mut faulty = hub
                    .receiver_builder()
                    .key_filter(move |k: &u32| {
                        if a.load(SeqCst) && *k == 5 {
                            panic!("key filter refused key 5");
                        }
                        true
                    })
                    .build();
                let mut after = hub.receiver();
                tx.send(5, 1).unwrap();
                tx.send(6, 1).unwrap();
                armed.store(true, SeqCst);
                let panic = catch_unwind(AssertUnwindSafe(|| tx.send(5, 2)));
                let payload = panic.expect_err("the filter's panic must reach send's caller");
                assert_eq!(payload.downcast_ref::<&str>(), Some(&"key filter refused key 5"));
                // Earlier receiver has the send; the panicking one and later ones do not.
                assert_eq!(before.peek().unwrap().value, 2);
                assert_eq!(faulty.peek().unwrap().value, 1);
                assert_eq!(after.peek().unwrap().value, 1);
                assert_eq!((before.len(), faulty.len(), after.len()), (2, 2, 2));
                // The bus stays usable: other keys reach everyone, even now.
                tx.send(7, 1).unwrap();
                armed.store(false, SeqCst);
                tx.send(5, 3).unwrap();
                assert_eq!(drain(&mut before), vec![(5, 3, 3), (6, 1, 1), (7, 1, 1)]);
                assert_eq!(drain(&mut faulty), vec![(5, 3, 2), (6, 1, 1), (7, 1, 1)]);
                assert_eq!(drain(&mut after), vec![(5, 3, 2), (6, 1, 1), (7, 1, 1)]);
                // No poisoned lock, no lost wake-up.
                thread::scope(|s| {
                    let waiter = s.spawn(|| after.recv().unwrap().key);
                    tx.send(8, 8).unwrap();
                    assert_eq!(waiter.join().unwrap(), 8);
                });
                tx.close();
                assert_eq!(keys_of(&mut faulty), vec![8]);
                assert_fully_closed(&mut faulty);
            }

            #[test]
            fn rule9_merge_panic_drops_that_receivers_slot() {
                let hub: Hub<u32, i64> = Hub::new();
                let tx = hub.sender();
                let mut before = hub.receiver();
                let mut faulty = hub
                    .receiver_builder()
                    .merge(|p: i64, n: i64| {
                        if n == 666 {
                            panic!("merge refused 666");
                        }
                        Some(p + n)
                    })
                    .build();
                let mut after = hub.receiver();
                for k in 1..=3 {
                    tx.send(k, k as i64 * 10).unwrap();
                }
                let panic = catch_unwind(AssertUnwindSafe(|| tx.send(2, 666)));
                let payload = panic.expect_err("the merge's panic must reach send's caller");
                assert_eq!(payload.downcast_ref::<&str>(), Some(&"merge refused 666"));
                // Earlier receiver has the send (newer wins).
                assert_eq!(before.len(), 3);
                // The panicking receiver's slot for key 2 is gone, queue entry too.
                assert_eq!(faulty.len(), 2);
                // The later receiver never saw the send.
                assert_eq!(after.len(), 3);
                // Later sends reach every receiver; key 2 starts afresh at `faulty`.
                tx.send(2, 5).unwrap();
                tx.send(4, 40).unwrap();
                assert_eq!(drain(&mut before), vec![(1, 10, 1), (2, 5, 3), (3, 30, 1), (4, 40, 1)]);
                assert_eq!(drain(&mut faulty), vec![(1, 10, 1), (3, 30, 1), (2, 5, 1), (4, 40, 1)]);
                assert_eq!(drain(&mut after), vec![(1, 10, 1), (2, 5, 2), (3, 30, 1), (4, 40, 1)]);
                // A merge panic on the only pending key leaves an empty, working queue.
                tx.send(9, 1).unwrap();
                assert!(catch_unwind(AssertUnwindSafe(|| tx.send(9, 666))).is_err());
                assert_eq!(faulty.len(), 0);
                assert_eq!(faulty.try_recv().err(), Some(TryRecvError::Empty));
                thread::scope(|s| {
                    let waiter = s.spawn(|| faulty.recv().unwrap().key);
                    tx.send(10, 1).unwrap();
                    assert_eq!(waiter.join().unwrap(), 10);
                });
                tx.close();
                assert_eq!(keys_of(&mut before), vec![9, 10]);
                assert_fully_closed(&mut before);
                assert_fully_closed(&mut faulty);
            }

            /// A merge that panics on one thread while other threads keep
            /// sending, with every receiver consumed concurrently. Values carry
            /// `(weight, sends)` and merges sum both, so each receiver can
            /// account for every send: the first receiver in fan-out order gets
            /// all of them, the last misses exactly the panicking ones, and the
            /// panicking receiver loses exactly the slot its merge was given
            /// (recorded by the merge) plus the panicking send.
            #[test]
            fn rule9_race_panicking_merge_while_other_sends_continue() {
                const POISON: u64 = 1 << 32;
                const SENDERS: u64 = 2;
                const PER: u64 = 3_000;
                struct Refused;
                type W = (u64, u64);
                let sum = |p: W, n: W| Some((p.0 + n.0, p.1 + n.1));
                let lost_sends = Arc::new(AtomicU64::new(0));
                let lost_weight = Arc::new(AtomicU64::new(0));
                let hub: Hub<u32, W> = Hub::new();
                let tx = hub.sender();
                let mut first = hub.receiver_builder().merge(sum).build();
                let (ls, lw) = (lost_sends.clone(), lost_weight.clone());
                let mut faulty = hub
                    .receiver_builder()
                    .merge(move |p: W, n: W| {
                        if n.0 == POISON {
                            ls.fetch_add(p.1, SeqCst);
                            lw.fetch_add(p.0, SeqCst);
                            // A panic that skips the panic hook: same unwinding,
                            // no stderr noise per round.
                            std::panic::resume_unwind(Box::new(Refused));
                        }
                        sum(p, n)
                    })
                    .build();
                let mut last = hub.receiver_builder().merge(sum).build();

                fn consume(rx: &mut Receiver<u32, W>) -> W {
                    let mut total = (0, 0);
                    while let Ok(e) = rx.recv() {
                        assert_eq!(e.sends, e.value.1, "sends disagrees with the merged count");
                        total = (total.0 + e.value.0, total.1 + e.value.1);
                    }
                    total
                }

                let (attempts, panics, got) = thread::scope(|s| {
                    let consumers: Vec<_> = [&mut first, &mut faulty, &mut last]
                        .into_iter()
                        .map(|rx| s.spawn(move || consume(rx)))
                        .collect();
                    let senders: Vec<_> = (0..SENDERS)
                        .map(|_| {
                            s.spawn(|| {
                                for i in 0..PER {
                                    tx.send((i % 3) as u32, (1, 1)).unwrap();
                                }
                            })
                        })
                        .collect();
                    let poisoner = s.spawn(|| {
                        let (mut attempts, mut panics) = (0u64, 0u64);
                        while panics < 40 && attempts < 100_000 {
                            attempts += 1;
                            match catch_unwind(AssertUnwindSafe(|| tx.send(0, (POISON, 1)))) {
                                Ok(sent) => sent.unwrap(),
                                Err(payload) => {
                                    assert!(payload.is::<Refused>(), "a foreign panic escaped send");
                                    panics += 1;
                                }
                            }
                        }
                        (attempts, panics)
                    });
                    for h in senders {
                        h.join().unwrap();
                    }
                    let (attempts, panics) = poisoner.join().unwrap();
                    tx.close();
                    let got: Vec<W> = consumers.into_iter().map(|h| h.join().unwrap()).collect();
                    (attempts, panics, got)
                });
                assert!(panics > 0, "the poisoned merge never ran");
                let sends = SENDERS * PER + attempts;
                let weight = SENDERS * PER + attempts * POISON;
                assert_eq!(got[0], (weight, sends), "first receiver must have every send");
                assert_eq!(
                    got[2],
                    (weight - panics * POISON, sends - panics),
                    "last receiver must miss exactly the panicking sends"
                );
                assert_eq!(
                    (
                        got[1].0 + lost_weight.load(SeqCst) + panics * POISON,
                        got[1].1 + lost_sends.load(SeqCst) + panics
                    ),
                    (weight, sends),
                    "panicking receiver must lose exactly its dropped slots"
                );
                // The bus still works after all that, for every receiver.
                for rx in [&mut first, &mut faulty, &mut last] {
                    assert_fully_closed(rx);
                }
            }
            // ---------------------------------------------------------------
            // rules 11-14: the state table, snapshot receivers, accounting and
            // bounded receivers

            /// `received == folded + annihilated + overflowed + dropped +
            /// pending_sends`, asserted with the fields named.
            fn assert_conserved(s: &imp::ReceiverStats) {
                assert_eq!(
                    s.received,
                    s.folded + s.annihilated + s.overflowed + s.dropped + s.pending_sends,
                    "conservation law broken: {s:?}"
                );
            }

            fn summing_table() -> Hub<u32, i64> {
                Hub::builder().merge(sum_merge).retain_latest().build()
            }

            #[test]
            fn rule11_table_keeps_the_hub_merge_of_every_send_in_first_touch_order() {
                let hub: Hub<u32, i64> = Hub::builder()
                    .merge(|p: i64, n: i64| Some(p + n).filter(|s| *s != 0))
                    .retain_latest()
                    .build();
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

            #[test]
            fn rule11_default_merge_is_newer_wins_in_the_table() {
                let hub: Hub<&str, u32> = Hub::builder().retain_latest().build();
                let tx = hub.sender();
                tx.send("a", 1).unwrap();
                tx.send("a", 2).unwrap();
                assert_eq!(hub.latest(&"a"), Some(2));
                assert_eq!(hub.snapshot(), vec![("a", 2)]);
            }

            #[test]
            fn rule11_without_retain_latest_the_hub_keeps_nothing() {
                for hub in [Hub::new(), Hub::with_merge(sum_merge), Hub::builder().build()] {
                    let tx = hub.sender();
                    let _rx = hub.receiver();
                    tx.send(1u32, 1i64).unwrap();
                    assert_eq!(hub.latest(&1), None);
                    assert!(hub.snapshot().is_empty());
                }
            }

            #[test]
            fn rule11_snapshot_is_one_instant_a_prefix_of_one_senders_keys() {
                // One sender of keys 0, 1, 2, ...: a snapshot taken at one
                // instant holds exactly the keys 0..n for some n, in order.
                const N: u32 = 10_000;
                let hub: Hub<u32, u32> = Hub::builder().retain_latest().build();
                let tx = hub.sender();
                let done = AtomicBool::new(false);
                let snapshots = thread::scope(|s| {
                    s.spawn(|| {
                        for k in 0..N {
                            tx.send(k, k).unwrap();
                        }
                        done.store(true, SeqCst);
                    });
                    let mut taken = 0u32;
                    let mut last = 0usize;
                    while !done.load(SeqCst) || taken == 0 {
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

            #[test]
            fn rule12_snapshot_receiver_is_born_with_the_table_pending() {
                let hub = summing_table();
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
                assert_eq!(drain(&mut all), vec![(4, 2, 0), (2, 15, 1), (7, 3, 0), (9, 1, 1)]);
                assert_eq!(drain(&mut even), vec![(4, 2, 0), (2, 5, 1)]);
                // The first two in table order; the rest were not sends.
                assert_eq!(drain(&mut two), vec![(4, 2, 0), (2, 15, 1)]);
                assert_eq!(drain(&mut plain), vec![(2, 5, 1), (9, 1, 1)]);
                let s = two.stats();
                assert_eq!((s.received, s.overflowed, s.folded, s.delivered), (2, 1, 1, 2));
                assert_conserved(&s);
                let s = all.stats();
                assert_eq!((s.received, s.folded, s.delivered), (2, 2, 4));
                assert_conserved(&s);
            }

            #[test]
            fn rule12_snapshot_entries_annihilate_and_drop_like_any_pending_value() {
                let hub: Hub<u32, i64> = Hub::builder()
                    .merge(|p: i64, n: i64| Some(p + n).filter(|s| *s != 0))
                    .retain_latest()
                    .build();
                let tx = hub.sender();
                tx.send(1, 5).unwrap();
                tx.send(2, 1).unwrap();
                let rx = hub.receiver_builder().snapshot().build();
                tx.send(1, -5).unwrap(); // annihilates the snapshot entry
                assert_eq!(rx.len(), 1);
                let s = rx.stats();
                assert_eq!((s.received, s.annihilated, s.pending, s.pending_sends), (1, 1, 1, 0));
                rx.close(); // drops the other snapshot entry: no send to count
                let s = rx.stats();
                assert_eq!((s.dropped, s.pending, s.pending_sends), (0, 0, 0));
                assert_conserved(&s);
            }

            #[test]
            fn rule12_snapshot_receiver_of_a_closed_hub_is_born_closed() {
                let hub = summing_table();
                hub.sender().send(1, 1).unwrap();
                hub.close();
                let mut rx = hub.receiver_builder().snapshot().build();
                assert_fully_closed(&mut rx);
                assert_eq!(rx.stats().pending, 0);
            }

            #[test]
            fn rule12_snapshot_registration_is_one_instant_against_concurrent_sends() {
                // Summing merge everywhere: a send missing between the snapshot
                // and the live stream makes a key's total too small, one counted
                // twice makes it too big.
                const SENDERS: usize = 3;
                const PER: u64 = 5_000;
                const KEYS: u32 = 16;
                let hub = summing_table();
                let stop = AtomicBool::new(false);
                let receivers = thread::scope(|s| {
                    let senders: Vec<_> = (0..SENDERS)
                        .map(|t| {
                            let tx = hub.sender();
                            s.spawn(move || {
                                for i in 0..PER {
                                    tx.send(((i as u32).wrapping_mul(7) + t as u32) % KEYS, 1)
                                        .unwrap();
                                }
                            })
                        })
                        .collect();
                    let registrar = s.spawn(|| {
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
                        assert_eq!(Some(&e.value), table.get(&e.key), "key {} missing or doubled", e.key);
                        sends_after += e.sends;
                    }
                    assert_eq!(got.len(), table.len(), "a key of the table is missing");
                    let s = rx.stats();
                    assert_eq!(s.received, sends_after);
                    assert_conserved(&s);
                }
            }

            #[test]
            fn rule13_every_field_counts_what_it_names() {
                let hub: Hub<u32, i64> = Hub::with_merge(|p: i64, n: i64| Some(p + n).filter(|s| *s != 0));
                let tx = hub.sender();
                assert_eq!(hub.stats().sent, 0);
                tx.send(0, 1).unwrap(); // no receiver: sent all the same
                let mut rx = hub.receiver_builder().key_filter(|k: &u32| *k < 10).max_pending(3).build();
                tx.send(1, 1).unwrap();
                tx.send(1, 1).unwrap(); // folded
                tx.send(2, 4).unwrap();
                tx.send(2, -4).unwrap(); // annihilates 2 (2 sends)
                tx.send(3, 1).unwrap();
                tx.send(4, 1).unwrap();
                tx.send(5, 1).unwrap(); // overflows: 1, 3, 4 pending
                tx.send(50, 1).unwrap(); // filtered
                tx.send(4, 1).unwrap(); // still merges
                let s = rx.stats();
                assert_eq!(
                    (s.received, s.filtered, s.annihilated, s.overflowed, s.pending, s.pending_sends),
                    (8, 1, 2, 1, 3, 5)
                );
                assert_conserved(&s);
                let e = rx.try_recv().unwrap();
                assert_eq!((e.key, e.sends), (1, 2));
                let s = rx.stats();
                assert_eq!((s.delivered, s.folded, s.pending, s.pending_sends), (1, 2, 2, 3));
                assert_conserved(&s);
                let batch = rx.try_recv_all().unwrap();
                assert_eq!(batch.len(), 2);
                let s = rx.stats();
                assert_eq!((s.delivered, s.folded, s.pending, s.pending_sends), (3, 5, 0, 0));
                assert_conserved(&s);
                tx.send(6, 1).unwrap();
                tx.send(6, 1).unwrap();
                rx.close(); // drops the pending 6 (2 sends)
                let s = rx.stats();
                assert_eq!((s.dropped, s.pending, s.pending_sends, s.received), (2, 0, 0, 10));
                assert_conserved(&s);
                tx.close();
                assert!(tx.send(1, 1).is_err());
                assert!(tx.send(1, 1).is_err());
                let h = hub.stats();
                assert_eq!((h.sent, h.refused, h.receivers), (12, 2, 0));
            }

            #[test]
            fn rule13_hard_close_and_panicking_merge_count_as_dropped() {
                #[derive(Debug)]
                struct Boom;
                let hub: Hub<u32, i64> = Hub::new();
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
                let mut other = hub.receiver();
                tx.send(1, 1).unwrap();
                tx.send(1, 1).unwrap();
                tx.send(2, 1).unwrap();
                let r = catch_unwind(AssertUnwindSafe(|| tx.send(1, 99)));
                assert!(r.is_err());
                let s = faulty.stats();
                assert_eq!((s.received, s.dropped, s.pending, s.pending_sends), (4, 3, 1, 1));
                assert_conserved(&s);
                hub.close();
                for rx in [&mut faulty, &mut other] {
                    let s = rx.stats();
                    assert_eq!((s.pending, s.pending_sends), (0, 0));
                    assert_conserved(&s);
                    assert_fully_closed(rx);
                }
                assert_eq!(other.stats().dropped, 3, "other had 1 (twice) and 2 pending");
                assert_eq!(hub.stats().receivers, 0);
            }

            #[test]
            fn rule13_conservation_holds_after_senders_of_several_threads_join() {
                const SENDERS: u64 = 3;
                // Under ThreadSanitizer (`.ci/tsan` sets KEYBUS_TSAN) every
                // atomic is instrumented and the spinning consumers slow the
                // senders to a crawl: a smaller run exercises the same races.
                let per: u64 = if std::env::var_os("KEYBUS_TSAN").is_some() { 300 } else { 5_000 };
                let hub: Hub<u32, i64> = Hub::builder()
                    .merge(|p: i64, n: i64| Some(p + n).filter(|s| *s % 5 != 0))
                    .retain_latest()
                    .build();
                let tx = hub.sender();
                let rxs: Vec<Receiver<u32, i64>> = vec![
                    hub.receiver(),
                    hub.receiver_builder().key_filter(|k: &u32| k % 3 != 0).build(),
                    hub.receiver_builder().max_pending(4).build(),
                    hub.receiver_builder().merge(|_, n| Some(n)).max_pending(2).build(),
                ];
                let torn = AtomicBool::new(false);
                let finished = AtomicUsize::new(0);
                let results: Vec<Receiver<u32, i64>> = thread::scope(|s| {
                    let consumers: Vec<_> = rxs
                        .into_iter()
                        .enumerate()
                        .map(|(i, mut rx)| {
                            let (torn, finished) = (&torn, &finished);
                            s.spawn(move || {
                                let mut turn = 0u64;
                                loop {
                                    let s = rx.stats();
                                    if s.received < s.folded + s.annihilated + s.overflowed + s.dropped {
                                        torn.store(true, SeqCst);
                                    }
                                    let gone = match (i + turn as usize) % 3 {
                                        0 => rx.try_recv().err() == Some(TryRecvError::Closed),
                                        1 => rx.try_recv_all().err() == Some(TryRecvError::Closed),
                                        _ => rx.recv_timeout(Duration::from_micros(50)).err() == Some(RecvTimeoutError::Closed),
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
                            s.spawn(move || {
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
                    let s = rx.stats();
                    assert_conserved(&s);
                    assert_eq!(s.received + s.filtered, total, "{s:?}");
                    assert_eq!((s.pending, s.pending_sends, s.dropped), (0, 0, 0));
                }
                assert_eq!(results[0].stats().filtered, 0);
                assert!(results[2].stats().overflowed > 0 || results[3].stats().overflowed > 0);
            }

            #[test]
            fn rule14_max_pending_refuses_new_keys_only_and_renumbers_nothing() {
                let hub: Hub<u32, u32> = Hub::new();
                let tx = hub.sender();
                let mut rx = hub.receiver_builder().max_pending(2).build();
                let mut free = hub.receiver();
                for k in [5, 3, 8, 5, 9, 3] {
                    tx.send(k, k * 10).unwrap();
                }
                assert_eq!(rx.len(), 2);
                assert_eq!(drain(&mut rx), vec![(5, 50, 2), (3, 30, 2)]);
                assert_eq!(keys_of(&mut free), vec![5, 3, 8, 9], "other receivers unaffected");
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
                let s = rx.stats();
                assert_eq!((s.overflowed, s.received), (4, 13));
                assert_conserved(&s);
            }

            #[test]
            fn rule14_max_pending_holds_under_concurrent_sends() {
                const MAX: usize = 5;
                const SENDERS: u64 = 3;
                let per: u64 = if std::env::var_os("KEYBUS_TSAN").is_some() { 500 } else { 8_000 };
                let hub: Hub<u32, u64> = Hub::new();
                let tx = hub.sender();
                let mut rx = hub.receiver_builder().max_pending(MAX).build();
                let (most, rx) = thread::scope(|s| {
                    let consumer = s.spawn(move || {
                        let mut most = 0;
                        loop {
                            most = most.max(rx.len());
                            match fastrand::u8(0..3) {
                                0 => match rx.try_recv_all() {
                                    Ok(batch) => most = most.max(batch.len()),
                                    Err(TryRecvError::Closed) => break,
                                    Err(TryRecvError::Empty) => {}
                                },
                                _ => match rx.try_recv() {
                                    Err(TryRecvError::Closed) => break,
                                    _ => {}
                                },
                            }
                        }
                        (most, rx)
                    });
                    let senders: Vec<_> = (0..SENDERS)
                        .map(|_| {
                            let tx = tx.clone();
                            s.spawn(move || {
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
                let s = rx.stats();
                assert_conserved(&s);
                assert_eq!(s.received, SENDERS * per);
                assert!(s.overflowed > 0, "the bound was never reached");
            }
        }
    };
}

conflate_conformance!(baseline, keybus::baseline::conflate);
conflate_conformance!(lockfree, keybus::conflate);
