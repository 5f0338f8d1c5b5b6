//! Rule 14: bounded receivers. `max_pending(n)` refuses new keys only (a
//! pending key still merges) and renumbers nothing, also under concurrent
//! sends; and the bound holds against the races that could corrupt a bounded
//! receiver's count: a cut (`try_recv_all`) taken while another thread's merge
//! for a pending key is running, and that merge then annihilating the key or
//! panicking.
//!
//! The interleaving is forced, not hoped for: the merge waits until the
//! consumer thread is blocked (on the lock the merge's send holds; read from
//! `/proc` on Linux) or has finished its cut, so the cut always starts while
//! the merge runs. Afterwards the bound must admit exactly `n` new keys, and
//! `overflowed` must count only the real overflows.

use crate::conflate_api::*;
use crate::conformance::support::*;
use crate::threads::Crew;
use keybus::ReceiverStats;
use keybus::TryRecvError;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

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

/// The value whose merge races the cut.
const MARK: u64 = u64::MAX;
/// The bound of the receivers below.
const BOUND: usize = 4;

/// What the merge waits on: the consumer thread, and whether its cut returned.
#[derive(Default)]
struct Gate {
    /// The consumer's kernel thread id (0: unknown, not Linux).
    consumer_tid: AtomicU64,
    entered: AtomicBool,
    cut_done: AtomicBool,
}

impl Gate {
    /// Called by the consumer thread before it cuts.
    fn record_consumer(&self) {
        self.consumer_tid.store(current_tid(), SeqCst);
    }

    /// Called from inside the merge: returns once the consumer's cut is
    /// blocked (waiting for this very send) or has returned.
    fn wait_for_the_cut(&self) {
        self.entered.store(true, SeqCst);
        let tid = self.consumer_tid.load(SeqCst);
        loop {
            if self.cut_done.load(SeqCst) {
                return;
            }
            if tid == 0 {
                // No `/proc` to read: give the cut time to start (the test
                // still checks the outcome, whichever order it got).
                thread::sleep(Duration::from_millis(100));
                return;
            }
            if thread_is_blocked(tid) {
                return;
            }
            thread::yield_now();
        }
    }
}

#[cfg(target_os = "linux")]
fn current_tid() -> u64 {
    // `/proc/thread-self` links to `<pid>/task/<tid>`.
    std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name()?.to_str()?.parse().ok())
        .unwrap_or(0)
}

#[cfg(not(target_os = "linux"))]
fn current_tid() -> u64 {
    0
}

/// Whether thread `tid` of this process is asleep in the kernel (state `S`:
/// blocked on a futex, which is where a lock holder's waiter ends up).
fn thread_is_blocked(tid: u64) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap_or_default();
    // The state is the first field after the parenthesised command name.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|state| state == "S")
}

/// How the racing merge ends.
#[derive(Clone, Copy)]
enum Ending {
    Annihilate,
    Panic,
}

/// Runs the race on a receiver bounded to [`BOUND`], then checks that the
/// bound admits exactly `BOUND` new keys. `seeded`: the receiver is a snapshot
/// receiver born with keys 1 and 2 from the table, instead of receiving them.
fn cut_races_merge<I: Conflate>(ending: Ending, seeded: bool) {
    let hub: Hub<I, u32, u64> = if seeded {
        Hub::<I, _, _>::builder().retain_latest().build()
    } else {
        Hub::<I, _, _>::new()
    };
    let tx = hub.sender();
    let gate = Arc::new(Gate::default());
    let g = gate.clone();
    let builder =
        hub.receiver_builder()
            .max_pending(BOUND)
            .merge(move |_pending: u64, next: u64| {
                if next != MARK {
                    return Some(next);
                }
                g.wait_for_the_cut();
                match ending {
                    Ending::Annihilate => None,
                    Ending::Panic => panic!("planted merge panic"),
                }
            });
    let mut rx = if seeded {
        tx.send(1, 10).unwrap();
        tx.send(2, 20).unwrap();
        builder.snapshot().build()
    } else {
        let rx = builder.build();
        tx.send(1, 10).unwrap();
        tx.send(2, 20).unwrap();
        rx
    };
    let first_sends = if seeded { 0 } else { 1 };
    assert_eq!(rx.len(), 2);

    gate.record_consumer();
    let crew = Crew::new("rule14_cut_races_merge");
    // A panic of the test's thread before its cut: the merge stops waiting.
    crew.on_panic(|| gate.cut_done.store(true, SeqCst));
    let (batch, sent_ok) = crew.scope(|s| {
        let racer = {
            let tx = tx.clone();
            crew.spawn(s, move || {
                // A panic here is the planted merge's; it reaches this thread only.
                catch_unwind(AssertUnwindSafe(|| tx.send(1, MARK))).is_ok()
            })
        };
        // A racer that panicked never enters the merge.
        while !gate.entered.load(SeqCst) && !crew.panicked() {
            thread::yield_now();
        }
        let batch = rx.try_recv_all().unwrap();
        gate.cut_done.store(true, SeqCst);
        (batch, racer.join().expect("the racing sender's thread"))
    });
    assert_eq!(sent_ok, matches!(ending, Ending::Annihilate));

    // Key 1 was annihilated (or dropped by the panic) before the cut could
    // take it: the batch holds key 2 only.
    let got: Vec<_> = batch.iter().map(|e| (e.key, e.value, e.sends)).collect();
    assert_eq!(got, vec![(2, 20, first_sends)]);
    assert_eq!(rx.len(), 0, "nothing is pending after the cut");

    // The bound admits exactly BOUND new keys, and refuses the next one.
    for k in 10..10 + BOUND as u32 {
        tx.send(k, u64::from(k)).unwrap();
    }
    assert_eq!(rx.len(), BOUND, "the bound admits exactly {BOUND} new keys");
    let s = rx.stats();
    assert_eq!(s.overflowed, 0, "no real overflow happened yet: {s:?}");
    tx.send(99, 99).unwrap();
    let s = rx.stats();
    assert_eq!(s.overflowed, 1, "one real overflow: {s:?}");
    assert_eq!(rx.len(), BOUND);

    // The receiver still delivers, in first-touch order.
    let keys: Vec<u32> = drain(&mut rx).into_iter().map(|(k, _, _)| k).collect();
    assert_eq!(keys, (10..10 + BOUND as u32).collect::<Vec<_>>());
    let s: ReceiverStats = rx.stats();
    assert_eq!(
        s.received,
        s.folded + s.annihilated + s.overflowed + s.dropped + s.pending_sends,
        "conservation: {s:?}"
    );
    match ending {
        Ending::Annihilate => assert_eq!(s.annihilated, first_sends + 1, "{s:?}"),
        Ending::Panic => assert_eq!(s.dropped, first_sends + 1, "{s:?}"),
    }
}

pub fn rule14_bound_holds_after_a_cut_races_an_annihilating_merge<I: Conflate>() {
    cut_races_merge::<I>(Ending::Annihilate, false);
}

pub fn rule14_bound_holds_after_a_cut_races_a_panicking_merge<I: Conflate>() {
    cut_races_merge::<I>(Ending::Panic, false);
}

pub fn rule14_snapshot_bound_holds_after_a_cut_races_an_annihilating_merge<I: Conflate>() {
    cut_races_merge::<I>(Ending::Annihilate, true);
}

pub fn rule14_snapshot_bound_holds_after_a_cut_races_a_panicking_merge<I: Conflate>() {
    cut_races_merge::<I>(Ending::Panic, true);
}
