//! Soak: a bounded stress run of both buses, written once and instantiated for
//! `keybus::{conflate, broadcast}` and `keybus::baseline::{conflate, broadcast}`.
//!
//! Each run is a sequence of *epochs*, each on a new hub / buffer, until its share
//! of the time budget is spent. The budget is `KEYBUS_SOAK_SECS` seconds for the
//! whole file (default 20 in release builds, 2 in debug builds, so a plain
//! `cargo test` stays fast), split evenly between the four runs; the runs take
//! turns (one lock) because they share one counting allocator. The time budget
//! only bounds how many epochs run: nothing here asserts on time.
//!
//! conflate epochs: producers send to many keys (a few hot ones), with values whose
//! merges sum a count, so every send is accounted for; some sends annihilate their
//! key, some poison it (merges that panic, caught with `catch_unwind` around
//! `send`); stable receivers with key filters and their own merges are consumed
//! with every receive form, some slowly, some leaving early; a churn thread makes
//! and drops receivers all the time; the epoch ends with `Sender::close` or
//! `Hub::close` at a random moment, or with every send handle dropped.
//!
//! broadcast epochs: two writers (one using `append_if_changed`), readers with
//! every read form, some slow enough to be lapped (gaps), some leaving early, a
//! snapshot-then-subscribe thread, and a close at a random moment.
//!
//! Checked:
//! - conservation. conflate, per stable receiver, counted at the producers: every
//!   send offered to it is filtered, delivered (as `Event::sends`), annihilated,
//!   lost in a panicking merge, or (hard close, leaving early) abandoned; after a
//!   graceful close nothing is abandoned. Globally, with a value type that counts
//!   its own clones and drops: every unit of count created (a send, a clone) is
//!   delivered, annihilated, lost in a panic, refused (`SendError`), peeked, or
//!   dropped by the bus, and nothing else, so nothing leaks and nothing is
//!   delivered twice. broadcast, per reader: entries read + revisions reported
//!   skipped by gaps = revisions appended after its first cursor; every entry
//!   carries exactly the value appended under its revision.
//! - memory: peak live heap bytes of an epoch stay under a bound proportional to
//!   keys × receivers (broadcast: capacity × readers), and once every hub,
//!   handle and receiver of an epoch is dropped, live bytes are back at the
//!   starting level (within a small tolerance).
//!
//! Run the full soak with `cargo test --release --test soak -- --nocapture`;
//! `KEYBUS_SOAK_SEED` repeats a run's epoch shapes (its seed is printed).

use keybus_test_support::counting::Counting;
use keybus_test_support::soak::{Meter, Peaks, BYTES_FIXED, DEBUG};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Counts live heap bytes for the memory bounds.
#[global_allocator]
static ALLOC: Counting = Counting;

// ---------------------------------------------------------------------------
// conflate: a value that accounts for itself

/// A unit of count created, moved or destroyed. Every counter is in units of
/// sends: a value's `count` is the number of sends folded into it.
struct Mass {
    /// One per send attempt.
    created: AtomicU64,
    /// The count of every clone the bus made (fan-out, peek, ...).
    cloned: AtomicU64,
    delivered: AtomicU64,
    annihilated: AtomicU64,
    /// Both inputs of a merge that panicked.
    panicked: AtomicU64,
    /// Handed back in a `SendError`.
    refused: AtomicU64,
    /// Copies returned by `peek`.
    peeked: AtomicU64,
    /// Dropped by the bus with a count still in it: abandoned by a close or a
    /// receiver's drop, or a transient copy of the bus's own.
    dropped: AtomicU64,
}

