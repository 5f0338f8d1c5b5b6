//! Bounded cursor broadcast, the plain way: one mutex per buffer, like the Go
//! original (`pkg/broadcast.Buffer[T]`).
//!
//! The public API and every rule are those of [`crate::broadcast`] (see its module
//! docs); this module is the oracle the conformance and differential tests compare
//! it against, and the reference its benchmarks report ratios to.
//!
//! ```
//! use keybus::baseline::broadcast::{Buffer, ReadError};
//!
//! let buf = Buffer::new(2);
//! for v in ["a", "b", "c"] {
//!     buf.append(v).unwrap();
//! }
//! // Retained: 2..=3. Cursor 1 (= oldest - 1) still reads everything...
//! assert_eq!(buf.try_read(1, 8).unwrap().len(), 2);
//! // ...cursor 0 lost revision 1.
//! assert_eq!(buf.try_read(0, 8), Err(ReadError::Gap { after: 0, oldest: 2 }));
//!
//! // Cursors carry the generation; one of another buffer (of either kind) is
//! // refused, one of this buffer resumes.
//! let lockfree = keybus::broadcast::Buffer::<&str>::new(2);
//! let mut reader = buf.reader_at(lockfree.cursor());
//! assert!(matches!(reader.try_next(), Err(ReadError::Foreign { .. })));
//! reader.seek(buf.cursor_at(2)).unwrap();
//! assert_eq!(reader.try_next().unwrap().value, "c");
//! ```
//!
//! # Design
//!
//! A preallocated ring of `capacity` places with `head`, `count` and `revision`
//! under one mutex: an append writes place `(head + count) % capacity` and, once
//! full, advances `head` (constant-time replacement). Reads validate the cursor,
//! clone the wanted entries and decide `Closed`/`Empty` under the same lock, so
//! every answer describes one instant. Wake-ups go through one notifier, signalled
//! after the lock is released; readers register before their last check (see
//! `crate::wait`), so none is lost.
//!
//! # Differences from `broadcast` worth knowing
//!
//! - Readers take the buffer's mutex, so a reader cloning a large value delays the
//!   writer (never indefinitely: the clone is bounded work). `T::clone` and
//!   `T::eq` run under the lock; a panic in either leaves the ring unchanged and
//!   the lock usable. A replaced value is dropped after the lock is released.
//! - Memory is exactly `capacity` values; appends allocate nothing.

pub use crate::broadcast::{Cursor, ParseCursorError, Position};
pub use crate::{AppendError, Entry, ReadError};

use crate::appending::Appending;
use crate::broadcast::cursor::check_generation;
use crate::broadcast::entry::stream_item;
use crate::sync::{lock, Arc, AtomicUsize, Listener, Mutex, Notify, Ordering};
use crate::wait::{block, poll_attempt, WaitFuture};
use futures_core::Stream;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

struct State<T> {
    /// Preallocated; `None` only before the place's first append.
    ring: Box<[Option<T>]>,
    /// Index of the oldest retained entry.
    head: usize,
    /// Retained entries (`<= ring.len()`).
    count: usize,
    /// The latest revision (0 before the first append).
    revision: u64,
    closed: bool,
}

impl<T> State<T> {
    /// The oldest retained revision minus one (`a - 1`); equals `revision` when
    /// nothing is retained.
    fn floor(&self) -> u64 {
        self.revision - self.count as u64
    }

    fn check(&self, after: u64) -> Result<(), ReadError> {
        if after > self.revision {
            return Err(ReadError::Future {
                after,
                tail: self.revision,
            });
        }
        if after < self.floor() {
            return Err(ReadError::Gap {
                after,
                oldest: self.floor() + 1,
            });
        }
        Ok(())
    }

    /// The retained value of `revision` (`floor() < revision <= self.revision`).
    fn get(&self, revision: u64) -> &T {
        let offset = (revision - self.floor() - 1) as usize;
        self.ring[(self.head + offset) % self.ring.len()]
            .as_ref()
            .expect("retained places are filled")
    }

    /// Stores `value` as the next revision; returns it and the value it evicted.
    fn push(&mut self, value: T) -> (u64, Option<T>) {
        let capacity = self.ring.len();
        let index = (self.head + self.count) % capacity;
        if self.count < capacity {
            self.count += 1;
        } else {
            self.head = (self.head + 1) % capacity;
        }
        self.revision += 1;
        (self.revision, self.ring[index].replace(value))
    }
}

struct Shared<T> {
    state: Mutex<State<T>>,
    capacity: usize,
    /// `Buffer` handles alive (readers do not count).
    handles: AtomicUsize,
    notify: Notify,
    generation: u64,
}

