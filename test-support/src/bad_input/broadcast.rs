//! Bad input for broadcast, written once over [`Broadcast`] and run against
//! both implementations by `tests/bad_input_broadcast.rs`: capacity 0 and
//! `usize::MAX`, `limit` 0 and `usize::MAX`, cursors from another buffer (of
//! either implementation), made-up or far in the future, a reader outliving every `Buffer` handle, `Duration::MAX` and zero
//! timeouts, `T::clone` panicking in a read, `T::eq` panicking in
//! `append_if_changed`, zero-sized values. Every case must give a clear error, a
//! documented panic, or degrade without UB, deadlock or unbounded memory; the
//! functions documented as panicking run under `#[should_panic]`.

use super::{Touchy, Trap, Which};
use crate::broadcast_api::{self, revisions, Broadcast, BufferApi, Cursor, ReadError, ReaderApi};
use crate::harness::poll_once;
use crate::threads::Crew;
use futures::executor::block_on;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

/// Revisions `1..=n`, each holding its revision.
fn filled<B: Broadcast>(capacity: usize, n: u64) -> B::Buffer<u64> {
    broadcast_api::filled::<B>(capacity, n, |r| r)
}

// ---- capacity and limit ----

/// Panics with "capacity must be at least 1".
pub fn capacity_zero_is_a_documented_panic<B: Broadcast>() {
    let _ = B::Buffer::<u64>::new(0);
}

/// Not documented, but a panic (capacity overflow), not UB or an
/// attempt to allocate forever.
/// Panics.
pub fn capacity_usize_max_panics<B: Broadcast>() {
    let _ = B::Buffer::<u64>::new(usize::MAX);
}

/// Panics with "limit must be at least 1".
pub fn limit_zero_try_read<B: Broadcast>() {
    let _ = filled::<B>(4, 2).try_read(0, 0);
}

/// Panics with "limit must be at least 1".
pub fn limit_zero_read<B: Broadcast>() {
    let _ = filled::<B>(4, 2).read(0, 0);
}

/// Panics with "limit must be at least 1".
pub fn limit_zero_read_timeout<B: Broadcast>() {
    let _ = filled::<B>(4, 2).read_timeout(0, 0, Duration::MAX);
}

/// Panics with "limit must be at least 1".
pub fn limit_zero_read_async<B: Broadcast>() {
    let buf = filled::<B>(4, 2);
    drop(buf.read_async(0, 0));
}

/// Panics with "limit must be at least 1".
pub fn limit_zero_on_an_empty_closed_buffer_still_panics<B: Broadcast>() {
    let buf = B::Buffer::<u64>::new(4);
    buf.close();
    let _ = buf.read(0, 0);
}

pub fn limit_usize_max_reads_what_is_there<B: Broadcast>() {
    let buf = filled::<B>(8, 20);
    assert_eq!(
        revisions(&buf.try_read(12, usize::MAX).unwrap()),
        (13..=20).collect::<Vec<_>>()
    );
    assert_eq!(revisions(&buf.read(19, usize::MAX).unwrap()), [20]);
    assert_eq!(
        revisions(&buf.read_timeout(18, usize::MAX, Duration::ZERO).unwrap()),
        [19, 20]
    );
    assert_eq!(
        revisions(&block_on(buf.read_async(17, usize::MAX)).unwrap()),
        [18, 19, 20]
    );
    assert_eq!(buf.try_read(20, usize::MAX), Err(ReadError::Empty));
}

// ---- cursors from another buffer / the far future ----

