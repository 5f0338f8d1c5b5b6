//! Loom models of the parking shard lock (`src/conflate/lockfree/lock.rs`,
//! `ParkLock`; docs/design.md, "Locks that cost one RMW"): a release that
//! stores the lock free and wakes only when it sees a waiter announced, against
//! waiters that announce themselves before their last tries. Under loom both
//! sides of the asymmetric fence are `SeqCst` fences and a waiter parks at
//! once (no spinning): a lost wake-up leaves a thread parked for good, which
//! loom reports as a deadlock.
//!
//! Run one: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release
//! -p keybus-loom-tests --test conflate_lock MODEL`.
#![cfg(loom)]

use keybus::conflate::__loom::ParkLockModel;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

/// Adds one to `count` under the lock with a plain load and store: two
/// holders at once would lose an add.
fn add_one(lock: &ParkLockModel, count: &AtomicUsize) {
    lock.with(|| {
        let n = count.load(Ordering::Relaxed);
        count.store(n + 1, Ordering::Relaxed);
    });
}

/// Two threads take the lock in turn while the main one holds it first: each
/// waiter parks, and every release must wake one that announced itself (a
/// release that loaded the waiters' count before its store was visible, while
/// the waiter's last try still saw the lock held, parks it for good). The
/// count checks the exclusion and the release/acquire ordering.
///
/// Mutants: q, q2 (`.ci/mutants`).
#[test]
fn park_lock_wakes_every_waiter_and_excludes() {
    loom::model(|| {
        let lock = Arc::new(ParkLockModel::default());
        let count = Arc::new(AtomicUsize::new(0));
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let (lock, count) = (lock.clone(), count.clone());
                thread::spawn(move || add_one(&lock, &count))
            })
            .collect();
        add_one(&lock, &count);
        for w in waiters {
            w.join().unwrap();
        }
        assert_eq!(count.load(Ordering::Relaxed), 3);
    });
}