/// A bounded history of revisions of one stream; a cheap `Clone` handle to one
/// shared ring guarded by one mutex.
///
/// Same API and rules as [`crate::broadcast::Buffer`].
pub struct Buffer<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for Buffer<T> {
    fn clone(&self) -> Self {
        // Relaxed: cloned from a live handle (as `Arc::clone`).
        self.shared.handles.fetch_add(1, Ordering::Relaxed);
        Buffer {
            shared: self.shared.clone(),
        }
    }
}

/// Dropping the last `Buffer` handle closes the buffer (readers drain, then
/// `Closed`), as in `keybus::broadcast`.
impl<T> Drop for Buffer<T> {
    fn drop(&mut self) {
        // AcqRel: the last release sees every other handle's appends done.
        if self.shared.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            lock(&self.shared.state).closed = true;
            self.shared.notify.notify(usize::MAX);
        }
    }
}

impl<T> fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = lock(&self.shared.state);
        f.debug_struct("Buffer")
            .field("capacity", &s.ring.len())
            .field("tail", &s.revision)
            .field("closed", &s.closed)
            .field("generation", &self.shared.generation)
            .finish_non_exhaustive()
    }
}

fn assert_limit(limit: usize) {
    assert!(limit > 0, "broadcast read limit must be at least 1");
}

