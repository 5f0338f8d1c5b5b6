//! A cursor over a buffer: one reader's independent position in the history.
//!
//! The argument: `docs/design.md`, "Broadcast: cursors and generations" and
//! "Broadcast: the state word (writer lock, tail, close, parking)".

use super::ring::Ring;
use crate::broadcast::cursor::{check_generation, Cursor};
use crate::broadcast::entry::stream_item;
use crate::sync::{Arc, Listener};
use crate::wait::{block_armed, poll_attempt_armed, WaitFuture};
use crate::{Entry, ReadError};
use futures_core::Stream;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A cursor over a [`Buffer`](super::Buffer): yields every revision after its
/// cursor, one at a time, and reports a gap when it fell behind retention.
///
/// Made by [`Buffer::reader`](super::Buffer::reader) (only new values) or
/// [`Buffer::reader_at`](super::Buffer::reader_at) (resume from a cursor). It owns
/// a handle to the buffer, is `Send`, and never affects what other readers see.
///
/// On [`ReadError::Gap`] the cursor moves to `oldest - 1`, so the next call
/// resumes at the oldest retained entry (the gap is reported once, like tokio's
/// `Lagged`). On [`ReadError::Future`] and [`ReadError::Foreign`] the cursor
/// stays where it was; [`seek`](Self::seek), [`seek_to_tail`](Self::seek_to_tail)
/// or [`seek_to_oldest`](Self::seek_to_oldest) move it.
///
/// # As a `Stream`
///
/// `Reader` is a [`Stream`] of `Result<Entry<T>, ReadError>`, one
/// [`next_async`](Self::next_async) per item: entries in revision order; a gap
/// as one `Err(Gap)` item, after which the stream goes on from the oldest
/// retained entry; `Closed` ends it (`None`). A cursor this buffer can never
/// read from as it stands (`Foreign`, `Future`) is yielded once as an `Err` item
/// and then ends the stream, rather than repeating the error on every poll; a
/// `seek` starts it again.
///
/// ```
/// use futures::{executor::block_on, StreamExt};
/// use keybus::broadcast::{Buffer, ReadError};
///
/// let buf = Buffer::new(2);
/// let reader = buf.reader_at(buf.cursor_at(0));
/// for v in ["a", "b", "c"] {
///     buf.append(v).unwrap();
/// }
/// buf.close();
/// let items: Vec<_> = block_on(reader.collect());
/// assert_eq!(items[0], Err(ReadError::Gap { after: 0, oldest: 2 }));
/// let values: Vec<_> = items[1..].iter().map(|e| e.as_ref().unwrap().value).collect();
/// assert_eq!(values, ["b", "c"]); // then Closed ended the stream
/// ```
pub struct Reader<T> {
    ring: Arc<Ring<T>>,
    /// The cursor's generation: the ring's, unless made from a foreign cursor.
    generation: u64,
    /// The cursor's revision.
    revision: u64,
    /// Parking state of the `Stream` implementation between polls.
    listener: Option<Listener>,
    /// The stream yielded `Foreign` or `Future` and ends until a seek.
    halted: bool,
}

impl<T> Reader<T> {
    pub(super) fn new(ring: Arc<Ring<T>>, cursor: Cursor) -> Self {
        Reader {
            ring,
            generation: cursor.generation(),
            revision: cursor.revision(),
            listener: None,
            halted: false,
        }
    }

    /// The reader's position: the last revision it returned (or was created or
    /// sought at, or was moved to by a gap), with the generation it belongs to.
    /// Save it and resume with [`Buffer::reader_at`](super::Buffer::reader_at).
    #[must_use]
    pub fn cursor(&self) -> Cursor {
        Cursor::new(self.generation, self.revision)
    }

