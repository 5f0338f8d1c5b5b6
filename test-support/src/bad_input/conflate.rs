//! Bad input for conflate, written once over [`Conflate`] and run against both
//! implementations by `tests/bad_input_conflate.rs` (with the state table's cases
//! in [`super::conflate_state`]): a receiver outliving its hub and every sender,
//! a merge that panics on every call, keys whose `Hash` makes every key collide
//! (or hashes nothing), `Duration::MAX` / far deadlines, zero timeouts and past
//! deadlines, user trait impls (`Hash`, `Eq`, `Clone` of key and value) that
//! panic mid-send, zero-sized keys and values.
//!
//! "No hang" is checked without a watchdog: after a close, a drained receiver must
//! answer `Closed` to `try_recv` (a leaked in-flight send would answer `Empty`
//! forever, and make `recv` hang). The threaded cases run their threads in a
//! [`Crew`], so a thread that panics fails the test instead of leaving the
//! others waiting. Nothing asserts on time.

use super::{Sprung, Touchy, Trap, Which};
use crate::conflate_api::*;
use crate::threads::Crew;
use futures::executor::block_on;
use futures::StreamExt as _;
use keybus::{RecvTimeoutError, TryRecvError};
use std::fmt;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll, Wake};
use std::time::{Duration, Instant};

pub use crate::conformance::support::{assert_fully_closed as assert_closed, drain};

/// A new hub (no merge: the incoming value wins), a sender and a receiver.
#[allow(clippy::type_complexity)]
fn hub_sender_receiver<I: Conflate, K: Key, V: Value>(
) -> (Hub<I, K, V>, Sender<I, K, V>, Receiver<I, K, V>) {
    let hub = Hub::<I, K, V>::new();
    let (tx, rx) = (hub.sender(), hub.receiver());
    (hub, tx, rx)
}

/// A deadline decades away (a representable `Instant`).
pub fn far_future() -> Instant {
    let now = Instant::now();
    [1u64 << 40, 1 << 32, 1 << 20]
        .into_iter()
        .find_map(|s| now.checked_add(Duration::from_secs(s)))
        .expect("a deadline a few days away is representable")
}

/// A waker that records that it was woken.
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, SeqCst);
    }
}

/// A key whose `Hash` makes every key collide with every other: it writes one
/// constant ([`Collide`]) or nothing at all ([`Silent`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Colliding<const WRITES: bool>(pub u32);

impl<const WRITES: bool> Hash for Colliding<WRITES> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        if WRITES {
            state.write_u64(0x5eed);
        }
    }
}

/// A key whose `Hash` writes a constant.
pub type Collide = Colliding<true>;
/// A key whose `Hash` writes nothing.
pub type Silent = Colliding<false>;

/// The colliding keys, made from and read back as a number.
pub trait TestKey: Key + fmt::Debug {
    fn of(id: u32) -> Self;
    fn id(&self) -> u32;
}

impl<const WRITES: bool> TestKey for Colliding<WRITES> {
    fn of(id: u32) -> Self {
        Colliding(id)
    }
    fn id(&self) -> u32 {
        self.0
    }
}

// ---- a receiver outliving its hub and every sender ----

pub fn receiver_after_hub_and_senders_dropped_drains_then_closed<I: Conflate>() {
    let hub = Hub::<I, u32, String>::new();
    let tx = hub.sender();
    let tx2 = tx.clone();
    let mut rx = hub.receiver();
    let mut idle = hub.receiver();
    let mut async_rx = hub.receiver();
    for k in [3, 1, 2, 1] {
        tx.send(k, format!("v{k}")).unwrap();
    }
    drop(idle.try_recv_all().unwrap());
    drop((hub, tx, tx2));
    // Pending values survive the graceful close by drop...
    assert_eq!(rx.len(), 3);
    assert!(!rx.is_closed());
    assert_eq!(rx.peek().unwrap().key, 3);
    // ...and are delivered by the blocking form, then Closed.
    let got: Vec<u32> = (0..3).map(|_| rx.recv().unwrap().key).collect();
    assert_eq!(got, [3, 1, 2]);
    assert_closed(&mut rx);
    // A receiver with nothing pending is closed at once: no hang.
    assert_closed(&mut idle);
    // The Stream drains too, then ends.
    let keys: Vec<u32> = block_on(async_rx.by_ref().map(|e| e.key).collect());
    assert_eq!(keys, [3, 1, 2]);
    assert_closed(&mut async_rx);
}

