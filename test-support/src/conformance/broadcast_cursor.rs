//! Broadcast rule 7 as enforced ("a cursor is only meaningful with its
//! generation"), `Reader::seek*` and the `Stream` form of `Reader`, written once
//! over [`Broadcast`]. Re-exported by [`super::broadcast`], so
//! `tests/conformance_broadcast.rs` runs them with the rest of the suite.

use crate::broadcast_api::{
    self, revisions, Broadcast, BufferApi, Cursor, Entry, ReadError, ReaderApi,
};
use crate::threads::Crew;
use futures::executor::block_on;
use futures::{FutureExt as _, StreamExt};
use std::time::Duration;

/// Revisions `1..=n`, revision `r` holding `10 r`.
fn filled<B: Broadcast>(capacity: usize, n: u64) -> B::Buffer<u64> {
    broadcast_api::filled::<B>(capacity, n, |r| r * 10)
}

/// The next stream item (`StreamExt::next`, spelled out: `ReaderApi::next` is
/// in scope too).
fn next_item<B: Broadcast>(r: &mut B::Reader<u64>) -> Option<Result<Entry<u64>, ReadError>> {
    block_on(StreamExt::next(r))
}

// ---- rule 7: a cursor carries its generation, and every use checks it ----

/// The report's case: cursor 744 of one buffer, used on another that has a
/// revision 745, is refused in every form instead of reading that 745.
pub fn rule7_foreign_cursor_is_refused_by_every_use<B: Broadcast>() {
    let old = filled::<B>(1024, 745);
    let new = filled::<B>(1024, 800);
    let cursor = old.cursor_at(744);
    let foreign = ReadError::Foreign {
        expected: new.generation(),
        found: old.generation(),
    };
    assert_eq!(new.validate(cursor), Err(foreign));
    assert_eq!(new.try_read(cursor, 8), Err(foreign));
    assert_eq!(new.read(cursor, 8), Err(foreign));
    assert_eq!(new.read_timeout(cursor, 8, Duration::MAX), Err(foreign));
    assert_eq!(block_on(new.read_async(cursor, 8)), Err(foreign));
    let mut r = new.reader_at(cursor);
    for _ in 0..2 {
        assert_eq!(r.try_next(), Err(foreign));
        assert_eq!(ReaderApi::next(&mut r), Err(foreign));
        assert_eq!(block_on(r.next_async()), Err(foreign));
        assert_eq!(r.cursor(), cursor, "a foreign cursor is kept, not moved");
    }
    // Its own buffer still reads it.
    assert_eq!(revisions(&old.try_read(cursor, 8).unwrap()), [745]);
    assert_eq!(old.reader_at(cursor).try_next().unwrap().revision, 745);
}

/// `Foreign` is checked before everything else: before `Future`, `Gap`,
/// `Closed`, and on an empty buffer.
pub fn rule7_foreign_is_checked_before_future_gap_and_closed<B: Broadcast>() {
    let other = B::Buffer::<u64>::new(4);
    let buf = filled::<B>(4, 10); // retains 7..=10
    let foreign = |c: Cursor| ReadError::Foreign {
        expected: buf.generation(),
        found: c.generation(),
    };
    for revision in [0, 3, 6, 10, 11, u64::MAX] {
        let c = other.cursor_at(revision);
        assert_eq!(buf.validate(c), Err(foreign(c)), "revision {revision}");
        assert_eq!(buf.try_read(c, usize::MAX), Err(foreign(c)));
    }
    let empty = B::Buffer::<u64>::new(2);
    let c = buf.cursor();
    assert_eq!(
        empty.try_read(c, 1),
        Err(ReadError::Foreign {
            expected: empty.generation(),
            found: buf.generation(),
        })
    );
    buf.close();
    let c = other.cursor_at(10);
    assert_eq!(buf.try_read(c, 1), Err(foreign(c)));
    assert_eq!(buf.read(c, 1), Err(foreign(c)));
    assert_eq!(ReaderApi::next(&mut buf.reader_at(c)), Err(foreign(c)));
}

