//! Stream → reader: the [`RemoteBuffer`] handle and [`RemoteReadError`]; the
//! reader is `reader.rs`. The reading contract, cursors and generations are
//! documented once, on [`RemoteBuffer`]; what a remote reader observes is
//! `docs/nats.md`, "Broadcast ↔ stream".

mod reader;

pub use reader::RemoteReader;

use crate::codec::{CodecError, ValueCodec};
use crate::error::chain;
use crate::stream_mirror::ERROR_HEADER;
use async_nats::jetstream::stream::{LastRawMessageErrorKind, Stream};
use async_nats::jetstream::Context;
use keybus::broadcast::Cursor;
use keybus::{Entry, ReadError};
use std::error::Error;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

/// Why a remote read returned no entries.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteReadError {
    /// What a local buffer would answer: `Gap`, `Future`, `Empty` or `Timeout`.
    Read(ReadError),
    /// The stream was deleted and created again since this handle's
    /// generation: its revisions belong to another history.
    Generation {
        /// The generation this handle (or reader) was reading.
        expected: u64,
        /// The stream's generation now.
        found: u64,
    },
    /// The entry at `revision` did not decode (or is a placeholder the mirror
    /// wrote for a value it could not send). A reader moves past it.
    Decode {
        /// The revision that did not decode.
        revision: u64,
        /// Why.
        error: CodecError,
    },
    /// The server could not be asked (timeout, lost connection, no stream).
    Transport(String),
}

impl fmt::Display for RemoteReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RemoteReadError::Read(e) => e.fmt(f),
            RemoteReadError::Generation { expected, found } => write!(
                f,
                "the stream was recreated: generation {found}, the cursor belongs to {expected}"
            ),
            RemoteReadError::Decode { revision, error } => {
                write!(f, "revision {revision}: {error}")
            }
            RemoteReadError::Transport(why) => write!(f, "reading the stream: {why}"),
        }
    }
}

impl Error for RemoteReadError {}

impl From<ReadError> for RemoteReadError {
    fn from(e: ReadError) -> Self {
        RemoteReadError::Read(e)
    }
}

/// A handle to a mirrored stream; cheap to clone.
///
/// Reads a mirrored stream back with the local `Buffer`'s reading contract.
///
/// A [`RemoteBuffer`] is a handle to a stream written by a
/// [`StreamMirror`](crate::StreamMirror) (sequence = revision). Its reads
/// answer what [`keybus::broadcast::Buffer`] would: entries after a cursor,
/// oldest first, at most `limit`; [`ReadError::Gap`] when the stream no longer
/// holds the revision after the cursor; [`ReadError::Future`] past the tail;
/// [`ReadError::Empty`] when nothing is past the cursor yet. The server does
/// not report gaps, so every read compares the cursor with the stream's first
/// sequence itself (`first > after + 1` is a gap with `oldest = first`).
///
/// # Cursors
///
/// A position on the stream is a [`keybus::broadcast::Cursor`], as on a local
/// buffer: the stream's [`generation`](RemoteBuffer::generation) and a
/// revision. There is no remote cursor type: a remote one is saved, sent and
/// parsed like a local one (`(u64, u64)`, text). Made by
/// [`RemoteReader::cursor`], [`RemoteBuffer::cursor`] or
/// [`RemoteBuffer::cursor_at`]; a cursor of any other generation (a local
/// buffer's, another stream's, an earlier incarnation of this one) answers
/// [`ReadError::Foreign`] before anything is read, as locally.
///
/// ```no_run
/// use keybus::ReadError;
/// use keybus_nats::codec::Utf8;
/// use keybus_nats::{RemoteBuffer, RemoteReadError};
///
/// # async fn demo(js: async_nats::jetstream::Context) -> Result<(), Box<dyn std::error::Error>> {
/// let remote = RemoteBuffer::open(&js, "EVENTS", Utf8).await?;
/// let mut reader = remote.reader_at(remote.cursor_at(0));
/// loop {
///     match reader.next().await {
///         Ok(entry) => println!("{} {}", entry.revision, entry.value),
///         Err(RemoteReadError::Read(ReadError::Gap { after, oldest })) => {
///             println!("missed {}..{oldest}", after + 1) // reported once; resumes at oldest
///         }
///         Err(e) => return Err(e.into()),
///     }
/// }
/// # }
/// ```
///
/// # Generations
///
/// The stream's creation time is its [`generation`](RemoteBuffer::generation):
/// a stream deleted and created again (by the mirror, for a new buffer, or by
/// hand) has a new one, and a read against a handle of the old generation
/// answers [`RemoteReadError::Generation`] instead of mixing two histories. A
/// [`RemoteReader`] reports it once, then follows the new stream from its
/// start (its cursor becomes the new generation's revision 0, so a trimmed new
/// stream answers a `Gap` next).
pub struct RemoteBuffer<T, C> {
    inner: Arc<Inner<C>>,
    generation: u64,
    values: PhantomData<fn() -> T>,
}

