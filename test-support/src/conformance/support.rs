//! Helpers shared by the conformance suites: draining and checking conflate
//! receivers, the conservation law, the usual merges, and the plumbing of race
//! tests (jitter, a close landing near a given send, a stall watchdog, smaller
//! runs under ThreadSanitizer).

use crate::conflate_api::{
    Conflate, Hub, HubApi, Key, Receiver, ReceiverApi, Sender, SenderApi, Value,
};
use crate::threads::Crew;
use futures::StreamExt as _;
use keybus::{ReceiverStats, RecvError, RecvTimeoutError, TryRecvError};
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

/// A hub of implementation `I`, a sender and a receiver.
pub type Bus<I, K, V> = (Hub<I, K, V>, Sender<I, K, V>, Receiver<I, K, V>);

/// A hub of implementation `I` whose values are clones of one token (the
/// token's count tells how many values are alive), its sender, the token.
pub type TokenBus<I> = (Arc<()>, Hub<I, u32, Arc<()>>, Sender<I, u32, Arc<()>>);

/// A newer-wins hub of implementation `I`, a sender and a receiver: how most
/// tests start.
pub fn bus<I: Conflate, K: Key, V: Value>() -> Bus<I, K, V> {
    open(Hub::<I, K, V>::new())
}

/// A newer-wins [`TokenBus`].
pub fn token_bus<I: Conflate>() -> TokenBus<I> {
    let hub = Hub::<I, u32, Arc<()>>::new();
    let tx = hub.sender();
    (Arc::new(()), hub, tx)
}

/// `hub`, a sender and a receiver of it.
pub fn open<K: Key, V: Value, H: HubApi<K, V>>(hub: H) -> (H, H::Sender, H::Receiver) {
    let (tx, rx) = (hub.sender(), hub.receiver());
    (hub, tx, rx)
}

/// Everything pending now, as `(key, value, sends)`, via `try_iter`.
pub fn drain<K: Key, V: Value>(rx: &mut impl ReceiverApi<K, V>) -> Vec<(K, V, u64)> {
    rx.try_iter().map(|e| (e.key, e.value, e.sends)).collect()
}

/// The keys of everything pending now, via `try_iter`.
pub fn keys_of<K: Key, V: Value>(rx: &mut impl ReceiverApi<K, V>) -> Vec<K> {
    rx.try_iter().map(|e| e.key).collect()
}

/// Every receive form answers `Closed`, and the receiver says so.
pub fn assert_fully_closed<K: Key, V: Value>(rx: &mut impl ReceiverApi<K, V>) {
    assert!(rx.is_closed());
    assert_eq!(rx.len(), 0);
    assert!(rx.is_empty());
    assert_eq!(rx.try_recv().err(), Some(TryRecvError::Closed));
    assert_eq!(rx.try_recv_all().err(), Some(TryRecvError::Closed));
    assert_eq!(rx.peek().err(), Some(TryRecvError::Closed));
    assert_eq!(rx.recv().err(), Some(RecvError));
    assert_eq!(
        rx.recv_timeout(Duration::ZERO).err(),
        Some(RecvTimeoutError::Closed)
    );
    assert_eq!(
        rx.recv_deadline(past()).err(),
        Some(RecvTimeoutError::Closed)
    );
    // The extremes too: no deadline arithmetic may overflow or wait.
    assert_eq!(
        rx.recv_timeout(Duration::MAX).err(),
        Some(RecvTimeoutError::Closed)
    );
    assert_eq!(
        rx.recv_deadline(crate::bad_input::conflate::far_future())
            .err(),
        Some(RecvTimeoutError::Closed)
    );
    assert_eq!(
        futures::executor::block_on(rx.recv_async()).err(),
        Some(RecvError)
    );
    assert_eq!(rx.try_iter().count(), 0);
    assert_eq!(rx.iter().count(), 0);
    assert!(futures::executor::block_on(rx.next()).is_none());
}