/// A buffer's own cursors: what readers hand out equals `cursor_at`, carries the
/// buffer's generation, survives a `(u64, u64)` and a text round trip, and is
/// accepted by every handle of the buffer.
pub fn rule7_own_cursor_round_trips_and_resumes<B: Broadcast>() {
    let buf = filled::<B>(8, 3);
    assert_eq!(buf.cursor(), buf.cursor_at(3));
    assert_eq!(buf.cursor().generation(), buf.generation());
    let mut r = buf.reader_at(buf.cursor_at(1));
    assert_eq!(r.try_next().unwrap().revision, 2);
    let saved = r.cursor();
    assert_eq!(saved, buf.cursor_at(2));
    assert_eq!(buf.reader().cursor(), buf.cursor());
    let pair: (u64, u64) = saved.into();
    assert_eq!(pair, (buf.generation(), 2));
    let text = saved.to_string();
    for restored in [Cursor::from(pair), text.parse::<Cursor>().unwrap()] {
        assert_eq!(restored, saved);
        let handle = buf.clone();
        assert_eq!(handle.validate(restored), Ok(()));
        assert_eq!(revisions(&handle.try_read(restored, 8).unwrap()), [3]);
        assert_eq!(handle.reader_at(restored).try_next().unwrap().value, 30);
    }
    // A bare revision is taken as this buffer's (unchecked, documented).
    assert_eq!(revisions(&buf.try_read(2, 8).unwrap()), [3]);
    assert_eq!(buf.validate(2), Ok(()));
}

// ---- seek ----

pub fn reader_seek_moves_to_a_checked_cursor<B: Broadcast>() {
    let buf = filled::<B>(4, 6); // retains 3..=6
    let mut r = buf.reader();
    r.seek(buf.cursor_at(3)).unwrap();
    assert_eq!(r.cursor(), buf.cursor_at(3));
    assert_eq!(r.try_next().unwrap().revision, 4);
    // Backwards too, and to the oldest - 1 boundary.
    r.seek(buf.cursor_at(2)).unwrap();
    assert_eq!(r.try_next().unwrap().revision, 3);
    // Behind retention: accepted; the next read reports the gap once.
    r.seek(buf.cursor_at(0)).unwrap();
    assert_eq!(
        r.try_next(),
        Err(ReadError::Gap {
            after: 0,
            oldest: 3
        })
    );
    assert_eq!(r.try_next().unwrap().revision, 3);
    // Future and Foreign: refused, the reader stays where it was.
    assert_eq!(
        r.seek(buf.cursor_at(7)),
        Err(ReadError::Future { after: 7, tail: 6 })
    );
    let other = filled::<B>(4, 6);
    assert_eq!(
        r.seek(other.cursor_at(3)),
        Err(ReadError::Foreign {
            expected: buf.generation(),
            found: other.generation(),
        })
    );
    assert_eq!(r.cursor(), buf.cursor_at(3));
    assert_eq!(r.try_next().unwrap().revision, 4);
    // A reader made from a foreign cursor is recovered by a seek.
    let mut lost = buf.reader_at(other.cursor_at(5));
    assert!(matches!(lost.try_next(), Err(ReadError::Foreign { .. })));
    lost.seek(buf.cursor_at(5)).unwrap();
    assert_eq!(lost.try_next().unwrap().revision, 6);
}

pub fn reader_seek_to_tail_and_to_oldest<B: Broadcast>() {
    let buf = filled::<B>(4, 6); // retains 3..=6
    let mut r = buf.reader_at(buf.cursor_at(0));
    r.seek_to_oldest();
    assert_eq!(r.cursor(), buf.cursor_at(2));
    assert_eq!(revisions(&[r.try_next().unwrap()]), [3]);
    r.seek_to_tail();
    assert_eq!(r.cursor(), buf.cursor_at(6));
    assert_eq!(r.try_next(), Err(ReadError::Empty));
    buf.append(70).unwrap();
    assert_eq!(r.try_next().unwrap().revision, 7);
    // Both recover a reader made from a foreign cursor.
    let other = B::Buffer::<u64>::new(1);
    let mut lost = buf.reader_at(other.cursor());
    lost.seek_to_tail();
    assert_eq!(lost.cursor(), buf.cursor_at(7));
    let mut lost = buf.reader_at(other.cursor());
    lost.seek_to_oldest();
    assert_eq!(lost.try_next().unwrap().revision, 4);
    // Before the first append both are cursor 0 of this buffer.
    let empty = B::Buffer::<u64>::new(2);
    let mut r = empty.reader_at(buf.cursor());
    r.seek_to_oldest();
    assert_eq!(r.cursor(), empty.cursor_at(0));
    r.seek_to_tail();
    assert_eq!(r.cursor(), empty.cursor_at(0));
    // After close: oldest still drains what is retained, tail is Closed.
    buf.close();
    r = buf.reader();
    r.seek_to_oldest();
    assert_eq!(r.try_next().unwrap().revision, 4);
    r.seek_to_tail();
    assert_eq!(r.try_next(), Err(ReadError::Closed));
}

