//! Loom models of the sends-in-flight stripes against a close
//! (`src/conflate/lockfree/stripes.rs`, `barrier.rs`; docs/design.md, "Sends in flight:
//! one stripe per thread"). Under loom both sides of the asymmetric fence are
//! `SeqCst` fences, which loom models: these check the Dekker pairing itself.
//!
//! Run one: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release
//! -p keybus-loom-tests --test conflate_stripes MODEL`.
#![cfg(loom)]

use keybus::conflate::__loom::{StripesModel, ThreadCountsModel};
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;

/// A send racing a close: the close sets the closed bit, then a receiver told of
/// the close waits until no stripe is in flight and looks at what was
/// published. A send that returned "published" must be visible then; one that
/// saw the close published nothing. Trap: the store→load pairing without its
/// fences (a send that marked itself in flight too late for the close to see,
/// and read the word too early to see the close).
///
/// Rule: conflate 8, "Sends in flight". Mutant: b (`.ci/mutants`).
#[test]
fn close_vs_send_the_close_waits_for_every_send_that_missed_it() {
    loom::model(|| {
        let m = Arc::new(StripesModel::default());
        let published = Arc::new(AtomicBool::new(false));
        let sender = {
            let (m, published) = (m.clone(), published.clone());
            thread::spawn(move || m.send(|| published.store(true, Ordering::Relaxed)))
        };
        m.close();
        // The receiver's drained check: wait while a send is in flight.
        while !m.quiescent() {
            thread::yield_now();
        }
        let seen = published.load(Ordering::Relaxed);
        let sent = sender.join().unwrap();
        assert_eq!(
            seen, sent,
            "a send that returned published must be visible once the close sees none in flight"
        );
        assert_eq!(m.sent(), u64::from(sent));
    });
}

/// A registry writer's grace period (`wait_for_sends_in_flight`) after a
/// decision it stored: a send that did not see the decision has finished
/// before the writer goes on. Here the decision is the closed bit and the
/// "release" is a flag the send must not find set while it runs.
///
/// Rule: "The registry" (grace periods). Trap: a writer going on while a send
/// that missed its decision runs. Mutant: b (`.ci/mutants`).
#[test]
fn grace_period_waits_for_a_send_that_missed_the_decision() {
    loom::model(|| {
        let m = Arc::new(StripesModel::default());
        let released = Arc::new(AtomicBool::new(false));
        let sender = {
            let (m, released) = (m.clone(), released.clone());
            thread::spawn(move || {
                m.send(|| {
                    assert!(
                        !released.load(Ordering::Relaxed),
                        "freed under a send that entered before the decision"
                    );
                })
            })
        };
        m.close();
        m.wait_for_sends_in_flight();
        released.store(true, Ordering::Relaxed);
        sender.join().unwrap();
    });
}

/// The last send in flight after a close wakes the receivers: a receiver told
/// of the close that still sees the send in flight parks, and only the send's
/// leaving can wake it. So whenever the receiver's check saw the send in
/// flight, the send, as it left, saw the close (and woke it). Trap: a lost
/// wake-up after a close (the receiver waits for a send that left without
/// looking).
///
/// Rule: conflate 7, 8. Mutant: f, f2 (`.ci/mutants`).
#[test]
fn a_send_leaving_after_a_close_sees_it_when_a_receiver_waits_for_it() {
    loom::model(|| {
        let m = Arc::new(StripesModel::default());
        let sender = {
            let m = m.clone();
            thread::spawn(move || m.send_seeing_close(|| {}))
        };
        m.close();
        let waited = !m.quiescent();
        let (_, woke) = sender.join().unwrap();
        if waited {
            assert!(
                woke,
                "a receiver waits for a send that left without waking it"
            );
        }
    });
}

/// A count with a slot per thread (`ThreadCounts`, a receiver's `filtered`):
/// two threads' first adds race to install the chunk both their slots are
/// in, while another thread sums. Every add is counted once: the sum never
/// exceeds the adds made, and it is exact once the adders are joined. Trap:
/// a chunk installed over another thread's (that thread's adds lost with
/// it), or a slot read before its zeroed chunk was published.
///
/// Rule: conflate 13 (`filtered`, kept with no shared read-modify-write).
/// Mutant: t (`.ci/mutants`).
#[test]
fn thread_counts_first_adds_race_to_install_one_chunk() {
    loom::model(|| {
        let counts = Arc::new(ThreadCountsModel::default());
        let adders: Vec<_> = [2, 1]
            .into_iter()
            .map(|n| {
                let counts = counts.clone();
                thread::spawn(move || {
                    for _ in 0..n {
                        counts.add_one();
                    }
                })
            })
            .collect();
        assert!(counts.sum() <= 3, "never more than the adds made");
        for a in adders {
            a.join().unwrap();
        }
        assert_eq!(counts.sum(), 3, "every add counted once");
    });
}