/// One read attempt under the lock, shared by every read form: `Some(Ok(n))` after
/// handing `n >= 1` entries to `sink`, `Some(Err)` for a final answer, `None` when
/// nothing is past `after` yet and the buffer is open.
fn read_with<T: Clone>(
    shared: &Shared<T>,
    after: u64,
    limit: usize,
    mut sink: impl FnMut(Entry<T>),
) -> Option<Result<usize, ReadError>> {
    let s = lock(&shared.state);
    if let Err(e) = s.check(after) {
        return Some(Err(e));
    }
    if after == s.revision {
        return s.closed.then_some(Err(ReadError::Closed));
    }
    let end = s.revision.min(after.saturating_add(limit as u64));
    for revision in after + 1..=end {
        sink(Entry {
            revision,
            value: s.get(revision).clone(),
        });
    }
    Some(Ok((end - after) as usize))
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
        assert!(
            capacity > 0,
            "broadcast::Buffer capacity must be at least 1"
        );
        Buffer {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    ring: (0..capacity).map(|_| None).collect(),
                    head: 0,
                    count: 0,
                    revision: 0,
                    closed: false,
                }),
                capacity,
                handles: AtomicUsize::new(1),
                notify: Notify::new(),
                generation: crate::broadcast::generation::next(),
            }),
        }
    }

    /// How many revisions the buffer retains.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.shared.capacity
    }

    /// Appends `value` as the next revision and returns that revision. Takes the
    /// buffer's mutex (waits for a concurrent reader's copy, never for a reader to
    /// catch up). Errors with the value handed back once the buffer is closed.
    pub fn append(&self, value: T) -> Result<u64, AppendError<T>> {
        let mut s = lock(&self.shared.state);
        if s.closed {
            return Err(AppendError(value));
        }
        let (revision, evicted) = s.push(value);
        drop(s);
        self.shared.notify.notify(usize::MAX);
        drop(evicted);
        Ok(revision)
    }

    /// Like [`append`](Self::append), unless `value` equals the latest value: then
    /// nothing is appended and the current tail is returned.
    pub fn append_if_changed(&self, value: T) -> Result<u64, AppendError<T>>
    where
        T: PartialEq,
    {
        let mut s = lock(&self.shared.state);
        if s.closed {
            return Err(AppendError(value));
        }
        if s.count > 0 && *s.get(s.revision) == value {
            return Ok(s.revision);
        }
        let (revision, evicted) = s.push(value);
        drop(s);
        self.shared.notify.notify(usize::MAX);
        drop(evicted);
        Ok(revision)
    }

    /// The latest revision, 0 before the first append.
    #[must_use]
    pub fn tail(&self) -> u64 {
        lock(&self.shared.state).revision
    }

    /// `Ok`, or [`ReadError::Foreign`], then [`ReadError::Gap`] /
    /// [`ReadError::Future`] for reading after `after` now.
    pub fn validate(&self, after: impl Position) -> Result<(), ReadError> {
        let after = self.revision_of(after)?;
        lock(&self.shared.state).check(after)
    }

    /// The tail as a cursor of this buffer.
    #[must_use]
    pub fn cursor(&self) -> Cursor {
        self.cursor_at(self.tail())
    }

    /// The cursor of this buffer at `revision` (nothing checked until used).
    #[must_use]
    pub fn cursor_at(&self, revision: u64) -> Cursor {
        Cursor::new(self.shared.generation, revision)
    }

    /// A copy of the latest entry, `None` before the first append.
    #[must_use]
    pub fn latest(&self) -> Option<Entry<T>> {
        let s = lock(&self.shared.state);
        (s.count > 0).then(|| Entry {
            revision: s.revision,
            value: s.get(s.revision).clone(),
        })
    }

    /// A copy of every retained entry, oldest first.
    #[must_use]
    pub fn retained(&self) -> Vec<Entry<T>> {
        let s = lock(&self.shared.state);
        (s.floor() + 1..=s.revision)
            .map(|revision| Entry {
                revision,
                value: s.get(revision).clone(),
            })
            .collect()
    }

    /// Up to `limit` entries after `after`, oldest first, without waiting.
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
    /// No allocation once `out` has room for `limit` entries.
    ///
    /// ```
    /// use keybus::baseline::broadcast::Buffer;
    ///
    /// let buf = Buffer::new(8);
    /// let mut page = Vec::with_capacity(4);
    /// buf.append(1).unwrap();
    /// assert_eq!(buf.try_read_into(0, 4, &mut page), Ok(1));
    /// assert!(buf.try_read_into(1, 4, &mut page).is_err()); // empty: kept
    /// assert_eq!(page.len(), 1);
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
        let answer = read_with(&self.shared, after, limit, |entry| {
            appending.out.push(entry)
        });
        appending.done = true;
        answer.unwrap_or(Err(ReadError::Empty))
    }

    /// Like [`try_read`](Self::try_read), but blocks until at least one entry is
    /// past `after` or the buffer closes.
    ///
    /// # Panics
    ///
    /// If `limit == 0`.
    pub fn read(&self, after: impl Position, limit: usize) -> Result<Vec<Entry<T>>, ReadError> {
        self.wait(after, limit, None)
            .expect("no deadline: never times out")
    }

    /// Like [`read`](Self::read), but gives up with [`ReadError::Timeout`] after
    /// `timeout`; an answer ready at the deadline wins over the timeout.
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
        let after = self.revision_of(after);
        WaitFuture::new(&self.shared.notify, move || match after {
            Ok(after) => self.attempt(after, limit),
            Err(e) => Some(Err(e)),
        })
    }

    /// A reader whose cursor is the current tail: only new values.
    #[must_use]
    pub fn reader(&self) -> Reader<T> {
        self.reader_at(self.cursor())
    }

    /// A reader resuming after `cursor`; `Foreign` or `Future` is reported by
    /// its reads.
    #[must_use]
    pub fn reader_at(&self, cursor: Cursor) -> Reader<T> {
        Reader {
            shared: self.shared.clone(),
            generation: cursor.generation(),
            revision: cursor.revision(),
            listener: None,
            halted: false,
        }
    }

    /// Closes the buffer for appends; idempotent. Readers drain, then `Closed`.
    pub fn close(&self) {
        lock(&self.shared.state).closed = true;
        self.shared.notify.notify(usize::MAX);
    }

    /// Whether [`close`](Self::close) was called on any handle.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        lock(&self.shared.state).closed
    }

    /// An id of this buffer instance, unique within the process (and random
    /// across processes); every [`Cursor`] carries it.
    #[must_use]
    pub fn generation(&self) -> u64 {
        self.shared.generation
    }

    /// The revision `after` names in this buffer, or `Foreign`.
    fn revision_of(&self, after: impl Position) -> Result<u64, ReadError> {
        after.revision_in(self.shared.generation)
    }

    /// Blocks until a read answers or `deadline` passes (`None`).
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
        block(&self.shared.notify, deadline, || self.attempt(after, limit))
    }

    fn attempt(&self, after: u64, limit: usize) -> Option<Result<Vec<Entry<T>>, ReadError>> {
        let mut out = Vec::new();
        let answer = read_with(&self.shared, after, limit, |entry| out.push(entry))?;
        Some(answer.map(|_| out))
    }
}

/// A cursor over a [`Buffer`]; same behaviour as [`crate::broadcast::Reader`]:
/// on `Gap` the cursor moves to `oldest - 1`, on `Future` and `Foreign` it
/// stays; a `Stream` of `Result<Entry<T>, ReadError>` with the same rules.
pub struct Reader<T> {
    shared: Arc<Shared<T>>,
    /// The cursor's generation: the buffer's, unless made from a foreign cursor.
    generation: u64,
    revision: u64,
    /// Parking state of the `Stream` implementation between polls.
    listener: Option<Listener>,
    /// The stream yielded `Foreign` or `Future` and ends until a seek.
    halted: bool,
}

