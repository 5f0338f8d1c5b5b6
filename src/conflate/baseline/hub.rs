//! The baseline [`Hub`]: the construction handle, its state-table reads, its
//! closes and its receiver list.

use super::sender::{SendSide, Sender};
use super::shared::Shared;
use crate::conflate::common::hub_word::HubWord;
use crate::conflate::common::policy::Merge;
use crate::conflate::common::removal::Tombstones;
use crate::conflate::common::stats::{HubStats, ReceiverInfo};
use crate::sync::Arc;
use std::fmt;
use std::hash::Hash;

/// The construction handle of one conflate bus: mints [`Sender`]s and
/// [`Receiver`](super::Receiver)s, and can tear the whole bus down.
///
/// Cheap to clone (one reference count), `Send + Sync`. A `Hub` counts as a
/// send handle: the send side closes gracefully when every `Hub` clone and every
/// [`Sender`] is dropped.
pub struct Hub<K, V> {
    pub(super) side: Arc<SendSide<K, V>>,
}

impl<K, V> Clone for Hub<K, V> {
    fn clone(&self) -> Self {
        Hub {
            side: self.side.clone(),
        }
    }
}

impl<K, V> fmt::Debug for Hub<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.side.shared.state.load().fmt_handle(f, "Hub")
    }
}

impl<K, V> Default for Hub<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
{
    fn default() -> Self {
        Self::new()
    }
}

impl<K, V> Hub<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
{
    /// A hub whose receivers coalesce "newer wins": a send for a pending key
    /// replaces the pending value. Allocates the shared state; never blocks.
    #[must_use]
    pub fn new() -> Self {
        Self::from_merge(Merge::NewerWins)
    }

    /// A hub whose receivers coalesce with `merge(pending, incoming)`: `Some`
    /// keeps the slot with that value, `None` annihilates it (the key leaves
    /// the queue with no residue). A receiver may override it with
    /// [`ReceiverBuilder::merge`](super::ReceiverBuilder::merge).
    ///
    /// `merge` runs under the hub mutex on the send path: it must not call back
    /// into this bus (that would deadlock) and should be short. Allocates the
    /// shared state; never blocks.
    #[must_use]
    pub fn with_merge<F>(merge: F) -> Self
    where
        F: Fn(V, V) -> Option<V> + Send + Sync + 'static,
    {
        Self::from_merge(Merge::With(std::sync::Arc::new(merge)))
    }

    fn from_merge(merge: Merge<V>) -> Self {
        Self::from_parts(merge, false, Tombstones::default())
    }

    pub(super) fn from_parts(merge: Merge<V>, retain: bool, tombstones: Tombstones<V>) -> Self {
        Hub {
            side: Arc::new(SendSide {
                shared: Arc::new(Shared::new(merge, retain, tombstones)),
            }),
        }
    }

    /// The state table's value for `key`: the hub's merge of every accepted
    /// send for it since it last entered the table. `None` if the key is not in
    /// the table, or the hub was built without
    /// [`retain_latest`](super::HubBuilder::retain_latest).
    ///
    /// Takes the hub mutex once (none without a table); one hash, one lookup,
    /// one clone of the value.
    #[must_use]
    pub fn latest(&self, key: &K) -> Option<V> {
        self.side.shared.latest(key)
    }

    /// The whole state table as of one instant (one hold of the hub mutex), in
    /// the table's first-touch order: a key enters at the back when a send
    /// makes it present, and leaves when the merge returns `None`. Empty
    /// without [`retain_latest`](super::HubBuilder::retain_latest).
    ///
    /// Holds the hub mutex for O(keys) clones, which stalls every send
    /// meanwhile; allocates the returned `Vec`.
    ///
    /// ```
    /// use keybus::baseline::conflate::Hub;
    ///
    /// let hub: Hub<&str, u32> = Hub::builder().retain_latest().build();
    /// let tx = hub.sender();
    /// tx.send("b", 1).unwrap();
    /// tx.send("a", 2).unwrap();
    /// tx.send("b", 3).unwrap(); // keeps its place
    /// assert_eq!(hub.snapshot(), vec![("b", 3), ("a", 2)]);
    /// ```
    #[must_use]
    pub fn snapshot(&self) -> Vec<(K, V)> {
        self.side.shared.snapshot()
    }

