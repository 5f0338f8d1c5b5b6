//! The lock-free [`Hub`]: the construction handle, its state-table reads, its
//! closes and its receiver list.
//!
//! The argument: `docs/design.md`, "The state table is the cells" and "Close
//! versus send".

use super::sender::Sender;
use super::shared::Shared;
use crate::conflate::common::hub_word::HubWord;
use crate::conflate::common::policy::Merge;
use crate::conflate::common::removal::Tombstones;
use crate::conflate::common::stats::{HubStats, ReceiverInfo};
use crate::sync::Arc;
use std::fmt;
use std::hash::Hash;

/// The construction handle of a conflate bus: a cheap `Clone` handle, `Send +
/// Sync`. Holding a hub keeps the send side open; see the
/// [module docs](crate::conflate#closing).
pub struct Hub<K, V> {
    pub(super) shared: Arc<Shared<K, V>>,
}

impl<K, V> Hub<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
{
    /// A hub whose receivers keep the newer value when a pending key is sent again.
    #[must_use]
    pub fn new() -> Self {
        Hub {
            shared: Arc::new(Shared::new(Merge::NewerWins, false, Tombstones::default())),
        }
    }

    /// A hub whose receivers merge a send into a pending slot with `merge(pending,
    /// incoming)`; `None` annihilates the key. A receiver can override it with
    /// [`ReceiverBuilder::merge`](super::ReceiverBuilder::merge).
    ///
    /// ```
    /// use keybus::conflate::Hub;
    ///
    /// // Sum deltas; a zero sum leaves nothing to deliver.
    /// let hub = Hub::with_merge(|a: i64, b: i64| Some(a + b).filter(|s| *s != 0));
    /// let (tx, mut rx) = (hub.sender(), hub.receiver());
    /// tx.send("k", 5).unwrap();
    /// tx.send("k", -5).unwrap();
    /// assert!(rx.try_recv().is_err());
    /// ```
    #[must_use]
    pub fn with_merge<F>(merge: F) -> Self
    where
        F: Fn(V, V) -> Option<V> + Send + Sync + 'static,
    {
        Hub {
            shared: Arc::new(Shared::new(
                Merge::With(std::sync::Arc::new(merge)),
                false,
                Tombstones::default(),
            )),
        }
    }

    /// The state table's value for `key`: the hub's merge of every accepted
    /// send for it since it last entered the table. `None` if the key is not in
    /// the table, or the hub was built without
    /// [`retain_latest`](super::HubBuilder::retain_latest).
    ///
    /// One hash, one cell-shard lock (the lock a send for a key of that shard
    /// takes for its table update), one clone of the value; never waits for
    /// anything else.
    ///
    /// # Panics
    /// If called from user code running inside a send of this hub (a merge, a
    /// key filter), which could hold that very shard lock.
    #[must_use]
    pub fn latest(&self, key: &K) -> Option<V> {
        if !self.shared.retain {
            return None;
        }
        self.shared.forbid_inside_send("Hub::latest");
        self.shared.cells.latest(self.shared.hash(key), key)
    }

    /// The whole state table as of one instant, in its first-touch order: a
    /// key enters at the back when a send makes it present, and leaves when the
    /// hub's merge returns `None`. Empty without
    /// [`retain_latest`](super::HubBuilder::retain_latest).
    ///
    /// Locks every cell shard (in a fixed order) before copying, so sends for
    /// any key wait for O(keys) clones; allocates the returned `Vec` and sorts
    /// it (O(keys log keys)) after the locks are released.
    ///
    /// ```
    /// use keybus::conflate::Hub;
    ///
    /// let hub: Hub<&str, u32> = Hub::builder().retain_latest().build();
    /// let tx = hub.sender();
    /// tx.send("b", 1).unwrap();
    /// tx.send("a", 2).unwrap();
    /// tx.send("b", 3).unwrap(); // keeps its place
    /// assert_eq!(hub.snapshot(), vec![("b", 3), ("a", 2)]);
    /// ```
    ///
    /// # Panics
    /// If called from user code running inside a send of this hub.
    #[must_use]
    pub fn snapshot(&self) -> Vec<(K, V)> {
        if !self.shared.retain {
            return Vec::new();
        }
        self.shared.forbid_inside_send("Hub::snapshot");
        self.shared.cells.snapshot()
    }

    /// The send side's accounting: sends accepted and refused, receivers live.
    /// See [`HubStats`]. Never blocks a sender: lock-free loads (the per-thread
    /// stripes that count `sent`, a counter, the state word). Exact once no
    /// send runs.
    #[must_use]
    pub fn stats(&self) -> HubStats {
        self.shared.stats()
    }

