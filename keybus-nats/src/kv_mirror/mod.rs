//! Conflate → KV: the [`KvMirror`] builder, its [`MirrorHandle`] and its
//! [`MirrorStats`]; the task is `engine.rs`. What the mirror writes, its
//! delivery and its bounds are documented once, on [`KvMirror`]; what a remote
//! consumer observes is `docs/nats.md`, "Conflate ↔ KV bucket".

mod engine;

use crate::backoff::Backoff;
use crate::codec::{KeyCodec, ValueCodec};
use crate::error::BridgeError;
use crate::mirror_task::MirrorTask;
use crate::stats::{Counter, LastError};
use async_nats::jetstream::kv::Store;
use keybus::conflate::Hub;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

/// Builds a conflate → KV mirror; [`spawn`](Self::spawn) starts it.
///
/// A hub's latest value per key, mirrored into a JetStream KV bucket.
///
/// A [`KvMirror`] registers one receiver on the hub and a task that drains it.
/// With the default newer-wins merge that receiver *is* the set of dirty keys:
/// each pending key holds its latest value, however many sends it saw, so a
/// slow or absent server only lets that set grow, and it is bounded by the live
/// key set. The producer never waits for the mirror: a send costs what a send
/// to a hub with one more receiver costs, connected or not.
///
/// ```no_run
/// use keybus::conflate::Hub;
/// use keybus_nats::codec::{DisplayValues, StrKeys};
/// use keybus_nats::{ensure_bucket, KvMirror};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let js = async_nats::jetstream::new(async_nats::connect("127.0.0.1:4222").await?);
/// let bucket = ensure_bucket(&js, "telemetry").await?; // history 1
///
/// let hub: Hub<String, f64> = Hub::new();
/// let mirror = KvMirror::new(&hub, bucket, StrKeys, DisplayValues).spawn();
/// let tx = hub.sender();
/// tx.send("cpu".into(), 0.41)?;
/// tx.send("cpu".into(), 0.57)?; // coalesces: one put of 0.57, most likely
/// let stats = mirror.settled().await; // everything sent so far is acked
/// assert_eq!(stats.rejected, 0);
/// # Ok(()) }
/// ```
///
/// # What it writes
///
/// - **Newer-wins hub** ([`KvMirror::new`]): each taken key's latest sent
///   value, one put per key per drain. Keys sent before [`spawn`](KvMirror::spawn)
///   are not mirrored (a receiver starts empty).
/// - **`retain_latest` hub** ([`KvMirror::from_table`]): the mirror starts with
///   the whole state table (a snapshot receiver: nothing missing between the
///   table and the live sends) and writes the **table's** value,
///   [`Hub::latest`](keybus::conflate::Hub::latest), so a merge such as a sum
///   is mirrored as the total; a key the table's merge annihilated (`None`)
///   becomes a KV delete.
///
/// # Delivery
///
/// At most one write per key is in flight; a newer value for a key in flight
/// waits for that write's ack and then goes out, so the last write the bucket
/// stores for a key is its latest value. Writes are pipelined: up to
/// [`max_in_flight`](KvMirror::max_in_flight) keys await their acks at once.
/// A transient failure (timeout, lost connection, missing bucket) puts the key
/// back, counts a retry and backs off ([`Backoff`]); the client reconnects by
/// itself, and no key's latest value is lost meanwhile: the key is either
/// held by the mirror or pending at the receiver. A permanent refusal (payload
/// over the server's `max_payload` or the bucket's `max_value_size`) and codec
/// failures are counted and recorded in [`MirrorStats::last_error`]; the key
/// waits for its next send, and the mirror goes on.
///
/// # Bounds
///
/// The mirror itself holds at most `max_in_flight` distinct keys (in flight or
/// queued; a newer value for an in-flight key replaces the one waiting behind
/// it); everything else stays coalescing in the hub receiver, one slot per key.
/// [`MirrorStats::held`] and [`MirrorStats::receiver_pending`] never exceed the
/// live key set.
///
/// # Ending
///
/// The task ends when the receiver reports closed (the hub's send side closed
/// and everything pending was written), on [`MirrorHandle::close`], or when
/// the [`MirrorHandle`] is dropped. A `from_table` mirror holds a `Hub` handle
/// (to read the table), which keeps the send side open: close it with
/// [`Sender::close`](keybus::conflate::Sender::close) or
/// [`Hub::close`](keybus::conflate::Hub::close), or close the mirror.
#[must_use = "a mirror does nothing until spawned"]
pub struct KvMirror<K, V, KC, VC> {
    hub: Hub<K, V>,
    store: Store,
    keys: KC,
    values: VC,
    from_table: bool,
    max_in_flight: usize,
    flush_interval: Duration,
    backoff: Backoff,
}

