//! [`Hub`], the construction handle, and [`ReceiverBuilder`].

use super::receiver::Receiver;
use super::sender::{SendSide, Sender};
use super::shared::Shared;
use crate::policy::{Merge, ReceiverConfig};
use crate::sync::Arc;
use std::fmt;
use std::hash::Hash;

/// The construction handle of one conflate bus: mints [`Sender`]s and
/// [`Receiver`]s, and can tear the whole bus down.
///
/// Cheap to clone (one reference count), `Send + Sync`. A `Hub` counts as a
/// send handle: the send side closes gracefully when every `Hub` clone and every
/// [`Sender`] is dropped.
pub struct Hub<K, V> {
    side: Arc<SendSide<K, V>>,
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
        let word = self.side.shared.state.load();
        f.debug_struct("Hub")
            .field("send_closed", &word.send_closed())
            .field("hub_closed", &word.hub_closed())
            .field("receivers", &word.live())
            .finish()
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
    pub fn new() -> Self {
        Self::from_merge(Merge::NewerWins)
    }

    /// A hub whose receivers coalesce with `merge(pending, incoming)`: `Some`
    /// keeps the slot with that value, `None` annihilates it (the key leaves
    /// the queue with no residue). A receiver may override it with
    /// [`ReceiverBuilder::merge`].
    ///
    /// `merge` runs under the hub mutex on the send path: it must not call back
    /// into this bus (that would deadlock) and should be short. Allocates the
    /// shared state; never blocks.
    pub fn with_merge<F>(merge: F) -> Self
    where
        F: Fn(V, V) -> Option<V> + Send + Sync + 'static,
    {
        Self::from_merge(Merge::With(std::sync::Arc::new(merge)))
    }

    fn from_merge(merge: Merge<V>) -> Self {
        Hub {
            side: Arc::new(SendSide {
                shared: Arc::new(Shared::new(merge)),
            }),
        }
    }

    /// A handle to the send side (the same one on every call). One reference
    /// count; never blocks.
    pub fn sender(&self) -> Sender<K, V> {
        Sender {
            side: self.side.clone(),
        }
    }

    /// A receiver for every key with the hub's merge. It starts empty: it sees
    /// only sends that happen after this call returns. Born closed if the send
    /// side is already closed. Takes the hub mutex once.
    pub fn receiver(&self) -> Receiver<K, V> {
        self.receiver_builder().build()
    }

    /// A builder for a receiver with its own key filter and/or merge.
    /// Allocates nothing until [`ReceiverBuilder::build`].
    pub fn receiver_builder(&self) -> ReceiverBuilder<K, V> {
        ReceiverBuilder {
            shared: self.side.shared.clone(),
            config: ReceiverConfig::default(),
        }
    }
}

impl<K, V> Hub<K, V> {
    #[cfg(test)]
    pub(super) fn side_shared(&self) -> &Shared<K, V> {
        &self.side.shared
    }

    /// Hard close: the send side and every receiver close now. Nothing drains:
    /// pending values are dropped and every receive answers `Closed`; receivers
    /// made afterwards are born closed. Idempotent; safe to race with `send`
    /// (the send returns `Ok` or `Err`, and is delivered to all receivers or
    /// none before they are torn down).
    ///
    /// Takes the hub mutex once; O(receivers), and the dropped values are
    /// dropped after the mutex is released.
    pub fn close(&self) {
        self.side.shared.close_hub();
    }

    /// Whether [`Hub::close`] has run. One atomic load; never blocks.
    pub fn is_closed(&self) -> bool {
        self.side.shared.state.load().hub_closed()
    }
}

/// Configures one receiver: which keys it takes and how it coalesces.
///
/// Built by [`Hub::receiver_builder`]; finish with [`ReceiverBuilder::build`].
/// The builder does not hold the send side open.
pub struct ReceiverBuilder<K, V> {
    shared: Arc<Shared<K, V>>,
    config: ReceiverConfig<K, V>,
}

impl<K, V> fmt::Debug for ReceiverBuilder<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReceiverBuilder")
            .field("filter", &self.config.filter)
            .field("merge", &self.config.merge)
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
    pub fn merge<F>(self, merge: F) -> Self
    where
        F: Fn(V, V) -> Option<V> + Send + Sync + 'static,
    {
        ReceiverBuilder {
            config: self.config.merge(merge),
            ..self
        }
    }

    /// Registers the receiver. It starts empty and sees only sends that happen
    /// after this returns; born closed if the send side is already closed.
    /// Takes the hub mutex once; allocates the receiver's wake-up primitive.
    pub fn build(self) -> Receiver<K, V> {
        let registration = self.shared.register(self.config);
        Receiver::new(self.shared, registration)
    }
}