struct Inner<C> {
    stream: Stream,
    client: async_nats::Client,
    name: String,
    codec: C,
}

impl<T, C> Clone for RemoteBuffer<T, C> {
    fn clone(&self) -> Self {
        RemoteBuffer {
            inner: self.inner.clone(),
            generation: self.generation,
            values: PhantomData,
        }
    }
}

impl<T, C> fmt::Debug for RemoteBuffer<T, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteBuffer")
            .field("stream", &self.inner.name)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

/// The stream's state as one read sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct State {
    pub(crate) generation: u64,
    /// The oldest sequence retained, or the next one if none is.
    pub(crate) first: u64,
    pub(crate) last: u64,
}

fn transport(what: &str, e: &(dyn Error + 'static)) -> RemoteReadError {
    RemoteReadError::Transport(format!("{what}: {}", chain(e)))
}

impl<T, C> RemoteBuffer<T, C>
where
    T: Send + 'static,
    C: ValueCodec<T>,
{
    /// A handle to the stream `name`, at its current generation. Errors with
    /// [`RemoteReadError::Transport`] if the stream cannot be found.
    pub async fn open(js: &Context, name: &str, codec: C) -> Result<Self, RemoteReadError> {
        let stream = js
            .get_stream(name)
            .await
            .map_err(|e| transport(&format!("opening stream {name}"), &e))?;
        let inner = Arc::new(Inner {
            stream,
            client: js.client(),
            name: name.to_owned(),
            codec,
        });
        let generation = inner.state().await?.generation;
        Ok(RemoteBuffer {
            inner,
            generation,
            values: PhantomData,
        })
    }

    /// The generation this handle reads: the stream's creation time, in
    /// nanoseconds since the Unix epoch. Every [`Cursor`] of this stream
    /// carries it.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The latest revision on the stream (0 before the first).
    pub async fn tail(&self) -> Result<u64, RemoteReadError> {
        Ok(self.inner.checked(self.generation).await?.last)
    }

    /// The cursor at the stream's current tail: a reader made with it sees
    /// only revisions after it.
    pub async fn cursor(&self) -> Result<Cursor, RemoteReadError> {
        Ok(self.cursor_at(self.tail().await?))
    }

    /// The cursor of this stream at `revision` (e.g. an entry's revision from
    /// [`latest`](Self::latest)). Nothing is checked here; a revision past the
    /// tail is `Future` when used.
    pub fn cursor_at(&self, revision: u64) -> Cursor {
        Cursor::new(self.generation, revision)
    }

    /// The revision `after` names on this stream, or `Foreign` when it is a
    /// cursor of another generation.
    fn revision_of(&self, after: Cursor) -> Result<u64, RemoteReadError> {
        if after.generation() == self.generation {
            Ok(after.revision())
        } else {
            Err(ReadError::Foreign {
                expected: self.generation,
                found: after.generation(),
            }
            .into())
        }
    }

    /// Whether reading after `after` is in range now: `Ok`, or a `Foreign` /
    /// `Gap` / `Future`.
    pub async fn validate(&self, after: Cursor) -> Result<(), RemoteReadError> {
        let after = self.revision_of(after)?;
        let state = self.inner.checked(self.generation).await?;
        state.validate(after).map_err(Into::into)
    }

    /// Up to `limit` entries after `after`, oldest first, without waiting:
    /// `Foreign`, `Future`, `Gap`, then `Empty` when nothing is past `after`.
    /// A read that races an eviction may end early; its entries are still
    /// exactly the revisions after `after`'s.
    ///
    /// # Panics
    /// If `limit == 0`, as a local buffer does.
    pub async fn read(
        &self,
        after: Cursor,
        limit: usize,
    ) -> Result<Vec<Entry<T>>, RemoteReadError> {
        assert!(limit > 0, "broadcast read limit must be at least 1");
        let after = self.revision_of(after)?;
        self.inner.read(self.generation, after, limit).await
    }

    /// The latest entry, `None` on an empty stream.
    pub async fn latest(&self) -> Result<Option<Entry<T>>, RemoteReadError> {
        // The latest can be evicted between the two requests: look again.
        for _ in 0..8 {
            let state = self.inner.checked(self.generation).await?;
            if state.last < state.first {
                return Ok(None);
            }
            match self.inner.read(self.generation, state.last - 1, 1).await {
                Ok(mut entries) => return Ok(entries.pop()),
                Err(RemoteReadError::Read(ReadError::Gap { .. })) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(RemoteReadError::Transport(
            "the latest entry kept being evicted".to_owned(),
        ))
    }

    /// A reader at the stream's current tail: it sees only revisions after it.
    pub async fn reader(&self) -> Result<RemoteReader<T, C>, RemoteReadError> {
        Ok(self.reader_at(self.cursor().await?))
    }

    /// A reader resuming after `cursor` (saved from a reader of this stream,
    /// or made by [`cursor_at`](Self::cursor_at)). Problems with it are
    /// reported by its reads, not here: `Foreign` (a cursor of another
    /// generation; the reader stays put), `Future`, `Gap`.
    pub fn reader_at(&self, cursor: Cursor) -> RemoteReader<T, C> {
        RemoteReader::new(self.clone(), cursor)
    }
}

impl State {
    fn validate(&self, after: u64) -> Result<(), ReadError> {
        if after > self.last {
            return Err(ReadError::Future {
                after,
                tail: self.last,
            });
        }
        if after + 1 < self.first {
            return Err(ReadError::Gap {
                after,
                oldest: self.first,
            });
        }
        Ok(())
    }
}

impl<C> Inner<C> {
    async fn state(&self) -> Result<State, RemoteReadError> {
        let info = self
            .stream
            .get_info()
            .await
            .map_err(|e| transport(&format!("reading stream {}", self.name), &e))?;
        Ok(State {
            generation: u64::try_from(info.created.unix_timestamp_nanos()).unwrap_or(0),
            first: info.state.first_sequence.max(1),
            last: info.state.last_sequence,
        })
    }

    /// The state, checked to be of `generation`.
    async fn checked(&self, generation: u64) -> Result<State, RemoteReadError> {
        let state = self.state().await?;
        if state.generation != generation {
            return Err(RemoteReadError::Generation {
                expected: generation,
                found: state.generation,
            });
        }
        Ok(state)
    }

    pub(crate) fn subject(&self) -> Option<String> {
        self.stream.cached_info().config.subjects.first().cloned()
    }

    async fn read<T>(
        &self,
        generation: u64,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Entry<T>>, RemoteReadError>
    where
        C: ValueCodec<T>,
    {
        // Twice at most: once more if the first entry was evicted between the
        // state and the fetch (then the fresh state reports the gap).
        for _ in 0..2 {
            let state = self.checked(generation).await?;
            state.validate(after)?;
            if after == state.last {
                return Err(ReadError::Empty.into());
            }
            let n = (state.last - after).min(limit as u64);
            // Pipelined: every get is in flight at once.
            let gets = (after + 1..=after + n).map(|seq| self.stream.get_raw_message(seq));
            let messages = futures_util::future::join_all(gets).await;
            let mut out = Vec::with_capacity(messages.len());
            for (i, message) in messages.into_iter().enumerate() {
                let revision = after + 1 + i as u64;
                let message = match message {
                    Ok(m) => m,
                    Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => break,
                    Err(e) if out.is_empty() => {
                        return Err(transport(&format!("getting revision {revision}"), &e))
                    }
                    Err(_) => break,
                };
                let decoded = match message.headers.get(ERROR_HEADER) {
                    Some(why) => Err(CodecError::Encode(format!(
                        "the mirror could not send this value: {}",
                        why.as_str()
                    ))),
                    None => self.codec.decode_value(&message.payload),
                };
                match decoded {
                    Ok(value) => out.push(Entry { revision, value }),
                    Err(error) if out.is_empty() => {
                        return Err(RemoteReadError::Decode { revision, error })
                    }
                    // The entries before it are good; the next read reports it.
                    Err(_) => break,
                }
            }
            if !out.is_empty() {
                return Ok(out);
            }
        }
        // Evicted twice in a row under this read: report it as the gap it is.
        let state = self.checked(generation).await?;
        state.validate(after)?;
        Err(ReadError::Empty.into())
    }
}