pub fn far_future_cursor_is_future_in_every_form<B: Broadcast>() {
    let buf = filled::<B>(4, 10);
    let future = Err(ReadError::Future {
        after: u64::MAX,
        tail: 10,
    });
    assert_eq!(
        buf.validate(u64::MAX),
        Err(ReadError::Future {
            after: u64::MAX,
            tail: 10
        })
    );
    assert_eq!(buf.try_read(u64::MAX, 1), future);
    assert_eq!(buf.try_read(u64::MAX, usize::MAX), future);
    // The blocking forms answer at once: Future is checked first.
    assert_eq!(buf.read(u64::MAX, 3), future);
    assert_eq!(buf.read_timeout(u64::MAX, 3, Duration::MAX), future);
    assert_eq!(block_on(buf.read_async(u64::MAX, 3)), future);
    assert_eq!(
        buf.try_read(u64::MAX - 1, usize::MAX),
        Err(ReadError::Future {
            after: u64::MAX - 1,
            tail: 10
        })
    );
    assert_eq!(
        buf.try_read(11, 1),
        Err(ReadError::Future {
            after: 11,
            tail: 10
        })
    );
    // A reader keeps its cursor on Future, every time.
    let mut r = buf.reader_at(buf.cursor_at(u64::MAX));
    for _ in 0..3 {
        assert_eq!(
            r.try_next(),
            Err(ReadError::Future {
                after: u64::MAX,
                tail: 10
            })
        );
        assert_eq!(
            r.next(),
            Err(ReadError::Future {
                after: u64::MAX,
                tail: 10
            })
        );
        assert_eq!(
            block_on(r.next_async()),
            Err(ReadError::Future {
                after: u64::MAX,
                tail: 10
            })
        );
        assert_eq!(r.cursor().revision(), u64::MAX);
    }
    // Future beats Closed (checks run Future/Gap first).
    buf.close();
    assert_eq!(buf.read(u64::MAX, 1), future);
    assert_eq!(
        r.next(),
        Err(ReadError::Future {
            after: u64::MAX,
            tail: 10
        })
    );
    // An empty buffer: any cursor > 0 is Future.
    let empty = B::Buffer::<u64>::new(2);
    assert_eq!(
        empty.try_read(1, 1),
        Err(ReadError::Future { after: 1, tail: 0 })
    );
    assert_eq!(empty.latest(), None);
    assert!(empty.retained().is_empty());
}

/// The report's bug: a cursor of another buffer was read as a revision of this
/// one (`Future` at best, a silent read of another history at worst). A
/// [`Cursor`] now answers `Foreign`, ahead of the tail or behind it.
pub fn cursor_from_another_buffer<B: Broadcast>() {
    let long = filled::<B>(4, 100);
    let short = filled::<B>(4, 3);
    assert_ne!(long.generation(), short.generation());
    let foreign = ReadError::Foreign {
        expected: short.generation(),
        found: long.generation(),
    };
    // Ahead of this buffer's tail: Foreign, not Future.
    let cursor = long.reader().cursor();
    assert_eq!(cursor.revision(), 100);
    assert_eq!(short.try_read(cursor, 8), Err(foreign));
    let mut r = short.reader_at(cursor);
    assert_eq!(r.try_next(), Err(foreign));
    assert_eq!(r.cursor(), cursor);
    // Behind it, where a revision number alone reads this history: Foreign.
    let behind = long.cursor_at(1);
    assert_eq!(short.try_read(behind, 8), Err(foreign));
    assert_eq!(short.validate(behind), Err(foreign));
    assert_eq!(short.reader_at(behind).try_next(), Err(foreign));
    // A bare revision has no generation to check (documented): it is read as
    // this buffer's.
    assert_eq!(revisions(&short.try_read(1, 8).unwrap()), [2, 3]);
    assert_eq!(
        long.try_read(2, 8),
        Err(ReadError::Gap {
            after: 2,
            oldest: 97
        })
    );
    // An own cursor past the tail is Future, and readable once the tail
    // passes it.
    let buf = filled::<B>(4, 3);
    let mut r = buf.reader_at(buf.cursor_at(5));
    assert_eq!(r.try_next(), Err(ReadError::Future { after: 5, tail: 3 }));
    buf.append(4).unwrap();
    buf.append(5).unwrap();
    assert_eq!(r.try_next(), Err(ReadError::Empty));
    buf.append(6).unwrap();
    assert_eq!(r.try_next().unwrap().revision, 6);
}

/// Generations are unique across both implementations: a cursor of either
/// kind of buffer is foreign to every other buffer.
pub fn cursor_from_the_other_implementation<B: Broadcast>() {
    let buf = filled::<B>(4, 3);
    let lockfree = keybus::broadcast::Buffer::<u64>::new(4);
    let baseline = keybus::baseline::broadcast::Buffer::<u64>::new(4);
    for other in [lockfree.cursor_at(2), baseline.cursor_at(2)] {
        let foreign = ReadError::Foreign {
            expected: buf.generation(),
            found: other.generation(),
        };
        assert_eq!(buf.try_read(other, 1), Err(foreign));
        assert_eq!(buf.reader_at(other).try_next(), Err(foreign));
        assert_eq!(buf.reader().seek(other), Err(foreign));
    }
    assert_ne!(lockfree.generation(), baseline.generation());
}