pub fn receiver_built_after_hub_and_senders_dropped_is_closed<I: Conflate>() {
    let hub = Hub::<I, u32, u32>::new();
    let tx = hub.sender();
    let builder = hub.receiver_builder().key(1);
    drop((hub, tx));
    // The builder is no send handle: the send side closed with the
    // last hub and sender, so the new receiver has nothing coming.
    let mut rx = builder.build();
    assert_closed(&mut rx);
}

pub fn sender_kept_alive_by_a_clone_of_a_dropped_hub<I: Conflate>() {
    let (hub, tx, mut rx) = hub_sender_receiver::<I, u32, u32>();
    drop(hub);
    tx.send(1, 1).unwrap();
    assert_eq!(rx.recv_timeout(Duration::MAX).unwrap().key, 1);
    assert_eq!(rx.try_recv().err(), Some(TryRecvError::Empty));
    // No closer: `tx` is the last send handle, and a panic here drops it.
    let crew = Crew::new("sender_kept_alive_by_a_clone_of_a_dropped_hub");
    let (got, mut rx) = crew.scope(|s| {
        let waiter = crew.spawn(s, move || {
            let got = rx.recv().map(|e| e.key);
            (got, rx)
        });
        tx.send(2, 2).unwrap();
        drop(tx);
        waiter.join().unwrap()
    });
    assert_eq!(got, Ok(2));
    assert_closed(&mut rx);
}

pub fn receiver_after_hard_close_and_drop_of_everything<I: Conflate>() {
    let (hub, tx, mut rx) = hub_sender_receiver::<I, u32, u32>();
    tx.send(1, 1).unwrap();
    hub.close_now();
    drop((hub, tx));
    assert_closed(&mut rx);
}

// ---- a merge that panics on every call ----

struct Refused;

fn refuse(_: u32, _: u32) -> Option<u32> {
    std::panic::resume_unwind(Box::new(Refused))
}

/// Documented: a panicking merge drops *that* receiver's slot; the
/// receivers before it (fan-out order) have the send, those after it
/// do not; the panic reaches the caller; the bus stays usable.
pub fn merge_panicking_on_every_call<I: Conflate>() {
    let hub = Hub::<I, u32, u32>::with_merge(refuse);
    let tx = hub.sender();
    let mut a = hub.receiver();
    let mut b = hub.receiver();
    let mut c = hub.receiver_builder().merge(|_, n| Some(n)).build();
    let send = |k: u32, v: u32| catch_unwind(AssertUnwindSafe(|| tx.send(k, v)));

    // New keys never call the merge.
    for k in 0..4 {
        assert!(send(k, 10).unwrap().is_ok());
    }
    // Key 1 again: `a` panics first; `b` and `c` never see the send.
    let payload = send(1, 11).expect_err("the merge's panic reaches send");
    assert!(payload.is::<Refused>());
    assert_eq!((a.len(), b.len(), c.len()), (3, 4, 4));
    // Again: 1 is not pending at `a` (fresh slot, at the back); `b`
    // panics and drops its slot; `c` does not see it.
    assert!(send(1, 12).is_err());
    assert_eq!((a.len(), b.len(), c.len()), (4, 3, 4));
    // Once more: `a` panics again.
    assert!(send(1, 13).is_err());
    assert_eq!((a.len(), b.len(), c.len()), (3, 3, 4));
    // Now `a` and `b` take it fresh and `c` (own merge) coalesces.
    assert!(send(1, 14).unwrap().is_ok());
    assert_eq!(
        drain(&mut a),
        [(0, 10, 1), (2, 10, 1), (3, 10, 1), (1, 14, 1)]
    );
    assert_eq!(
        drain(&mut b),
        [(0, 10, 1), (2, 10, 1), (3, 10, 1), (1, 14, 1)]
    );
    assert_eq!(
        drain(&mut c),
        [(0, 10, 1), (1, 14, 2), (2, 10, 1), (3, 10, 1)]
    );

    // Hammering one key: memory stays bounded by keys (len <= 1).
    for v in 0..10_000 {
        let _ = send(7, v);
        assert!(a.len() <= 1 && b.len() <= 1 && c.len() <= 1);
    }
    drop((drain(&mut a), drain(&mut b), drain(&mut c)));

    // Still usable: a parked receiver is woken, close drains, then Closed.
    let crew = Crew::new("merge_panicking_on_every_call");
    crew.on_panic(|| hub.close_now());
    crew.scope(|s| {
        let waiter = crew.spawn(s, || a.recv().map(|e| e.key));
        assert!(send(42, 1).unwrap().is_ok());
        assert_eq!(waiter.join().unwrap(), Ok(42));
    });
    tx.close();
    assert_eq!(drain(&mut b), [(42, 1, 1)]);
    assert_eq!(drain(&mut c), [(42, 1, 1)]);
    for rx in [&mut a, &mut b, &mut c] {
        assert_closed(rx);
    }
}