    /// A handle to the send side (the same one on every call). One reference
    /// count; never blocks.
    #[must_use]
    pub fn sender(&self) -> Sender<K, V> {
        Sender {
            side: self.side.clone(),
        }
    }
}

impl<K, V> Hub<K, V> {
    #[cfg(test)]
    pub(super) fn side_shared(&self) -> &Shared<K, V> {
        &self.side.shared
    }

    /// What every handle of this hub shares (for the builders).
    pub(super) fn shared(&self) -> &Arc<Shared<K, V>> {
        &self.side.shared
    }

    /// Graceful close, from the hub: the send side closes, and every receiver
    /// still delivers what is pending for it, then answers `Closed` (and
    /// deregisters). The same as [`Sender::close`]. Idempotent; takes the hub
    /// mutex once, O(receivers).
    ///
    /// ```
    /// use keybus::baseline::conflate::Hub;
    ///
    /// let hub: Hub<&str, u32> = Hub::new();
    /// let mut rx = hub.receiver();
    /// hub.sender().send("cpu", 1).unwrap();
    /// hub.close_graceful();
    /// assert_eq!(rx.recv().unwrap().value, 1); // still delivered
    /// assert!(rx.recv().is_err()); // then closed
    /// assert_eq!(hub.stats().receivers_drained, 1);
    /// ```
    pub fn close_graceful(&self) {
        self.side.shared.close_send();
    }

    /// Hard close: the send side and every receiver close now. Nothing drains:
    /// pending values are dropped (counted in each receiver's
    /// [`ReceiverStats::dropped`](crate::ReceiverStats::dropped)) and every
    /// receive answers `Closed`; receivers made afterwards are born closed.
    /// Idempotent; safe to race with `send` (the send returns `Ok` or `Err`,
    /// and is delivered to all receivers or none before they are torn down).
    ///
    /// Takes the hub mutex once; O(receivers), and the dropped values are
    /// dropped after the mutex is released.
    ///
    /// ```
    /// use keybus::baseline::conflate::Hub;
    ///
    /// let hub: Hub<&str, u32> = Hub::new();
    /// let mut rx = hub.receiver();
    /// hub.sender().send("cpu", 1).unwrap();
    /// hub.close_now();
    /// assert!(rx.recv().is_err()); // nothing drains
    /// assert_eq!(rx.stats().dropped, 1);
    /// ```
    pub fn close_now(&self) {
        self.side.shared.close_hub();
    }

    /// The hard close, under its old name: [`close_now`](Self::close_now).
    #[deprecated(
        since = "0.1.1",
        note = "`Hub::close` is the hard close: call `close_now` for that, or `close_graceful` to let receivers drain"
    )]
    pub fn close(&self) {
        self.close_now();
    }

    /// Every registered receiver, in [`ReceiverInfo::id`] order, with its name
    /// and accounting (`stats.pending` and `stats.pending_sends` are its
    /// backlog). One hold of the hub mutex, O(receivers) counter reads.
    ///
    /// ```
    /// use keybus::baseline::conflate::Hub;
    ///
    /// let hub: Hub<u32, u32> = Hub::new();
    /// let _slow = hub.receiver_builder().name("slow").build();
    /// hub.sender().send(1, 1).unwrap();
    /// let all = hub.receivers();
    /// assert_eq!((all[0].name.as_deref(), all[0].stats.pending), (Some("slow"), 1));
    /// ```
    ///
    /// # Panics
    /// If called from user code running inside a send of this hub.
    pub fn receivers(&self) -> Vec<ReceiverInfo> {
        self.side.shared.receivers()
    }

    /// Whether [`Hub::close_now`] has run. One atomic load; never blocks.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.side.shared.state.load().hub_closed()
    }

    /// The send side's accounting: sends accepted and refused, receivers live.
    /// See [`HubStats`]. Never blocks a sender: lock-free loads (a few
    /// per-thread stripes of the `sent` count). Exact once no send runs.
    #[must_use]
    pub fn stats(&self) -> HubStats {
        self.side.shared.stats()
    }
}