    /// A handle to the one send side. Never blocks.
    #[must_use]
    pub fn sender(&self) -> Sender<K, V> {
        self.shared.acquire_handle();
        Sender {
            shared: self.shared.clone(),
        }
    }

    /// Graceful close, from the hub: the send side closes (later sends return
    /// `Err`), and every receiver still delivers everything pending, then
    /// reports closed and deregisters. The same as [`Sender::close`] on any
    /// sender of this hub. Idempotent; returns once every receiver was told
    /// (a send still in flight finishes on its own, and receivers wait for
    /// it).
    ///
    /// ```
    /// use keybus::conflate::Hub;
    ///
    /// let hub: Hub<&str, u32> = Hub::new();
    /// let mut rx = hub.receiver();
    /// hub.sender().send("cpu", 1).unwrap();
    /// hub.close_graceful();
    /// assert!(hub.sender().send("cpu", 2).is_err());
    /// assert_eq!(rx.recv().unwrap().value, 1); // still delivered
    /// assert!(rx.recv().is_err()); // then closed
    /// assert_eq!(hub.stats().receivers_drained, 1);
    /// ```
    pub fn close_graceful(&self) {
        self.shared.close_tx();
    }

    /// Hard close: the send side and every receiver close now, nothing drains
    /// (pending values are dropped and counted in each receiver's
    /// [`ReceiverStats::dropped`](crate::ReceiverStats::dropped)), and
    /// receivers made afterwards are born closed. Idempotent. For a shutdown
    /// that delivers what is pending, use
    /// [`close_graceful`](Self::close_graceful).
    ///
    /// ```
    /// use keybus::conflate::Hub;
    ///
    /// let hub: Hub<&str, u32> = Hub::new();
    /// let mut rx = hub.receiver();
    /// hub.sender().send("cpu", 1).unwrap();
    /// hub.close_now();
    /// assert!(rx.recv().is_err()); // nothing drains
    /// assert_eq!(rx.stats().dropped, 1);
    /// assert_eq!(hub.stats().receivers_hard_closed, 1);
    /// ```
    pub fn close_now(&self) {
        self.shared.close_hub();
    }

    /// The hard close, under its old name: [`close_now`](Self::close_now).
    #[deprecated(
        since = "0.1.1",
        note = "`Hub::close` is the hard close: call `close_now` for that, or `close_graceful` to let receivers drain"
    )]
    pub fn close(&self) {
        self.close_now();
    }

    /// Every live receiver of this hub (registered, not closed, not yet
    /// drained), in [`ReceiverInfo::id`] order, with its name and its
    /// accounting: `stats.pending` keys and `stats.pending_sends` sends are
    /// its backlog, readable without the receiver, which its consumer owns.
    ///
    /// Takes the registry lock (which registrations and deregistrations take,
    /// never sends) for O(receivers) lock-free stats reads; a receiver of
    /// every key with the hub's newer-wins merge walks its pending entries
    /// (O(pending keys)). Allocates the `Vec`.
    ///
    /// ```
    /// use keybus::conflate::Hub;
    ///
    /// let hub: Hub<u32, u32> = Hub::new();
    /// let tx = hub.sender();
    /// let mut fast = hub.receiver_builder().name("fast").build();
    /// let _slow = hub.receiver_builder().name("slow").build();
    /// for k in 0..5 {
    ///     tx.send(k, k).unwrap();
    /// }
    /// fast.try_recv_all().unwrap();
    /// let behind: Vec<_> = hub
    ///     .receivers()
    ///     .into_iter()
    ///     .map(|rx| (rx.name.as_deref().map(str::to_owned), rx.stats.pending))
    ///     .collect();
    /// assert_eq!(behind, [(Some("fast".into()), 0), (Some("slow".into()), 5)]);
    /// ```
    ///
    /// # Panics
    /// If called from user code running inside a send of this hub.
    pub fn receivers(&self) -> Vec<ReceiverInfo> {
        self.shared.receivers()
    }

    /// Whether the hard close ([`close_now`](Self::close_now)) was called.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.shared.state.load().hub_closed()
    }
}

impl<K, V> Hub<K, V> {
    /// What every handle of this hub shares (for the builders).
    pub(super) fn shared(&self) -> &Arc<Shared<K, V>> {
        &self.shared
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

impl<K, V> Clone for Hub<K, V> {
    fn clone(&self) -> Self {
        self.shared.acquire_handle();
        Hub {
            shared: self.shared.clone(),
        }
    }
}

impl<K, V> Drop for Hub<K, V> {
    fn drop(&mut self) {
        self.shared.release_handle();
    }
}

impl<K, V> fmt::Debug for Hub<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.shared.state.load().fmt_handle(f, "Hub")
    }
}