/// Many threads whose every coalescing send panics, a consumer on
/// each receiver, then a graceful close: nothing hangs (the in-flight
/// count always comes back down), every receiver reaches Closed.
pub fn merge_panicking_on_every_call_from_many_threads<I: Conflate>() {
    let hub = Hub::<I, u32, u32>::with_merge(refuse);
    let tx = hub.sender();
    let receivers: Vec<Receiver<I, u32, u32>> = (0..3).map(|_| hub.receiver()).collect();
    let crew = Crew::new("merge_panicking_from_many_threads");
    crew.on_panic(|| hub.close_now());
    let (panics, delivered) = crew.scope(|s| {
        let consumers: Vec<_> = receivers
            .into_iter()
            .map(|mut rx| {
                crew.spawn(s, move || {
                    let mut n = 0u64;
                    while let Ok(e) = rx.recv() {
                        assert_eq!(e.sends, 1, "a merge that never returns merged");
                        n += 1;
                    }
                    assert_closed(&mut rx);
                    n
                })
            })
            .collect();
        let senders: Vec<_> = (0..3)
            .map(|t| {
                let tx = tx.clone();
                crew.spawn(s, move || {
                    let mut panics = 0u64;
                    for i in 0..2_000u32 {
                        match catch_unwind(AssertUnwindSafe(|| tx.send(i % 5, t))) {
                            Ok(r) => r.unwrap(),
                            Err(p) => {
                                assert!(p.is::<Refused>());
                                panics += 1;
                            }
                        }
                    }
                    panics
                })
            })
            .collect();
        let panics: u64 = senders.into_iter().map(|h| h.join().unwrap()).sum();
        tx.close();
        let delivered: u64 = consumers.into_iter().map(|h| h.join().unwrap()).sum();
        (panics, delivered)
    });
    // Not a tautology: each receiver delivered at most every send.
    assert!(delivered <= 3 * 3 * 2_000);
    println!("{panics} panics, {delivered} deliveries");
}

// ---- adversarial Hash: every key collides ----