/// Made-up cursors: generations 0 and `u64::MAX`, revisions 0 and `u64::MAX`,
/// a generation one bit off. Every form answers `Foreign` (checked first, so no
/// revision arithmetic runs on them), a `Stream` yields it once and ends, and
/// text that is not a cursor is a parse error, not a cursor.
pub fn made_up_cursors_are_foreign_in_every_form<B: Broadcast>() {
    let buf = filled::<B>(4, 10);
    buf.close();
    let g = buf.generation();
    for (generation, revision) in [
        (0, 0),
        (u64::MAX, u64::MAX),
        (g ^ 1, 10),
        (g.wrapping_add(1), 0),
    ] {
        if generation == g {
            continue;
        }
        let c = Cursor::new(generation, revision);
        let foreign = ReadError::Foreign {
            expected: g,
            found: generation,
        };
        assert_eq!(buf.validate(c), Err(foreign));
        assert_eq!(buf.try_read(c, usize::MAX), Err(foreign));
        assert_eq!(buf.read(c, 1), Err(foreign));
        assert_eq!(buf.read_timeout(c, 1, Duration::ZERO), Err(foreign));
        assert_eq!(block_on(buf.read_async(c, 1)), Err(foreign));
        let mut r = buf.reader_at(c);
        assert_eq!(ReaderApi::next(&mut r), Err(foreign));
        assert_eq!(
            block_on(futures::StreamExt::next(&mut r)),
            Some(Err(foreign))
        );
        assert_eq!(block_on(futures::StreamExt::next(&mut r)), None);
        assert_eq!(r.seek(c), Err(foreign));
        assert!(!foreign.to_string().is_empty());
    }
    // The buffer's own generation with a revision past any tail: Future.
    let absurd = buf.cursor_at(u64::MAX);
    assert_eq!(
        buf.reader().seek(absurd),
        Err(ReadError::Future {
            after: u64::MAX,
            tail: 10
        })
    );
    for text in ["", "g:1", "1:-1", "1:1:1", "10000000000000000:1"] {
        let err = text.parse::<Cursor>().unwrap_err();
        assert_eq!(err.to_string(), err.to_string().to_lowercase());
    }
}

// ---- a reader outliving every Buffer handle ----

/// Dropping the last `Buffer` handle closes the buffer (nobody can
/// append any more): a `Reader` drains what is retained, then answers
/// `Closed` in every form instead of waiting forever.
pub fn reader_after_every_buffer_handle_dropped_drains_then_closed<B: Broadcast>() {
    let buf = filled::<B>(4, 6);
    let mut r = buf.reader_at(buf.cursor_at(2));
    let mut behind = buf.reader_at(buf.cursor_at(0));
    let clone = buf.clone();
    drop(buf);
    assert_eq!(r.try_next().unwrap().value, 3, "a clone keeps it open");
    drop(clone);
    assert_eq!(
        behind.try_next(),
        Err(ReadError::Gap {
            after: 0,
            oldest: 3
        })
    );
    let got: Vec<u64> = (0..3).map(|_| r.next().unwrap().value).collect();
    assert_eq!(got, [4, 5, 6]);
    assert_eq!(r.try_next(), Err(ReadError::Closed));
    assert_eq!(r.next(), Err(ReadError::Closed));
    assert_eq!(poll_once(r.next_async()), Some(Err(ReadError::Closed)));
    assert_eq!(r.cursor().revision(), 6);
}

pub fn reader_after_close_and_drop_of_every_handle_drains_then_closed<B: Broadcast>() {
    let buf = filled::<B>(4, 6);
    let mut r = buf.reader_at(buf.cursor_at(4));
    buf.close();
    drop(buf);
    assert_eq!(r.next().unwrap().revision, 5);
    assert_eq!(block_on(r.next_async()).unwrap().revision, 6);
    assert_eq!(r.next(), Err(ReadError::Closed));
    assert_eq!(r.try_next(), Err(ReadError::Closed));
}

// ---- timeouts at the extremes ----

