//! The baseline [`HubBuilder`] and [`ReceiverBuilder`]: a hub's merge, table
//! and tombstones; a receiver's filter, merge, bound and snapshot.

use super::hub::Hub;
use super::receiver::Receiver;
use super::shared::Shared;
use crate::conflate::common::policy::{no_state_table, Merge, ReceiverConfig};
use crate::conflate::common::removal::Tombstones;
use crate::sync::Arc;
use std::fmt;
use std::hash::Hash;

/// The hub's builders and receivers: where a hub and a receiver are
/// configured.
impl<K, V> Hub<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
{
    /// A builder for a hub with a merge and/or a state table
    /// ([`HubBuilder::retain_latest`]). [`Hub::new`] and [`Hub::with_merge`]
    /// are its two common cases.
    ///
    /// ```
    /// use keybus::baseline::conflate::Hub;
    ///
    /// let hub = Hub::builder()
    ///     .merge(|total: u64, delta: u64| Some(total + delta))
    ///     .retain_latest()
    ///     .build();
    /// let tx = hub.sender();
    /// tx.send("requests", 3).unwrap(); // no receiver yet: the table keeps it
    /// tx.send("requests", 4).unwrap();
    /// assert_eq!(hub.latest(&"requests"), Some(7));
    ///
    /// // A late dashboard starts from the table, then follows the live stream.
    /// let mut dash = hub.receiver_builder().snapshot().build();
    /// let first = dash.try_recv().unwrap();
    /// assert_eq!((first.key, first.value, first.sends), ("requests", 7, 0));
    /// ```
    #[must_use = "a builder does nothing until `build` is called"]
    pub fn builder() -> HubBuilder<K, V> {
        HubBuilder {
            merge: Merge::NewerWins,
            retain: false,
            tombstones: Tombstones::default(),
            keys: std::marker::PhantomData,
        }
    }

    /// A receiver for every key with the hub's merge. It starts empty: it sees
    /// only sends that happen after this call returns. Born closed if the send
    /// side is already closed. Takes the hub mutex once.
    #[must_use = "a receiver is registered at once and deregistered when dropped; keep it to receive"]
    pub fn receiver(&self) -> Receiver<K, V> {
        self.receiver_builder().build()
    }

    /// A builder for a receiver with its own key filter and/or merge.
    /// Allocates nothing until [`ReceiverBuilder::build`].
    #[must_use = "a builder does nothing until `build` is called"]
    pub fn receiver_builder(&self) -> ReceiverBuilder<K, V> {
        ReceiverBuilder {
            shared: self.side.shared.clone(),
            config: ReceiverConfig::default(),
        }
    }
}

/// Builds a [`Hub`]: its merge, and whether it keeps a state table. From
/// [`Hub::builder`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct HubBuilder<K, V> {
    pub(super) merge: Merge<V>,
    pub(super) retain: bool,
    pub(super) tombstones: Tombstones<V>,
    pub(super) keys: std::marker::PhantomData<fn() -> K>,
}

impl<K, V> fmt::Debug for HubBuilder<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HubBuilder")
            .field("merge", &self.merge)
            .field("retain_latest", &self.retain)
            .field("tombstones", &self.tombstones.enabled())
            .finish()
    }
}

impl<K, V> HubBuilder<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
{
    /// The hub's merge, as [`Hub::with_merge`]: receivers without their own
    /// use it, and so does the state table. `None` annihilates (and removes the
    /// key from the table). Without it: newer wins.
    #[must_use = "builder methods return the changed builder; dropping it drops the setting"]
    pub fn merge<F>(self, merge: F) -> Self
    where
        F: Fn(V, V) -> Option<V> + Send + Sync + 'static,
    {
        HubBuilder {
            merge: Merge::With(std::sync::Arc::new(merge)),
            ..self
        }
    }

    /// Keeps a state table: per key, the hub's merge of every accepted send
    /// (whether or not a receiver listens), in first-touch order; `None` from
    /// the merge removes the key. Enables [`Hub::latest`], [`Hub::snapshot`]
    /// and [`ReceiverBuilder::snapshot`]. Memory: one entry per live key.
    ///
    /// Cost: every send then takes the hub mutex, even with no receiver, for
    /// one more lookup and merge (and a key and value clone when the key
    /// enters the table, a value clone otherwise).
    #[must_use = "builder methods return the changed builder; dropping it drops the setting"]
    pub fn retain_latest(self) -> Self {
        HubBuilder {
            retain: true,
            ..self
        }
    }

