//! Broadcast → stream: the [`StreamMirror`] builder, its
//! [`StreamMirrorHandle`] and its [`StreamMirrorStats`]; the task is
//! `engine.rs`. The wire format, faults and gaps are documented once, on
//! [`StreamMirror`]; what a remote reader observes is `docs/nats.md`,
//! "Broadcast ↔ stream".

mod engine;

use crate::backoff::Backoff;
use crate::codec::{CodecError, ValueCodec};
use crate::error::BridgeError;
use crate::mirror_task::MirrorTask;
use crate::stats::{Counter, LastError};
use async_nats::jetstream::stream::StorageType;
use async_nats::jetstream::Context;
use keybus::broadcast::Buffer;
use std::sync::Arc;

/// The header naming the keybus revision of a stream message.
pub const REVISION_HEADER: &str = "Keybus-Revision";
/// The header naming the generation of the buffer a message came from.
pub const GENERATION_HEADER: &str = "Keybus-Generation";
/// The header of a placeholder message: why the revision's value is absent.
pub const ERROR_HEADER: &str = "Keybus-Error";
/// The prefix of a mirrored stream's description.
pub(crate) const DESCRIPTION: &str = "keybus broadcast mirror; buffer generation ";

/// Builds a broadcast → stream mirror; [`spawn`](Self::spawn) starts it.
///
/// A buffer's revisions appended to a JetStream stream, stream sequence =
/// revision.
///
/// The stream is the buffer's ring on the server: one subject,
/// `max_messages = window` (the buffer's capacity by default), discard old.
/// Each revision `r` is published with `Nats-Expected-Last-Sequence: r - 1`,
/// so the server stores it as sequence `r` or refuses it (never out of order,
/// never twice), with `Nats-Msg-Id: <generation>-<r>` so a retry inside the
/// duplicate window is acknowledged, not appended, and with the headers
/// `Keybus-Revision` and `Keybus-Generation`. Publishes are pipelined (up to
/// [`max_in_flight`](StreamMirror::max_in_flight) acks awaited at once).
///
/// ```no_run
/// use keybus::broadcast::Buffer;
/// use keybus_nats::codec::Utf8;
/// use keybus_nats::StreamMirror;
///
/// # async fn demo(js: async_nats::jetstream::Context) -> Result<(), Box<dyn std::error::Error>> {
/// let buf: Buffer<String> = Buffer::new(1024);
/// let mirror = StreamMirror::new(&buf, js, "EVENTS", Utf8).subject("events.status")?.spawn();
/// buf.append("ready".to_string())?;
/// let stats = mirror.settled().await; // revision 1 is stream sequence 1
/// assert_eq!(stats.cursor, 1);
/// # Ok(()) }
/// ```
///
/// # Faults and gaps
///
/// After any failed publish the mirror waits for the publishes in flight,
/// backs off, reads the stream's last sequence `L` and resumes the buffer
/// at `L`. If the buffer no longer holds `L + 1` (an outage longer than the
/// ring), the buffer reports `Gap { after: L, oldest }`; once the publishes
/// before it are acked, the mirror purges the stream up to the buffer's oldest
/// revision at that moment (`oldest` or later, when the ring moved on while it
/// waited), which moves the stream's first sequence there:
/// remote readers then get exactly one `Gap` naming their cursor and `oldest`,
/// never a silent skip, and the stream goes on at sequence `oldest`. The stream
/// is created if missing (also when deleted under the mirror); it is bound to
/// the buffer's generation (in its description), and a stream of another
/// generation (another buffer, a restarted process) is deleted and created
/// anew, so remote readers see a new generation instead of a mixed history.
/// A stream of that name that is not a keybus mirror is left alone: the mirror
/// stops with [`StreamMirrorStats::last_error`] saying so.
///
/// A value the codec refuses, or one over the server's `max_payload`, still
/// takes its revision: the mirror publishes an empty placeholder with a
/// `Keybus-Error` header, counts it, and remote readers get a
/// [`RemoteReadError::Decode`](crate::RemoteReadError::Decode) for that revision.
#[must_use = "a mirror does nothing until spawned"]
pub struct StreamMirror<T, C> {
    buffer: Buffer<T>,
    js: Context,
    stream: String,
    subject: String,
    codec: C,
    window: usize,
    max_in_flight: usize,
    storage: StorageType,
    backoff: Backoff,
}

