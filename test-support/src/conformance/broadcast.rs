//! The broadcast contract (docs/design.md, "The contract", broadcast rules 1–8,
//! and the API docs), written once as generic functions over [`Broadcast`] and
//! run against both implementations by `tests/conformance_broadcast.rs`.
//!
//! Functions named `ruleN_*` pin broadcast rule N of docs/design.md; the rest pin
//! the API details of the rustdoc. Those documented as panicking are run under
//! `#[should_panic]`. Nothing asserts on timing.

use crate::broadcast_api::{
    self, revisions, AppendError, Broadcast, BufferApi, Entry, ReadError, ReaderApi,
};
use crate::threads::Crew;
use futures::executor::block_on;
use futures::FutureExt as _;
use std::collections::HashSet;
use std::sync::Arc;
use std::thread::{self, Scope, ScopedJoinHandle};
use std::time::Duration;

/// Revisions `1..=n`, revision `r` holding `10 r`.
fn filled<B: Broadcast>(capacity: usize, n: u64) -> B::Buffer<u64> {
    broadcast_api::filled::<B>(capacity, n, |r| r * 10)
}

/// Runs `f` on a clone of `buf`, on a new thread of `crew`.
fn on_a_thread<'scope, Buf: Clone + Send + 'scope, R: Send + 'scope>(
    crew: &'scope Crew<'_>,
    s: &'scope Scope<'scope, '_>,
    buf: &Buf,
    f: impl FnOnce(Buf) -> R + Send + 'scope,
) -> ScopedJoinHandle<'scope, R> {
    let buf = buf.clone();
    crew.spawn(s, move || f(buf))
}

/// A value that owns heap data and encodes its revision everywhere,
/// so a torn or mislabelled copy is detectable.
#[derive(Clone, Debug, PartialEq)]
struct Payload {
    revision: u64,
    words: Vec<u64>,
    text: String,
}

impl Payload {
    fn new(revision: u64) -> Self {
        Payload {
            revision,
            words: vec![revision; 1 + (revision % 7) as usize],
            text: revision.to_string(),
        }
    }

    fn check(&self, revision: u64) {
        assert_eq!(self.revision, revision, "value under the wrong revision");
        assert!(self.words.iter().all(|&w| w == revision), "torn value");
        assert_eq!(self.words.len(), 1 + (revision % 7) as usize, "torn value");
        assert_eq!(self.text, revision.to_string(), "torn value");
    }
}

// ---- rule 1: revisions, Gap / Future, the a - 1 boundary ----

pub fn rule1_revisions_start_at_one_and_rise_by_one<B: Broadcast>() {
    let buf = B::Buffer::<u64>::new(4);
    assert_eq!(buf.tail(), 0);
    for i in 1..=10u64 {
        assert_eq!(buf.append(i).unwrap(), i);
        assert_eq!(buf.tail(), i);
    }
    assert_eq!(buf.capacity(), 4);
}

pub fn rule1_boundary_retained_101_to_132<B: Broadcast>() {
    let buf = filled::<B>(32, 132);
    let retained = buf.retained();
    assert_eq!(revisions(&retained), (101..=132).collect::<Vec<_>>());
    // Cursor 100 (= oldest - 1) reads everything retained.
    let all = buf.try_read(100, 1000).unwrap();
    assert_eq!(revisions(&all), (101..=132).collect::<Vec<_>>());
    assert!(all.iter().all(|e| e.value == e.revision * 10));
    assert_eq!(buf.validate(100), Ok(()));
    // Cursor 99 lost revision 100.
    let gap = ReadError::Gap {
        after: 99,
        oldest: 101,
    };
    assert_eq!(buf.try_read(99, 10), Err(gap));
    assert_eq!(buf.validate(99), Err(gap));
    assert_eq!(buf.read(99, 10), Err(gap));
    assert_eq!(buf.read_timeout(99, 10, Duration::ZERO), Err(gap));
    assert_eq!(block_on(buf.read_async(99, 10)), Err(gap));
    assert_eq!(
        buf.validate(0),
        Err(ReadError::Gap {
            after: 0,
            oldest: 101
        })
    );
}

