//! Randomized schedules of `keybus::conflate` with shuttle: the loom scenarios with
//! more threads and more operations than exhaustive checking can afford.
//!
//! Run: `RUSTFLAGS="--cfg shuttle" CARGO_TARGET_DIR=target/shuttle cargo test
//! --release -p keybus-loom-tests --test shuttle_conflate`
//! (`KEYBUS_SHUTTLE_ITERS` sets schedules per scenario; default 10,000). Under
//! `--cfg shuttle` the crate's `sync.rs` routes every atomic, mutex and park through
//! shuttle, so the scheduler controls every interleaving point.
//!
//! Each scenario runs `KEYBUS_SHUTTLE_ITERS` schedules of shuttle's PCT scheduler
//! (depth 3: it forces up to two preemptions at chosen points, which is what a
//! bug needing one badly placed preemption takes; a planted "send merges into a
//! value the cut owns" survived 100,000 uniformly random schedules and falls to
//! PCT at once), then a fifth as many uniformly random ones, which spread
//! differently across long runs.
//!
//! A lost wake-up shows only where nothing else wakes the receiver: a close wakes
//! every receiver, so `recv_woken_by_data_without_close` ends without one, and a
//! missing data wake-up leaves every thread blocked, which shuttle reports as a
//! deadlock.
#![cfg(shuttle)]

use keybus::conflate::{Hub, Receiver};
use keybus::TryRecvError;
use shuttle::thread;
use std::collections::{BTreeMap, BTreeSet};
use std::panic::{self, AssertUnwindSafe};

use keybus_loom_tests::shuttle_iterations as iterations;

/// PCT depth: the number of priority change points is `depth - 1`.
const PCT_DEPTH: usize = 3;

fn check(f: impl Fn() + Send + Sync + 'static) {
    let f = std::sync::Arc::new(f);
    let pct = f.clone();
    shuttle::check_pct(move || pct(), iterations(), PCT_DEPTH);
    shuttle::check_random(move || f(), (iterations() / 5).max(1));
}

/// One thread per id, running `run(handle, id)` with a handle of its own (a
/// sender or a receiver of `hub`), made just before the thread starts.
fn spawn_each<I, H, R>(
    hub: &Hub<u32, u64>,
    handle: fn(&Hub<u32, u64>) -> H,
    ids: impl IntoIterator<Item = I>,
    run: fn(H, I) -> R,
) -> Vec<thread::JoinHandle<R>>
where
    I: Send + 'static,
    H: Send + 'static,
    R: Send + 'static,
{
    ids.into_iter()
        .map(|id| {
            let h = handle(hub);
            thread::spawn(move || run(h, id))
        })
        .collect()
}

/// `hub` with one receiver, registered before any other thread starts.
fn with_receiver(hub: Hub<u32, u64>) -> (Hub<u32, u64>, Receiver<u32, u64>) {
    let rx = hub.receiver();
    (hub, rx)
}

