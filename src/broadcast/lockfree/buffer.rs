//! The lock-free [`Buffer`]: the append side and the paging reads of one ring.
//!
//! The argument: `docs/design.md`, "Broadcast: the state word (writer lock,
//! tail, close, parking)" and "Broadcast: cost per append and per read".

use super::ring::Ring;
use crate::appending::Appending;
use crate::broadcast::{Cursor, Position, Reader};
use crate::sync::Arc;
use crate::wait::{block_armed, WaitFuture};
use crate::{AppendError, Entry, ReadError};
use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant};

/// A bounded history of revisions of one stream; a cheap `Clone` handle to one
/// shared ring.
///
/// See the [module documentation](crate::broadcast) for the rules.
pub struct Buffer<T> {
    pub(super) ring: Arc<Ring<T>>,
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