impl Mass {
    const fn new() -> Self {
        Mass {
            created: AtomicU64::new(0),
            cloned: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            annihilated: AtomicU64::new(0),
            panicked: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            peeked: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    fn counters(&self) -> [&AtomicU64; 8] {
        [
            &self.created,
            &self.cloned,
            &self.delivered,
            &self.annihilated,
            &self.panicked,
            &self.refused,
            &self.peeked,
            &self.dropped,
        ]
    }

    fn reset(&self) {
        for c in self.counters() {
            c.store(0, Relaxed);
        }
    }

    fn get(c: &AtomicU64) -> u64 {
        c.load(Relaxed)
    }

    /// Everything created went somewhere, exactly once.
    fn assert_conserved(&self, epoch: usize) {
        let g = Mass::get;
        let made = g(&self.created) + g(&self.cloned);
        let gone = g(&self.delivered)
            + g(&self.annihilated)
            + g(&self.panicked)
            + g(&self.refused)
            + g(&self.peeked)
            + g(&self.dropped);
        assert_eq!(
            made,
            gone,
            "epoch {epoch}: mass not conserved: created {} + cloned {} != delivered {} + \
             annihilated {} + panicked {} + refused {} + peeked {} + dropped {}",
            g(&self.created),
            g(&self.cloned),
            g(&self.delivered),
            g(&self.annihilated),
            g(&self.panicked),
            g(&self.refused),
            g(&self.peeked),
            g(&self.dropped)
        );
    }
}

/// The process-wide ledger of the conflate epoch in progress (runs take turns).
static MASS: Mass = Mass::new();

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Plain,
    /// Merging it into a pending slot annihilates the key.
    Annihilate,
    /// Merging it into a pending slot panics, at receivers whose merge is armed.
    Poison,
}

/// The value sent: `count` sends folded into it (1 when sent).
#[derive(Debug)]
struct W {
    count: u64,
    kind: Kind,
}

impl W {
    fn sent(kind: Kind) -> W {
        MASS.created.fetch_add(1, Relaxed);
        W { count: 1, kind }
    }

    /// Takes the count out (so dropping the husk records nothing) and books it.
    fn settle(mut self, into: &AtomicU64) -> u64 {
        let count = std::mem::take(&mut self.count);
        into.fetch_add(count, Relaxed);
        count
    }

    /// Takes the count out without booking it: it moves into a merged value.
    fn take(mut self) -> u64 {
        std::mem::take(&mut self.count)
    }
}

impl Clone for W {
    fn clone(&self) -> W {
        MASS.cloned.fetch_add(self.count, Relaxed);
        W {
            count: self.count,
            kind: self.kind,
        }
    }
}

impl Drop for W {
    fn drop(&mut self) {
        if self.count > 0 {
            MASS.dropped.fetch_add(self.count, Relaxed);
        }
    }
}

/// Per stable receiver: what its consumer and its merge saw.
#[derive(Default)]
struct RxLedger {
    delivered: AtomicU64,
    annihilated: AtomicU64,
    panicked: AtomicU64,
}

/// Where a merge panicked, for the producer that caught it: a stable receiver's
/// index, or [`CHURN`]. Merges run on the sending thread.
mod panicked_at {
    use std::cell::Cell;

    thread_local! {
        static AT: Cell<Option<usize>> = const { Cell::new(None) };
    }

    pub fn set(at: usize) {
        AT.with(|c| c.set(Some(at)));
    }

    pub fn take() -> Option<usize> {
        AT.with(Cell::take)
    }
}

/// Receivers made by the churn thread (all registered after the stable ones).
const CHURN: usize = usize::MAX;

/// The payload of a merge's panic (`resume_unwind`: no panic-hook output).
struct Refused;

/// A summing merge that books annihilations and panics, in `MASS` and in
/// `ledger`; `at` names the receiver for [`panicked_at`].
fn merge_fn(
    at: usize,
    ledger: Option<std::sync::Arc<RxLedger>>,
    armed: bool,
) -> impl Fn(W, W) -> Option<W> + Send + Sync + 'static {
    move |pending: W, incoming: W| match incoming.kind {
        Kind::Poison if armed => {
            let lost = pending.take() + incoming.take();
            MASS.panicked.fetch_add(lost, Relaxed);
            if let Some(l) = &ledger {
                l.panicked.fetch_add(lost, Relaxed);
            }
            panicked_at::set(at);
            std::panic::resume_unwind(Box::new(Refused));
        }
        Kind::Annihilate => {
            let gone = pending.take() + incoming.take();
            MASS.annihilated.fetch_add(gone, Relaxed);
            if let Some(l) = &ledger {
                l.annihilated.fetch_add(gone, Relaxed);
            }
            None
        }
        _ => Some(W {
            count: pending.take() + incoming.take(),
            kind: Kind::Plain,
        }),
    }
}

