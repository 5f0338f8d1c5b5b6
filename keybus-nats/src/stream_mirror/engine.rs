//! The stream mirror task: sync with the stream, pump revisions into it in
//! order, purge forward over local gaps, resync after any failure.

use super::{Shared, DESCRIPTION, ERROR_HEADER, GENERATION_HEADER, REVISION_HEADER};
use crate::backoff::{Backoff, Retry};
use crate::codec::ValueCodec;
use crate::error::{chain, is_permanent, BridgeError};
use crate::mirror_task::Request;
use async_nats::jetstream::context::{PublishAckFuture, PublishError};
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::publish::PublishAck;
use async_nats::jetstream::stream::{self, DiscardPolicy, StorageType, Stream};
use async_nats::jetstream::Context;
use bytes::Bytes;
use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;
use keybus::broadcast::Buffer;
use keybus::{Entry, ReadError};
use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

pub(super) struct Engine<T, C> {
    pub(super) buffer: Buffer<T>,
    pub(super) js: Context,
    pub(super) stream: String,
    pub(super) subject: String,
    pub(super) codec: C,
    pub(super) window: usize,
    pub(super) max_in_flight: usize,
    pub(super) storage: StorageType,
    pub(super) backoff: Backoff,
    pub(super) shared: Arc<Shared>,
}

type Ack = Pin<Box<dyn Future<Output = (u64, Result<PublishAck, PublishError>)> + Send>>;

/// How a pump session ended.
enum Outcome {
    /// The buffer closed and everything is on the stream, or the handle is gone.
    Ended,
    /// A failure: read the stream's state again.
    Resync,
}

enum SyncError {
    /// Worth retrying.
    Transient(String),
    /// A stream of that name that is not a keybus mirror: stop.
    Foreign(String),
}

/// What one session carries besides the engine.
struct Session {
    waiters: Vec<oneshot::Sender<()>>,
    /// Revisions the server refused for good: published as placeholders.
    poison: BTreeSet<u64>,
    retry: Retry,
    /// The stream's creation time last seen, to count recreations.
    created: Option<i128>,
}

