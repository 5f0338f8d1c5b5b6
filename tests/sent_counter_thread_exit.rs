//! `HubStats::sent` counts a send made from a thread-local destructor that runs
//! after the crate's own thread-exit guard, against both implementations (both
//! count `sent` the same way; docs/design.md, "Sends in flight: one stripe
//! per thread"). Public API only.
//!
//! The counter keeps one slot per sending thread, and a per-thread cache of the
//! slot it last counted in. When a thread exits, a thread-local guard gives its
//! slot back (the next thread to send takes it) and must clear the cache first:
//! a send from a thread-local destructor that runs after the guard then counts
//! in a shared fallback counter. If the cache were left set, that late send
//! would count, with a plain load and store, in a slot that now belongs to
//! another thread, and the two threads' counts would overwrite each other.
//!
//! So here: thread A sends, then exits; two of its thread-locals send from
//! their destructors, one registered before A's first send and one after it,
//! so that one of them runs after the guard whichever order the platform runs
//! thread-local destructors in (most run the last registered first). Each such
//! destructor waits until a new thread B has taken a slot (the slot A gave
//! back, if the guard has run: the free list is last in, first out, and
//! nothing else in this binary takes a slot meanwhile), then the destructor and
//! B send a million times each, at the same time. `sent` must be exact.
//!
//! The overwrites need the two threads to run at the same time, so the check
//! is one of chance in principle; with a million sends each on two cores, a
//! stale slot loses thousands of counts per round (the planted bug in
//! `.ci/mutants`, `s1`, is caught this way). Nothing here asserts on time.

use keybus_test_support::conflate_api::*;
use keybus_test_support::threads::Crew;
use std::cell::RefCell;
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::time::Duration;

/// Sends per destructor, and per thread B, per round.
const SENDS: u64 = if cfg!(debug_assertions) {
    1_000_000
} else {
    4_000_000
};

/// Rounds (each a new thread A).
const ROUNDS: u64 = 3;

/// How long a thread of a round may wait for another before the round calls it
/// a hang: a deadlock detector, not a timing assertion.
const HANG: Duration = Duration::from_secs(60);

/// The tests of this file take turns: each needs the slot A gives back to go to
/// its own thread B, not to a thread of the other test.
static TURN: Mutex<()> = Mutex::new(());

/// A thread-local value whose destructor sends `SENDS` times, together with a
/// thread B that the test's thread starts when told.
struct SendsOnDrop {
    send: Arc<dyn Fn() + Send + Sync>,
    /// Tells the test's thread to start a thread B.
    ready: mpsc::Sender<()>,
    /// Met by this destructor and that B (a new generation of the barrier for
    /// each destructor: they run one after the other).
    start: Arc<Barrier>,
}

impl Drop for SendsOnDrop {
    fn drop(&mut self) {
        // A panic here would abort the process: a failure, not a hang.
        self.ready.send(()).expect("the test's thread is waiting");
        self.start.wait();
        for _ in 0..SENDS {
            (self.send)();
        }
    }
}

thread_local! {
    /// Set before the thread's first send: registered before the crate's
    /// guard, so destroyed after it where the last registered goes first.
    static BEFORE_FIRST_SEND: RefCell<Option<SendsOnDrop>> = const { RefCell::new(None) };
    /// Set after the first send: destroyed after the guard where the first
    /// registered goes first.
    static AFTER_FIRST_SEND: RefCell<Option<SendsOnDrop>> = const { RefCell::new(None) };
}

/// One round on the hub `send` sends to: A sends `early` times and exits; each
/// of its two destructors sends with a new thread B. Returns how many sends
/// were made.
fn round(send: Arc<dyn Fn() + Send + Sync>, early: u64) -> u64 {
    let (ready_tx, ready) = mpsc::channel::<()>();
    let start = Arc::new(Barrier::new(2));
    // The Bs and the test's thread: every B stays alive until both are done,
    // so the slot the first took is not given back before the second takes one.
    let crew = Crew::new("sent_counter_thread_exit");
    let release = crew.barrier(3);
    crew.scope(|s| {
        let a = {
            let (send, start) = (send.clone(), start.clone());
            crew.spawn(s, move || {
                let late = || SendsOnDrop {
                    send: send.clone(),
                    ready: ready_tx.clone(),
                    start: start.clone(),
                };
                BEFORE_FIRST_SEND.with(|v| *v.borrow_mut() = Some(late()));
                for _ in 0..early {
                    send();
                }
                AFTER_FIRST_SEND.with(|v| *v.borrow_mut() = Some(late()));
            })
        };
        let bs: Vec<_> = (0..2)
            .map(|_| {
                crew.recv_timeout(&ready, HANG)
                    .expect("a thread-local destructor of A never ran");
                let (send, start, release) = (send.clone(), start.clone(), &release);
                crew.spawn(s, move || {
                    // The first send takes a slot: the one A gave back, if its
                    // guard has run.
                    send();
                    start.wait();
                    for _ in 0..SENDS {
                        send();
                    }
                    release.wait();
                })
            })
            .collect();
        // `join` waits for A's thread-local destructors too.
        a.join().unwrap();
        release.wait();
        bs.into_iter().for_each(|b| b.join().unwrap());
    });
    early + 2 * (SENDS + 1 + SENDS)
}

/// `sent` is exact over every round, on `I`.
fn sent_is_exact_across_thread_exit<I: Conflate>() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let hub = Hub::<I, u32, u32>::new();
    let tx = hub.sender();
    let send: Arc<dyn Fn() + Send + Sync> = Arc::new(move || tx.send(0, 0).unwrap());
    let mut expected = 0;
    for r in 0..ROUNDS {
        expected += round(send.clone(), 10 + r);
        assert_eq!(
            hub.stats().sent,
            expected,
            "round {r}: sends from thread-local destructors lost or counted twice"
        );
    }
}

keybus_test_support::tests_for! {
    crate for lockfree = Lockfree, baseline = Baseline => {
        sent_is_exact_across_thread_exit,
    }
}
