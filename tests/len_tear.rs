//! `Receiver::len()` polled while a sender pushes and annihilates one key over and
//! over, against both implementations: it never reports more than the one key that
//! can be pending, and never wraps. (The loom model
//! `conflate::len_stays_within_the_pending_keys` explores every interleaving of a
//! poll with pushes and annihilations; this test runs the same on real threads,
//! with the other core kept busy so the poller gets preempted.)

use keybus_test_support::conflate_api::*;
use keybus_test_support::threads::{self, Crew};
use std::sync::atomic::{AtomicBool, Ordering};

const POLLS: usize = 200_000;

/// Polls `len()` while a sender pushes and annihilates key 0 (and a burner
/// keeps the other core busy): never more than 1.
fn len_never_exceeds_the_pending_keys<I: Conflate>() {
    let hub = Hub::<I, u32, u64>::with_merge(|_pending, _incoming| None);
    let (tx, rx) = (hub.sender(), hub.receiver());
    let stop = AtomicBool::new(false);
    // Both loops also end when a thread of the test panicked (the
    // poller's panic would otherwise never set `stop`).
    let crew = Crew::new(format!("len_tear {}", I::NAME));
    let running = || !stop.load(Ordering::Relaxed) && !crew.panicked();
    let worst = crew.scope(|s| {
        let sender = crew.spawn(s, move || {
            while running() {
                tx.send(0, 0).unwrap();
                tx.send(0, 0).unwrap();
            }
        });
        let burner = crew.spawn(s, move || {
            while running() {
                std::hint::spin_loop();
            }
        });
        let worst = (0..POLLS).map(|_| rx.len()).max().unwrap();
        stop.store(true, Ordering::Relaxed);
        sender.join().unwrap();
        burner.join().unwrap();
        worst
    });
    assert!(
        worst <= 1,
        "len() reported {worst} with at most one key pending"
    );
    assert!(rx.len() <= 1 && rx.is_empty() == (rx.len() == 0));
}

keybus_test_support::tests_for! {
    crate for lockfree = Lockfree, baseline = Baseline => {
        len_never_exceeds_the_pending_keys,
    }
}

/// A thread of each test above panicking (planted) fails the test.
#[test]
fn planted_panics_fail_instead_of_hanging() {
    threads::audit_in(
        &["lockfree", "baseline"],
        &["len_never_exceeds_the_pending_keys"],
        1,
    );
}