pub fn rule1_future_cursor<B: Broadcast>() {
    let buf = filled::<B>(4, 3);
    let future = ReadError::Future { after: 4, tail: 3 };
    assert_eq!(buf.validate(4), Err(future));
    assert_eq!(buf.try_read(4, 1), Err(future));
    assert_eq!(buf.read(4, 1), Err(future));
    assert_eq!(buf.read_timeout(4, 1, Duration::ZERO), Err(future));
    assert_eq!(block_on(buf.read_async(4, 1)), Err(future));
    assert_eq!(buf.validate(3), Ok(()));
    // A reader on Future keeps its cursor.
    let mut r = buf.reader_at(buf.cursor_at(7));
    assert_eq!(r.try_next(), Err(ReadError::Future { after: 7, tail: 3 }));
    assert_eq!(r.cursor().revision(), 7);
    assert_eq!(r.next(), Err(ReadError::Future { after: 7, tail: 3 }));
    assert_eq!(r.cursor().revision(), 7);
}

pub fn rule1_empty_buffer_bounds<B: Broadcast>() {
    let buf = B::Buffer::<u64>::new(2);
    assert_eq!(buf.tail(), 0);
    assert_eq!(buf.validate(0), Ok(()));
    assert_eq!(
        buf.validate(1),
        Err(ReadError::Future { after: 1, tail: 0 })
    );
    assert_eq!(buf.latest(), None);
    assert!(buf.retained().is_empty());
    assert_eq!(buf.try_read(0, 1), Err(ReadError::Empty));
}

pub fn rule1_reads_are_oldest_first_and_capped_by_limit<B: Broadcast>() {
    let buf = filled::<B>(8, 6);
    assert_eq!(revisions(&buf.try_read(1, 3).unwrap()), [2, 3, 4]);
    assert_eq!(revisions(&buf.read(4, 100).unwrap()), [5, 6]);
    assert_eq!(revisions(&buf.try_read(5, 1).unwrap()), [6]);
    assert_eq!(buf.try_read(6, 1), Err(ReadError::Empty));
    assert_eq!(
        buf.latest(),
        Some(Entry {
            revision: 6,
            value: 60
        })
    );
}

pub fn rule1_reader_gap_moves_cursor_to_oldest_minus_one<B: Broadcast>() {
    let buf = filled::<B>(3, 2);
    let mut r = buf.reader_at(buf.cursor_at(0));
    for i in 3..=6u64 {
        buf.append(i * 10).unwrap();
    }
    // Retained 4..=6: the gap is reported once...
    assert_eq!(
        r.try_next(),
        Err(ReadError::Gap {
            after: 0,
            oldest: 4
        })
    );
    assert_eq!(r.cursor().revision(), 3);
    // ...then the reader resumes at the oldest retained entry.
    assert_eq!(
        r.try_next().unwrap(),
        Entry {
            revision: 4,
            value: 40
        }
    );
    assert_eq!(r.next().unwrap().revision, 5);
    assert_eq!(block_on(r.next_async()).unwrap().revision, 6);
    assert_eq!(r.try_next(), Err(ReadError::Empty));
    // The blocking and async forms report gaps the same way.
    let mut r = buf.reader_at(buf.cursor_at(1));
    assert_eq!(
        r.next(),
        Err(ReadError::Gap {
            after: 1,
            oldest: 4
        })
    );
    assert_eq!(r.cursor().revision(), 3);
    let mut r = buf.reader_at(buf.cursor_at(2));
    assert_eq!(
        block_on(r.next_async()),
        Err(ReadError::Gap {
            after: 2,
            oldest: 4
        })
    );
    assert_eq!(r.cursor().revision(), 3);
}

// ---- rule 2: the writer never waits; no torn or mislabelled value ----

pub fn rule2_writer_never_waits_for_parked_or_idle_readers<B: Broadcast>() {
    let buf = B::Buffer::<u64>::new(2);
    // Readers that never read, and one parked in a blocking read.
    let idle: Vec<B::Reader<u64>> = (0..8).map(|_| buf.reader_at(buf.cursor_at(0))).collect();
    let crew = Crew::new("rule2_writer_never_waits");
    crew.on_panic(|| buf.close());
    let parked = crew.scope(|s| {
        let parked = on_a_thread(&crew, s, &buf, |buf| buf.read(0, 1));
        for i in 1..=10_000u64 {
            assert_eq!(buf.append(i).unwrap(), i);
        }
        buf.close();
        parked.join().unwrap()
    });
    // Woken by some append; by then revision 1 may be gone.
    match parked {
        Ok(page) => assert_eq!(
            page[0],
            Entry {
                revision: 1,
                value: 1
            }
        ),
        Err(ReadError::Gap { after: 0, oldest }) => assert!(oldest > 1),
        Err(e) => panic!("unexpected {e:?}"),
    }
    for mut r in idle {
        assert_eq!(
            r.try_next(),
            Err(ReadError::Gap {
                after: 0,
                oldest: 9_999
            })
        );
    }
}

