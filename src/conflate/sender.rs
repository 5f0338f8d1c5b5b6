//! The send side: a cheap handle, lock-free up to one receiver's key shard.

use super::shared::Shared;
use super::state::{Entered, Snapshot};
use crate::error::SendError;
use crate::hub_word::HubWord;
use crate::reentrancy::SendScope;
use crate::sync::Arc;
use std::fmt;
use std::hash::Hash;

/// The send side of a [`Hub`](super::Hub): a cheap `Clone` handle, `Send + Sync`.
///
/// Every clone is a handle to the one send side; closing any of them closes it.
/// The send side also closes, gracefully, when the hub and every `Sender` are
/// dropped.
pub struct Sender<K, V> {
    pub(crate) shared: Arc<Shared<K, V>>,
}

/// Ends one send in flight, also when user code panics out of the fan-out, so the
/// in-flight count can never stay raised (docs/design.md, "Panics in user code").
struct InFlight<'a, K, V> {
    shared: &'a Shared<K, V>,
    slot: usize,
}

impl<K, V> Drop for InFlight<'_, K, V> {
    fn drop(&mut self) {
        if self.shared.state.leave_send(self.slot) {
            self.shared.wake_all();
        }
    }
}

impl<K, V> Sender<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
{
    /// Sends `value` under `key` to every live receiver. Never blocks.
    ///
    /// For a receiver with `key` pending, the value merges into that slot (the key
    /// keeps its queue position); otherwise the key is appended at the back. With
    /// no live receiver this is one atomic load of the hub's state plus a count in a
    /// slot its thread owns (no read-modify-write, under 1 ns), and returns `Ok(())`.
    ///
    /// Cost: one hash, then per receiver one uncontended-in-the-common-case shard
    /// lock; a key that was not pending also takes the receiver's queue lock and
    /// clones the key twice. A send that coalesces allocates nothing. The value is
    /// cloned once per receiver but the last.
    ///
    /// # Errors
    /// [`SendError`] with the key and value when the send side is closed; nothing
    /// was published.
    ///
    /// # Panics
    /// If a receiver's key filter or merge panics, the panic propagates here after
    /// the bus was repaired (see the [module docs](super#panics-in-user-code)).
    #[inline]
    pub fn send(&self, key: K, value: V) -> Result<(), SendError<K, V>> {
        // The no-receiver fast path: one Acquire load, inlined into the caller.
        let now = self.shared.state.load();
        if now.tx_closed() {
            return self.shared.refuse(key, value);
        }
        if now.idle() {
            self.shared.sent.add();
            return Ok(());
        }
        self.fan_out(key, value, now)
    }

    /// The send proper, out of line so the fast path above stays small.
    #[inline(never)]
    fn fan_out(&self, key: K, value: V, seen: Snapshot) -> Result<(), SendError<K, V>> {
        let shared = &*self.shared;
        let mut seen = seen;
        let slot = loop {
            match shared.state.enter_send(seen) {
                Entered::Closed => return shared.refuse(key, value),
                Entered::NoReceivers => {
                    shared.sent.add();
                    return Ok(());
                }
                Entered::InFlight(slot) => break slot,
                Entered::Quiescing => {
                    // User code of a snapshot registration on this thread (its
                    // key filter, a clone) would wait for itself: panic instead.
                    crate::reentrancy::forbid_inside_send(shared, "Sender::send");
                    seen = shared.state.wait_quiesced();
                }
            }
        };
        shared.sent.add();
        let _in_flight = InFlight { shared, slot };
        // Dropped before `_in_flight`, whose drop may take the registry lock.
        let _scope = SendScope::enter(shared);
        let hash = shared.hash(&key);
        if let Some(table) = &shared.table {
            // Inside the in-flight window, before any receiver: a snapshot
            // registration (which waits for no send in flight) sees this
            // update exactly when this send does not reach its receiver. A
            // panicking hub merge removes the key and reaches no receiver.
            table.update(hash, &key, &value, &shared.merge);
        }
        // SAFETY: this send is in flight on `slot` until `_in_flight` drops, after
        // the last use of `receivers`.
        let receivers = unsafe { shared.registry.list(slot) };
        if let Some((last, rest)) = receivers.split_last() {
            // The list may hold holes (receivers that left): `iter` skips them.
            for core in rest.iter() {
                core.deliver(hash, &key, value.clone());
            }
            last.deliver(hash, &key, value);
        }
        Ok(())
    }

    /// Closes the send side gracefully: every receiver still delivers everything
    /// pending, then reports closed. Idempotent; never blocks.
    pub fn close(&self) {
        self.shared.close_tx();
    }

    /// Whether the send side is closed (by [`close`](Self::close), by
    /// [`Hub::close`](super::Hub::close), or by dropping every hub and sender).
    pub fn is_closed(&self) -> bool {
        self.shared.state.load().tx_closed()
    }
}

impl<K, V> Clone for Sender<K, V> {
    fn clone(&self) -> Self {
        self.shared.acquire_handle();
        Sender {
            shared: self.shared.clone(),
        }
    }
}

impl<K, V> Drop for Sender<K, V> {
    fn drop(&mut self) {
        self.shared.release_handle();
    }
}

impl<K, V> fmt::Debug for Sender<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.shared.state.load().fmt_handle(f, "Sender")
    }
}