    /// Moves the cursor to `cursor`, checked now: `Foreign` (another buffer's)
    /// or `Future` (past the tail) answers the error and leaves the reader where
    /// it was. A cursor behind retention is accepted; the next read reports its
    /// `Gap`, as for any reader that fell behind. The next read returns the
    /// revision after `cursor`.
    ///
    /// ```
    /// use keybus::broadcast::{Buffer, ReadError};
    ///
    /// let buf = Buffer::new(4);
    /// for v in 1..=3 {
    ///     buf.append(v).unwrap();
    /// }
    /// let mut reader = buf.reader();
    /// reader.seek(buf.cursor_at(1)).unwrap();
    /// assert_eq!(reader.try_next().unwrap().value, 2);
    ///
    /// let other = Buffer::<i32>::new(4);
    /// let foreign = other.cursor();
    /// assert!(matches!(reader.seek(foreign), Err(ReadError::Foreign { .. })));
    /// assert_eq!(reader.cursor().revision(), 2); // unchanged
    /// ```
    pub fn seek(&mut self, cursor: Cursor) -> Result<(), ReadError> {
        let revision = check_generation(cursor, self.ring.generation())?;
        match self.ring.validate(revision) {
            Ok(()) | Err(ReadError::Gap { .. }) => {
                self.move_to(revision);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Skips everything retained: the next read returns the first revision
    /// appended after this call (as a fresh [`Buffer::reader`](super::Buffer::reader)).
    ///
    /// ```
    /// use keybus::broadcast::{Buffer, ReadError};
    ///
    /// let buf = Buffer::new(4);
    /// let mut reader = buf.reader();
    /// for v in 1..=3 {
    ///     buf.append(v).unwrap();
    /// }
    /// reader.seek_to_tail(); // a backlog it does not want
    /// assert_eq!(reader.try_next(), Err(ReadError::Empty));
    /// buf.append(4).unwrap();
    /// assert_eq!(reader.try_next().unwrap().value, 4);
    /// ```
    pub fn seek_to_tail(&mut self) {
        self.move_to(self.ring.tail());
    }

    /// Moves to just before the oldest retained revision: the next read returns
    /// the oldest entry retained at this call (or, if appends evict it before
    /// that read, reports the `Gap` once and goes on from the new oldest).
    ///
    /// ```
    /// use keybus::broadcast::Buffer;
    ///
    /// let buf = Buffer::new(2);
    /// for v in 1..=5 {
    ///     buf.append(v).unwrap();
    /// }
    /// let mut reader = buf.reader();
    /// reader.seek_to_oldest(); // everything retained: revisions 4 and 5
    /// assert_eq!(reader.try_next().unwrap().value, 4);
    /// ```
    pub fn seek_to_oldest(&mut self) {
        self.move_to(self.ring.floor());
    }

    fn move_to(&mut self, revision: u64) {
        self.generation = self.ring.generation();
        self.revision = revision;
        self.halted = false;
    }
}

/// One step of a reader at `revision` of `generation` (see [`Entry::step`]).
/// Taking the fields apart lets the async forms borrow them separately.
fn step<T: Clone>(
    ring: &Ring<T>,
    generation: u64,
    revision: &mut u64,
) -> Option<Result<Entry<T>, ReadError>> {
    if let Err(e) = check_generation(Cursor::new(generation, *revision), ring.generation()) {
        return Some(Err(e));
    }
    Entry::step(revision, |after, got| {
        ring.read_with(after, 1, |entry| *got = Some(entry))
    })
}

impl<T: Clone + Send + Sync + 'static> Reader<T> {
    /// Blocks until the revision after the cursor is readable, then returns it and
    /// advances the cursor.
    ///
    /// Errors: `Foreign` or `Future` (cursor kept), `Gap` (cursor moved to
    /// `oldest - 1`), or `Closed` once the buffer is closed and nothing is left
    /// past the cursor. Lock-free while an entry is ready; parks the thread
    /// otherwise.
    #[allow(clippy::should_implement_trait)] // a fallible, blocking cursor, not an Iterator
    pub fn next(&mut self) -> Result<Entry<T>, ReadError> {
        let (ring, generation, revision) = (&self.ring, self.generation, &mut self.revision);
        block_armed(
            &ring.notify,
            None,
            || ring.arm_parking(),
            || step(ring, generation, revision),
        )
        .expect("no deadline: never times out")
    }

    /// Like [`next`](Self::next), but answers `Empty` instead of waiting.
    pub fn try_next(&mut self) -> Result<Entry<T>, ReadError> {
        step(&self.ring, self.generation, &mut self.revision).unwrap_or(Err(ReadError::Empty))
    }

    /// The async form of [`next`](Self::next): runtime-agnostic, `Send`. Dropping
    /// the future before it completes leaves the cursor unchanged.
    #[must_use = "futures do nothing unless polled or `.await`ed"]
    pub fn next_async(&mut self) -> impl Future<Output = Result<Entry<T>, ReadError>> + Send + '_ {
        let (ring, generation, revision) = (&*self.ring, self.generation, &mut self.revision);
        WaitFuture::armed(
            &ring.notify,
            move || ring.arm_parking(),
            move || step(ring, generation, revision),
        )
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
        let ring: &Ring<T> = &this.ring;
        let (generation, revision) = (this.generation, &mut this.revision);
        let answer = poll_attempt_armed(
            &ring.notify,
            &mut this.listener,
            cx,
            || ring.arm_parking(),
            || step(ring, generation, revision),
        );
        answer.map(|answer| stream_item(answer, &mut this.halted))
    }
}

impl<T> fmt::Debug for Reader<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reader")
            .field("cursor", &self.cursor())
            .field("buffer_generation", &self.ring.generation())
            .finish_non_exhaustive()
    }
}