/// One step of a reader at `revision` of `generation` (see [`Entry::step`]).
fn step<T: Clone>(
    shared: &Shared<T>,
    generation: u64,
    revision: &mut u64,
) -> Option<Result<Entry<T>, ReadError>> {
    if let Err(e) = check_generation(Cursor::new(generation, *revision), shared.generation) {
        return Some(Err(e));
    }
    Entry::step(revision, |after, got| {
        read_with(shared, after, 1, |entry| *got = Some(entry))
    })
}

impl<T> Reader<T> {
    /// The reader's position: the last revision it returned (or was created or
    /// sought at, or was moved to by a gap), with its generation.
    #[must_use]
    pub fn cursor(&self) -> Cursor {
        Cursor::new(self.generation, self.revision)
    }

    /// Moves the cursor to `cursor`; `Foreign` or `Future` answers the error
    /// and leaves the reader where it was (a `Gap` is reported by the next read).
    pub fn seek(&mut self, cursor: Cursor) -> Result<(), ReadError> {
        let revision = check_generation(cursor, self.shared.generation)?;
        match lock(&self.shared.state).check(revision) {
            Ok(()) | Err(ReadError::Gap { .. }) => {}
            Err(e) => return Err(e),
        }
        self.move_to(revision);
        Ok(())
    }

    /// The next read returns the first revision appended after this call.
    pub fn seek_to_tail(&mut self) {
        let tail = lock(&self.shared.state).revision;
        self.move_to(tail);
    }

    /// The next read returns the oldest entry retained at this call (or reports
    /// the `Gap` if appends evicted it first).
    pub fn seek_to_oldest(&mut self) {
        let floor = lock(&self.shared.state).floor();
        self.move_to(floor);
    }

    fn move_to(&mut self, revision: u64) {
        self.generation = self.shared.generation;
        self.revision = revision;
        self.halted = false;
    }
}

impl<T: Clone + Send + Sync + 'static> Reader<T> {
    /// Blocks until the revision after the cursor is readable, returns it and
    /// advances the cursor; `Foreign`, `Future`, `Gap` or `Closed` otherwise.
    #[allow(clippy::should_implement_trait)] // a fallible, blocking cursor, not an Iterator
    pub fn next(&mut self) -> Result<Entry<T>, ReadError> {
        let (shared, generation, revision) = (&self.shared, self.generation, &mut self.revision);
        block(&shared.notify, None, || step(shared, generation, revision))
            .expect("no deadline: never times out")
    }

    /// Like [`next`](Self::next), but answers `Empty` instead of waiting.
    pub fn try_next(&mut self) -> Result<Entry<T>, ReadError> {
        step(&self.shared, self.generation, &mut self.revision).unwrap_or(Err(ReadError::Empty))
    }

    /// The async form of [`next`](Self::next). Dropping the future before it
    /// completes leaves the cursor unchanged.
    #[must_use = "futures do nothing unless polled or `.await`ed"]
    pub fn next_async(&mut self) -> impl Future<Output = Result<Entry<T>, ReadError>> + Send + '_ {
        let (shared, generation, revision) = (&*self.shared, self.generation, &mut self.revision);
        WaitFuture::new(&shared.notify, move || step(shared, generation, revision))
    }
}

// No field is ever pinned: `poll_next` only needs `&mut Reader`.
impl<T> Unpin for Reader<T> {}

impl<T: Clone + Send + Sync + 'static> Stream for Reader<T> {
    type Item = Result<Entry<T>, ReadError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.halted {
            return Poll::Ready(None);
        }
        let shared: &Shared<T> = &this.shared;
        let (generation, revision) = (this.generation, &mut this.revision);
        let answer = poll_attempt(&shared.notify, &mut this.listener, cx, || {
            step(shared, generation, revision)
        });
        answer.map(|answer| stream_item(answer, &mut this.halted))
    }
}

impl<T> fmt::Debug for Reader<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reader")
            .field("cursor", &self.cursor())
            .field("buffer_generation", &self.shared.generation)
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Buffer;

    #[test]
    fn baseline_broadcast_ring_wraps_in_place() {
        let buf = Buffer::new(3);
        for i in 1..=10u64 {
            assert_eq!(buf.append(i * 10).unwrap(), i);
        }
        let got: Vec<_> = buf
            .retained()
            .into_iter()
            .map(|e| (e.revision, e.value))
            .collect();
        assert_eq!(got, [(8, 80), (9, 90), (10, 100)]);
    }
}