/// With nothing to take, each timed receive answers `expected`: a zero
/// timeout, a deadline already past, and a timeout of 2 ms.
pub fn assert_timed_receives<K: Key, V: Value>(
    rx: &mut impl ReceiverApi<K, V>,
    expected: RecvTimeoutError,
) {
    assert_eq!(rx.recv_timeout(Duration::ZERO).err(), Some(expected));
    assert_eq!(rx.recv_deadline(past()).err(), Some(expected));
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(2)).err(),
        Some(expected)
    );
}

/// `received == folded + annihilated + overflowed + dropped + pending_sends`,
/// asserted with the fields named.
pub fn assert_conserved(s: &ReceiverStats) {
    assert_eq!(
        s.received,
        s.folded + s.annihilated + s.overflowed + s.dropped + s.pending_sends,
        "conservation law broken: {s:?}"
    );
}

/// `rx`'s stats, once they were checked against the conservation law.
pub fn conserved_stats<K: Key, V: Value>(rx: &impl ReceiverApi<K, V>) -> ReceiverStats {
    let s = rx.stats();
    assert_conserved(&s);
    s
}

/// Sends `value` (a clone each time) under each of `keys`; every send must be
/// accepted.
pub fn send_each<K: Key, V: Value>(
    tx: &impl SenderApi<K, V>,
    keys: impl IntoIterator<Item = K>,
    value: &V,
) {
    for k in keys {
        tx.send(k, value.clone()).unwrap();
    }
}

/// A summing merge.
pub fn sum_merge(p: i64, n: i64) -> Option<i64> {
    Some(p + n)
}

/// A summing merge that annihilates a key whose sum is zero (deltas that cancel).
pub fn sum_or_annihilate(p: i64, n: i64) -> Option<i64> {
    Some(p + n).filter(|s| *s != 0)
}

/// `n < 0` annihilates the pending slot; otherwise newer wins.
pub fn annihilating(_p: i64, n: i64) -> Option<i64> {
    if n < 0 {
        None
    } else {
        Some(n)
    }
}

/// An instant already past (or now, on a clock too young to go back).
pub fn past() -> Instant {
    let now = Instant::now();
    now.checked_sub(Duration::from_millis(50)).unwrap_or(now)
}

/// Busy-waits a random, short while, to spread where a racing operation
/// lands. Never used to order anything.
pub fn jitter(max: u32) {
    for _ in 0..fastrand::u32(0..max) {
        std::hint::spin_loop();
    }
}

/// Waits until a racing sender has started send number `target` (it always
/// runs to `sends`, so this ends), then a little more, so the close lands in
/// the middle of the stream while still racing the send in flight. Ordering by
/// an atomic, not by time.
/// Gives up if a thread of `crew` panicked (the sender may be the one).
pub fn close_near(progress: &AtomicU32, target: u32, sends: u32, crew: &Crew) {
    while progress.load(SeqCst) < target.min(sends - 1) && !crew.panicked() {
        std::hint::spin_loop();
    }
    jitter(200);
}

/// `normal`, or `tsan` when run under ThreadSanitizer (`.ci/tsan` sets
/// `KEYBUS_TSAN`): there every atomic is instrumented and spinning consumers
/// slow the senders to a crawl, so a smaller run exercises the same races.
pub fn tsan_scaled(normal: u64, tsan: u64) -> u64 {
    if std::env::var_os("KEYBUS_TSAN").is_some() {
        tsan
    } else {
        normal
    }
}

/// Runs `body` on a thread of its own and fails the test if it makes no
/// progress for `STALL`: `body` calls `beat(round)` once per round, from the
/// thread that would block behind a receiver that was never woken. A lost
/// wake-up then fails, naming the last round that finished, instead of hanging
/// the test binary (libtest's "has been running for over 60 seconds" never
/// ends). `STALL` is a watchdog, not a timing assertion: a healthy round takes
/// microseconds, even under ThreadSanitizer.
pub fn with_stall_watchdog(
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
