//! Rule 9: panics in user code (key filters and merges) change nothing at the
//! receiver whose filter panicked, drop only that receiver's slot for a merge,
//! and leave every other send going.

use crate::conflate_api::*;
use crate::conformance::support::*;
use crate::threads::Crew;
use keybus::TryRecvError;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

pub fn rule9_key_filter_panic_changes_nothing_at_that_receiver<I: Conflate>() {
    let armed = Arc::new(AtomicBool::new(false));
    let a = armed.clone();
    let hub = Hub::<I, u32, u32>::new();
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
    // Registered after the faulty one: a receiver with its own values (it
    // comes after it in the fan-out), and a plain one (plain receivers —
    // every key, newer wins, unbounded — come first in the fan-out).
    let mut after = hub.receiver_builder().key_filter(|_: &u32| true).build();
    let mut plain_after = hub.receiver();
    tx.send(5, 1).unwrap();
    tx.send(6, 1).unwrap();
    armed.store(true, SeqCst);
    let panic = catch_unwind(AssertUnwindSafe(|| tx.send(5, 2)));
    let payload = panic.expect_err("the filter's panic must reach send's caller");
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"key filter refused key 5")
    );
    // Receivers before it in the fan-out have the send (every plain one);
    // the panicking one and later ones do not.
    assert_eq!(before.peek().unwrap().value, 2);
    assert_eq!(plain_after.peek().unwrap().value, 2);
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
    assert_eq!(
        drain(&mut plain_after),
        vec![(5, 3, 3), (6, 1, 1), (7, 1, 1)]
    );
    // No poisoned lock, no lost wake-up.
    let crew = Crew::new("rule9_key_filter_panic_waiter");
    crew.on_panic(|| hub.close_now());
    crew.scope(|s| {
        let waiter = crew.spawn(s, || after.recv().unwrap().key);
        tx.send(8, 8).unwrap();
        assert_eq!(waiter.join().unwrap(), 8);
    });
    tx.close();
    assert_eq!(keys_of(&mut faulty), vec![8]);
    assert_fully_closed(&mut faulty);
}