    /// Values for which `is_tombstone` is true *remove* their key, as
    /// [`keybus::conflate::HubBuilder::tombstones`](crate::conflate::HubBuilder::tombstones)
    /// describes: the state table forgets the key, a receiver that delivered
    /// an event of the key's current life gets the tombstone once, and a
    /// receiver that did not gets nothing. The test runs once per send, before
    /// the hub mutex, and once per event a receiver takes.
    ///
    /// ```
    /// use keybus::baseline::conflate::Hub;
    ///
    /// let hub = Hub::builder()
    ///     .retain_latest()
    ///     .tombstones(|v: &Option<u32>| v.is_none())
    ///     .build();
    /// let (tx, mut rx) = (hub.sender(), hub.receiver());
    /// tx.send("a", Some(1)).unwrap();
    /// assert_eq!(rx.try_recv().unwrap().value, Some(1));
    /// tx.send("b", Some(2)).unwrap();
    /// tx.send("a", None).unwrap();
    /// tx.send("b", None).unwrap();
    /// assert!(hub.snapshot().is_empty());
    /// assert_eq!(rx.try_recv().unwrap().key, "a"); // "b" was never seen
    /// assert!(rx.try_recv().is_err());
    /// ```
    #[must_use = "builder methods return the changed builder; dropping it drops the setting"]
    pub fn tombstones<F>(self, is_tombstone: F) -> Self
    where
        F: Fn(&V) -> bool + Send + Sync + 'static,
    {
        HubBuilder {
            tombstones: Tombstones::new(std::sync::Arc::new(is_tombstone)),
            ..self
        }
    }

    /// The hub. Allocates the shared state; never blocks.
    #[must_use]
    pub fn build(self) -> Hub<K, V> {
        Hub::from_parts(self.merge, self.retain, self.tombstones)
    }
}

/// Configures one receiver: which keys it takes and how it coalesces.
///
/// Built by [`Hub::receiver_builder`]; finish with [`ReceiverBuilder::build`].
/// The builder does not hold the send side open.
#[must_use = "a builder does nothing until `build` is called"]
pub struct ReceiverBuilder<K, V> {
    pub(super) shared: Arc<Shared<K, V>>,
    pub(super) config: ReceiverConfig<K, V>,
}

impl<K, V> fmt::Debug for ReceiverBuilder<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReceiverBuilder")
            .field("filter", &self.config.filter)
            .field("merge", &self.config.merge)
            .field("snapshot", &self.config.snapshot)
            .field("max_pending", &self.config.max_pending)
            .field("name", &self.config.name)
            .finish()
    }
}

impl<K, V> ReceiverBuilder<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
{
    /// Takes exactly `key`. Compared on the send path with `K: Eq`; no user
    /// closure runs for this receiver. Replaces an earlier
    /// [`key`](Self::key) or [`key_filter`](Self::key_filter): the later call
    /// wins. Never blocks; O(1).
    #[must_use = "builder methods return the changed builder; dropping it drops the setting"]
    pub fn key(self, key: K) -> Self {
        ReceiverBuilder {
            config: self.config.key(key),
            ..self
        }
    }

    /// Takes the keys for which `keep` returns true. Runs at send, under the hub
    /// mutex, once per send: an unwanted key never takes a slot. Must not call
    /// back into this bus. Replaces an earlier [`key`](Self::key) or
    /// [`key_filter`](Self::key_filter): the later call wins. Never blocks;
    /// allocates the shared closure.
    #[must_use = "builder methods return the changed builder; dropping it drops the setting"]
    pub fn key_filter<F>(self, keep: F) -> Self
    where
        F: Fn(&K) -> bool + Send + Sync + 'static,
    {
        ReceiverBuilder {
            config: self.config.key_filter(keep),
            ..self
        }
    }

    /// Coalesces this receiver's slots with `merge(pending, incoming)` instead
    /// of the hub's merge (other receivers are unaffected). `None` annihilates.
    /// Runs under the hub mutex; must not call back into this bus. Never
    /// blocks; allocates the shared closure.
    #[must_use = "builder methods return the changed builder; dropping it drops the setting"]
    pub fn merge<F>(self, merge: F) -> Self
    where
        F: Fn(V, V) -> Option<V> + Send + Sync + 'static,
    {
        ReceiverBuilder {
            config: self.config.merge(merge),
            ..self
        }
    }

