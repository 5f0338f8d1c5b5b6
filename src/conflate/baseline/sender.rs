//! The send side: [`Sender`], and the handle count that closes it on drop.

use super::shared::Shared;
use crate::conflate::common::hub_word::HubWord;
use crate::error::SendError;
use crate::sync::Arc;
use std::fmt;
use std::hash::Hash;

/// One reference to the send side. Every [`Hub`](super::Hub) and [`Sender`]
/// clone shares one of these; when the last goes, the send side closes
/// gracefully, as if [`Sender::close`] had been called. Receivers hold the
/// [`Shared`] state directly, so they never keep the send side open.
pub(super) struct SendSide<K, V> {
    pub(super) shared: Arc<Shared<K, V>>,
}

impl<K, V> Drop for SendSide<K, V> {
    fn drop(&mut self) {
        self.shared.close_send();
    }
}

/// A handle to the hub's one send side.
///
/// Cheap to clone (one reference count), `Send + Sync`: share it or clone it
/// across threads. Every clone, and the [`Hub`](super::Hub) itself, is the same
/// send side: closing through one closes it for all. When every `Sender` and
/// every `Hub` handle is dropped, the send side closes gracefully.
pub struct Sender<K, V> {
    pub(super) side: Arc<SendSide<K, V>>,
}

impl<K, V> Clone for Sender<K, V> {
    fn clone(&self) -> Self {
        Sender {
            side: self.side.clone(),
        }
    }
}

impl<K, V> fmt::Debug for Sender<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.side.shared.state.load().fmt_handle(f, "Sender")
    }
}

impl<K, V> Sender<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
{
    /// Publishes `value` under `key` to every live receiver whose key filter
    /// accepts it. Never blocks (beyond waiting for the hub mutex, see below).
    ///
    /// At each receiver, in registration order: if `key` is pending, the
    /// receiver's merge folds `value` into the slot and the key keeps its queue
    /// position (`None` from the merge removes the key); otherwise the key is
    /// appended at the back of that receiver's queue.
    ///
    /// # Errors
    ///
    /// [`SendError`] (with the key and value) once the send side is closed by
    /// [`Sender::close`], [`Hub::close_now`](super::Hub::close_now), or by dropping every
    /// send handle. A send racing `Sender::close` either returns `Ok` and is
    /// delivered by every receiver before its `Closed`, or returns `Err` and
    /// published nothing.
    ///
    /// # Panics
    ///
    /// If a key filter or merge panics, the panic propagates out of this call
    /// after the bus has been left consistent; see the module docs, "Panics in
    /// user code".
    ///
    /// # Cost
    ///
    /// With no live receiver, one atomic load: no lock, no hashing, `Ok(())`
    /// (or `Err` if closed). Otherwise one hash of `key`, then the hub mutex for
    /// the whole fan-out: per receiver a filter check and a hash lookup; a
    /// coalescing send allocates nothing, an appending one may grow that
    /// receiver's slab. `key` and `value` are cloned for every accepting
    /// receiver except the last, which takes them by move.
    pub fn send(&self, key: K, value: V) -> Result<(), SendError<K, V>> {
        self.side.shared.send(key, value)
    }
}

impl<K, V> Sender<K, V> {
    /// Closes the send side gracefully: later sends fail, and every receiver
    /// still delivers what is pending for it, then answers `Closed` (and
    /// deregisters). Idempotent; a no-op after [`Hub::close_now`](super::Hub::close_now).
    ///
    /// Does not block beyond taking the hub mutex once; O(receivers).
    pub fn close(&self) {
        self.side.shared.close_send();
    }

    /// Whether the send side is closed (by either close kind). One atomic
    /// load; never blocks.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.side.shared.state.load().tx_closed()
    }
}