impl<K, V, KC, VC> KvMirror<K, V, KC, VC>
where
    K: Hash + Eq + Clone + Send + Sync + Debug + 'static,
    V: Clone + Send + 'static,
    KC: KeyCodec<K>,
    VC: ValueCodec<V>,
{
    /// A mirror of `hub` into `store`, writing each dirty key's latest sent
    /// value. The receiver is registered at [`spawn`](Self::spawn).
    pub fn new(hub: &Hub<K, V>, store: Store, keys: KC, values: VC) -> Self {
        KvMirror {
            hub: hub.clone(),
            store,
            keys,
            values,
            from_table: false,
            max_in_flight: 256,
            flush_interval: Duration::ZERO,
            backoff: Backoff::default(),
        }
    }

    /// Mirrors the hub's state table instead (the hub must be built with
    /// [`retain_latest`](keybus::conflate::HubBuilder::retain_latest)): starts
    /// with the whole table, writes [`Hub::latest`] per dirty key, and deletes
    /// keys the table's merge annihilated. [`spawn`](Self::spawn) panics, with
    /// keybus's own message, on a hub without a table.
    pub fn from_table(self) -> Self {
        KvMirror {
            from_table: true,
            ..self
        }
    }

    /// At most `n` writes awaiting their acks at once (default 256; keep it
    /// under the JetStream context's `max_ack_inflight`, 5,000 by default).
    ///
    /// # Panics
    /// If `n == 0`.
    pub fn max_in_flight(self, n: usize) -> Self {
        assert!(n > 0, "max_in_flight must be at least 1");
        KvMirror {
            max_in_flight: n,
            ..self
        }
    }

    /// Drains the hub receiver at most once per `interval` (and, woken from
    /// idle, waits one interval first), so the sends in between coalesce at
    /// the receiver into one write per key. Default zero: drain as soon as
    /// anything is dirty (lowest lag). A key then waits at most about one
    /// interval, plus its write, before it reaches the bucket.
    pub fn flush_interval(self, interval: Duration) -> Self {
        KvMirror {
            flush_interval: interval,
            ..self
        }
    }

    /// The wait between retries after a transient failure.
    pub fn backoff(self, backoff: Backoff) -> Self {
        KvMirror { backoff, ..self }
    }

    /// Registers the receiver (a snapshot receiver with
    /// [`from_table`](Self::from_table)) and starts the mirror task on the
    /// current tokio runtime. Every send after this call is mirrored.
    ///
    /// # Panics
    /// Outside a tokio runtime; with `from_table` on a hub without a table.
    pub fn spawn(self) -> MirrorHandle {
        let rx = if self.from_table {
            self.hub
                .receiver_builder()
                .snapshot()
                .merge(|_, newer| Some(newer))
                .build()
        } else {
            // Newer wins whatever the hub's merge: the receiver is the dirty
            // set, and it must never annihilate a key the mirror has to write.
            self.hub
                .receiver_builder()
                .merge(|_, newer| Some(newer))
                .build()
        };
        let shared = Arc::new(Shared::default());
        let engine = engine::Engine::new(self, rx, shared.clone());
        MirrorHandle {
            shared,
            task: MirrorTask::spawn(|inbox| engine.run(inbox)),
        }
    }
}

/// A running mirror. Dropping it stops the mirror (writes in flight are
/// abandoned; the bucket keeps whatever was acked).
#[derive(Debug)]
pub struct MirrorHandle {
    shared: Arc<Shared>,
    task: MirrorTask,
}

impl MirrorHandle {
    /// The mirror's accounting now. Never waits.
    pub fn stats(&self) -> MirrorStats {
        self.shared.read()
    }

    /// Waits until every send made before this call is written and acked (or
    /// refused and counted), then returns the stats. With the server away it
    /// waits for the server: wrap it in a timeout. Returns at once if the
    /// mirror has ended.
    pub async fn settled(&self) -> MirrorStats {
        self.task.settle().await;
        self.stats()
    }

    /// Whether the mirror task has ended (receiver closed and drained).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Stops the mirror now (writes in flight are abandoned) and returns its
    /// final stats.
    pub async fn close(mut self) -> MirrorStats {
        self.task.stop().await;
        self.shared.in_flight.set(0);
        self.shared.read()
    }
}

/// What a [`KvMirror`] did, from [`MirrorHandle::stats`]. Counters only rise;
/// `in_flight`, `held` and `receiver_pending` are gauges.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MirrorStats {
    /// Events taken from the hub receiver (each a dirty key with its folded sends).
    pub taken: u64,
    /// Sends folded into the taken events (`Event::sends`; a snapshot entry counts 0).
    pub sends: u64,
    /// Puts the server acked.
    pub puts: u64,
    /// Deletes the server acked (`from_table`: keys the merge annihilated).
    pub deletes: u64,
    /// Writes put back after a transient failure (timeout, lost connection).
    pub retries: u64,
    /// Writes the server (or client) refused for good; not retried.
    pub rejected: u64,
    /// Keys the key codec refused.
    pub key_errors: u64,
    /// Values the value codec refused.
    pub value_errors: u64,
    /// Writes awaiting their acks now.
    pub in_flight: u64,
    /// Distinct keys the mirror holds now (in flight or queued); at most
    /// `max_in_flight`, and at most the live key set.
    pub held: u64,
    /// Keys pending at the hub receiver now (not yet taken).
    pub receiver_pending: u64,
    /// The bucket revision of the latest acked put.
    pub last_revision: u64,
    /// The latest failure the mirror went on from.
    pub last_error: Option<BridgeError>,
}

#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub(crate) taken: Counter,
    pub(crate) sends: Counter,
    pub(crate) puts: Counter,
    pub(crate) deletes: Counter,
    pub(crate) retries: Counter,
    pub(crate) rejected: Counter,
    pub(crate) key_errors: Counter,
    pub(crate) value_errors: Counter,
    pub(crate) in_flight: Counter,
    pub(crate) held: Counter,
    pub(crate) receiver_pending: Counter,
    pub(crate) last_revision: Counter,
    pub(crate) last_error: LastError,
}

impl Shared {
    fn read(&self) -> MirrorStats {
        MirrorStats {
            taken: self.taken.get(),
            sends: self.sends.get(),
            puts: self.puts.get(),
            deletes: self.deletes.get(),
            retries: self.retries.get(),
            rejected: self.rejected.get(),
            key_errors: self.key_errors.get(),
            value_errors: self.value_errors.get(),
            in_flight: self.in_flight.get(),
            held: self.held.get(),
            receiver_pending: self.receiver_pending.get(),
            last_revision: self.last_revision.get(),
            last_error: self.last_error.get(),
        }
    }
}