pub fn rule2_race_no_torn_values_and_gaps_are_explicit<B: Broadcast>() {
    let buf = B::Buffer::<Payload>::new(4);
    let crew = Crew::new("rule2_race_no_torn_values");
    crew.on_panic(|| buf.close());
    crew.scope(|s| rule2_race_body::<B>(&crew, s, &buf));
}

fn rule2_race_body<'scope, B: Broadcast>(
    crew: &'scope Crew<'_>,
    s: &'scope Scope<'scope, '_>,
    buf: &B::Buffer<Payload>,
) {
    const APPENDS: u64 = 20_000;
    let mut readers = Vec::new();
    for id in 0..3 {
        let buf = buf.clone();
        readers.push(crew.spawn(s, move || {
            let mut r = buf.reader_at(buf.cursor_at(0));
            let mut seen = 0u64;
            let mut gaps = 0u64;
            loop {
                let step = if id == 0 { r.next() } else { r.try_next() };
                match step {
                    Ok(e) => {
                        e.value.check(e.revision);
                        assert!(e.revision > seen, "revisions go forward");
                        seen = e.revision;
                    }
                    Err(ReadError::Gap { after, oldest }) => {
                        assert_eq!(after, seen, "a gap names the cursor");
                        assert!(oldest > after + 1, "a gap skips something");
                        assert_eq!(r.cursor().revision(), oldest - 1);
                        seen = oldest - 1;
                        gaps += 1;
                    }
                    Err(ReadError::Empty) => thread::yield_now(),
                    Err(ReadError::Closed) => break,
                    Err(e) => panic!("unexpected {e:?}"),
                }
            }
            assert_eq!(seen, APPENDS, "drained to the end");
            gaps
        }));
    }
    let pages = on_a_thread(crew, s, buf, |buf| {
        let mut after = 0u64;
        // A panicked appender never gets to APPENDS.
        while after < APPENDS && !crew.panicked() {
            match buf.try_read(after, 3) {
                Ok(page) => {
                    for (i, e) in page.iter().enumerate() {
                        assert_eq!(e.revision, after + 1 + i as u64);
                        e.value.check(e.revision);
                    }
                    after = page.last().unwrap().revision;
                }
                Err(ReadError::Gap { oldest, .. }) => after = oldest - 1,
                Err(ReadError::Empty) => thread::yield_now(),
                Err(e) => panic!("unexpected {e:?}"),
            }
            if let Some(latest) = buf.latest() {
                latest.value.check(latest.revision);
            }
            let retained = buf.retained();
            for w in retained.windows(2) {
                assert!(w[0].revision < w[1].revision);
            }
            for e in &retained {
                e.value.check(e.revision);
            }
        }
    });
    for i in 1..=APPENDS {
        assert_eq!(buf.append(Payload::new(i)).unwrap(), i);
    }
    buf.close();
    pages.join().unwrap();
    for r in readers {
        r.join().unwrap();
    }
}

// ---- rule 3: copies are independent ----

pub fn rule3_each_reader_gets_its_own_copy<B: Broadcast>() {
    let buf = B::Buffer::<Vec<u32>>::new(2);
    buf.append(vec![1, 2, 3]).unwrap();
    let mut a = buf.reader_at(buf.cursor_at(0));
    let mut b = buf.reader_at(buf.cursor_at(0));
    let mut mine = a.next().unwrap();
    mine.value.push(99);
    mine.value[0] = 0;
    assert_eq!(b.next().unwrap().value, [1, 2, 3]);
    let mut page = buf.try_read(0, 1).unwrap();
    page[0].value.clear();
    assert_eq!(buf.latest().unwrap().value, [1, 2, 3]);
    assert_eq!(buf.retained()[0].value, [1, 2, 3]);
    // The appended value itself is moved in; later reads are unaffected
    // by anything done to earlier copies.
    let shared = Arc::new(7u32);
    let arcs = B::Buffer::<Arc<u32>>::new(1);
    arcs.append(shared.clone()).unwrap();
    assert_eq!(*arcs.latest().unwrap().value, 7);
}