/// Slow (every lookup scans every key) but correct.
pub fn colliding_keys_are_correct<I: Conflate, K: TestKey>() {
    const KEYS: u32 = if cfg!(debug_assertions) { 600 } else { 3_000 };
    let hub =
        Hub::<I, K, u64>::with_merge(|p: u64, n: u64| if n == 0 { None } else { Some(p + n) });
    let tx = hub.sender();
    let mut all = hub.receiver();
    let mut one = hub.receiver_builder().key(K::of(7)).build();
    let mut odd = hub
        .receiver_builder()
        .key_filter(|k: &K| k.id() % 2 == 1)
        .build();
    // First touch in reverse order, then coalesce everything.
    for k in (0..KEYS).rev() {
        tx.send(K::of(k), 1).unwrap();
    }
    for k in 0..KEYS {
        tx.send(K::of(k), 2).unwrap();
    }
    assert_eq!(
        (all.len(), one.len(), odd.len()),
        (KEYS as usize, 1, KEYS as usize / 2)
    );
    // Annihilate every third key (a middle-of-queue removal each).
    for k in (0..KEYS).step_by(3) {
        tx.send(K::of(k), 0).unwrap();
    }
    let expect: Vec<(u32, u64, u64)> = (0..KEYS)
        .rev()
        .filter(|k| k % 3 != 0)
        .map(|k| (k, 3, 2))
        .collect();
    assert_eq!(all.peek().unwrap().key.id(), expect[0].0);
    let cut = all.try_recv_all().unwrap();
    let cut: Vec<(u32, u64, u64)> = cut
        .into_iter()
        .map(|e| (e.key.id(), e.value, e.sends))
        .collect();
    assert_eq!(cut, expect);
    assert_eq!(drain(&mut one), [(K::of(7), 3, 2)]);
    let odd_keys: Vec<u32> = drain(&mut odd).into_iter().map(|e| e.0.id()).collect();
    let expect_odd: Vec<u32> = (0..KEYS)
        .rev()
        .filter(|k| k % 2 == 1 && k % 3 != 0)
        .collect();
    assert_eq!(odd_keys, expect_odd);
    tx.close();
    assert_closed(&mut all);
    assert_closed(&mut one);
    assert_closed(&mut odd);
}

/// Senders on colliding keys racing a consumer: every send counted
/// once (summing merge), nothing hangs.
pub fn colliding_keys_under_threads<I: Conflate, K: TestKey>() {
    const KEYS: u32 = 200;
    const PER: u64 = if cfg!(debug_assertions) {
        2_000
    } else {
        20_000
    };
    let hub = Hub::<I, K, u64>::with_merge(|p: u64, n: u64| Some(p + n));
    let tx = hub.sender();
    let mut rx = hub.receiver();
    // No closer: the test's thread owns the hub and the last sender, and
    // drops them (closing gracefully) whether it panics or not.
    let crew = Crew::new("colliding_keys_under_threads");
    let total = crew.scope(|s| {
        let consumer = crew.spawn(s, || {
            let mut total = 0u64;
            while let Ok(e) = rx.recv() {
                assert!(e.key.id() < KEYS);
                assert_eq!(e.value, e.sends);
                total += e.value;
            }
            total
        });
        for t in 0..2u32 {
            let tx = tx.clone();
            crew.spawn(s, move || {
                for i in 0..PER {
                    tx.send(K::of((i as u32 * 7 + t) % KEYS), 1).unwrap();
                }
            });
        }
        drop(tx);
        drop(hub);
        consumer.join().unwrap()
    });
    assert_eq!(total, 2 * PER);
    assert_closed(&mut rx);
}

// ---- timeouts at the extremes ----

pub fn duration_max_and_far_deadline_wait_and_wake<I: Conflate>() {
    let (hub, tx, mut rx) = hub_sender_receiver::<I, u32, u32>();
    let crew = Crew::new("duration_max_and_far_deadline");
    crew.on_panic(|| hub.close_now());
    // A ready value comes back at once.
    tx.send(1, 1).unwrap();
    assert_eq!(rx.recv_timeout(Duration::MAX).unwrap().key, 1);
    tx.send(2, 2).unwrap();
    assert_eq!(rx.recv_deadline(far_future()).unwrap().key, 2);
    // Nothing ready: they park until a send from another thread.
    crew.scope(|s| {
        let waiter = crew.spawn(s, || {
            let a = rx.recv_timeout(Duration::MAX).map(|e| e.key);
            let b = rx.recv_deadline(far_future()).map(|e| e.key);
            (a, b)
        });
        tx.send(3, 3).unwrap();
        tx.send(4, 4).unwrap();
        let (a, b) = waiter.join().unwrap();
        assert_eq!(a, Ok(3));
        assert_eq!(b, Ok(4));
    });
    // ...or until a close.
    crew.scope(|s| {
        let waiter = crew.spawn(s, || rx.recv_timeout(Duration::MAX).err());
        tx.close();
        assert_eq!(waiter.join().unwrap(), Some(RecvTimeoutError::Closed));
    });
    assert_closed(&mut rx);
}