// ---- Reader as a Stream ----

/// Entries in order; a gap is one `Err` item and the stream goes on from the
/// oldest retained entry; `Closed` ends it, and it stays ended.
pub fn reader_stream_yields_entries_and_gaps_then_ends_at_closed<B: Broadcast>() {
    let buf = filled::<B>(3, 5); // retains 3..=5
    let r = buf.reader_at(buf.cursor_at(0));
    buf.append(60).unwrap(); // retains 4..=6
    buf.close();
    let items: Vec<_> = block_on(r.collect());
    assert_eq!(
        items,
        [
            Err(ReadError::Gap {
                after: 0,
                oldest: 4
            }),
            Ok(Entry {
                revision: 4,
                value: 40
            }),
            Ok(Entry {
                revision: 5,
                value: 50
            }),
            Ok(Entry {
                revision: 6,
                value: 60
            }),
        ]
    );
    let mut r = buf.reader_at(buf.cursor_at(5));
    assert_eq!(next_item::<B>(&mut r).unwrap().unwrap().revision, 6);
    assert_eq!(next_item::<B>(&mut r), None);
    assert_eq!(next_item::<B>(&mut r), None);
    assert_eq!(r.cursor(), buf.cursor_at(6));
}

/// `Foreign` and `Future` are yielded once, then the stream ends (instead of
/// repeating the error on every poll) until a seek.
pub fn reader_stream_foreign_and_future_end_it_until_a_seek<B: Broadcast>() {
    let buf = filled::<B>(4, 3);
    let other = B::Buffer::<u64>::new(4);
    let mut r = buf.reader_at(other.cursor());
    assert_eq!(
        next_item::<B>(&mut r),
        Some(Err(ReadError::Foreign {
            expected: buf.generation(),
            found: other.generation(),
        }))
    );
    assert_eq!(next_item::<B>(&mut r), None);
    r.seek(buf.cursor_at(2)).unwrap();
    assert_eq!(next_item::<B>(&mut r).unwrap().unwrap().revision, 3);
    let mut r = buf.reader_at(buf.cursor_at(9));
    assert_eq!(
        next_item::<B>(&mut r),
        Some(Err(ReadError::Future { after: 9, tail: 3 }))
    );
    assert_eq!(next_item::<B>(&mut r), None);
    r.seek_to_oldest();
    assert_eq!(next_item::<B>(&mut r).unwrap().unwrap().revision, 1);
}

/// A pending poll consumes nothing; the stream is woken by an append from
/// another thread, and by `close` (ending it).
pub fn reader_stream_is_woken_by_appends_and_close_from_another_thread<B: Broadcast>() {
    let buf = B::Buffer::<u64>::new(2);
    let mut r = buf.reader();
    assert!(StreamExt::next(&mut r).now_or_never().is_none());
    assert_eq!(r.cursor(), buf.cursor_at(0));
    let crew = Crew::new("reader_stream_is_woken");
    crew.on_panic(|| buf.close());
    let (got, cursor) = crew.scope(|s| {
        let reader = crew.spawn(s, move || {
            let got: Vec<u64> = block_on(r.by_ref().map(|e| e.unwrap().revision).collect());
            (got, r.cursor().revision())
        });
        for v in 1..=2u64 {
            buf.append(v).unwrap();
        }
        buf.close();
        reader.join().unwrap()
    });
    // Capacity 2 and two appends: nothing can be evicted before it is read.
    assert_eq!((got, cursor), (vec![1, 2], 2));
}