impl<T, C> StreamMirror<T, C>
where
    T: Clone + Send + Sync + 'static,
    C: ValueCodec<T>,
{
    /// A mirror of `buffer` into the stream `stream` (subject: the stream's
    /// name lowercased, until [`subject`](Self::subject)), keeping as many
    /// revisions as the buffer does.
    pub fn new(buffer: &Buffer<T>, js: Context, stream: impl Into<String>, codec: C) -> Self {
        let stream = stream.into();
        StreamMirror {
            subject: stream.to_lowercase(),
            buffer: buffer.clone(),
            js,
            stream,
            codec,
            window: buffer.capacity(),
            max_in_flight: 256,
            storage: StorageType::File,
            backoff: Backoff::default(),
        }
    }

    /// The one subject the stream holds; a KV-key-like subject (`events.status`).
    pub fn subject(self, subject: impl Into<String>) -> Result<Self, CodecError> {
        let subject = subject.into();
        crate::validate_key(&subject)?;
        Ok(StreamMirror { subject, ..self })
    }

    /// How many revisions the stream keeps (`max_messages`); default the buffer's capacity.
    ///
    /// # Panics
    /// If `n == 0`.
    pub fn window(self, n: usize) -> Self {
        assert!(n > 0, "a stream window must hold at least 1 revision");
        StreamMirror { window: n, ..self }
    }

    /// At most `n` publishes awaiting their acks (default 256).
    ///
    /// # Panics
    /// If `n == 0`.
    pub fn max_in_flight(self, n: usize) -> Self {
        assert!(n > 0, "max_in_flight must be at least 1");
        StreamMirror {
            max_in_flight: n,
            ..self
        }
    }

    /// Keep the stream in memory instead of files (lost when the server restarts).
    pub fn memory_storage(self) -> Self {
        StreamMirror {
            storage: StorageType::Memory,
            ..self
        }
    }

    /// The wait between retries after a failure.
    pub fn backoff(self, backoff: Backoff) -> Self {
        StreamMirror { backoff, ..self }
    }

    /// Starts the mirror on the current tokio runtime.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn spawn(self) -> StreamMirrorHandle {
        let shared = Arc::new(Shared::default());
        let engine = engine::Engine {
            buffer: self.buffer,
            js: self.js,
            stream: self.stream,
            subject: self.subject,
            codec: self.codec,
            window: self.window,
            max_in_flight: self.max_in_flight,
            storage: self.storage,
            backoff: self.backoff,
            shared: shared.clone(),
        };
        StreamMirrorHandle {
            shared,
            task: MirrorTask::spawn(|inbox| engine.run(inbox)),
        }
    }
}

/// A running stream mirror. Dropping it stops the mirror.
#[derive(Debug)]
pub struct StreamMirrorHandle {
    shared: Arc<Shared>,
    task: MirrorTask,
}

impl StreamMirrorHandle {
    /// The mirror's accounting now. Never waits.
    pub fn stats(&self) -> StreamMirrorStats {
        self.shared.read()
    }

    /// Waits until every revision appended before this call is on the stream
    /// (or was lost to a local gap, counted), then returns the stats. With the
    /// server away it waits for the server: wrap it in a timeout. Returns at
    /// once if the mirror has ended.
    pub async fn settled(&self) -> StreamMirrorStats {
        self.task.settle().await;
        self.stats()
    }

    /// Whether the mirror task has ended (buffer closed and fully mirrored,
    /// or a foreign stream in the way).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Stops the mirror now and returns its final stats.
    pub async fn close(mut self) -> StreamMirrorStats {
        self.task.stop().await;
        self.shared.in_flight.set(0);
        self.shared.read()
    }
}

/// What a [`StreamMirror`] did, from [`StreamMirrorHandle::stats`].
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamMirrorStats {
    /// Revisions the server stored (acks that were not duplicates).
    pub published: u64,
    /// Acks the server marked duplicate (a retry of a stored revision).
    pub duplicates: u64,
    /// The last revision known to be on the stream.
    pub cursor: u64,
    /// Local gaps: the buffer had evicted what the stream needed next; each
    /// one purged the stream forward (remote readers see a `Gap`).
    pub gaps: u64,
    /// Revisions lost to those gaps.
    pub skipped: u64,
    /// Publishes that failed transiently (each followed by a resync).
    pub retries: u64,
    /// Resyncs: the stream's last sequence read back after a failure.
    pub resyncs: u64,
    /// Streams the mirror created after the first (deleted under it, or of
    /// another generation).
    pub recreated: u64,
    /// Revisions published as placeholders (value unencodable or too large).
    pub placeholders: u64,
    /// Publishes awaiting their acks now.
    pub in_flight: u64,
    /// The latest failure the mirror went on from.
    pub last_error: Option<BridgeError>,
}

#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub(crate) published: Counter,
    pub(crate) duplicates: Counter,
    pub(crate) cursor: Counter,
    pub(crate) gaps: Counter,
    pub(crate) skipped: Counter,
    pub(crate) retries: Counter,
    pub(crate) resyncs: Counter,
    pub(crate) recreated: Counter,
    pub(crate) placeholders: Counter,
    pub(crate) in_flight: Counter,
    pub(crate) last_error: LastError,
}

impl Shared {
    fn read(&self) -> StreamMirrorStats {
        StreamMirrorStats {
            published: self.published.get(),
            duplicates: self.duplicates.get(),
            cursor: self.cursor.get(),
            gaps: self.gaps.get(),
            skipped: self.skipped.get(),
            retries: self.retries.get(),
            resyncs: self.resyncs.get(),
            recreated: self.recreated.get(),
            placeholders: self.placeholders.get(),
            in_flight: self.in_flight.get(),
            last_error: self.last_error.get(),
        }
    }
}