pub fn zero_timeouts_and_past_deadlines_never_wait<I: Conflate>() {
    let (_hub, tx, mut rx) = hub_sender_receiver::<I, u32, u32>();
    let long_ago = Instant::now()
        .checked_sub(Duration::from_secs(3600))
        .unwrap_or_else(Instant::now);
    let timeout = Some(RecvTimeoutError::Timeout);
    assert_eq!(rx.recv_timeout(Duration::ZERO).err(), timeout);
    assert_eq!(rx.recv_deadline(long_ago).err(), timeout);
    assert_eq!(rx.recv_timeout(Duration::from_nanos(1)).err(), timeout);
    tx.send(1, 1).unwrap();
    tx.send(2, 2).unwrap();
    // A ready value wins over an expired deadline.
    assert_eq!(rx.recv_timeout(Duration::ZERO).unwrap().key, 1);
    assert_eq!(rx.recv_deadline(long_ago).unwrap().key, 2);
    tx.close();
    let closed = Some(RecvTimeoutError::Closed);
    assert_eq!(rx.recv_timeout(Duration::ZERO).err(), closed);
    assert_eq!(rx.recv_deadline(long_ago).err(), closed);
}

// ---- user trait impls that panic mid-send ----

/// After a panic out of `K: Hash`, `K: Eq`, `K: Clone` or `V: Clone`
/// at any point of a send, each receiver is consistent (`len` agrees
/// with what it delivers, no key twice), later sends reach every
/// receiver, and a graceful close drains to `Closed` (no in-flight
/// send left counted).
pub fn survives_panicking_trait<I: Conflate>(which: Which, in_value: bool) {
    for nth in 1..=12u32 {
        // Keys carry one trap, values another: only `armed` springs.
        let (kt, vt) = (Arc::new(Trap::default()), Arc::new(Trap::default()));
        let armed = if in_value { &vt } else { &kt };
        let pair = |id: u32| (Touchy::new(id, &kt), Touchy::new(id, &vt));
        let hub = Hub::<I, Touchy, Touchy>::new();
        let tx = hub.sender();
        let mut rxs: Vec<Receiver<I, Touchy, Touchy>> = vec![
            hub.receiver(),
            hub.receiver_builder()
                .key_filter(|k: &Touchy| k.id != 99)
                .build(),
            hub.receiver_builder().merge(|_, n| Some(n)).build(),
        ];
        for id in 0..3 {
            let (k, v) = pair(id);
            tx.send(k, v).unwrap();
        }
        // A coalescing send, then a new key, each with the trap armed.
        let mut panics = 0;
        for id in [1, 5] {
            let (k, v) = pair(id);
            armed.arm(which, nth);
            let r = catch_unwind(AssertUnwindSafe(|| tx.send(k, v)));
            armed.disarm();
            if let Err(p) = r {
                assert!(p.downcast_ref::<Sprung>().is_some_and(|s| s.0 == which));
                panics += 1;
            }
        }
        for (i, rx) in rxs.iter_mut().enumerate() {
            let len = rx.len();
            let got: Vec<u32> = rx.try_iter().map(|e| e.key.id).collect();
            assert_eq!(
                len,
                got.len(),
                "{which:?} panicking at call {nth} ({panics} panics): receiver {i} \
                 reported len {len} but delivered {got:?}"
            );
            let mut unique = got.clone();
            unique.sort_unstable();
            unique.dedup();
            assert_eq!(unique.len(), got.len(), "a key delivered twice: {got:?}");
            assert!(got.iter().all(|id| [0, 1, 2, 5].contains(id)));
            assert!(rx.is_empty());
        }
        // Usable: every receiver gets later sends, then Closed.
        let (k, v) = pair(8);
        tx.send(k, v).unwrap();
        tx.close();
        for (i, rx) in rxs.iter_mut().enumerate() {
            let got: Vec<u32> = rx.try_iter().map(|e| e.key.id).collect();
            assert_eq!(got, [8], "{which:?} at call {nth}: receiver {i}");
            assert_eq!(
                rx.try_recv().err(),
                Some(TryRecvError::Closed),
                "{which:?} at call {nth}: receiver {i} never closes (a send still counted in flight?)"
            );
            assert_closed(rx);
        }
        drop((rxs, hub, tx, pair));
        // Every key and value the bus held was dropped.
        assert_eq!(
            Arc::strong_count(&kt),
            1,
            "{which:?} at call {nth}: a key leaked"
        );
        assert_eq!(
            Arc::strong_count(&vt),
            1,
            "{which:?} at call {nth}: a value leaked"
        );
    }
}

