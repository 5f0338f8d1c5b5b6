//! [`RemoteReader`]: a cursor over a remote stream, with the local `Reader`'s
//! rules (documented on the type).

use super::{RemoteBuffer, RemoteReadError};
use crate::codec::ValueCodec;
use futures_util::{FutureExt, StreamExt};
use keybus::broadcast::Cursor;
use keybus::{Entry, ReadError};
use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

/// Entries fetched per round trip.
const BATCH: usize = 64;
/// How long a waiting reader trusts its wake-up subscription before looking
/// again anyway (a wake-up can be missed across a reconnect).
const POLL: Duration = Duration::from_millis(500);

/// A cursor over a [`RemoteBuffer`]: every revision after its cursor, one at a
/// time, in order, or a gap when the stream no longer holds what it needs.
///
/// Its position is a [`Cursor`] of the stream (see [`RemoteBuffer`], "Cursors").
/// As a local [`Reader`](keybus::broadcast::Reader): on `Gap { after, oldest }`
/// the cursor moves to `oldest - 1` (the gap is reported once, the next call
/// returns `oldest`); on `Future` and `Foreign` it stays. Also: on
/// [`RemoteReadError::Decode`] it moves past that revision; on
/// [`RemoteReadError::Generation`] it takes the new generation at revision 0.
///
/// A waiting [`next`](Self::next) subscribes to the stream's subject only as
/// a wake-up (what it returns is always read from the stream), and looks
/// again every 500 ms regardless.
pub struct RemoteReader<T, C> {
    buffer: RemoteBuffer<T, C>,
    cursor: Cursor,
    /// Fetched, not yet returned: revisions `cursor + 1 ..` in order.
    ready: VecDeque<Entry<T>>,
    wake: Option<async_nats::Subscriber>,
}

impl<T, C> RemoteReader<T, C>
where
    T: Send + 'static,
    C: ValueCodec<T>,
{
    pub(super) fn new(buffer: RemoteBuffer<T, C>, cursor: Cursor) -> Self {
        RemoteReader {
            buffer,
            cursor,
            ready: VecDeque::new(),
            wake: None,
        }
    }

    /// The stream's generation and the last revision returned (or started
    /// at, or moved to by a gap): save it to resume with
    /// [`RemoteBuffer::reader_at`].
    pub fn cursor(&self) -> Cursor {
        self.cursor
    }

    /// Moves the cursor to `revision` of the stream it belongs to.
    fn move_to(&mut self, revision: u64) {
        self.cursor = Cursor::new(self.cursor.generation(), revision);
    }

    /// The revision after the cursor, or `Empty` if there is none yet.
    pub async fn try_next(&mut self) -> Result<Entry<T>, RemoteReadError> {
        if let Some(entry) = self.ready.pop_front() {
            self.move_to(entry.revision);
            return Ok(entry);
        }
        let answer = self.buffer.read(self.cursor, BATCH).await;
        match answer {
            Ok(entries) => {
                self.ready.extend(entries);
                let entry = self
                    .ready
                    .pop_front()
                    .expect("a successful read has entries");
                self.move_to(entry.revision);
                Ok(entry)
            }
            Err(RemoteReadError::Read(ReadError::Gap { after, oldest })) => {
                self.move_to(oldest - 1);
                Err(ReadError::Gap { after, oldest }.into())
            }
            Err(RemoteReadError::Decode { revision, error }) => {
                self.move_to(revision);
                Err(RemoteReadError::Decode { revision, error })
            }
            Err(RemoteReadError::Generation { expected, found }) => {
                self.buffer.generation = found;
                self.cursor = Cursor::new(found, 0);
                self.wake = None;
                Err(RemoteReadError::Generation { expected, found })
            }
            Err(e) => Err(e),
        }
    }

    /// Waits for the revision after the cursor. Errors as
    /// [`try_next`](Self::try_next) does, never `Empty`; a transport error
    /// is returned (the caller decides whether to retry).
    pub async fn next(&mut self) -> Result<Entry<T>, RemoteReadError> {
        loop {
            match self.try_next().await {
                Err(RemoteReadError::Read(ReadError::Empty)) => self.wait().await,
                answer => {
                    if answer.is_ok() && self.ready.is_empty() {
                        // Caught up on what was fetched: stop buffering
                        // wake-ups until the next wait.
                        self.wake = None;
                    }
                    return answer;
                }
            }
        }
    }

    /// [`next`](Self::next), giving up with `Timeout` after `timeout`.
    pub async fn next_timeout(&mut self, timeout: Duration) -> Result<Entry<T>, RemoteReadError> {
        tokio::time::timeout(timeout, self.next())
            .await
            .unwrap_or(Err(ReadError::Timeout.into()))
    }

    /// Until something may have been appended: a message on the subject, or
    /// the poll interval.
    async fn wait(&mut self) {
        if self.wake.is_none() {
            let inner = &self.buffer.inner;
            if let Some(subject) = inner.subject() {
                if let Ok(sub) = inner.client.subscribe(subject).await {
                    // Registered before the next look, so nothing published
                    // after that look goes unnoticed.
                    let _ = inner.client.flush().await;
                    self.wake = Some(sub);
                    return;
                }
            }
        }
        match &mut self.wake {
            Some(sub) => {
                let _ = tokio::time::timeout(POLL, sub.next()).await;
                // Drop the wake-ups that queued up meanwhile.
                while let Some(Some(_)) = sub.next().now_or_never() {}
            }
            None => tokio::time::sleep(POLL).await,
        }
    }
}

impl<T, C> fmt::Debug for RemoteReader<T, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteReader")
            .field("cursor", &self.cursor)
            .finish_non_exhaustive()
    }
}
