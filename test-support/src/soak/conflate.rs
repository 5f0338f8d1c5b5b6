//! The conflate soak, written once over [`Conflate`] and run against both
//! implementations by `tests/soak.rs` (budget, seed and memory bounds:
//! the [parent module](super)).
//!
//! An epoch: producers send to many keys (a few hot ones), with values whose
//! merges sum a count, so every send is accounted for; some sends annihilate their
//! key, some poison it (merges that panic, caught with `catch_unwind` around
//! `send`); stable receivers with key filters and their own merges are consumed
//! with every receive form, some slowly, some leaving early; a churn thread makes
//! and drops receivers all the time; the epoch ends with `Sender::close` or
//! `Hub::close` at a random moment, or with every send handle dropped.
//!
//! Checked, per stable receiver, counted at the producers: every send offered to
//! it is filtered, delivered (as `Event::sends`), annihilated, lost in a
//! panicking merge, or (hard close, leaving early) abandoned; after a graceful
//! close nothing is abandoned. Globally, with a value type that counts its own
//! clones and drops ([`ledger`]): every unit of count created (a send, a clone) is
//! delivered, annihilated, lost in a panic, refused (`SendError`), peeked, or
//! dropped by the bus, and nothing else, so nothing leaks and nothing is
//! delivered twice. Memory: an epoch's peak stays under keys × receivers, and
//! everything is freed when the epoch's handles go.

mod ledger;

