//! Loom models of the lock-free broadcast ring (`keybus::broadcast`).
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release -p keybus-loom-tests --test broadcast`
//!
//! What each model bounds (all with capacity 1 or 2, i.e. 2 or 3 slots, and at
//! most three threads; loom explores every interleaving up to the preemption bound):
//!
//! - `read_vs_overwrite_of_the_same_slot`: one reader (try_read, latest, a
//!   `Reader`) against two appends, the second of which rewrites the slot the
//!   reader is copying. Checks: never a torn value, never a value under the wrong
//!   revision, `Gap` (with a plausible `oldest`) instead.
//! - `batch_read_races_eviction`: a two-entry read (capacity 2, three slots)
//!   against three appends that evict both entries it wants. Checks: the batch is
//!   a gap-free run from the cursor with every value under its own revision (it
//!   may end early), or `Gap`; the read after a short batch continues or reports
//!   `Gap`.
//! - `gap_boundary_while_an_append_evicts`: cursor `a - 1` and `a - 2` while the
//!   append that moves `a` commits. Checks: `a - 1` never gets `Gap`; `a - 2` gets
//!   the entry or `Gap`, never a wrong one; a reader that got `Gap` resumes at the
//!   oldest retained entry.
//! - `close_vs_draining_read`: appends then close on one thread, a blocking reader
//!   on another. Checks: the reader gets every revision, then `Closed`; the append
//!   after close hands its value back; no lost wake-up (loom reports a deadlock).
//! - `close_racing_append`: close and append on two threads, a drainer on a third.
//!   Checks: an append that returned `Ok` is drained before `Closed`; one that
//!   returned `Err` published nothing.
//! - `park_vs_wake` / `park_vs_wake_async`: a reader parks on an empty buffer (the
//!   blocking form and the async form) while an append publishes. Checks: no lost
//!   wake-up.
//! - `two_concurrent_appenders`: two appenders and a concurrent reader. Checks:
//!   revisions are unique and gap-free, each value sits under the revision its
//!   append returned, and a reader never sees revision 2 without revision 1.
//!
//! - `two_parked_readers_vs_two_appends`: two readers park for different
//!   revisions while two appends publish; the first publishing swap clears the
//!   parking flag the second reader may have set. Checks: no lost wake-up.
//! - `parked_reader_vs_two_contending_appenders`: two appenders contend for the
//!   lock bit of the state word while a reader parks for revision 2. Checks:
//!   unique revisions, the reader is woken.
//! - `a_panic_under_the_writer_lock_releases_it`: `append_if_changed`'s `T::eq`
//!   panics holding the lock bit, against a concurrent append and a later close.
//!   Checks: the lock is released, nothing is published by the panicking call.
//!
//! - `recycling_never_rewrites_a_value_a_reader_is_cloning`: one reader reads
//!   revision 1 while the writer evicts it and then recycles evicted nodes (two
//!   recycling appends, so a node found pinned goes to the held list and comes
//!   back). Checks (loom's own `UnsafeCell` tracks every access to a value): the
//!   writer never overwrites or drops a value while a reader may clone it; the
//!   reader gets revision 1's value or `Gap`; every value is dropped exactly once
//!   (a loom `Arc` token per value, counted at the end).
//! - `two_readers_pin_while_the_writer_recycles`: two readers, one node each,
//!   against appends that recycle both nodes. Same checks.
//!
//! What loom checks, and what it cannot:
//!
//! - The whole slot and reclamation protocol is keybus's own, written with the
//!   atomics, `UnsafeCell` and mutex of `keybus`'s sync module, which are loom's
//!   under `--cfg loom`: the stamps, the node pointers, the pin counts and the
//!   writer's claim, the state word (tail, writer lock bit, close and parking
//!   flags) and the wake-ups
//!   are all explored, and a value access that is not ordered after the write
//!   that made it (or a rewrite not ordered after every clone) fails the model.
//!   No stand-in is involved (the earlier `arc-swap` cell needed one).
//! - Loom's memory model has no SeqCst loads or stores; the protocol uses none
//!   (only Acquire/Release and read-modify-writes), so nothing is weakened.
//! - The pool's allocation path beyond a few nodes, the memory bound under many
//!   stalled readers, and node counts are checked by the unit tests
//!   (`src/broadcast/lockfree/tests.rs`, also under Miri), not here.
//! - Wake-ups go through a stand-in for `event-listener` (`src/sync.rs`,
//!   `model_notify`) whose `notify` has the lock-free early-out of
//!   `event-listener` 5.0 to 5.3.0: after a `SeqCst` fence, an Acquire load of a
//!   flag that listeners store (Release) under the list lock, and no lock at all
//!   when it says none waits. So the models check that a reader's registration
//!   is ordered before the `notify` that must see it by the ring's own protocol
//!   (the Release `fetch_or(PARKING)` read by the publishing swap): a Relaxed
//!   `fetch_or` deadlocks `park_vs_wake` (mutant j of `.ci/mutants`), where a
//!   stand-in that always locked, as 5.3.1 and later do, ordered it by itself.
//!   Its async listener re-polls instead of waiting, so the async form's models
//!   do not catch a lost wake-up.
//! - Timeouts: the loom notifier has no clock, so `read_timeout` is not modelled.
//! - Long runs: revision wrap-around, large capacities and many readers are beyond
//!   what an exhaustive search can reach; the conformance suite's race tests cover
//!   them statistically.
#![cfg(loom)]

use keybus::broadcast::{AppendError, Buffer, Entry, ReadError, Reader};
use loom::thread;
// `std`'s `Arc`, not loom's: a loom `Arc` clone inside `T::clone` is itself a
// synchronizing operation and would hide a missing Release on the reader's unpin
// (tried: the model then passes with a Relaxed unpin). `std`'s is invisible to
// loom, so the models see only what the ring itself orders.
use std::sync::Arc;

/// A value that owns heap data (an `Arc` token, so that every drop is counted)
/// and names its revision.
#[derive(Clone, Debug)]
struct Counted {
    revision: u64,
    _token: Arc<()>,
}

/// One token per revision `0..n` (index = revision).
fn tokens(n: u64) -> Vec<Arc<()>> {
    (0..n).map(|_| Arc::new(())).collect()
}

fn counted(revision: u64, tokens: &[Arc<()>]) -> Counted {
    Counted {
        revision,
        _token: tokens[revision as usize].clone(),
    }
}

/// Every value the ring held was dropped, once.
fn all_dropped(tokens: &[Arc<()>]) {
    for (revision, t) in tokens.iter().enumerate() {
        assert_eq!(Arc::strong_count(t), 1, "revision {revision} leaked");
    }
}

/// A value that owns heap data and names its revision.
fn value(revision: u64) -> String {
    format!("rev-{revision}")
}

/// `entry` is revision `revision`, holding `value(revision)`.
fn assert_entry(entry: &Entry<String>, revision: u64) {
    assert_eq!((entry.revision, &entry.value), (revision, &value(revision)));
}

/// A ring of `capacity` holding `value(1)` to `value(revisions)`, appended
/// before any other thread starts.
fn ring<T>(capacity: usize, revisions: u64, value: impl Fn(u64) -> T) -> Buffer<T>
where
    T: Clone + Send + Sync + 'static,
{
    let buf = Buffer::new(capacity);
    for revision in 1..=revisions {
        buf.append(value(revision)).unwrap();
    }
    buf
}

/// Runs `f` on a thread of its own, which owns `handle` (a clone of the
/// buffer, a reader).
fn spawn_with<H, R>(handle: H, f: impl FnOnce(H) -> R + Send + 'static) -> thread::JoinHandle<R>
where
    H: Send + 'static,
    R: Send + 'static,
{
    thread::spawn(move || f(handle))
}

/// An appender's thread: it answers its revision and its value.
type Appender = thread::JoinHandle<(u64, &'static str)>;

/// An empty ring of capacity 2 and two appenders to it, of the values `"a"` and
/// `"b"`; each answers its revision and its value.
fn two_appenders() -> (Buffer<String>, Vec<Appender>) {
    let buf = Buffer::new(2);
    let appenders = ["a", "b"]
        .into_iter()
        .map(|name| {
            spawn_with(buf.clone(), move |buf| {
                (buf.append(name.to_string()).unwrap(), name)
            })
        })
        .collect();
    (buf, appenders)
}

/// Joins [`two_appenders`]: their (revision, value), by revision, which must be
/// unique and gap-free from 1.
fn join_appenders(appenders: Vec<Appender>) -> Vec<(u64, &'static str)> {
    let mut results: Vec<_> = appenders.into_iter().map(|h| h.join().unwrap()).collect();
    results.sort();
    assert_eq!(results.iter().map(|r| r.0).collect::<Vec<_>>(), [1, 2]);
    results
}

/// The model of a ring of `capacity` holding `value(1)` to `value(revisions)`,
/// `writer` on a thread of its own racing `reader` on this one; the writer is
/// joined after the reader is done. What `reader` returns (the `Reader` it
/// used, if any) is dropped after the join, as a local of the model would be:
/// a reader's drop is a step of its own that loom would otherwise interleave
/// with the writer.
fn race<R: 'static>(
    capacity: usize,
    revisions: u64,
    writer: fn(Buffer<String>),
    reader: fn(&Buffer<String>) -> R,
) {
    loom::model(move || {
        let buf = ring(capacity, revisions, value);
        let writer = spawn_with(buf.clone(), writer);
        let _kept = reader(&buf);
        writer.join().unwrap();
    });
}

/// Blocking reads until `Closed`; every entry read.
fn read_until_closed<T: Clone + Send + Sync + 'static>(reader: &mut Reader<T>) -> Vec<Entry<T>> {
    let mut read = Vec::new();
    loop {
        match reader.next() {
            Ok(e) => read.push(e),
            Err(ReadError::Closed) => return read,
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
}

/// Rule: broadcast 2, 8. Trap: a torn value, or one under the wrong revision.
#[test]
fn read_vs_overwrite_of_the_same_slot() {
    // Capacity 1 = two slots: revision 3 rewrites revision 1's slot.
    race(
        1,
        1,
        |buf| {
            assert_eq!(buf.append(value(2)).unwrap(), 2);
            assert_eq!(buf.append(value(3)).unwrap(), 3);
        },
        |buf| {
            match buf.try_read(0, 1) {
                Ok(page) => {
                    assert_eq!(page.len(), 1);
                    assert_eq!(page[0].revision, 1);
                    assert_eq!(page[0].value, value(1));
                }
                Err(ReadError::Gap { after: 0, oldest }) => assert!((2..=3).contains(&oldest)),
                Err(e) => panic!("unexpected {e:?}"),
            }
            let latest = buf.latest().unwrap();
            assert_eq!(latest.value, value(latest.revision));
            let mut reader = buf.reader_at(buf.cursor_at(1));
            match reader.try_next() {
                Ok(e) => assert_eq!(e.value, value(e.revision)),
                Err(ReadError::Empty) => assert_eq!(reader.cursor().revision(), 1),
                Err(ReadError::Gap {
                    after: 1,
                    oldest: 3,
                }) => assert_eq!(reader.cursor().revision(), 2),
                Err(e) => panic!("unexpected {e:?}"),
            }
            reader
        },
    );
}

/// Rule: broadcast 1, 2. Trap: a batch with a hole or a wrong revision. Mutant:
/// k (`.ci/mutants`).
#[test]
fn batch_read_races_eviction() {
    race(
        2,
        2,
        |buf| {
            for revision in 3..=5 {
                assert_eq!(buf.append(value(revision)).unwrap(), revision);
            }
        },
        |buf| {
            let mut after = 0;
            for _ in 0..2 {
                match buf.try_read(after, 2) {
                    Ok(page) => {
                        assert!(!page.is_empty() && page.len() <= 2);
                        for (i, e) in page.iter().enumerate() {
                            assert_eq!(e.revision, after + 1 + i as u64);
                            assert_eq!(e.value, value(e.revision));
                        }
                        after = page.last().unwrap().revision;
                    }
                    Err(ReadError::Gap { after: a, oldest }) => {
                        assert_eq!(a, after);
                        assert!(oldest > after + 1 && oldest <= 4);
                        after = oldest - 1;
                    }
                    Err(ReadError::Empty) => {}
                    Err(e) => panic!("unexpected {e:?}"),
                }
            }
        },
    );
}

/// Rule: broadcast 1. Trap: `Gap` at `a - 1`, a wrong entry at `a - 2`.
#[test]
fn gap_boundary_while_an_append_evicts() {
    loom::model(|| {
        // Capacity 1: appending 2 moves the oldest retained revision a from 1 to 2.
        let buf = ring(1, 1, value);
        let writer = spawn_with(buf.clone(), move |buf| buf.append(value(2)).unwrap());
        // Cursor 1 is a - 1 after the append: never a gap.
        match buf.try_read(1, 4) {
            Ok(page) => {
                assert_eq!(page.len(), 1);
                assert_eq!(page[0].value, value(2));
            }
            Err(ReadError::Empty) => {}
            Err(e) => panic!("unexpected {e:?}"),
        }
        // Cursor 0 is a - 1 before the append and a - 2 after it.
        let mut reader = buf.reader_at(buf.cursor_at(0));
        match reader.try_next() {
            Ok(e) => assert_entry(&e, 1),
            Err(ReadError::Gap {
                after: 0,
                oldest: 2,
            }) => {
                // Resumes at the oldest retained entry.
                assert_eq!(reader.cursor().revision(), 1);
                assert_eq!(reader.try_next().unwrap().value, value(2));
            }
            Err(e) => panic!("unexpected {e:?}"),
        }
        writer.join().unwrap();
        assert_eq!(
            buf.validate(0),
            Err(ReadError::Gap {
                after: 0,
                oldest: 2
            })
        );
    });
}

/// Rule: broadcast 6. Trap: entries lost before `Closed`; a lost wake-up.
/// Mutant: j (`.ci/mutants`).
#[test]
fn close_vs_draining_read() {
    race(
        2,
        1,
        |buf| {
            buf.append(value(2)).unwrap();
            buf.close();
            assert_eq!(buf.append(value(3)), Err(AppendError(value(3))));
        },
        |buf| {
            let mut reader = buf.reader_at(buf.cursor_at(0));
            let drained = read_until_closed(&mut reader);
            for e in &drained {
                assert_eq!(e.value, value(e.revision));
            }
            assert_eq!(
                drained.iter().map(|e| e.revision).collect::<Vec<_>>(),
                [1, 2]
            );
            reader
        },
    );
}

/// Rule: broadcast 6. Trap: an `Ok` append not drained, an `Err` one published.
#[test]
fn close_racing_append() {
    loom::model(|| {
        let buf = Buffer::new(2);
        let appender = spawn_with(buf.clone(), move |buf| buf.append(value(1)).is_ok());
        let closer = spawn_with(buf.clone(), move |buf| buf.close());
        let mut reader = buf.reader_at(buf.cursor_at(0));
        let drained = read_until_closed(&mut reader);
        let appended = appender.join().unwrap();
        closer.join().unwrap();
        if appended {
            assert_eq!(drained.iter().map(|e| e.revision).collect::<Vec<_>>(), [1]);
        } else {
            assert!(drained.is_empty());
            assert_eq!(buf.tail(), 0);
        }
    });
}

/// Rule: "Broadcast: the state word" (parking). Trap: a lost wake-up (blocking
/// and async). Mutant: j (`.ci/mutants`).
#[test]
fn park_vs_wake() {
    loom::model(|| {
        let buf = Buffer::new(1);
        let reader = spawn_with(buf.clone(), move |buf| buf.read(0, 1));
        buf.append(value(1)).unwrap();
        assert_entry(&reader.join().unwrap().unwrap()[0], 1);
    });
}

/// Rule: "Broadcast: the state word" (parking). Trap: a lost wake-up (blocking
/// and async). Mutant: j (`.ci/mutants`).
#[test]
fn park_vs_wake_async() {
    loom::model(|| {
        let buf = Buffer::new(1);
        let reader = spawn_with(buf.reader(), |mut reader| {
            loom::future::block_on(reader.next_async())
        });
        buf.append(value(1)).unwrap();
        assert_entry(&reader.join().unwrap().unwrap(), 1);
    });
}

/// Rule: broadcast 5. Trap: duplicate or missing revisions.
#[test]
fn two_concurrent_appenders() {
    loom::model(|| {
        let (buf, appenders) = two_appenders();
        // A concurrent reader: whatever it sees is a gap-free prefix from 1.
        let seen = match buf.try_read(0, 2) {
            Ok(page) => page,
            Err(ReadError::Empty) => Vec::new(),
            Err(e) => panic!("unexpected {e:?}"),
        };
        for (i, e) in seen.iter().enumerate() {
            assert_eq!(e.revision, i as u64 + 1);
        }
        let results = join_appenders(appenders);
        for e in seen.iter().chain(&buf.retained()) {
            assert_eq!(e.value, results[e.revision as usize - 1].1);
        }
        assert_eq!(buf.tail(), 2);
    });
}

/// Rule: broadcast 3, 8. Trap: a recycled node overwritten while a reader
/// clones it. Mutant: k (`.ci/mutants`).
#[test]
fn recycling_never_rewrites_a_value_a_reader_is_cloning() {
    loom::model(|| {
        let tokens = tokens(6);
        // Capacity 1 = two slots. Append 3 evicts revision 1's node; append 4
        // recycles it (or, if the reader has it pinned, holds it back and
        // allocates); append 5 re-checks the held node and recycles another.
        let buf = ring(1, 1, |r| counted(r, &tokens));
        let values: Vec<_> = (2..=5).map(|r| counted(r, &tokens)).collect();
        let writer = spawn_with(buf.clone(), move |buf| {
            for v in values {
                let revision = v.revision;
                assert_eq!(buf.append(v).unwrap(), revision);
            }
        });
        let got = buf.try_read(0, 1);
        match &got {
            Ok(page) => assert_eq!((page[0].revision, page[0].value.revision), (1, 1)),
            Err(ReadError::Gap { after: 0, oldest }) => assert!((2..=5).contains(oldest)),
            Err(e) => panic!("unexpected {e:?}"),
        }
        writer.join().unwrap();
        let last = buf.latest().unwrap();
        assert_eq!((last.revision, last.value.revision), (5, 5));
        drop((got, last, buf));
        all_dropped(&tokens);
    });
}

/// Rule: broadcast 3, 8. Trap: the same with two pins.
#[test]
fn two_readers_pin_while_the_writer_recycles() {
    loom::model(|| {
        let tokens = tokens(5);
        let buf = ring(1, 2, |r| counted(r, &tokens));
        let reader = spawn_with(buf.clone(), move |buf| match buf.try_read(0, 1) {
            Ok(page) => assert_eq!(page[0].value.revision, 1),
            Err(ReadError::Gap { after: 0, .. }) => {}
            Err(e) => panic!("unexpected {e:?}"),
        });
        let values: Vec<_> = (3..=4).map(|r| counted(r, &tokens)).collect();
        let writer = spawn_with(buf.clone(), move |buf| {
            for v in values {
                buf.append(v).unwrap();
            }
        });
        match buf.try_read(1, 1) {
            Ok(page) => assert_eq!(page[0].value.revision, 2),
            Err(ReadError::Gap { after: 1, .. }) => {}
            Err(e) => panic!("unexpected {e:?}"),
        }
        reader.join().unwrap();
        writer.join().unwrap();
        drop(buf);
        all_dropped(&tokens);
    });
}

// --- The state word: writer lock, publishing swap, parking flag -------------

/// Rule: "Broadcast: the state word" (parking). Trap: the first publish clears
/// the second reader's parking flag. Mutant: j (`.ci/mutants`).
#[test]
fn two_parked_readers_vs_two_appends() {
    loom::model(|| {
        // Reader `a` waits for revision 1, reader `b` for 1 and then 2. The swap
        // that publishes 1 clears `PARKING` even if `b` set it; `b` must then
        // either see 2 on its last look or have re-armed so the swap of 2
        // notifies. A lost wake-up is a deadlock, which loom reports.
        let buf = Buffer::new(2);
        let a = spawn_with(buf.clone(), move |buf| buf.read(0, 1));
        let b = spawn_with(buf.reader_at(buf.cursor_at(0)), |mut reader| {
            assert_eq!(reader.next().unwrap().revision, 1);
            reader.next()
        });
        buf.append(value(1)).unwrap();
        buf.append(value(2)).unwrap();
        assert_entry(&a.join().unwrap().unwrap()[0], 1);
        assert_entry(&b.join().unwrap().unwrap(), 2);
    });
}

/// Rule: broadcast 5. Trap: the writer lock bit and parking interfering.
#[test]
fn parked_reader_vs_two_contending_appenders() {
    loom::model(|| {
        // Two appenders contend for the lock bit (one waits for the other,
        // never for the reader); the reader parks until revision 2 exists.
        let (buf, appenders) = two_appenders();
        let mut reader = buf.reader_at(buf.cursor_at(0));
        assert_eq!(reader.next().unwrap().revision, 1);
        assert_eq!(reader.next().unwrap().revision, 2);
        join_appenders(appenders);
    });
}

/// Equal to everything, but panics when compared with a value named "boom".
#[derive(Clone, Debug)]
struct Touchy(&'static str);

impl PartialEq for Touchy {
    fn eq(&self, other: &Self) -> bool {
        assert!(self.0 != "boom" && other.0 != "boom", "boom");
        self.0 == other.0
    }
}

/// Rule: "Panics in user code". Trap: a lock bit left held after `T::eq`
/// panics.
#[test]
fn a_panic_under_the_writer_lock_releases_it() {
    loom::model(|| {
        // `append_if_changed` runs `T::eq` holding the lock bit; a panic there
        // must release it (and publish nothing), or the other appender and the
        // close spin forever.
        let buf = Buffer::new(2);
        buf.append(Touchy("one")).unwrap();
        let other = spawn_with(buf.clone(), move |buf| buf.append(Touchy("two")).unwrap());
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            buf.append_if_changed(Touchy("boom"))
        }));
        assert!(panicked.is_err());
        assert_eq!(other.join().unwrap(), 2);
        assert_eq!(buf.tail(), 2);
        buf.close();
        assert!(buf.is_closed());
        assert_eq!(buf.latest().map(|e| e.value.0), Some("two"));
    });
}
