//! A cursor over a buffer: one reader's independent position in the history.

use super::ring::Ring;
use crate::sync::Arc;
use crate::wait::{block_armed, WaitFuture};
use crate::{Entry, ReadError};
use std::fmt;
use std::future::Future;

/// A cursor over a [`Buffer`](super::Buffer): yields every revision after its
/// cursor, one at a time, and reports a gap when it fell behind retention.
///
/// Made by [`Buffer::reader`](super::Buffer::reader) (only new values) or
/// [`Buffer::reader_at`](super::Buffer::reader_at) (resume from a cursor). It owns
/// a handle to the buffer, is `Send`, and never affects what other readers see.
///
/// On [`ReadError::Gap`] the cursor moves to `oldest - 1`, so the next call
/// resumes at the oldest retained entry (the gap is reported once, like tokio's
/// `Lagged`). On [`ReadError::Future`] the cursor stays where it was.
pub struct Reader<T> {
    ring: Arc<Ring<T>>,
    cursor: u64,
}

impl<T> Reader<T> {
    pub(super) fn new(ring: Arc<Ring<T>>, cursor: u64) -> Self {
        Reader { ring, cursor }
    }

    /// The last revision this reader returned (or was created at, or was moved
    /// to by a gap). Save it together with [`Buffer::generation`](super::Buffer::generation).
    #[must_use]
    pub fn cursor(&self) -> u64 {
        self.cursor
    }
}

/// One step of a reader at `cursor` (see [`Entry::step`]). Taking the fields
/// apart lets the async form borrow them separately.
fn step<T: Clone>(ring: &Ring<T>, cursor: &mut u64) -> Option<Result<Entry<T>, ReadError>> {
    Entry::step(cursor, |after, got| {
        ring.read_with(after, 1, |entry| *got = Some(entry))
    })
}

impl<T: Clone + Send + Sync + 'static> Reader<T> {
    /// Blocks until the revision after the cursor is readable, then returns it and
    /// advances the cursor.
    ///
    /// Errors: `Gap` (cursor moved to `oldest - 1`), `Future` (cursor kept), or
    /// `Closed` once the buffer is closed and nothing is left past the cursor.
    /// Lock-free while an entry is ready; parks the thread otherwise.
    #[allow(clippy::should_implement_trait)] // a fallible, blocking cursor, not an Iterator
    pub fn next(&mut self) -> Result<Entry<T>, ReadError> {
        let Reader { ring, cursor } = self;
        block_armed(
            &ring.notify,
            None,
            || ring.arm_parking(),
            || step(ring, cursor),
        )
        .expect("no deadline: never times out")
    }

    /// Like [`next`](Self::next), but answers `Empty` instead of waiting.
    pub fn try_next(&mut self) -> Result<Entry<T>, ReadError> {
        step(&self.ring, &mut self.cursor).unwrap_or(Err(ReadError::Empty))
    }

    /// The async form of [`next`](Self::next): runtime-agnostic, `Send`. Dropping
    /// the future before it completes leaves the cursor unchanged.
    #[must_use = "futures do nothing unless polled or `.await`ed"]
    pub fn next_async(&mut self) -> impl Future<Output = Result<Entry<T>, ReadError>> + Send + '_ {
        let Reader { ring, cursor } = self;
        let ring: &Ring<T> = ring;
        WaitFuture::armed(
            &ring.notify,
            move || ring.arm_parking(),
            move || step(ring, cursor),
        )
    }
}

impl<T> fmt::Debug for Reader<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reader")
            .field("cursor", &self.cursor)
            .field("generation", &self.ring.generation())
            .finish_non_exhaustive()
    }
}