#[derive(Clone, Copy, Debug)]
enum Filter {
    All,
    Key(u64),
    Residue(u64, u64),
}

impl Filter {
    fn accepts(self, key: u64) -> bool {
        match self {
            Filter::All => true,
            Filter::Key(k) => key == k,
            Filter::Residue(m, r) => key % m == r,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Consume {
    Recv,
    RecvTimeout,
    TryRecvAll,
    TryIter,
    Async,
    Stream,
    Iter,
}

const CONSUME_FORMS: [Consume; 7] = [
    Consume::Recv,
    Consume::RecvTimeout,
    Consume::TryRecvAll,
    Consume::TryIter,
    Consume::Async,
    Consume::Stream,
    Consume::Iter,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    /// `Sender::close` at a random moment while producers send.
    SenderClose,
    /// `Hub::close` at a random moment while producers send.
    HubClose,
    /// Producers finish; then every `Hub` and `Sender` handle is dropped.
    DropAll,
}

/// A stable receiver of one epoch: registered before the producers start, in
/// index order (= fan-out order).
#[derive(Clone, Copy, Debug)]
struct Stable {
    filter: Filter,
    armed: bool,
    consume: Consume,
    slow: bool,
    /// Closes itself after this many events.
    leave_after: Option<u64>,
}

/// What a producer counted, per stable receiver.
#[derive(Default, Debug)]
struct Tally {
    attempts: u64,
    ok: u64,
    refused: u64,
    panics: u64,
    accepted: Vec<u64>,
    filtered: Vec<u64>,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        self.attempts += other.attempts;
        self.ok += other.ok;
        self.refused += other.refused;
        self.panics += other.panics;
        for (a, b) in self.accepted.iter_mut().zip(&other.accepted) {
            *a += b;
        }
        for (a, b) in self.filtered.iter_mut().zip(&other.filtered) {
            *a += b;
        }
    }
}

/// Run totals, printed at the end.
#[derive(Default, Debug)]
struct ConflateTotals {
    endings: [usize; 3],
    attempts: u64,
    ok: u64,
    refused: u64,
    panics: u64,
    offered: u64,
    filtered: u64,
    delivered: u64,
    annihilated: u64,
    panicked: u64,
    abandoned: u64,
    churned_receivers: u64,
    peaks: Peaks,
}

/// Bytes allowed per pending key per receiver (a slot, a queue ticket, table
/// slack: hash tables grow by doubling and never shrink), and per receiver.
const BYTES_PER_KEY_PER_RECEIVER: usize = 512;
const BYTES_PER_RECEIVER: usize = 16 << 10;

/// Most receivers the churn thread keeps alive at once (parked plus current).
const CHURN_KEEP: usize = 6;

macro_rules! soak_conflate {
    ($name:ident, $($m:ident)::+) => {
        #[test]
        fn $name() {
            use $($m)::+ as imp;
            use futures::executor::block_on;
            use futures::StreamExt as _;
            use imp::{Event, Hub, Receiver, RecvTimeoutError, Sender, TryRecvError};
            use std::panic::{catch_unwind, AssertUnwindSafe};
            use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::{Relaxed, SeqCst}};
            use std::sync::Arc;
            use std::thread;

            /// Checks and books one delivered event.
            fn take(e: Event<u64, W>, filter: Filter, ledger: Option<&RxLedger>) {
                assert!(filter.accepts(e.key), "key {} got past the filter {filter:?}", e.key);
                assert_eq!(e.sends, e.value.count, "sends disagrees with the merged count");
                assert!(e.sends >= 1);
                let n = e.value.settle(&MASS.delivered);
                if let Some(l) = ledger {
                    l.delivered.fetch_add(n, Relaxed);
                }
            }

            fn peek(rx: &mut Receiver<u64, W>, filter: Filter) {
                if let Ok(e) = rx.peek() {
                    assert!(filter.accepts(e.key));
                    assert_eq!(e.sends, e.value.count);
                    e.value.settle(&MASS.peeked);
                }
            }

            fn dawdle(rng: &mut fastrand::Rng) {
                match rng.u8(0..16) {
                    0 => thread::sleep(Duration::from_micros(rng.u64(0..300))),
                    1..=4 => thread::yield_now(),
                    _ => {}
                }
            }

            /// Consumes a stable receiver until closed (or until it leaves).
            fn consume(mut rx: Receiver<u64, W>, spec: Stable, ledger: &RxLedger, seed: u64) {
                let mut rng = fastrand::Rng::with_seed(seed);
                let f = spec.filter;
                let l = Some(ledger);
                let mut events = 0u64;
                loop {
                    if spec.leave_after.is_some_and(|n| events >= n) {
                        rx.close();
                        assert!(rx.is_closed());
                        assert_eq!(rx.len(), 0);
                        assert_eq!(rx.try_recv().err(), Some(TryRecvError::Closed));
                        return;
                    }
                    if spec.slow {
                        dawdle(&mut rng);
                    }
                    if rng.u8(0..32) == 0 {
                        peek(&mut rx, f);
                    }
                    let open = match spec.consume {
                        Consume::Recv => rx.recv().map(|e| take(e, f, l)).is_ok(),
                        Consume::RecvTimeout => {
                            match rx.recv_timeout(Duration::from_micros(rng.u64(0..500))) {
                                Ok(e) => {
                                    take(e, f, l);
                                    true
                                }
                                Err(RecvTimeoutError::Timeout) => true,
                                Err(RecvTimeoutError::Closed) => false,
                            }
                        }
                        Consume::TryRecvAll => match rx.try_recv_all() {
                            Ok(batch) => {
                                assert!(!batch.is_empty());
                                let mut keys: Vec<u64> = batch.iter().map(|e| e.key).collect();
                                keys.sort_unstable();
                                keys.dedup();
                                assert_eq!(keys.len(), batch.len(), "a key twice in one cut");
                                events += batch.len() as u64 - 1;
                                batch.into_iter().for_each(|e| take(e, f, l));
                                true
                            }
                            Err(TryRecvError::Empty) => {
                                thread::yield_now();
                                true
                            }
                            Err(TryRecvError::Closed) => false,
                        },
                        Consume::TryIter => {
                            let n = rx.try_iter().take(rng.usize(1..64)).map(|e| take(e, f, l)).count();
                            events += (n as u64).saturating_sub(1);
                            if n == 0 {
                                match rx.try_recv() {
                                    Ok(e) => take(e, f, l),
                                    Err(TryRecvError::Empty) => thread::yield_now(),
                                    Err(TryRecvError::Closed) => break,
                                }
                            }
                            true
                        }
                        Consume::Async => block_on(rx.recv_async()).map(|e| take(e, f, l)).is_ok(),
                        Consume::Stream => block_on(rx.next()).map(|e| take(e, f, l)).is_some(),
                        Consume::Iter => {
                            // A bounded stretch of the blocking iterator, so the
                            // loop can still leave early.
                            let want = rng.usize(1..64);
                            let n = rx.iter().take(want).map(|e| take(e, f, l)).count();
                            events += (n as u64).saturating_sub(1);
                            n == want
                        }
                    };
                    if !open {
                        break;
                    }
                    events += 1;
                }
                // Closed is terminal: every form says so.
                assert!(rx.is_closed());
                assert_eq!(rx.try_recv().err(), Some(TryRecvError::Closed));
                assert_eq!(rx.try_recv_all().err(), Some(TryRecvError::Closed));
                assert_eq!(rx.recv_timeout(Duration::ZERO).err(), Some(RecvTimeoutError::Closed));
            }

            fn pick_key(rng: &mut fastrand::Rng, keys: u64) -> u64 {
                if rng.bool() {
                    rng.u64(0..keys.min(8))
                } else {
                    rng.u64(0..keys)
                }
            }

            fn produce(
                tx: Sender<u64, W>,
                stable: &[Stable],
                keys: u64,
                sends: u64,
                progress: &AtomicU64,
                seed: u64,
            ) -> Tally {
                let mut rng = fastrand::Rng::with_seed(seed);
                let mut t = Tally {
                    accepted: vec![0; stable.len()],
                    filtered: vec![0; stable.len()],
                    ..Tally::default()
                };
                for _ in 0..sends {
                    progress.fetch_add(1, SeqCst);
                    let key = pick_key(&mut rng, keys);
                    let kind = match rng.u16(0..1000) {
                        0..=2 => Kind::Poison,
                        3..=12 => Kind::Annihilate,
                        _ => Kind::Plain,
                    };
                    t.attempts += 1;
                    let _ = panicked_at::take();
                    // Offered to stable receivers 0..reached.
                    let reached = match catch_unwind(AssertUnwindSafe(|| tx.send(key, W::sent(kind)))) {
                        Ok(Ok(())) => {
                            assert_eq!(t.refused, 0, "Ok after Err");
                            t.ok += 1;
                            stable.len()
                        }
                        Ok(Err(e)) => {
                            t.refused += 1;
                            let (k, w) = e.into_inner();
                            assert_eq!(k, key);
                            w.settle(&MASS.refused);
                            0
                        }
                        Err(payload) => {
                            assert!(payload.is::<Refused>(), "a foreign panic escaped send");
                            assert_eq!(kind, Kind::Poison);
                            t.panics += 1;
                            match panicked_at::take().expect("a merge panicked without saying where") {
                                CHURN => stable.len(),
                                i => {
                                    assert!(stable[i].armed && stable[i].filter.accepts(key));
                                    i + 1
                                }
                            }
                        }
                    };
                    for (i, s) in stable.iter().enumerate().take(reached) {
                        if s.filter.accepts(key) {
                            t.accepted[i] += 1;
                        } else {
                            t.filtered[i] += 1;
                        }
                    }
                    if rng.u16(0..512) == 0 {
                        thread::yield_now();
                    }
                }
                t
            }

            /// Makes, reads a little from, and drops or parks receivers until
            /// `done`; returns the parked ones.
            fn churn(hub: Hub<u64, W>, keys: u64, done: &AtomicBool, seed: u64) -> (Vec<(Receiver<u64, W>, Filter)>, u64) {
                let mut rng = fastrand::Rng::with_seed(seed);
                let mut parked: Vec<(Receiver<u64, W>, Filter)> = Vec::new();
                let mut made = 0u64;
                while !done.load(SeqCst) {
                    let closed_before = hub.is_closed();
                    let (mut rx, filter) = match rng.u8(0..4) {
                        0 => (hub.receiver(), Filter::All),
                        1 => {
                            let k = pick_key(&mut rng, keys);
                            (hub.receiver_builder().key(k).build(), Filter::Key(k))
                        }
                        2 => {
                            let m = rng.u64(2..5);
                            let r = rng.u64(0..m);
                            let rx = hub
                                .receiver_builder()
                                .key_filter(move |k: &u64| k % m == r)
                                .merge(merge_fn(CHURN, None, rng.bool()))
                                .build();
                            (rx, Filter::Residue(m, r))
                        }
                        _ => (hub.receiver_builder().merge(merge_fn(CHURN, None, false)).build(), Filter::All),
                    };
                    made += 1;
                    if closed_before {
                        // Made after a hard close: born closed.
                        assert!(rx.is_closed());
                        assert_eq!(rx.len(), 0);
                        assert_eq!(rx.try_recv().err(), Some(TryRecvError::Closed));
                    }
                    for _ in 0..rng.usize(0..24) {
                        let r = match rng.u8(0..5) {
                            0 => rx.try_recv().map(|e| take(e, filter, None)),
                            1 => rx.try_recv_all().map(|b| b.into_iter().for_each(|e| take(e, filter, None))),
                            2 => {
                                peek(&mut rx, filter);
                                Ok(())
                            }
                            3 => match rx.recv_timeout(Duration::ZERO) {
                                Ok(e) => Ok(take(e, filter, None)),
                                Err(RecvTimeoutError::Timeout) => Err(TryRecvError::Empty),
                                Err(RecvTimeoutError::Closed) => Err(TryRecvError::Closed),
                            },
                            _ => {
                                thread::yield_now();
                                Ok(())
                            }
                        };
                        if r == Err(TryRecvError::Closed) {
                            break;
                        }
                    }
                    match rng.u8(0..3) {
                        0 => drop(rx),
                        1 => {
                            rx.close();
                            assert!(rx.is_closed());
                            assert_eq!(rx.len(), 0);
                        }
                        _ => {
                            parked.push((rx, filter));
                            if parked.len() >= CHURN_KEEP {
                                drop(parked.swap_remove(rng.usize(..parked.len())));
                            }
                        }
                    }
                }
                // The hub handle is dropped here, before the epoch ends.
                (parked, made)
            }

            fn epoch(index: usize, rng: &mut fastrand::Rng, totals: &mut ConflateTotals, meter: &Meter) {
                MASS.reset();
                let before = meter.reset_peak();
                let keys = if rng.bool() { rng.u64(1..64) } else { rng.u64(64..4096) };
                let stable: Vec<Stable> = (0..rng.usize(2..=5))
                    .map(|_| Stable {
                        filter: match rng.u8(0..4) {
                            0 | 1 => Filter::All,
                            2 => Filter::Key(pick_key(rng, keys)),
                            _ => {
                                let m = rng.u64(2..5);
                                Filter::Residue(m, rng.u64(0..m))
                            }
                        },
                        armed: rng.bool(),
                        consume: CONSUME_FORMS[rng.usize(..CONSUME_FORMS.len())],
                        slow: rng.u8(0..3) == 0,
                        leave_after: (rng.u8(0..6) == 0).then(|| rng.u64(0..2_000)),
                    })
                    .collect();
                let ending = match rng.u8(0..3) {
                    0 => Ending::SenderClose,
                    1 => Ending::HubClose,
                    _ => Ending::DropAll,
                };
                const PRODUCERS: u64 = 2;
                let per = if DEBUG { rng.u64(200..3_000) } else { rng.u64(2_000..40_000) };
                let close_at = rng.u64(0..PRODUCERS * per);

                let hub: Hub<u64, W> = Hub::with_merge(merge_fn(CHURN, None, true));
                let tx = hub.sender();
                let ledgers: Vec<Arc<RxLedger>> = stable.iter().map(|_| Arc::default()).collect();
                let receivers: Vec<Receiver<u64, W>> = stable
                    .iter()
                    .zip(&ledgers)
                    .enumerate()
                    .map(|(i, (s, l))| {
                        let b = hub.receiver_builder();
                        let b = match s.filter {
                            Filter::All => b,
                            Filter::Key(k) => b.key(k),
                            Filter::Residue(m, r) => b.key_filter(move |k: &u64| k % m == r),
                        };
                        b.merge(merge_fn(i, Some(l.clone()), s.armed)).build()
                    })
                    .collect();
                let progress = AtomicU64::new(0);
                let producing = AtomicU64::new(PRODUCERS);
                let done = AtomicBool::new(false);
                let seeds: Vec<u64> = (0..16).map(|_| rng.u64(..)).collect();

                let (tally, churned) = thread::scope(|s| {
                    let consumers: Vec<_> = receivers
                        .into_iter()
                        .zip(&stable)
                        .zip(&ledgers)
                        .enumerate()
                        .map(|(i, ((rx, spec), l))| {
                            let seed = seeds[i];
                            s.spawn(move || consume(rx, *spec, l, seed))
                        })
                        .collect();
                    let churner = {
                        let (hub, done, seed) = (hub.clone(), &done, seeds[8]);
                        s.spawn(move || churn(hub, keys, done, seed))
                    };
                    let producers: Vec<_> = (0..PRODUCERS as usize)
                        .map(|p| {
                            let (tx, stable, progress, producing) = (tx.clone(), &stable, &progress, &producing);
                            let seed = seeds[10 + p];
                            s.spawn(move || {
                                let t = produce(tx, stable, keys, per, progress, seed);
                                producing.fetch_sub(1, SeqCst);
                                t
                            })
                        })
                        .collect();
                    if ending != Ending::DropAll {
                        while progress.load(SeqCst) < close_at && producing.load(SeqCst) > 0 {
                            thread::yield_now();
                        }
                        match ending {
                            Ending::SenderClose => tx.close(),
                            _ => hub.close(),
                        }
                    }
                    let mut tally = Tally {
                        accepted: vec![0; stable.len()],
                        filtered: vec![0; stable.len()],
                        ..Tally::default()
                    };
                    for p in producers {
                        tally.add(&p.join().unwrap());
                    }
                    done.store(true, SeqCst);
                    let (mut parked, made) = churner.join().unwrap();
                    // Every send handle goes: graceful close if nothing closed yet.
                    drop(tx);
                    drop(hub);
                    for (rx, filter) in &mut parked {
                        if ending == Ending::HubClose {
                            assert_eq!(rx.try_recv().err(), Some(TryRecvError::Closed));
                        } else {
                            // Graceful: everything pending, then Closed.
                            rx.iter().for_each(|e| take(e, *filter, None));
                        }
                        assert!(rx.is_closed());
                    }
                    drop(parked);
                    for c in consumers {
                        c.join().unwrap();
                    }
                    (tally, made)
                });

                // Per stable receiver, counted at the producers.
                let graceful = ending != Ending::HubClose;
                for (i, (spec, l)) in stable.iter().zip(&ledgers).enumerate() {
                    let accepted = tally.accepted[i];
                    let delivered = l.delivered.load(Relaxed);
                    let annihilated = l.annihilated.load(Relaxed);
                    let panicked = l.panicked.load(Relaxed);
                    let accounted = delivered + annihilated + panicked;
                    let what = format!(
                        "epoch {index}, receiver {i} {spec:?}, {ending:?}: accepted {accepted}, \
                         delivered {delivered}, annihilated {annihilated}, panicked {panicked}"
                    );
                    if graceful && spec.leave_after.is_none() {
                        assert_eq!(accepted, accounted, "{what}: graceful close lost or added sends");
                    } else {
                        assert!(accounted <= accepted, "{what}: more accounted for than sent");
                    }
                    totals.offered += accepted + tally.filtered[i];
                    totals.filtered += tally.filtered[i];
                    totals.delivered += delivered;
                    totals.annihilated += annihilated;
                    totals.panicked += panicked;
                    totals.abandoned += accepted - accounted;
                }
                assert_eq!(tally.attempts, tally.ok + tally.refused + tally.panics);
                assert_eq!(MASS.created.load(Relaxed), tally.attempts);
                if ending == Ending::DropAll {
                    assert_eq!(tally.refused, 0, "refused a send with the send side open");
                }

                // Everything is dropped now: nothing leaked, nothing twice.
                MASS.assert_conserved(index);
                let peak = meter.peak_above(before);
                let receivers = stable.len() + CHURN_KEEP + 1;
                let bound = BYTES_FIXED
                    + receivers * (BYTES_PER_RECEIVER + keys as usize * BYTES_PER_KEY_PER_RECEIVER);
                totals.peaks.check(index, peak, bound, &format!("{keys} keys, {receivers} receivers"));
                meter.assert_back_to_start(&format!("after epoch {index}"));

                totals.endings[ending as usize] += 1;
                totals.attempts += tally.attempts;
                totals.ok += tally.ok;
                totals.refused += tally.refused;
                totals.panics += tally.panics;
                totals.churned_receivers += churned;
            }

            let run = keybus_test_support::soak::run(stringify!($($m)::+), epoch);
            let t = &run.totals;
            println!(
                "soak {}: {run} (sender close {}, hub close {}, drop all {}), {}\n  \
                 sends: {} attempted = {} ok + {} refused + {} panicked; {} churn receivers\n  \
                 stable receivers: {} offered = {} filtered + {} delivered + {} annihilated + \
                 {} lost in panics + {} abandoned by close",
                stringify!($($m)::+), t.endings[0], t.endings[1], t.endings[2], t.peaks,
                t.attempts, t.ok, t.refused, t.panics, t.churned_receivers,
                t.offered, t.filtered, t.delivered, t.annihilated, t.panicked, t.abandoned,
            );
        }
    };
}

soak_conflate!(conflate_baseline, keybus::baseline::conflate);
soak_conflate!(conflate_lockfree, keybus::conflate);