impl<T, C> Engine<T, C>
where
    T: Clone + Send + Sync + 'static,
    C: ValueCodec<T>,
{
    pub(super) async fn run(self, mut inbox: mpsc::Receiver<Request>) {
        let mut s = Session {
            waiters: Vec::new(),
            poison: BTreeSet::new(),
            retry: Retry::new(self.backoff),
            created: None,
        };
        loop {
            match self.sync(&mut s).await {
                Ok((stream, last)) => match self.pump(&stream, last, &mut inbox, &mut s).await {
                    Outcome::Ended => return,
                    Outcome::Resync => self.shared.resyncs.add(1),
                },
                Err(SyncError::Foreign(reason)) => {
                    self.shared.last_error.set(BridgeError::Rejected {
                        key: format!("stream {}", self.stream),
                        reason,
                    });
                    return;
                }
                Err(SyncError::Transient(reason)) => {
                    self.shared
                        .last_error
                        .set(BridgeError::Transient { reason });
                }
            }
            tokio::time::sleep(s.retry.fail()).await;
        }
    }

    fn config(&self) -> stream::Config {
        stream::Config {
            name: self.stream.clone(),
            subjects: vec![self.subject.clone()],
            max_messages: i64::try_from(self.window).unwrap_or(i64::MAX),
            discard: DiscardPolicy::Old,
            storage: self.storage,
            description: Some(format!("{DESCRIPTION}{}", self.buffer.generation())),
            ..Default::default()
        }
    }

    /// Finds (or creates) the stream of this buffer's generation and returns
    /// its last sequence: the last revision on it.
    async fn sync(&self, s: &mut Session) -> Result<(Stream, u64), SyncError> {
        let transient = |what: &str, e: &(dyn std::error::Error + 'static)| {
            SyncError::Transient(format!("{what} stream {}: {}", self.stream, chain(e)))
        };
        let config = self.config();
        let mut stream = self
            .js
            .get_or_create_stream(config.clone())
            .await
            .map_err(|e| transient("opening", &e))?;
        let info = stream.cached_info().clone();
        let ours = info.config.description == config.description;
        let behind = info.state.last_sequence > self.buffer.tail();
        if !ours || behind {
            let keybus = info
                .config
                .description
                .as_deref()
                .is_some_and(|d| d.starts_with(DESCRIPTION));
            if !keybus {
                return Err(SyncError::Foreign(format!(
                    "a stream named {} exists and is not a keybus mirror (description {:?})",
                    self.stream, info.config.description
                )));
            }
            // Another buffer's history (or one ahead of this buffer): start a
            // new one, so readers see a new generation, not a mixed history.
            self.js
                .delete_stream(&self.stream)
                .await
                .map_err(|e| transient("deleting", &e))?;
            stream = self
                .js
                .create_stream(config)
                .await
                .map_err(|e| transient("creating", &e))?;
        }
        let info = stream
            .info()
            .await
            .map_err(|e| transient("reading", &e))?
            .clone();
        let created = info.created.unix_timestamp_nanos();
        if s.created.is_some_and(|c| c != created) {
            self.shared.recreated.add(1);
        }
        s.created = Some(created);
        let last = info.state.last_sequence;
        self.shared.cursor.set(last);
        Ok((stream, last))
    }

    async fn pump(
        &self,
        stream: &Stream,
        start: u64,
        inbox: &mut mpsc::Receiver<Request>,
        s: &mut Session,
    ) -> Outcome {
        let mut reader = self.buffer.reader_at(self.buffer.cursor_at(start));
        let mut acks: FuturesUnordered<Ack> = FuturesUnordered::new();
        let mut failed = false;
        let mut closed = false;
        let mut gap: Option<(u64, u64)> = None;
        loop {
            while !failed && !closed && gap.is_none() && acks.len() < self.max_in_flight {
                match reader.try_next() {
                    Err(ReadError::Empty) => break,
                    read => {
                        self.on_read(read, &mut acks, s, &mut failed, &mut closed, &mut gap)
                            .await
                    }
                }
            }
            if let Some((after, found)) = gap {
                if acks.is_empty() && !failed {
                    // Everything before the gap is acked: move the stream's
                    // first sequence to the ring's oldest, so remote readers
                    // see the gap. The ring may have moved on while the acks
                    // were awaited (an outage): purge to where it is now, so
                    // one overrun is one gap, not one per read that saw it.
                    reader.seek_to_oldest();
                    let oldest = found.max(reader.cursor().revision() + 1);
                    reader = self.buffer.reader_at(self.buffer.cursor_at(oldest - 1));
                    match stream.purge().sequence(oldest).await {
                        Ok(_) => {
                            self.shared.gaps.add(1);
                            self.shared.skipped.add(oldest - 1 - after);
                            self.shared.cursor.set(oldest - 1);
                            gap = None;
                            continue;
                        }
                        Err(e) => {
                            self.shared.last_error.set(BridgeError::Transient {
                                reason: format!(
                                    "purging {} up to {oldest}: {}",
                                    self.stream,
                                    chain(&e)
                                ),
                            });
                            failed = true;
                        }
                    }
                }
            }
            self.shared.in_flight.set(acks.len() as u64);
            if failed && acks.is_empty() {
                return Outcome::Resync;
            }
            if acks.is_empty()
                && gap.is_none()
                && !failed
                && reader.cursor().revision() >= self.buffer.tail()
            {
                for w in s.waiters.drain(..) {
                    let _ = w.send(());
                }
                if closed {
                    return Outcome::Ended;
                }
            }
            let can_read = !failed && !closed && gap.is_none() && acks.len() < self.max_in_flight;
            tokio::select! {
                biased;
                request = inbox.recv() => match request {
                    None => return Outcome::Ended,
                    Some(Request::Settle(w)) => s.waiters.push(w),
                },
                Some((revision, result)) = acks.next(), if !acks.is_empty() => {
                    if !self.on_ack(revision, result, s) {
                        failed = true;
                    }
                }
                read = reader.next_async(), if can_read => {
                    self.on_read(read, &mut acks, s, &mut failed, &mut closed, &mut gap).await
                }
            }
        }
    }

    async fn on_read(
        &self,
        read: Result<Entry<T>, ReadError>,
        acks: &mut FuturesUnordered<Ack>,
        s: &mut Session,
        failed: &mut bool,
        closed: &mut bool,
        gap: &mut Option<(u64, u64)>,
    ) {
        match read {
            Ok(entry) => {
                if !self.publish(entry, acks, s).await {
                    *failed = true;
                }
            }
            Err(ReadError::Gap { after, oldest }) => *gap = Some((after, oldest)),
            Err(ReadError::Closed) => *closed = true,
            Err(ReadError::Empty) => {}
            Err(other) => {
                // `Future` cannot happen (the reader starts at the stream's
                // last sequence, checked to be at most the tail).
                self.shared.last_error.set(BridgeError::Transient {
                    reason: format!("reading the buffer: {other}"),
                });
                *failed = true;
            }
        }
    }

    /// Sends one revision; its ack joins `acks`. Sent here, in revision order,
    /// so the server sees them in order (only the acks are awaited together).
    async fn publish(
        &self,
        entry: Entry<T>,
        acks: &mut FuturesUnordered<Ack>,
        s: &mut Session,
    ) -> bool {
        let revision = entry.revision;
        let generation = self.buffer.generation();
        let max_payload = self.js.client().server_info().max_payload;
        let (payload, refused) = if s.poison.contains(&revision) {
            (
                Bytes::new(),
                Some("the server refused this value".to_owned()),
            )
        } else {
            match self.codec.encode_value(&entry.value) {
                // Room for the headers: a few hundred bytes at most.
                Ok(b) if max_payload > 0 && b.len() + 512 > max_payload => (
                    Bytes::new(),
                    Some(format!(
                        "a {}-byte value is over the server's max_payload of {max_payload}",
                        b.len()
                    )),
                ),
                Ok(b) => (b, None),
                Err(e) => (Bytes::new(), Some(e.to_string())),
            }
        };
        let mut message = PublishMessage::build()
            .payload(payload)
            .header(REVISION_HEADER, revision.to_string())
            .header(GENERATION_HEADER, generation.to_string())
            .message_id(format!("{generation}-{revision}"))
            .expected_last_sequence(revision - 1);
        if let Some(why) = refused {
            self.shared.placeholders.add(1);
            self.shared.last_error.set(BridgeError::Rejected {
                key: format!("#{revision}"),
                reason: why.clone(),
            });
            message = message.header(ERROR_HEADER, why.replace(['\r', '\n'], " "));
        }
        match self.js.send_publish(self.subject.clone(), message).await {
            Ok(ack) => {
                acks.push(wait_ack(revision, ack));
                true
            }
            Err(e) => {
                if is_permanent(&e) {
                    s.poison.insert(revision);
                }
                self.failure(revision, &e);
                false
            }
        }
    }

    /// Books one ack; `false` means resync.
    fn on_ack(
        &self,
        revision: u64,
        result: Result<PublishAck, PublishError>,
        s: &mut Session,
    ) -> bool {
        match result {
            Ok(ack) if ack.sequence == revision => {
                s.retry.succeed();
                if ack.duplicate {
                    self.shared.duplicates.add(1);
                } else {
                    self.shared.published.add(1);
                }
                if revision > self.shared.cursor.get() {
                    self.shared.cursor.set(revision);
                }
                // Poisoned revisions behind the stream's tail are done with.
                s.poison = s.poison.split_off(&(revision + 1));
                true
            }
            Ok(ack) => {
                self.shared.last_error.set(BridgeError::Transient {
                    reason: format!(
                        "revision {revision} acked as stream sequence {}",
                        ack.sequence
                    ),
                });
                false
            }
            Err(e) => {
                // A wrong last sequence follows an earlier failure (or a
                // stored retry): the resync reads where the stream is.
                if is_permanent(&e) {
                    s.poison.insert(revision);
                }
                self.failure(revision, &e);
                false
            }
        }
    }

    fn failure(&self, revision: u64, e: &PublishError) {
        self.shared.retries.add(1);
        self.shared.last_error.set(BridgeError::Transient {
            reason: format!("publishing revision {revision}: {}", chain(e)),
        });
    }
}

fn wait_ack(revision: u64, ack: PublishAckFuture) -> Ack {
    Box::pin(async move { (revision, ack.await) })
}