// ---- rule 4: snapshot then subscribe ----

pub fn rule4_snapshot_then_subscribe_loses_nothing<B: Broadcast>() {
    let buf = filled::<B>(8, 3);
    let snapshot = buf.latest().unwrap();
    assert_eq!(snapshot.revision, 3);
    buf.append(40).unwrap();
    buf.append(50).unwrap();
    let mut r = buf.reader_at(buf.cursor_at(snapshot.revision));
    assert_eq!(
        r.try_next().unwrap(),
        Entry {
            revision: 4,
            value: 40
        }
    );
    assert_eq!(
        r.try_next().unwrap(),
        Entry {
            revision: 5,
            value: 50
        }
    );
    assert_eq!(r.try_next(), Err(ReadError::Empty));
    // tail() works as the snapshot too.
    let tail = buf.tail();
    buf.append(60).unwrap();
    assert_eq!(revisions(&buf.try_read(tail, 8).unwrap()), [6]);
}

pub fn rule4_snapshot_evicted_before_subscribe_is_a_gap<B: Broadcast>() {
    let buf = filled::<B>(2, 3);
    let snapshot = buf.tail();
    for i in 4..=6u64 {
        buf.append(i * 10).unwrap();
    }
    // Retained 5..=6; revision 4 was lost between snapshot and subscribe.
    let mut r = buf.reader_at(buf.cursor_at(snapshot));
    assert_eq!(
        r.next(),
        Err(ReadError::Gap {
            after: 3,
            oldest: 5
        })
    );
    assert_eq!(r.next().unwrap().revision, 5);
}

pub fn rule4_reader_starts_at_tail_and_sees_only_new_values<B: Broadcast>() {
    let buf = filled::<B>(4, 2);
    let mut r = buf.reader();
    assert_eq!(r.cursor().revision(), 2);
    assert_eq!(r.try_next(), Err(ReadError::Empty));
    buf.append(30).unwrap();
    assert_eq!(
        r.try_next().unwrap(),
        Entry {
            revision: 3,
            value: 30
        }
    );
}

// ---- rule 5: concurrent appenders ----