/// A send that panics in `K::clone` must not cost a parked consumer
/// its wake-up for a later send. Deterministic: the consumer is an
/// async receive polled once (so it is registered), and the waker
/// records whether anything woke it.
pub fn key_clone_panic_loses_no_wakeup<I: Conflate>() {
    for nth in 1..=4u32 {
        let trap = Arc::new(Trap::default());
        let (_hub, tx, mut rx) = hub_sender_receiver::<I, Touchy, u32>();
        let flag = Arc::new(Flag(Default::default()));
        let waker = std::task::Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        let mut fut = std::pin::pin!(rx.recv_async());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        trap.arm(Which::Clone, nth);
        let panicked =
            catch_unwind(AssertUnwindSafe(|| tx.send(Touchy::new(1, &trap), 1))).is_err();
        trap.disarm();
        tx.send(Touchy::new(2, &trap), 2).unwrap();
        assert!(
            flag.0.load(SeqCst),
            "K::clone panicking at call {nth} (panicked: {panicked}): a later send \
             made key 2 pending but never woke the parked consumer"
        );
        let want = if panicked { 2 } else { 1 };
        match fut.as_mut().poll(&mut cx) {
            Poll::Ready(Ok(e)) => assert_eq!(e.key.id, want),
            other => panic!("nothing ready after the wake-up: {other:?}"),
        }
    }
}

pub fn value_clone_panicking_in_peek<I: Conflate>() {
    let trap = Arc::new(Trap::default());
    let (hub, tx, mut rx) = hub_sender_receiver::<I, u32, Touchy>();
    tx.send(1, Touchy::new(1, &trap)).unwrap();
    tx.send(2, Touchy::new(2, &trap)).unwrap();
    trap.arm(Which::Clone, 1);
    assert!(catch_unwind(AssertUnwindSafe(|| rx.peek())).is_err());
    trap.disarm();
    // Nothing was taken or lost.
    assert_eq!(rx.len(), 2);
    assert_eq!(rx.peek().unwrap().key, 1);
    assert_eq!(
        rx.try_iter().map(|e| e.value.id).collect::<Vec<_>>(),
        [1, 2]
    );
    tx.close();
    assert_closed(&mut rx);
    drop((rx, hub, tx));
    assert_eq!(Arc::strong_count(&trap), 1, "a value leaked");
}

// ---- zero-sized keys and values ----

pub fn zero_sized_keys_and_values<I: Conflate>() {
    let (_hub, tx, mut rx) = hub_sender_receiver::<I, (), ()>();
    for _ in 0..1_000 {
        tx.send((), ()).unwrap();
    }
    assert_eq!(rx.len(), 1);
    assert_eq!(rx.recv().unwrap().sends, 1_000);
    tx.close();
    assert_closed(&mut rx);
}