use super::{Meter, Peaks, BYTES_FIXED, DEBUG};
use crate::conflate_api::*;
use crate::threads::Crew;
use futures::executor::block_on;
use futures::StreamExt as _;
use keybus::{Event, RecvTimeoutError, TryRecvError};
use ledger::{merge_fn, panicked_at, Kind, Refused, RxLedger, CHURN, MASS, W};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{
    AtomicBool, AtomicU64,
    Ordering::{Relaxed, SeqCst},
};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

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
pub struct Totals {
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

/// Checks and books one delivered event.
fn take(e: Event<u64, W>, filter: Filter, ledger: Option<&RxLedger>) {
    assert!(
        filter.accepts(e.key),
        "key {} got past the filter {filter:?}",
        e.key
    );
    assert_eq!(
        e.sends, e.value.count,
        "sends disagrees with the merged count"
    );
    assert!(e.sends >= 1);
    let n = e.value.settle(&MASS.delivered);
    if let Some(l) = ledger {
        l.delivered.fetch_add(n, Relaxed);
    }
}

fn peek(rx: &mut impl ReceiverApi<u64, W>, filter: Filter) {
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
fn consume(mut rx: impl ReceiverApi<u64, W>, spec: Stable, ledger: &RxLedger, seed: u64) {
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
            Consume::RecvTimeout => match rx.recv_timeout(Duration::from_micros(rng.u64(0..500))) {
                Ok(e) => {
                    take(e, f, l);
                    true
                }
                Err(RecvTimeoutError::Timeout) => true,
                Err(RecvTimeoutError::Closed) => false,
            },
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
                let n = rx
                    .try_iter()
                    .take(rng.usize(1..64))
                    .map(|e| take(e, f, l))
                    .count();
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
    assert_eq!(
        rx.recv_timeout(Duration::ZERO).err(),
        Some(RecvTimeoutError::Closed)
    );
}

fn pick_key(rng: &mut fastrand::Rng, keys: u64) -> u64 {
    if rng.bool() {
        rng.u64(0..keys.min(8))
    } else {
        rng.u64(0..keys)
    }
}

fn produce(
    tx: impl SenderApi<u64, W>,
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
/// `done` (or a thread of `crew` panicked); returns the parked ones.
fn churn<H: HubApi<u64, W>>(
    hub: H,
    keys: u64,
    done: &AtomicBool,
    crew: &Crew,
    seed: u64,
) -> (Vec<(H::Receiver, Filter)>, u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut parked: Vec<(H::Receiver, Filter)> = Vec::new();
    let mut made = 0u64;
    while !done.load(SeqCst) && !crew.panicked() {
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
            _ => (
                hub.receiver_builder()
                    .merge(merge_fn(CHURN, None, false))
                    .build(),
                Filter::All,
            ),
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
                1 => rx
                    .try_recv_all()
                    .map(|b| b.into_iter().for_each(|e| take(e, filter, None))),
                2 => {
                    peek(&mut rx, filter);
                    Ok(())
                }
                3 => match rx.recv_timeout(Duration::ZERO) {
                    Ok(e) => {
                        take(e, filter, None);
                        Ok(())
                    }
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

fn epoch<I: Conflate>(index: usize, rng: &mut fastrand::Rng, totals: &mut Totals, meter: &Meter) {
    MASS.reset();
    let before = meter.reset_peak();
    let keys = if rng.bool() {
        rng.u64(1..64)
    } else {
        rng.u64(64..4096)
    };
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
    let per = if DEBUG {
        rng.u64(200..3_000)
    } else {
        rng.u64(2_000..40_000)
    };
    let close_at = rng.u64(0..PRODUCERS * per);

    let hub = Hub::<I, u64, W>::with_merge(merge_fn(CHURN, None, true));
    let tx = hub.sender();
    let ledgers: Vec<Arc<RxLedger>> = stable.iter().map(|_| Arc::default()).collect();
    let receivers: Vec<Receiver<I, u64, W>> = stable
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

    // No closer (an `Ending::DropAll` epoch must not see a handle the crew
    // kept): on a panic, the loops below that wait on an atomic give up, the
    // test's thread unwinds and drops its handles, and the churn thread drops
    // its own, which closes the hub gracefully; then the consumers end.
    let crew = Crew::new(format!("soak {} epoch {index}", I::NAME));
    let (tally, churned) = crew.scope(|s| {
        let consumers: Vec<_> = receivers
            .into_iter()
            .zip(&stable)
            .zip(&ledgers)
            .enumerate()
            .map(|(i, ((rx, spec), l))| {
                let seed = seeds[i];
                crew.spawn(s, move || consume(rx, *spec, l, seed))
            })
            .collect();
        let churner = {
            let (hub, done, crew, seed) = (hub.clone(), &done, &crew, seeds[8]);
            crew.spawn(s, move || churn(hub, keys, done, crew, seed))
        };
        let producers: Vec<_> = (0..PRODUCERS as usize)
            .map(|p| {
                let (tx, stable, progress, producing) =
                    (tx.clone(), &stable, &progress, &producing);
                let seed = seeds[10 + p];
                crew.spawn(s, move || {
                    let t = produce(tx, stable, keys, per, progress, seed);
                    producing.fetch_sub(1, SeqCst);
                    t
                })
            })
            .collect();
        if ending != Ending::DropAll {
            // A producer that panicked never counts itself out.
            while progress.load(SeqCst) < close_at && producing.load(SeqCst) > 0 && !crew.panicked()
            {
                thread::yield_now();
            }
            match ending {
                Ending::SenderClose => tx.close(),
                _ => hub.close_now(),
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
            assert_eq!(
                accepted, accounted,
                "{what}: graceful close lost or added sends"
            );
        } else {
            assert!(
                accounted <= accepted,
                "{what}: more accounted for than sent"
            );
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
    let bound =
        BYTES_FIXED + receivers * (BYTES_PER_RECEIVER + keys as usize * BYTES_PER_KEY_PER_RECEIVER);
    totals.peaks.check(
        index,
        peak,
        bound,
        &format!("{keys} keys, {receivers} receivers"),
    );
    meter.assert_back_to_start(&format!("after epoch {index}"));

    totals.endings[ending as usize] += 1;
    totals.attempts += tally.attempts;
    totals.ok += tally.ok;
    totals.refused += tally.refused;
    totals.panics += tally.panics;
    totals.churned_receivers += churned;
}

/// One soak run of `I` (its share of `KEYBUS_SOAK_SECS`); prints its totals.
pub fn soak<I: Conflate>() {
    let run = super::run(I::NAME, epoch::<I>);
    let t = &run.totals;
    println!(
        "soak {}: {run} (sender close {}, hub close {}, drop all {}), {}\n  \
         sends: {} attempted = {} ok + {} refused + {} panicked; {} churn receivers\n  \
         stable receivers: {} offered = {} filtered + {} delivered + {} annihilated + \
         {} lost in panics + {} abandoned by close",
        I::NAME,
        t.endings[0],
        t.endings[1],
        t.endings[2],
        t.peaks,
        t.attempts,
        t.ok,
        t.refused,
        t.panics,
        t.churned_receivers,
        t.offered,
        t.filtered,
        t.delivered,
        t.annihilated,
        t.panicked,
        t.abandoned,
    );
}