pub fn rule9_merge_panic_drops_that_receivers_slot<I: Conflate>() {
    let hub = Hub::<I, u32, i64>::new();
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
    // Registered after the faulty one: one with its own values (after it in
    // the fan-out) and a plain one (plain receivers come first).
    let mut after = hub.receiver_builder().key_filter(|_: &u32| true).build();
    let mut plain_after = hub.receiver();
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
    // The later receiver with its own values never saw the send; the plain
    // one did.
    assert_eq!(after.len(), 3);
    assert_eq!(plain_after.len(), 3);
    // Later sends reach every receiver; key 2 starts afresh at `faulty`.
    tx.send(2, 5).unwrap();
    tx.send(4, 40).unwrap();
    assert_eq!(
        drain(&mut before),
        vec![(1, 10, 1), (2, 5, 3), (3, 30, 1), (4, 40, 1)]
    );
    assert_eq!(
        drain(&mut faulty),
        vec![(1, 10, 1), (3, 30, 1), (2, 5, 1), (4, 40, 1)]
    );
    assert_eq!(
        drain(&mut after),
        vec![(1, 10, 1), (2, 5, 2), (3, 30, 1), (4, 40, 1)]
    );
    assert_eq!(
        drain(&mut plain_after),
        vec![(1, 10, 1), (2, 5, 3), (3, 30, 1), (4, 40, 1)]
    );
    // A merge panic on the only pending key leaves an empty, working queue.
    tx.send(9, 1).unwrap();
    assert!(catch_unwind(AssertUnwindSafe(|| tx.send(9, 666))).is_err());
    assert_eq!(faulty.len(), 0);
    assert_eq!(faulty.try_recv().err(), Some(TryRecvError::Empty));
    let crew = Crew::new("rule9_merge_panic_waiter");
    crew.on_panic(|| hub.close_now());
    crew.scope(|s| {
        let waiter = crew.spawn(s, || faulty.recv().unwrap().key);
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
pub fn rule9_race_panicking_merge_while_other_sends_continue<I: Conflate>() {
    const POISON: u64 = 1 << 32;
    const SENDERS: u64 = 2;
    const PER: u64 = 3_000;
    struct Refused;
    type W = (u64, u64);
    let sum = |p: W, n: W| Some((p.0 + n.0, p.1 + n.1));
    let lost_sends = Arc::new(AtomicU64::new(0));
    let lost_weight = Arc::new(AtomicU64::new(0));
    let hub = Hub::<I, u32, W>::new();
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

    fn consume(rx: &mut impl ReceiverApi<u32, W>) -> W {
        let mut total = (0, 0);
        while let Ok(e) = rx.recv() {
            assert_eq!(e.sends, e.value.1, "sends disagrees with the merged count");
            total = (total.0 + e.value.0, total.1 + e.value.1);
        }
        total
    }

    let crew = Crew::new("rule9_race_panicking_merge");
    crew.on_panic(|| hub.close_now());
    let (attempts, panics, got) = crew.scope(|s| {
        let consumers: Vec<_> = [&mut first, &mut faulty, &mut last]
            .into_iter()
            .map(|rx| crew.spawn(s, move || consume(rx)))
            .collect();
        let senders: Vec<_> = (0..SENDERS)
            .map(|_| {
                crew.spawn(s, || {
                    for i in 0..PER {
                        tx.send((i % 3) as u32, (1, 1)).unwrap();
                    }
                })
            })
            .collect();
        let poisoner = crew.spawn(s, || {
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
    assert_eq!(
        got[0],
        (weight, sends),
        "first receiver must have every send"
    );
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

thread_local! {
    /// The key whose `clone` panics on this thread now, if any.
    static CLONE_PANICS_FOR: std::cell::Cell<Option<u32>> = const { std::cell::Cell::new(None) };
}

/// A key whose `clone` panics while [`CLONE_PANICS_FOR`] names it.
#[derive(Debug, PartialEq, Eq, Hash)]
struct FragileKey(u32);

impl Clone for FragileKey {
    fn clone(&self) -> Self {
        if CLONE_PANICS_FOR.with(|k| k.get()) == Some(self.0) {
            panic!("key clone refused");
        }
        FragileKey(self.0)
    }
}

/// `K: Clone` is user code too: if it panics inside a receive (a pop or a
/// cut), the panic reaches the caller, the books still balance (whatever the
/// receive could not hand over is counted, dropped or still pending), and the
/// receiver keeps working. An implementation that never clones a key in a
/// receive passes without the panic.
pub fn rule9_key_clone_panic_in_a_receive_keeps_the_books<I: Conflate>() {
    for cut in [false, true] {
        let hub = Hub::<I, FragileKey, u32>::new();
        let tx = hub.sender();
        let mut rx = hub.receiver();
        for k in 1..=4 {
            tx.send(FragileKey(k), k).unwrap();
        }
        CLONE_PANICS_FOR.with(|k| k.set(Some(2)));
        let mut taken = Vec::new();
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            if cut {
                taken.extend(rx.try_recv_all().unwrap());
            } else {
                while let Ok(e) = rx.try_recv() {
                    taken.push(e);
                }
            }
        }));
        CLONE_PANICS_FOR.with(|k| k.set(None));
        if let Err(payload) = outcome {
            assert_eq!(
                payload.downcast_ref::<&str>(),
                Some(&"key clone refused"),
                "the key's panic reaches the caller (cut {cut})"
            );
        }
        let s = conserved_stats(&rx);
        assert_eq!(s.received, 4, "every send reached the receiver (cut {cut})");
        assert_eq!(
            s.folded,
            taken.iter().map(|e| e.sends).sum::<u64>(),
            "what was handed over is what is counted delivered (cut {cut})"
        );
        // Still usable: a second send of every key reaches it.
        for k in 1..=4 {
            tx.send(FragileKey(k), 10 + k).unwrap();
        }
        let mut last: Vec<(u32, u32)> = drain(&mut rx)
            .into_iter()
            .map(|(k, v, _)| (k.0, v))
            .collect();
        last.sort_unstable();
        assert_eq!(
            last,
            vec![(1, 11), (2, 12), (3, 13), (4, 14)],
            "every key's latest value, after the panic (cut {cut})"
        );
        let s = conserved_stats(&rx);
        assert_eq!(s.received, 8, "(cut {cut})");
        assert_eq!(s.pending, 0, "(cut {cut})");
    }
}
