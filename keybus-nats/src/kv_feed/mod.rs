//! KV → conflate: the [`KvFeed`] builder, its [`FeedHandle`] and its
//! [`FeedStats`]; the task is `watch.rs`, the value it sends `remote.rs`.
//! Where a feed starts, its order, resumption and end are documented once, on
//! [`KvFeed`]; what a remote consumer observes is `docs/nats.md`, "Conflate ↔
//! KV bucket".

mod remote;
mod watch;

pub use remote::{Change, Remote};

use crate::backoff::Backoff;
use crate::codec::{CodecError, KeyCodec, ValueCodec};
use crate::error::BridgeError;
use crate::stats::{Counter, LastError};
use async_nats::jetstream::kv::Store;
use keybus::conflate::Sender;
use std::hash::Hash;
use std::sync::Arc;
use tokio::sync::watch as signal;

/// Where a [`KvFeed`] starts reading the bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Start {
    /// The last entry per key, then every update (nothing missing between).
    #[default]
    LastPerKey,
    /// Only entries after the bucket's last revision when the feed starts.
    New,
    /// Every retained entry from this revision on (revision 0 is read as 1).
    Revision(u64),
}

/// Builds a KV → conflate feed; [`spawn`](Self::spawn) starts it.
///
/// A bucket watched into a local hub, so one remote table fans out
/// in-process with keybus's coalescing and first-touch order.
///
/// A [`KvFeed`] watches the bucket (all keys, or a filter such as `disk.>`)
/// and sends every entry into a hub's [`Sender`] as a [`Remote`]: the decoded
/// value or a tombstone, with its KV revision. Receivers of that hub then see
/// what any receiver sees: one slot per pending key, the latest revision,
/// `Event::sends` counting the revisions folded into it.
///
/// ```no_run
/// use keybus::conflate::Hub;
/// use keybus_nats::codec::{DisplayValues, StrKeys};
/// use keybus_nats::{KvFeed, Remote, Start};
///
/// # async fn demo(bucket: async_nats::jetstream::kv::Store) -> Result<(), Box<dyn std::error::Error>> {
/// let hub: Hub<String, Remote<f64>> = Hub::new();
/// let mut dashboard = hub.receiver();
/// let feed = KvFeed::new(bucket, hub.sender(), StrKeys, DisplayValues)
///     .start(Start::LastPerKey) // the remote snapshot, then live updates
///     .filter("disk.>")?
///     .spawn();
/// feed.caught_up().await;
/// for e in dashboard.try_recv_all()? {
///     println!("{} = {:?} (revision {})", e.key, e.value.value(), e.value.revision);
/// }
/// # Ok(()) }
/// ```
///
/// # Start, order and resumption
///
/// - [`Start::LastPerKey`] (default): the last entry of every key (deletes and
///   purges included, as tombstones), then every later entry; one consumer
///   does both, so nothing falls between the snapshot and the live updates.
/// - [`Start::New`]: entries after the bucket's last revision at spawn.
/// - [`Start::Revision`]: entries from that revision on.
///
/// Entries reach the hub in revision order. The feed remembers the highest
/// revision it sent; when the watch fails (lost connection, server restart) it
/// reopens from the revision after it, with backoff, and drops anything at or
/// below it, so no key's revision ever goes backwards and nothing retained is
/// missed. Entries the bucket no longer holds by then (with `history = 1`,
/// overwritten values) were coalesced on the server, the way a slow receiver
/// coalesces: only the key's latest revision arrives.
///
/// A key that does not decode, or a value that does not, is counted
/// ([`FeedStats::key_errors`], [`FeedStats::value_errors`]) and recorded, and
/// the feed goes on with the next entry.
///
/// # Ending
///
/// The feed ends when the hub's send side is closed (its next send fails), on
/// [`FeedHandle::close`], or when the [`FeedHandle`] is dropped.
#[must_use = "a feed does nothing until spawned"]
pub struct KvFeed<K, V, KC, VC> {
    store: Store,
    tx: Sender<K, Remote<V>>,
    keys: KC,
    values: VC,
    start: Start,
    filter: String,
    backoff: Backoff,
}