/// Joins every thread, in order; their results.
fn join_all<R>(threads: Vec<thread::JoinHandle<R>>) -> Vec<R> {
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

/// Receives until closed, mixing the three consuming forms.
fn consume_all(rx: &mut Receiver<u32, u64>) -> Vec<(u32, u64, u64)> {
    let mut got = Vec::new();
    let mut turn = 0u32;
    loop {
        turn += 1;
        match turn % 3 {
            0 => match rx.try_recv_all() {
                Ok(batch) => got.extend(batch.into_iter().map(|e| (e.key, e.value, e.sends))),
                Err(TryRecvError::Closed) => return got,
                Err(TryRecvError::Empty) => thread::yield_now(),
            },
            1 => match rx.try_recv() {
                Ok(e) => got.push((e.key, e.value, e.sends)),
                Err(TryRecvError::Closed) => return got,
                Err(TryRecvError::Empty) => thread::yield_now(),
            },
            _ => match rx.recv() {
                Ok(e) => got.push((e.key, e.value, e.sends)),
                Err(_) => return got,
            },
        }
    }
}

/// Three senders of distinct keys race a `Sender::close` while the consumer drains:
/// exactly the `Ok` sends are delivered, each once.
///
/// Rule: conflate 8 (close racing send). Trap: an `Ok` send lost at the close,
/// or an `Err` one delivered.
#[test]
fn close_races_many_senders() {
    check(|| {
        let (hub, mut rx) = with_receiver(Hub::new());
        let closer = hub.sender();
        let senders = spawn_each(&hub, Hub::sender, 0..3u32, |tx, s| {
            (0..3u32)
                .filter(|i| tx.send(s * 10 + i, 1).is_ok())
                .map(|i| s * 10 + i)
                .collect::<Vec<_>>()
        });
        drop(hub);
        let close = thread::spawn(move || closer.close());
        let got = consume_all(&mut rx);
        let ok: BTreeSet<u32> = join_all(senders).into_iter().flatten().collect();
        close.join().unwrap();
        let delivered: Vec<u32> = got.iter().map(|e| e.0).collect();
        let delivered_set: BTreeSet<u32> = delivered.iter().copied().collect();
        assert_eq!(delivered.len(), delivered_set.len(), "delivered twice");
        assert_eq!(delivered_set, ok, "Ok sends and deliveries differ");
    });
}

/// Two senders, each sending its own keys in order (some of them again, so sends
/// coalesce into slots that a cut may have taken), against a consumer taking cuts.
/// Values are one bit per send and merge by OR, so a batch says exactly which sends
/// it holds: per sender, everything received up to any cut must be a prefix of
/// that sender's sends (a cut is one instant, docs/design.md, "The cut is one instant" and "Own-value receivers: the core").
///
/// Rule: conflate 5 (one cut). Trap: a send merging into a value the cut owns,
/// or a batch that is not a prefix of each sender's sends.
#[test]
fn cuts_are_instants_with_two_senders() {
    const KEYS: [u32; 6] = [0, 1, 0, 2, 1, 3];
    check(|| {
        let (hub, mut rx) = with_receiver(Hub::with_merge(|a, b| Some(a | b)));
        let senders = spawn_each(&hub, Hub::sender, [0u32, 100], |tx, base| {
            for (i, k) in KEYS.iter().enumerate() {
                tx.send(base + k, 1 << i).unwrap();
            }
        });
        drop(hub);
        let mut seen = BTreeMap::from([(0u32, 0u64), (100, 0)]);
        let all = (1u64 << KEYS.len()) - 1;
        while seen.values().any(|m| *m != all) {
            let Ok(batch) = rx.try_recv_all() else {
                thread::yield_now();
                continue;
            };
            for e in batch {
                let mask = seen.get_mut(&(e.key / 100 * 100)).unwrap();
                assert_eq!(*mask & e.value, 0, "a send delivered twice");
                *mask |= e.value;
            }
            for (base, mask) in &seen {
                assert_eq!(
                    mask & (mask + 1),
                    0,
                    "sender {base}: cut is not a prefix: {mask:b}"
                );
            }
        }
        join_all(senders);
    });
}

/// A `retain_latest` hub's sole plain receiver (its values in places the
/// cells name, docs/design.md, "In a table hub") consumed with pops, cuts and
/// `recv` while two senders send and another thread registers and drops a
/// second plain receiver twice (the first converts its part into cell
/// entries at the first of them). Per key, the values arrive in send order,
/// the last one is the key's last send, and every send is counted once; the
/// table ends with the last value of every key.
///
/// Rule: conflate 1, 4, 5, 13 and the state table. Trap: a send lost,
/// doubled or reordered across the conversion; a place named by a cell
/// written after the cut or pop that took it.
#[test]
fn table_hubs_sole_receiver_with_churn_and_two_senders() {
    const KEYS: [u32; 6] = [0, 1, 0, 2, 1, 0];
    check(|| {
        let hub: Hub<u32, u64> = Hub::builder().retain_latest().build();
        let (hub, mut rx) = with_receiver(hub);
        let senders = spawn_each(&hub, Hub::sender, [0u32, 100], |tx, base| {
            for (i, k) in KEYS.iter().enumerate() {
                tx.send(base + k, i as u64 + 1).unwrap();
            }
        });
        let churn = {
            let hub = hub.clone();
            thread::spawn(move || {
                for _ in 0..2 {
                    let mut other = hub.receiver();
                    let _ = other.try_recv_all();
                    thread::yield_now();
                    drop(other);
                }
            })
        };
        let consumer = thread::spawn(move || (consume_all(&mut rx), rx));
        join_all(senders);
        churn.join().unwrap();
        let table = hub.snapshot();
        drop(hub);
        let (got, rx) = consumer.join().unwrap();
        let mut last: BTreeMap<u32, u64> = BTreeMap::new();
        let mut sends = 0;
        for &(k, v, n) in &got {
            if let Some(before) = last.insert(k, v) {
                assert!(before < v, "key {k}: {v} after {before}: {got:?}");
            }
            sends += n;
        }
        assert_eq!(sends, 2 * KEYS.len() as u64, "conservation: {got:?}");
        let want: BTreeMap<u32, u64> = [0, 100]
            .into_iter()
            .flat_map(|base| [(base, 6), (base + 1, 5), (base + 2, 4)])
            .collect();
        assert_eq!(last, want, "the last value of every key: {got:?}");
        let table: BTreeMap<u32, u64> = table.into_iter().collect();
        assert_eq!(table, want, "the table");
        let s = rx.stats();
        assert_eq!(s.pending, 0, "{s:?}");
        assert_eq!((s.received, s.folded), (sends, sends), "{s:?}");
    });
}

/// Summing merge, three senders on two keys, the consumer mixing pops, cuts and
/// peeks: after the graceful close the sums and send counts are conserved.
///
/// Rule: conflate 2, 7, 13. Trap: a merge lost or counted twice between a pop,
/// a cut and a peek.
#[test]
fn summing_merge_conserves() {
    check(|| {
        let (hub, mut rx) = with_receiver(Hub::with_merge(|a, b| Some(a + b)));
        let senders = spawn_each(&hub, Hub::sender, 0..3u64, |tx, s| {
            for i in 0..3u64 {
                tx.send((i % 2) as u32, s * 3 + i + 1).unwrap();
            }
        });
        drop(hub);
        let peeked = rx.peek().ok();
        let got = consume_all(&mut rx);
        join_all(senders);
        let sum: u64 = got.iter().map(|e| e.1).sum();
        let sends: u64 = got.iter().map(|e| e.2).sum();
        assert_eq!((sum, sends), ((1..=9).sum(), 9), "{got:?}");
        if let Some(p) = peeked {
            assert!(
                got.iter().any(|e| e.0 == p.key),
                "peeked key never delivered"
            );
        }
    });
}

/// Receivers join and leave while two senders send distinct keys: a receiver
/// alive throughout gets every send exactly once; churned ones never see a key
/// twice.
///
/// Rule: conflate 4, "Registration versus send". Trap: a send reading a
/// receiver already released, or delivering one send twice. Mutant: c.
#[test]
fn receiver_churn_during_sends() {
    check(|| {
        let (hub, mut stable) = with_receiver(Hub::new());
        let h2 = hub.clone();
        let churn = thread::spawn(move || {
            for _ in 0..3 {
                let mut rx = h2.receiver();
                let mut keys = BTreeSet::new();
                while let Ok(e) = rx.try_recv() {
                    assert!(keys.insert(e.key), "duplicate key on churned receiver");
                }
                drop(rx);
            }
        });
        let senders = spawn_each(&hub, Hub::sender, [0u32, 10], |tx, base| {
            for k in base..base + 3 {
                tx.send(k, 1).unwrap();
            }
        });
        join_all(senders);
        churn.join().unwrap();
        drop(hub);
        let keys: Vec<u32> = consume_all(&mut stable).into_iter().map(|e| e.0).collect();
        let set: BTreeSet<u32> = keys.iter().copied().collect();
        assert_eq!(keys.len(), 6);
        assert_eq!(set, [0, 1, 2, 10, 11, 12].into_iter().collect());
    });
}

/// A receiver dropped while a send that listed it is in flight, and a new one
/// registered in its place (its id, and its released allocation kept as a
/// spare): a send made after the new registration reaches the new receiver.
///
/// Rule: conflate 4, "The registry" and "Registration versus send". Trap: the
/// released receiver cleaned up (its entries walked, its marks cleared) before
/// the sends that listed it finished, so that one of them leaves a mark for
/// its id behind and the new receiver's first send of that key coalesces into
/// nothing. Mutant: c.
#[test]
fn a_send_after_a_renewed_registration_reaches_it() {
    check(|| {
        let hub: Hub<u32, u64> = Hub::new();
        let dropped = hub.receiver();
        let tx = hub.sender();
        let sender = thread::spawn(move || {
            for v in 0..2 {
                tx.send(0, v).unwrap();
            }
        });
        drop(dropped);
        let mut renewed = hub.receiver();
        hub.sender().send(0, 7).unwrap();
        sender.join().unwrap();
        let mut keys = Vec::new();
        while let Ok(e) = renewed.try_recv() {
            keys.push(e.key);
        }
        assert_eq!(keys, [0], "the send after the registration, pending once");
    });
}

/// Receivers registered and dropped out of order while two senders send: the
/// drops leave holes in the receiver array and then compact it, and the
/// registrations grow it (under shuttle it starts at 2 entries and compacts at
/// more holes than live receivers, at least 1; docs/design.md, "The
/// registry"). The receiver registered before the sends gets each send exactly
/// once; one registered during them never sees a key twice, and gets the send
/// made after it registered.
///
/// Rule: conflate 4, "The registry". Trap: a compaction or a growth of the
/// receiver array while a send reads it.
#[test]
fn receiver_churn_out_of_order_during_sends() {
    check(|| {
        let hub: Hub<u32, u64> = Hub::new();
        let mut first = hub.receiver();
        let h2 = hub.clone();
        let churn = thread::spawn(move || {
            let mut churned: Vec<_> = (0..3).map(|_| h2.receiver()).collect();
            let stays = h2.receiver();
            // The middle one first, then the first, then the last: two holes,
            // then three, more than the two live receivers (a compaction).
            for at in [1, 0, 0] {
                let mut rx = churned.remove(at);
                let mut keys = BTreeSet::new();
                while let Ok(e) = rx.try_recv() {
                    assert!(keys.insert(e.key), "duplicate key on a churned receiver");
                }
            }
            stays
        });
        let senders: Vec<_> = [0u32, 10]
            .into_iter()
            .map(|base| {
                let tx = hub.sender();
                thread::spawn(move || {
                    for k in base..base + 3 {
                        tx.send(k, 1).unwrap();
                    }
                })
            })
            .collect();
        for h in senders {
            h.join().unwrap();
        }
        let mut stays = churn.join().unwrap();
        hub.sender().send(99, 1).unwrap();
        assert_eq!(hub.stats().receivers, 2);
        drop(hub);
        let keys: Vec<u32> = consume_all(&mut first).into_iter().map(|e| e.0).collect();
        let set: BTreeSet<u32> = keys.iter().copied().collect();
        assert_eq!(keys.len(), 7);
        assert_eq!(set, [0, 1, 2, 10, 11, 12, 99].into_iter().collect());
        let keys: Vec<u32> = consume_all(&mut stays).into_iter().map(|e| e.0).collect();
        let set: BTreeSet<u32> = keys.iter().copied().collect();
        assert_eq!(
            keys.len(),
            set.len(),
            "duplicate key on a receiver: {keys:?}"
        );
        assert!(set.contains(&99), "a send after registration was missed");
    });
}

/// `Hub::close` racing senders and two consumers: every send answers `Ok` or
/// `Err`, nothing hangs, every receiver ends closed, later sends fail.
///
/// Rule: conflate 7, 8 (`Hub::close`). Trap: a hang, or a receiver left open.
#[test]
fn hub_close_races_senders_and_consumers() {
    check(|| {
        let hub: Hub<u32, u64> = Hub::new();
        let consumers = spawn_each(&hub, Hub::receiver, 0..2, |mut rx, _| {
            let _ = consume_all(&mut rx);
            assert!(rx.is_closed());
        });
        let tx = hub.sender();
        let sender = thread::spawn(move || {
            for k in 0..3 {
                let _ = tx.send(k, 1);
            }
            tx
        });
        hub.close_now();
        let tx = sender.join().unwrap();
        join_all(consumers);
        assert!(tx.send(9, 9).is_err());
        assert_eq!(hub.receiver().try_recv(), Err(TryRecvError::Closed));
    });
}

/// A merge that panics on a sentinel, racing an ordinary sender: the panic reaches
/// only the sender that triggered it, and afterwards every receiver gets new
/// sends (no poisoned lock, no raised in-flight count, no lost wake-up).
///
/// Rule: conflate 9, "Panics in user code". Trap: a poisoned lock, a raised
/// in-flight count or a lost wake-up left by the panic.
#[test]
fn panicking_merge_leaves_bus_usable() {
    check(|| {
        let hub: Hub<u32, u64> = Hub::with_merge(|a, b| {
            if b == 666 {
                panic!("merge refuses the sentinel");
            }
            Some(a + b)
        });
        let mut rx1 = hub.receiver();
        let mut rx2 = hub.receiver();
        let tx = hub.sender();
        tx.send(1, 1).unwrap();
        let tx2 = hub.sender();
        let panicker = thread::spawn(move || {
            panic::catch_unwind(AssertUnwindSafe(|| tx2.send(1, 666))).is_err()
        });
        let other = hub.sender();
        let plain = thread::spawn(move || other.send(2, 5).unwrap());
        let panicked = panicker.join().unwrap();
        plain.join().unwrap();
        tx.send(3, 7).unwrap();
        drop((hub, tx));
        for rx in [&mut rx1, &mut rx2] {
            let got = consume_all(rx);
            assert!(got.iter().any(|e| e.0 == 2 && e.1 == 5), "{got:?}");
            assert!(got.iter().any(|e| e.0 == 3 && e.1 == 7), "{got:?}");
            assert!(
                got.iter().all(|e| e.1 != 666),
                "sentinel delivered: {got:?}"
            );
        }
        // Key 1 was pending when the sentinel arrived, unless a consumer... no
        // consumer ran before: the merge always ran, so it always panicked.
        assert!(panicked);
    });
}

/// Receivers blocked in `recv` are woken by data alone: two senders send
/// distinct keys and nobody closes anything afterwards (the hub outlives the
/// receives). A lost data wake-up leaves the consumer parked with every other
/// thread finished: shuttle reports that as a deadlock. One consumer blocks in
/// `recv` only; the other alternates `recv` and `try_recv_all`.
///
/// Rule: "Parking without lost wake-ups". Trap: a lost data wake-up. Mutant: e1, e2.
#[test]
fn recv_woken_by_data_without_close() {
    check(|| {
        let hub: Hub<u32, u64> = Hub::new();
        let consumers = spawn_each(&hub, Hub::receiver, 0..2, |mut rx, c| {
            let mut keys = BTreeSet::new();
            let mut turn = 0;
            while keys.len() < 4 {
                turn += 1;
                if c == 1 && turn % 2 == 0 {
                    for e in rx.try_recv_all().unwrap_or_default() {
                        assert!(keys.insert(e.key), "key {} delivered twice", e.key);
                    }
                    continue;
                }
                let e = rx.recv().expect("nothing closes this hub");
                assert!(keys.insert(e.key), "key {} delivered twice", e.key);
            }
            keys
        });
        let senders = spawn_each(&hub, Hub::sender, [0u32, 10], |tx, base| {
            tx.send(base, 1).unwrap();
            tx.send(base + 1, 1).unwrap();
        });
        join_all(senders);
        for keys in join_all(consumers) {
            assert_eq!(keys, [0, 1, 10, 11].into_iter().collect());
        }
        // Only now may the hub go (its drop closes the send side).
        drop(hub);
    });
}
