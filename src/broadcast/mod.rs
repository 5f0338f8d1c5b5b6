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
//! lapped. A read that finds its cursor behind retention (or finds the slot it is
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
//! Reads take no lock: each checks the committed tail and then each slot's
//! sequence stamp around its copy (a seqlock). Appends serialize on a lock bit in
//! the ring's state word (the word that also holds the tail), which readers never
//! take, so an append waits only for another append (spinning, then yielding),
//! never for a reader. `T::clone` runs with no lock held; `T::eq`
//! ([`Buffer::append_if_changed`]) runs holding the lock bit (a panic there
//! releases it); a replaced value is dropped after the lock is released.
//!
//! # Memory
//!
//! `capacity + 1` slots, each a sequence stamp and a pointer to a value node (the
//! value and a pin count); the node an append evicts is recycled by a later
//! append once no read has it pinned. Without a read in progress the ring holds
//! `capacity + 2` values (the extra slot holds the just-evicted revision, so an
//! append in progress never disturbs a retained one; one more node waits to be
//! recycled). A read pins one node at a time, for one entry's `T::clone`. A read
//! stalled there (a slow or blocked `clone`, a preempted thread) never holds up
//! the writer: its node is set aside and the writer takes another, allocating
//! one if needed. `k` stalled reads thus add at most `k` nodes, however many
//! appends run meanwhile (tested in `src/broadcast/tests.rs`). Nodes are freed
//! when the ring is; readers otherwise cost nothing in the buffer (a `Reader` is
//! a handle, a cursor and the parking state of its `Stream` form). Details:
//! docs/design.md, section Broadcast.
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
//! bound) of: a read against an overwrite of the same slot, a read against the
//! recycling of the node it is cloning, two readers against recycling, the
//! `a - 1` boundary while an append evicts, close against a draining read, park
//! against wake (also two parked readers against two appends, and a parked
//! reader against two contending appenders), two concurrent appenders, and a
//! panic under the lock bit. Under loom every primitive of the
//! protocol is loom's (stamps, node pointers, pin counts, the state word,
//! wake-ups, and the value cells, whose accesses loom checks for
//! races), so the slot protocol and its reclamation are checked as written. What
//! the models cannot reach (long runs, many stalled readers, node counts) is
//! covered by the unit tests, also under Miri.
//!
//! The one-mutex twin is [`crate::baseline::broadcast`]; both pass one conformance
//! suite.

mod cell;
pub(crate) mod cursor;
mod pool;
pub(crate) mod reader;
mod ring;
mod slot;
mod stamp;
// Unit tests run outside loom: a loom primitive outside `loom::model` panics.
#[cfg(all(test, not(loom)))]
mod tests;

pub use crate::{AppendError, Entry, ReadError};
pub use cursor::{Cursor, ParseCursorError, Position};
pub use reader::Reader;

use crate::event::Appending;
use crate::sync::Arc;
use crate::wait::{block_armed, WaitFuture};
use ring::Ring;
use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant};

/// A bounded history of revisions of one stream; a cheap `Clone` handle to one
/// shared ring.
///
/// See the [module documentation](self) for the rules.
pub struct Buffer<T> {
    ring: Arc<Ring<T>>,
}

impl<T> Clone for Buffer<T> {
    fn clone(&self) -> Self {
        self.ring.acquire_handle();
        Buffer {
            ring: self.ring.clone(),
        }
    }
}

/// Dropping the last `Buffer` handle closes the buffer: nothing can be appended
/// any more, so readers drain what is retained and then get `Closed` instead of
/// waiting forever.
impl<T> Drop for Buffer<T> {
    fn drop(&mut self) {
        self.ring.release_handle();
    }
}

impl<T> fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.ring.fmt(f)
    }
}

fn assert_limit(limit: usize) {
    assert!(limit > 0, "broadcast read limit must be at least 1");
}