pub fn duration_max_and_zero_timeouts<B: Broadcast>() {
    let buf = filled::<B>(4, 2);
    for timeout in [Duration::MAX, Duration::ZERO] {
        assert_eq!(revisions(&buf.read_timeout(0, 8, timeout).unwrap()), [1, 2]);
    }
    for timeout in [Duration::ZERO, Duration::from_nanos(1)] {
        assert_eq!(buf.read_timeout(2, 8, timeout), Err(ReadError::Timeout));
    }
    let small = filled::<B>(2, 9);
    for timeout in [Duration::ZERO, Duration::MAX] {
        let gap = ReadError::Gap {
            after: 1,
            oldest: 8,
        };
        assert_eq!(small.read_timeout(1, 8, timeout), Err(gap));
    }
    // Duration::MAX parks until an append from another thread...
    let crew = Crew::new("duration_max_and_zero_timeouts");
    crew.on_panic(|| buf.close());
    crew.scope(|s| {
        let waiter = crew.spawn(s, || {
            buf.read_timeout(2, 8, Duration::MAX).map(|e| revisions(&e))
        });
        buf.append(3).unwrap();
        assert_eq!(waiter.join().unwrap(), Ok(vec![3]));
    });
    // ...or a close.
    crew.scope(|s| {
        let waiter = crew.spawn(s, || buf.read_timeout(3, 8, Duration::MAX));
        buf.close();
        assert_eq!(waiter.join().unwrap(), Err(ReadError::Closed));
    });
    assert_eq!(
        buf.read_timeout(3, 8, Duration::ZERO),
        Err(ReadError::Closed)
    );
}

// ---- user trait impls that panic ----

pub fn value_clone_panicking_in_a_read_leaves_everything_usable<B: Broadcast>() {
    let trap = Arc::new(Trap::default());
    let buf = B::Buffer::<Touchy>::new(4);
    for n in 1..=3 {
        buf.append(Touchy::new(n, &trap)).unwrap();
    }
    let mut r = buf.reader_at(buf.cursor_at(0));
    for nth in 1..=3 {
        trap.arm(Which::Clone, nth);
        assert!(catch_unwind(AssertUnwindSafe(|| buf.try_read(0, 8))).is_err());
        trap.arm(Which::Clone, 1);
        assert!(catch_unwind(AssertUnwindSafe(|| r.try_next())).is_err());
        trap.disarm();
        // The reader's cursor did not move past what it never got.
        assert_eq!(r.cursor().revision(), 0);
    }
    // The writer was never held up, readers still read.
    buf.append(Touchy::new(4, &trap)).unwrap();
    assert_eq!(r.try_next().unwrap().value.id, 1);
    assert_eq!(
        buf.try_read(0, 8)
            .unwrap()
            .iter()
            .map(|e| e.value.id)
            .collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    buf.close();
    drop((buf, r));
    assert_eq!(Arc::strong_count(&trap), 1, "a value leaked");
}

/// Documented: a panic in `T::eq` leaves the buffer unchanged and usable.
pub fn value_eq_panicking_in_append_if_changed_changes_nothing<B: Broadcast>() {
    let trap = Arc::new(Trap::default());
    let buf = B::Buffer::<Touchy>::new(2);
    buf.append(Touchy::new(1, &trap)).unwrap();
    trap.arm(Which::Eq, 1);
    let r = catch_unwind(AssertUnwindSafe(|| {
        buf.append_if_changed(Touchy::new(2, &trap))
    }));
    assert!(r.is_err());
    trap.disarm();
    assert_eq!(buf.tail(), 1);
    assert_eq!(buf.latest().unwrap().value.id, 1);
    assert_eq!(buf.append_if_changed(Touchy::new(1, &trap)).unwrap(), 1);
    assert_eq!(buf.append_if_changed(Touchy::new(2, &trap)).unwrap(), 2);
    // Appends (and wake-ups) still work.
    {
        let crew = Crew::new("value_eq_panicking_in_append_if_changed");
        crew.on_panic(|| buf.close());
        crew.scope(|s| {
            let waiter = crew.spawn(s, || buf.read(2, 1).map(|e| e[0].revision));
            buf.append(Touchy::new(3, &trap)).unwrap();
            assert_eq!(waiter.join().unwrap(), Ok(3));
        });
    }
    drop(buf);
    assert_eq!(Arc::strong_count(&trap), 1, "a value leaked");
}

// ---- zero-sized values ----

pub fn zero_sized_values<B: Broadcast>() {
    let buf = B::Buffer::<()>::new(3);
    for i in 1..=10 {
        assert_eq!(buf.append(()).unwrap(), i);
    }
    assert_eq!(buf.append_if_changed(()).unwrap(), 10);
    assert_eq!(revisions(&buf.try_read(7, 8).unwrap()), [8, 9, 10]);
    assert_eq!(
        buf.try_read(6, 8),
        Err(ReadError::Gap {
            after: 6,
            oldest: 8
        })
    );
    assert_eq!(buf.retained().len(), 3);
}