    /// Names the receiver, for [`Hub::receivers`] and
    /// [`ReceiverWatch::name`](super::ReceiverWatch::name). Names need not be
    /// unique. No cost on any send.
    ///
    /// ```
    /// use keybus::baseline::conflate::Hub;
    ///
    /// let hub: Hub<&str, u32> = Hub::new();
    /// let rx = hub.receiver_builder().name("dashboard").build();
    /// assert_eq!(rx.watch().name(), Some("dashboard"));
    /// ```
    pub fn name(self, name: impl Into<std::sync::Arc<str>>) -> Self {
        ReceiverBuilder {
            config: self.config.name(name.into()),
            ..self
        }
    }

    /// Starts the receiver with the hub's state table pending: every key in the
    /// table that passes this receiver's filter, with the table's value and
    /// `sends == 0`, in table order (at most [`max_pending`](Self::max_pending)
    /// of them, the first in that order). The copy and the registration are one
    /// instant (one hold of the hub mutex): every send before it is in the
    /// table, every send after it reaches the receiver like any other, none is
    /// missing and none counted twice. A later send for a snapshot key merges
    /// into it with this receiver's merge (the event then says `sends == 1`).
    ///
    /// # Panics
    ///
    /// If the hub was built without
    /// [`retain_latest`](HubBuilder::retain_latest): there is no table to
    /// start from. The message says so.
    ///
    /// ```
    /// use keybus::baseline::conflate::Hub;
    ///
    /// let hub: Hub<&str, u32> = Hub::builder().retain_latest().build();
    /// let tx = hub.sender();
    /// tx.send("cpu", 40).unwrap();
    /// let mut late = hub.receiver_builder().snapshot().build();
    /// tx.send("cpu", 41).unwrap(); // merges into the snapshot entry
    /// let e = late.recv().unwrap();
    /// assert_eq!((e.key, e.value, e.sends), ("cpu", 41, 1));
    /// ```
    #[must_use = "builder methods return the changed builder; dropping it drops the setting"]
    #[track_caller]
    pub fn snapshot(self) -> Self {
        if !self.shared.retains() {
            no_state_table();
        }
        ReceiverBuilder {
            config: self.config.snapshot(),
            ..self
        }
    }

    /// Bounds the receiver to `n` pending keys. A send for a key that is not
    /// pending while `n` are is refused at this receiver only (drop-new: the
    /// pending keys keep their slots and order) and counted in
    /// [`ReceiverStats::overflowed`](crate::ReceiverStats::overflowed); sends
    /// for pending keys still merge. O(1) per send.
    ///
    /// # Panics
    ///
    /// If `n` is 0 (a receiver that can hold nothing); the message says to pass
    /// `n >= 1` or leave the bound out.
    ///
    /// ```
    /// use keybus::baseline::conflate::Hub;
    ///
    /// let hub: Hub<u32, u32> = Hub::new();
    /// let tx = hub.sender();
    /// let mut rx = hub.receiver_builder().max_pending(2).build();
    /// for k in 0..5 {
    ///     tx.send(k, k).unwrap();
    /// }
    /// assert_eq!(rx.len(), 2);
    /// assert_eq!(rx.stats().overflowed, 3);
    /// ```
    #[must_use = "builder methods return the changed builder; dropping it drops the setting"]
    #[track_caller]
    pub fn max_pending(self, n: usize) -> Self {
        ReceiverBuilder {
            config: self.config.max_pending(n),
            ..self
        }
    }

    /// Registers the receiver. It starts empty (unless
    /// [`snapshot`](Self::snapshot)) and sees only sends that happen after this
    /// returns; born closed if the send side is already closed. Takes the hub
    /// mutex once; allocates the receiver's wake-up primitive; a snapshot
    /// receiver also copies the table under the mutex (O(keys)).
    #[must_use = "a receiver is registered at once and deregistered when dropped; keep it to receive"]
    pub fn build(self) -> Receiver<K, V> {
        let registration = self.shared.register(self.config);
        Receiver::new(self.shared, registration)
    }
}