pub fn rule5_concurrent_appenders_get_unique_gap_free_revisions<B: Broadcast>() {
    const THREADS: u64 = 4;
    const EACH: u64 = 500;
    let buf = B::Buffer::<(u64, u64)>::new((THREADS * EACH) as usize);
    let crew = Crew::new("rule5_concurrent_appenders");
    let mut all = crew.scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let buf = buf.clone();
                crew.spawn(s, move || {
                    (0..EACH)
                        .map(|i| (buf.append((t, i)).unwrap(), (t, i)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all = Vec::new();
        for h in handles {
            let mine = h.join().unwrap();
            // Each thread's own appends are ordered as it made them.
            assert!(mine.windows(2).all(|w| w[0].0 < w[1].0));
            all.extend(mine);
        }
        all
    });
    all.sort();
    let revs: Vec<u64> = all.iter().map(|(r, _)| *r).collect();
    assert_eq!(revs, (1..=THREADS * EACH).collect::<Vec<_>>());
    // Every value sits under the revision its append returned.
    let retained = buf.retained();
    assert_eq!(retained.len(), all.len());
    for (e, (rev, value)) in retained.iter().zip(&all) {
        assert_eq!((e.revision, e.value), (*rev, *value));
    }
}

// ---- rule 6: closing ----

pub fn rule6_close_is_idempotent_and_append_returns_the_value<B: Broadcast>() {
    let buf = filled::<B>(4, 1);
    assert!(!buf.is_closed());
    buf.close();
    buf.close();
    assert!(buf.is_closed());
    assert!(buf.clone().is_closed());
    assert_eq!(buf.append(7), Err(AppendError(7)));
    assert_eq!(buf.append(8).unwrap_err().into_inner(), 8);
    assert_eq!(buf.append_if_changed(10), Err(AppendError(10)));
    assert_eq!(buf.tail(), 1);
    let text: Vec<String> = vec!["x".into()];
    let strings = B::Buffer::<Vec<String>>::new(1);
    strings.close();
    assert_eq!(strings.append(text.clone()).unwrap_err().0, text);
}

pub fn rule6_readers_drain_then_closed<B: Broadcast>() {
    let buf = filled::<B>(4, 3);
    buf.close();
    let mut r = buf.reader_at(buf.cursor_at(0));
    for rev in 1..=3u64 {
        assert_eq!(r.next().unwrap().revision, rev);
    }
    assert_eq!(r.next(), Err(ReadError::Closed));
    assert_eq!(r.try_next(), Err(ReadError::Closed));
    assert_eq!(block_on(r.next_async()), Err(ReadError::Closed));
    assert_eq!(revisions(&buf.try_read(0, 10).unwrap()), [1, 2, 3]);
    assert_eq!(revisions(&buf.read(1, 10).unwrap()), [2, 3]);
    assert_eq!(buf.try_read(3, 1), Err(ReadError::Closed));
    assert_eq!(buf.read(3, 1), Err(ReadError::Closed));
    assert_eq!(
        buf.read_timeout(3, 1, Duration::from_secs(60)),
        Err(ReadError::Closed)
    );
    assert_eq!(block_on(buf.read_async(3, 1)), Err(ReadError::Closed));
    // Gap and Future still win over Closed.
    assert_eq!(
        buf.try_read(4, 1),
        Err(ReadError::Future { after: 4, tail: 3 })
    );
    let small = filled::<B>(1, 3);
    small.close();
    assert_eq!(
        small.try_read(0, 1),
        Err(ReadError::Gap {
            after: 0,
            oldest: 3
        })
    );
    // Retained values stay readable after close.
    assert_eq!(buf.latest().unwrap().revision, 3);
    assert_eq!(buf.retained().len(), 3);
}

pub fn rule6_close_wakes_blocked_readers<B: Broadcast>() {
    let buf = B::Buffer::<u64>::new(2);
    let crew = Crew::new("rule6_close_wakes_blocked_readers");
    crew.on_panic(|| buf.close());
    crew.scope(|s| {
        let blocked = on_a_thread(&crew, s, &buf, |buf| buf.read(0, 1));
        let reader = {
            let mut r = buf.reader();
            crew.spawn(s, move || r.next())
        };
        let asynchronous = on_a_thread(&crew, s, &buf, |buf| block_on(buf.read_async(0, 4)));
        buf.close();
        assert_eq!(blocked.join().unwrap(), Err(ReadError::Closed));
        assert_eq!(reader.join().unwrap(), Err(ReadError::Closed));
        assert_eq!(asynchronous.join().unwrap(), Err(ReadError::Closed));
    });
}

// ---- rule 7: generation ----

// Cursors carrying the generation, seek, and the Stream form.
pub use super::broadcast_cursor::*;

pub fn rule7_generation_identifies_the_buffer_instance<B: Broadcast>() {
    let a = B::Buffer::<u8>::new(1);
    assert_eq!(a.generation(), a.clone().generation());
    let ids: HashSet<u64> = (0..256)
        .map(|_| B::Buffer::<u8>::new(1).generation())
        .chain([a.generation()])
        .collect();
    assert_eq!(ids.len(), 257);
}

// ---- API details (the rustdoc) ----

pub fn append_if_changed_skips_a_value_equal_to_the_latest<B: Broadcast>() {
    let buf = B::Buffer::<&str>::new(4);
    assert_eq!(buf.append_if_changed("a").unwrap(), 1);
    assert_eq!(buf.append_if_changed("a").unwrap(), 1);
    assert_eq!(buf.append_if_changed("b").unwrap(), 2);
    assert_eq!(buf.append("b").unwrap(), 3);
    assert_eq!(buf.append_if_changed("b").unwrap(), 3);
    assert_eq!(buf.append_if_changed("a").unwrap(), 4);
    assert_eq!(buf.tail(), 4);
    let values: Vec<_> = buf.retained().into_iter().map(|e| e.value).collect();
    assert_eq!(values, ["a", "b", "b", "a"]);
}

pub fn append_if_changed_compares_across_wraparound<B: Broadcast>() {
    let buf = B::Buffer::<u32>::new(1);
    for i in 0..10u32 {
        buf.append(i).unwrap();
    }
    assert_eq!(buf.append_if_changed(9).unwrap(), 10);
    assert_eq!(buf.append_if_changed(10).unwrap(), 11);
}

// The documented panics (capacity 0, limit 0 in every read form) are bad
// input's cases, run here too under the names they have always had here.
pub use crate::bad_input::broadcast::{
    capacity_zero_is_a_documented_panic as capacity_zero_panics,
    limit_zero_read as limit_zero_panics_in_read,
    limit_zero_read_async as limit_zero_panics_in_read_async_when_called,
    limit_zero_read_timeout as limit_zero_panics_in_read_timeout,
    limit_zero_try_read as limit_zero_panics_in_try_read,
};

pub fn read_timeout_times_out_and_a_ready_answer_wins<B: Broadcast>() {
    let buf = filled::<B>(2, 1);
    for timeout in [Duration::ZERO, Duration::from_millis(5)] {
        assert_eq!(buf.read_timeout(1, 1, timeout), Err(ReadError::Timeout));
    }
    for timeout in [Duration::ZERO, Duration::MAX] {
        assert_eq!(revisions(&buf.read_timeout(0, 1, timeout).unwrap()), [1]);
    }
}

pub fn read_blocks_until_an_append_from_another_thread<B: Broadcast>() {
    let buf = B::Buffer::<u64>::new(2);
    let crew = Crew::new("read_blocks_until_an_append");
    crew.on_panic(|| buf.close());
    crew.scope(|s| {
        let waiter = on_a_thread(&crew, s, &buf, |buf| buf.read(0, 8));
        let timed = on_a_thread(&crew, s, &buf, |buf| {
            buf.read_timeout(0, 8, Duration::from_secs(600))
        });
        buf.append(11u64).unwrap();
        for h in [waiter, timed] {
            let page = h.join().unwrap().unwrap();
            assert_eq!(
                page[0],
                Entry {
                    revision: 1,
                    value: 11
                }
            );
        }
    });
}

pub fn reader_next_is_woken_by_an_append_from_another_thread<B: Broadcast>() {
    let buf = B::Buffer::<u64>::new(2);
    let mut r = buf.reader();
    let crew = Crew::new("reader_next_is_woken_by_an_append");
    crew.on_panic(|| buf.close());
    let (first, second, cursor) = crew.scope(|s| {
        let handle = crew.spawn(s, move || {
            let first = r.next().unwrap();
            let second = block_on(r.next_async()).unwrap();
            (first, second, r.cursor().revision())
        });
        buf.append(1u64).unwrap();
        buf.append(2u64).unwrap();
        handle.join().unwrap()
    });
    assert_eq!((first.revision, second.revision, cursor), (1, 2, 2));
}

pub fn read_async_is_woken_by_an_append_from_another_thread<B: Broadcast>() {
    let buf = B::Buffer::<u64>::new(2);
    let crew = Crew::new("read_async_is_woken_by_an_append");
    // An appender that panics would leave the read below waiting forever.
    crew.on_panic(|| buf.close());
    crew.scope(|s| {
        let appender = on_a_thread(&crew, s, &buf, |buf| buf.append(5).unwrap());
        let page = block_on(buf.read_async(0, 4)).unwrap();
        assert_eq!(
            page[0],
            Entry {
                revision: 1,
                value: 5
            }
        );
        appender.join().unwrap();
    });
}

pub fn pending_async_reads_consume_nothing_when_dropped<B: Broadcast>() {
    let buf = B::Buffer::<u64>::new(2);
    let mut r = buf.reader();
    assert!(r.next_async().now_or_never().is_none());
    assert!(buf.read_async(0, 1).now_or_never().is_none());
    assert_eq!(r.cursor().revision(), 0);
    buf.append(1).unwrap();
    assert_eq!(r.next_async().now_or_never().unwrap().unwrap().revision, 1);
    assert_eq!(r.cursor().revision(), 1);
}

pub fn handles_are_send_sync_and_debug<B: Broadcast>() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: &T) {}
    let buf = B::Buffer::<String>::new(3);
    buf.append("x".to_string()).unwrap();
    send_sync(&buf);
    let mut r = buf.reader_at(buf.cursor_at(0));
    send(&r);
    send(&r.next_async());
    send(&buf.read_async(0, 1));
    let text = format!("{buf:?} {r:?}");
    assert!(text.contains("Buffer") && text.contains("Reader"), "{text}");
    assert!(text.contains("tail: 1"), "{text}");
    let msg = ReadError::Gap {
        after: 1,
        oldest: 3,
    }
    .to_string();
    assert_eq!(msg, msg.to_lowercase());
}
