//! A bounded cursor history with lock-free readers.
//!
//! One [`Buffer`] retains the last `capacity` revisions of one stream. Any number
//! of readers read it independently, each with its own [`Cursor`] (the buffer's
//! generation and a revision number); none of them consumes anything, and the
//! writer never waits for any of them. A reader that falls behind retention is
//! told so with [`ReadError::Gap`], never silently skipped. A [`Reader`] is also
//! a [`Stream`](futures_core::Stream) of entries and gaps.
//!
//! ```
//! use keybus::broadcast::{Buffer, ReadError};
//!
//! let buf = Buffer::new(4);
//! let mut reader = buf.reader(); // only values appended from now on
//! assert_eq!(buf.append("ready").unwrap(), 1);
//! assert_eq!(buf.append("running").unwrap(), 2);
//!
//! assert_eq!(reader.try_next().unwrap().value, "ready");
//! assert_eq!(reader.cursor(), buf.cursor_at(1));
//! // Pages: everything after revision 0, at most 8 entries.
//! let page = buf.try_read(0, 8).unwrap();
//! assert_eq!(page.iter().map(|e| e.revision).collect::<Vec<_>>(), [1, 2]);
//!
//! buf.close();
//! assert_eq!(reader.next().unwrap().value, "running"); // drains first...
//! assert_eq!(reader.next(), Err(ReadError::Closed)); // ...then Closed
//! ```
//!
//! # Semantics
//!
//! - Revisions start at 1 and rise by one per append; [`Buffer::tail`] is the
//!   latest (0 before the first append). Appends from any number of threads are
//!   totally ordered by revision.
//! - A cursor `r` means "I have seen everything up to `r`". With oldest retained
//!   revision `a` and latest `z`: `r > z` is [`ReadError::Future`]; `r < a - 1` is
//!   [`ReadError::Gap`]; otherwise the entries with revision `> r` are readable,
//!   oldest first, at most `limit` per read. Retaining 101..=132, cursor 100 reads
//!   all 32 entries and cursor 99 gets `Gap { after: 99, oldest: 101 }`.
//! - Checks run in this order: `Foreign`, `Future`/`Gap`, then entries, then
//!   (nothing past the cursor) `Closed` if closed, else `Empty`
//!   ([`Buffer::try_read`]), a wait ([`Buffer::read`]) or `Timeout`
//!   ([`Buffer::read_timeout`]).
//! - Every entry is the reader's own clone: no reader can change what another
//!   sees.
//! - Snapshot then subscribe loses nothing: [`Buffer::latest`] (or `tail`) then
//!   [`Buffer::reader_at`] (with [`Buffer::cursor_at`] of the snapshot's
//!   revision) reads every revision published in between, or reports `Gap` if it
//!   was evicted meanwhile.
//! - A cursor is only meaningful with its generation, and every use checks it:
//!   a [`Cursor`] of another buffer answers [`ReadError::Foreign`], before any
//!   other check (see [Cursors](#cursors)).
//! - `limit == 0` panics in every read form: it would ask for nothing and could
//!   never make progress.
//!
//! ```
//! use keybus::broadcast::Buffer;
//!
//! let buf = Buffer::new(8);
//! buf.append(10).unwrap();
//! // Snapshot, then subscribe from the snapshot's revision.
//! let snapshot = buf.latest().unwrap();
//! buf.append(20).unwrap(); // published in between: not lost
//! let mut reader = buf.reader_at(buf.cursor_at(snapshot.revision));
//! assert_eq!(reader.try_next().unwrap().value, 20);
//!
//! // Unchanged state does not make a new revision.
//! assert_eq!(buf.append_if_changed(20).unwrap(), 2);
//! assert_eq!(buf.append_if_changed(30).unwrap(), 3);
//! ```
//!
//! # Gaps
//!
//! A reader is never blocked and never blocks the writer, so a slow reader can be
//! lapped. A read that finds its cursor behind retention (or finds the place it is
//! copying rewritten under it) answers `Gap { after, oldest }`, where `oldest` is
//! the oldest revision retained at that moment. It never returns a torn value or a
//! value under the wrong revision. A [`Reader`] reports a gap once and moves its
//! cursor to `oldest - 1`, so its next call resumes with the oldest retained
//! entry. A multi-entry read that races an eviction may end early, at the first
//! overwritten revision; its entries are still exactly revisions `after + 1 ..`,
//! and the next read from its last revision reports the gap.
//!
//! ```
//! use keybus::broadcast::{Buffer, ReadError};
//!
//! let buf = Buffer::new(32);
//! for i in 1..=132u64 {
//!     buf.append(i).unwrap();
//! }
//! // Retained: 101..=132. Cursor 100 still reads everything...
//! assert_eq!(buf.try_read(100, 64).unwrap().len(), 32);
//! // ...cursor 99 lost revision 100.
//! assert_eq!(buf.validate(99), Err(ReadError::Gap { after: 99, oldest: 101 }));
//!
//! let mut reader = buf.reader_at(buf.cursor_at(99));
//! assert_eq!(reader.next(), Err(ReadError::Gap { after: 99, oldest: 101 }));
//! assert_eq!(reader.cursor().revision(), 100); // reported once, then resume
//! assert_eq!(reader.next().unwrap().revision, 101);
//! ```
//!
//! # Cursors
//!
//! A [`Cursor`] is a buffer's [`generation`](Buffer::generation) and a
//! revision. Generations differ between any two buffers of one process (both
//! implementations draw from one counter) and between runs (a random
//! per-process seed), so a cursor saved from one buffer, or from an earlier run
//! of the process, answers [`ReadError::Foreign { expected, found }`](ReadError::Foreign)
//! in every read, in [`Buffer::validate`] and in [`Reader::seek`], instead of
//! being read as a revision of another history. A [`Reader`] made from a foreign
//! cursor keeps it and answers `Foreign` until it is moved with
//! [`Reader::seek`], [`Reader::seek_to_tail`] or [`Reader::seek_to_oldest`].
//!
//! The paging reads also accept a bare revision (`u64`, see [`Position`]): it
//! carries no generation, so nothing can check it. It suits a revision taken
//! from the same buffer a moment before; anything saved or handed on should be
//! a `Cursor` (`(u64, u64)` and text conversions are provided).
//!
//! ```
//! use keybus::broadcast::{Buffer, Cursor, ReadError};
//!
//! let old = Buffer::new(1024);
//! for i in 1..=745u64 {
//!     old.append(i).unwrap();
//! }
//! let mut reader = old.reader_at(old.cursor_at(743));
//! reader.next().unwrap();
//! let saved: String = reader.cursor().to_string(); // to disk, or over the wire
//!
//! // Later, another buffer (or the same code after a restart):
//! let new = Buffer::new(1024);
//! for i in 1..=800u64 {
//!     new.append(i).unwrap();
//! }
//! let cursor: Cursor = saved.parse().unwrap();
//! let foreign = ReadError::Foreign { expected: new.generation(), found: old.generation() };
//! assert_eq!(new.validate(cursor), Err(foreign));
//! assert_eq!(new.try_read(cursor, 8), Err(foreign));
//! let mut resumed = new.reader_at(cursor);
//! assert_eq!(resumed.try_next(), Err(foreign)); // not Ok(745) from another history
//! resumed.seek_to_oldest(); // or seek_to_tail(), or seek(a cursor of `new`)
//! assert_eq!(resumed.try_next().unwrap().revision, 1);
//! ```
//!
//! # Closing
//!
//! [`Buffer::close`] is idempotent and closes the one ring behind every handle.
//! Appends after it fail with [`AppendError`], which hands the value back. Readers
//! still get every retained entry past their cursor, then [`ReadError::Closed`];
//! blocked and async readers are woken. Dropping the last `Buffer` handle closes
//! the buffer too (nothing can be appended any more), so a `Reader` that outlives
//! every `Buffer` drains and then gets `Closed`, as with tokio's broadcast; the
//! ring's memory lives while any `Buffer` or `Reader` does. As a
//! [`Stream`](futures_core::Stream), a `Reader` ends (`None`) at `Closed`.
//!
//! ```
//! use keybus::broadcast::{AppendError, Buffer, ReadError};
//! use std::thread;
//!
//! let buf = Buffer::new(4);
//! let waiter = {
//!     let buf = buf.clone();
//!     thread::spawn(move || futures::executor::block_on(buf.read_async(0, 8)))
//! };
//! buf.append("last words".to_string()).unwrap();
//! buf.close();
//! assert_eq!(buf.append("too late".to_string()), Err(AppendError("too late".to_string())));
//! // The waiter gets the retained entry (or, had it looked after close, still
//! // the entry: Closed comes only once nothing is left past its cursor).
//! assert_eq!(waiter.join().unwrap().unwrap()[0].value, "last words");
//! assert_eq!(buf.try_read(1, 8), Err(ReadError::Closed));
//! ```
//!
//! # Thread safety
//!
//! `Buffer<T>` is a cheap `Clone` handle, `Send + Sync`; `Reader<T>` is `Send`.
//! Reads take no lock: each checks the committed tail and then each place's
//! sequence stamp around its copy (a seqlock). Appends serialize on a lock bit in
//! the ring's state word (the word that also holds the tail), which readers never
//! take, so an append waits only for another append (spinning, then yielding),
//! never for a reader. `T::clone` runs with no lock held; `T::eq`
//! ([`Buffer::append_if_changed`]) runs holding the lock bit (a panic there
//! releases it); a replaced value is dropped after the lock is released.
//!
//! # Memory
//!
//! `capacity + 1` places, each a sequence stamp and a pointer to a value node (the
//! value and a pin count); the node an append evicts is recycled by a later
//! append once no read has it pinned. Without a read in progress the ring holds
//! `capacity + 2` values (the extra place holds the just-evicted revision, so an
//! append in progress never disturbs a retained one; one more node waits to be
//! recycled). A read pins one node at a time, for one entry's `T::clone`. A read
//! stalled there (a slow or blocked `clone`, a preempted thread) never holds up
//! the writer: its node is set aside and the writer takes another, allocating
//! one if needed. `k` stalled reads thus add at most `k` nodes, however many
//! appends run meanwhile (tested in `src/broadcast/lockfree/tests.rs`). Nodes are freed
//! when the ring is; readers otherwise cost nothing in the buffer (a `Reader` is
//! a handle, a cursor and the parking state of its `Stream` form). Details:
//! `docs/design.md`, "Broadcast: the design", in the repository.
//!
//! # Performance
//!
//! - `append`: three read-modify-writes: a compare-and-swap that takes the lock
//!   bit, one on the recycled node's pin count, and the swap that publishes the
//!   tail and releases the lock; three stores (two stamps, the node pointer). It
//!   calls the notifier only when that swap finds a reader's parking flag: no
//!   fence, no listener check otherwise. No cost grows with readers or threads,
//!   and no state is shared with other buffers or the rest of the process. Once
//!   the ring is full it allocates nothing (`tests/broadcast_alloc.rs`) unless a
//!   read in progress has pinned the nodes it would recycle.
//! - `try_read`: a comparison of the cursor's generation (no atomic), one
//!   atomic load (tail and close flag), then per entry two stamp loads, a
//!   pointer load, a pin and an unpin (two read-modify-writes on the node's count, shared only
//!   with readers of the same entry) and one `T::clone`. `latest` is one entry;
//!   `retained` is up to `capacity` entries. Nothing waits.
//! - `read`, `next` and their timeout/async forms park only when nothing is past
//!   the cursor: they register a listener, set the parking flag in the state
//!   word (one read-modify-write), look once more, then park; the next append
//!   sees the flag and wakes the parked readers of its buffer.
//!
//! # What the loom models check, and what they cannot
//!
//! `loom-tests/tests/broadcast.rs` explores every interleaving (to a preemption
//! bound) of: a read against an overwrite of the same place, a read against the
//! recycling of the node it is cloning, two readers against recycling, the
//! `a - 1` boundary while an append evicts, close against a draining read, park
//! against wake (also two parked readers against two appends, and a parked
//! reader against two contending appenders), two concurrent appenders, and a
//! panic under the lock bit. Under loom every primitive of the
//! protocol is loom's (stamps, node pointers, pin counts, the state word,
//! wake-ups, and the value cells, whose accesses loom checks for
//! races), so the place protocol and its reclamation are checked as written. What
//! the models cannot reach (long runs, many stalled readers, node counts) is
//! covered by the unit tests, also under Miri.
//!
//! The one-mutex twin is [`crate::baseline::broadcast`]; both pass one conformance
//! suite.
//!
//! # Where the code is
//!
//! `lockfree/` is this module's implementation; `baseline.rs` is the
//! one-mutex twin, public as [`crate::baseline::broadcast`] (mounted from
//! `src/baseline.rs`); `cursor.rs`, `entry.rs` and `generation.rs` are what
//! the two share.

pub(crate) mod cursor;
pub(crate) mod entry;
pub(crate) mod generation;
mod lockfree;

pub use crate::{AppendError, ReadError};
pub use cursor::{Cursor, ParseCursorError, Position};
pub use entry::Entry;
pub use lockfree::{Buffer, Reader};