impl<K, V, KC, VC> KvFeed<K, V, KC, VC>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
    KC: KeyCodec<K>,
    VC: ValueCodec<V>,
{
    /// A feed of every key of `store` into `tx`, from [`Start::LastPerKey`].
    pub fn new(store: Store, tx: Sender<K, Remote<V>>, keys: KC, values: VC) -> Self {
        KvFeed {
            store,
            tx,
            keys,
            values,
            start: Start::default(),
            filter: ">".to_owned(),
            backoff: Backoff::default(),
        }
    }

    /// Where to start.
    pub fn start(self, start: Start) -> Self {
        KvFeed { start, ..self }
    }

    /// Only keys matching `filter`, a KV key whose tokens may be `*` and whose
    /// last may be `>` (`disk.>`); the server filters. Errors on an invalid
    /// filter ([`validate_filter`](crate::validate_filter)).
    pub fn filter(self, filter: impl Into<String>) -> Result<Self, CodecError> {
        let filter = filter.into();
        crate::validate_filter(&filter)?;
        Ok(KvFeed { filter, ..self })
    }

    /// The wait between attempts to reopen a failed watch.
    pub fn backoff(self, backoff: Backoff) -> Self {
        KvFeed { backoff, ..self }
    }

    /// Starts the feed on the current tokio runtime.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn spawn(self) -> FeedHandle {
        let shared = Arc::new(Shared::default());
        let (caught_up_tx, caught_up) = signal::channel(false);
        let task = tokio::spawn(
            watch::Feed {
                store: self.store,
                tx: self.tx,
                keys: self.keys,
                values: self.values,
                start: self.start,
                filter: self.filter,
                backoff: self.backoff,
                shared: shared.clone(),
                caught_up: caught_up_tx,
            }
            .run(),
        );
        FeedHandle {
            shared,
            caught_up,
            task: Some(task),
        }
    }
}

/// A running feed. Dropping it stops the feed.
#[derive(Debug)]
pub struct FeedHandle {
    shared: Arc<Shared>,
    caught_up: signal::Receiver<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl FeedHandle {
    /// The feed's accounting now. Never waits.
    pub fn stats(&self) -> FeedStats {
        self.shared.read(*self.caught_up.borrow())
    }

    /// Waits until the feed has sent everything the bucket held past its start
    /// when the watch opened (with [`Start::LastPerKey`]: the whole remote
    /// snapshot); returns at once if that already happened or the feed ended.
    pub async fn caught_up(&self) -> FeedStats {
        let mut rx = self.caught_up.clone();
        let _ = rx.wait_for(|c| *c).await;
        self.stats()
    }

    /// Whether the feed task has ended (its hub's send side closed).
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Stops the feed and returns its final stats.
    pub async fn close(mut self) -> FeedStats {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
        self.stats()
    }
}

impl Drop for FeedHandle {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// What a [`KvFeed`] did, from [`FeedHandle::stats`].
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FeedStats {
    /// Entries received from the server (before the checks below).
    pub entries: u64,
    /// Puts sent into the hub.
    pub puts: u64,
    /// Deletes and purges sent into the hub as tombstones.
    pub tombstones: u64,
    /// Entries dropped because their revision was not above the last one sent
    /// (redelivered around a reopen).
    pub stale: u64,
    /// KV keys the key codec could not decode (entry skipped).
    pub key_errors: u64,
    /// Values the value codec could not decode (entry skipped).
    pub value_errors: u64,
    /// Times the watch was reopened after a failure.
    pub resumes: u64,
    /// The highest revision received.
    pub last_revision: u64,
    /// Whether the feed has caught up with the bucket as of its opening.
    pub caught_up: bool,
    /// The latest failure the feed went on from.
    pub last_error: Option<BridgeError>,
}

#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub(crate) entries: Counter,
    pub(crate) puts: Counter,
    pub(crate) tombstones: Counter,
    pub(crate) stale: Counter,
    pub(crate) key_errors: Counter,
    pub(crate) value_errors: Counter,
    pub(crate) resumes: Counter,
    pub(crate) last_revision: Counter,
    pub(crate) last_error: LastError,
}

impl Shared {
    fn read(&self, caught_up: bool) -> FeedStats {
        FeedStats {
            entries: self.entries.get(),
            puts: self.puts.get(),
            tombstones: self.tombstones.get(),
            stale: self.stale.get(),
            key_errors: self.key_errors.get(),
            value_errors: self.value_errors.get(),
            resumes: self.resumes.get(),
            last_revision: self.last_revision.get(),
            caught_up,
            last_error: self.last_error.get(),
        }
    }
}