impl<T: Clone + Send + Sync + 'static> Buffer<T> {
    /// A buffer retaining the last `capacity` revisions, with a fresh
    /// [`generation`](Self::generation).
    ///
    /// # Panics
    ///
    /// If `capacity == 0`.
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        Buffer {
            ring: Arc::new(Ring::new(capacity)),
        }
    }

    /// How many revisions the buffer retains.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.ring.capacity()
    }

    /// Appends `value` as the next revision and returns that revision, evicting
    /// the oldest one once the buffer holds `capacity`. Wakes every waiting reader.
    ///
    /// Never waits for a reader; waits only for a concurrent append. Errors with
    /// the value handed back once the buffer is closed.
    pub fn append(&self, value: T) -> Result<u64, AppendError<T>> {
        self.ring.append(value)
    }

    /// Like [`append`](Self::append), unless `value` equals the latest value: then
    /// nothing is appended and the current tail is returned. `T::eq` runs under the
    /// writer lock (a panic in it leaves the buffer unchanged and usable).
    pub fn append_if_changed(&self, value: T) -> Result<u64, AppendError<T>>
    where
        T: PartialEq,
    {
        self.ring.append_if_changed(value)
    }

    /// The latest revision, 0 before the first append. Never blocks.
    #[must_use]
    pub fn tail(&self) -> u64 {
        self.ring.tail()
    }

    /// Whether reading after `after` would be in range now: `Ok`, or
    /// [`ReadError::Foreign`] (a [`Cursor`] of another buffer), then
    /// [`ReadError::Gap`] / [`ReadError::Future`]. Never blocks.
    pub fn validate(&self, after: impl Position) -> Result<(), ReadError> {
        self.ring.validate(self.revision_of(after)?)
    }

    /// The tail as a cursor of this buffer: what a fresh [`reader`](Self::reader)
    /// starts at.
    ///
    /// ```
    /// use keybus::broadcast::Buffer;
    ///
    /// let buf = Buffer::new(4);
    /// buf.append('a').unwrap();
    /// let here = buf.cursor(); // save it: a later reader_at(here) misses nothing
    /// buf.append('b').unwrap();
    /// assert_eq!(buf.reader_at(here).try_next().unwrap().value, 'b');
    /// assert_eq!((here.generation(), here.revision()), (buf.generation(), 1));
    /// ```
    #[must_use]
    pub fn cursor(&self) -> Cursor {
        self.cursor_at(self.tail())
    }

    /// The cursor of this buffer at `revision` (e.g. an entry's revision from
    /// [`latest`](Self::latest)), for [`reader_at`](Self::reader_at) and
    /// [`Reader::seek`]. Nothing is checked here; a revision past the tail is
    /// `Future` when used.
    ///
    /// ```
    /// use keybus::broadcast::Buffer;
    ///
    /// let buf = Buffer::new(4);
    /// buf.append(1).unwrap();
    /// let snapshot = buf.latest().unwrap();
    /// buf.append(2).unwrap();
    /// let mut reader = buf.reader_at(buf.cursor_at(snapshot.revision));
    /// assert_eq!(reader.try_next().unwrap().value, 2);
    /// ```
    #[must_use]
    pub fn cursor_at(&self, revision: u64) -> Cursor {
        Cursor::new(self.generation(), revision)
    }

    /// A copy of the latest entry, `None` before the first append. Never blocks.
    #[must_use]
    pub fn latest(&self) -> Option<Entry<T>> {
        self.ring.latest()
    }

    /// A copy of every retained entry, oldest first. Makes no continuity claim:
    /// entries evicted while it copies are left out. Never blocks.
    #[must_use]
    pub fn retained(&self) -> Vec<Entry<T>> {
        self.ring.retained()
    }

    /// Up to `limit` entries after `after` (a [`Cursor`], or a bare revision of
    /// this buffer: see [`Position`]), oldest first, without waiting.
    ///
    /// Errors: `Foreign`, then `Future`, `Gap`, then `Closed` (closed and nothing past `after`) or
    /// `Empty` (nothing past `after` yet).
    ///
    /// # Panics
    ///
    /// If `limit == 0`.
    pub fn try_read(&self, after: impl Position, limit: usize) -> Result<Vec<Entry<T>>, ReadError> {
        let mut out = Vec::new();
        self.try_read_into(after, limit, &mut out).map(|_| out)
    }

    /// [`try_read`](Self::try_read) into a `Vec` of the caller's: the entries
    /// are appended to `out`, and `Ok` says how many (at least one). On an
    /// error `out` is left as it was (also when a `T::clone` panics half-way).
    /// No allocation once `out` has room for `limit` entries: keep one `Vec`
    /// and `clear` it between calls.
    ///
    /// ```
    /// use keybus::broadcast::Buffer;
    ///
    /// let buf = Buffer::new(8);
    /// let mut page = Vec::with_capacity(4);
    /// for v in 1..=6 {
    ///     buf.append(v).unwrap();
    /// }
    /// assert_eq!(buf.try_read_into(0, 4, &mut page), Ok(4));
    /// let last = page.last().unwrap().revision;
    /// page.clear();
    /// assert_eq!(buf.try_read_into(last, 4, &mut page), Ok(2));
    /// assert!(buf.try_read_into(6, 4, &mut page).is_err()); // empty: `page` kept
    /// assert_eq!(page.len(), 2);
    /// ```
    ///
    /// # Errors
    /// As [`try_read`](Self::try_read).
    ///
    /// # Panics
    ///
    /// If `limit == 0`.
    pub fn try_read_into(
        &self,
        after: impl Position,
        limit: usize,
        out: &mut Vec<Entry<T>>,
    ) -> Result<usize, ReadError> {
        assert_limit(limit);
        let after = self.revision_of(after)?;
        let mut appending = Appending::new(out);
        let answer = self
            .ring
            .read_with(after, limit, |entry| appending.out.push(entry));
        appending.done = true;
        answer.unwrap_or(Err(ReadError::Empty))
    }

    /// Like [`try_read`](Self::try_read), but blocks until at least one entry is
    /// past `after` or the buffer closes (never answers `Empty`).
    ///
    /// # Panics
    ///
    /// If `limit == 0`.
    pub fn read(&self, after: impl Position, limit: usize) -> Result<Vec<Entry<T>>, ReadError> {
        self.wait(after, limit, None)
            .expect("no deadline: never times out")
    }

    /// Like [`read`](Self::read), but gives up with [`ReadError::Timeout`] after
    /// `timeout`. An answer ready at the deadline (entries, `Closed`, `Gap`…) wins
    /// over the timeout, so a zero timeout works like `try_read` with `Timeout` for
    /// `Empty`.
    ///
    /// # Panics
    ///
    /// If `limit == 0`.
    pub fn read_timeout(
        &self,
        after: impl Position,
        limit: usize,
        timeout: Duration,
    ) -> Result<Vec<Entry<T>>, ReadError> {
        self.wait(after, limit, Instant::now().checked_add(timeout))
            .unwrap_or(Err(ReadError::Timeout))
    }

    /// The async form of [`read`](Self::read): runtime-agnostic and `Send`.
    /// Reading consumes nothing, so dropping the future is always harmless.
    ///
    /// # Panics
    ///
    /// If `limit == 0` (when called, not when polled).
    #[must_use = "futures do nothing unless polled or `.await`ed"]
    pub fn read_async(
        &self,
        after: impl Position,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Entry<T>>, ReadError>> + Send + '_ {
        assert_limit(limit);
        // A foreign cursor stays foreign: answered at the first poll.
        let after = self.revision_of(after);
        let ring: &Ring<T> = &self.ring;
        WaitFuture::armed(
            &ring.notify,
            move || ring.arm_parking(),
            move || match after {
                Ok(after) => self.attempt(after, limit),
                Err(e) => Some(Err(e)),
            },
        )
    }

    /// A reader whose cursor is the current tail: it sees only revisions appended
    /// from now on.
    #[must_use]
    pub fn reader(&self) -> Reader<T> {
        Reader::new(self.ring.clone(), self.cursor())
    }

    /// A reader resuming after `cursor` (saved from a reader of this buffer, or
    /// made by [`cursor_at`](Self::cursor_at) from a revision of
    /// [`latest`](Self::latest) / [`tail`](Self::tail)). Problems with it are
    /// reported by its reads, not here: `Foreign` (another buffer's cursor; the
    /// reader stays put until a seek) or `Future`, both before `Gap`.
    #[must_use]
    pub fn reader_at(&self, cursor: Cursor) -> Reader<T> {
        Reader::new(self.ring.clone(), cursor)
    }

    /// Closes the buffer for appends; idempotent. Readers drain what is retained
    /// past their cursors, then get [`ReadError::Closed`]. Wakes every waiting
    /// reader. Waits only for a concurrent append.
    pub fn close(&self) {
        self.ring.close();
    }

    /// Whether [`close`](Self::close) was called on any handle.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.ring.is_closed()
    }

    /// An id of this buffer instance, unique within the process (and random across
    /// processes). Revisions are only meaningful together with it: every
    /// [`Cursor`] carries it, and a cursor with another is `Foreign` here.
    #[must_use]
    pub fn generation(&self) -> u64 {
        self.ring.generation()
    }

    /// The revision `after` names in this buffer, or `Foreign`.
    fn revision_of(&self, after: impl Position) -> Result<u64, ReadError> {
        after.revision_in(self.generation())
    }

    /// Blocks until a read answers or `deadline` passes (`None`): parks only
    /// after arming the ring's parking flag (see `Ring::arm_parking`).
    fn wait(
        &self,
        after: impl Position,
        limit: usize,
        deadline: Option<Instant>,
    ) -> Option<Result<Vec<Entry<T>>, ReadError>> {
        assert_limit(limit);
        let after = match self.revision_of(after) {
            Ok(after) => after,
            Err(e) => return Some(Err(e)),
        };
        block_armed(
            &self.ring.notify,
            deadline,
            || self.ring.arm_parking(),
            || self.attempt(after, limit),
        )
    }

    fn attempt(&self, after: u64, limit: usize) -> Option<Result<Vec<Entry<T>>, ReadError>> {
        let mut out = Vec::new();
        let answer = self.ring.read_with(after, limit, |entry| out.push(entry))?;
        Some(answer.map(|_| out))
    }
}
