//! What every handle of one hub shares: the state word, the receiver registry, the
//! hasher and the hub's default merge.

use super::core::RxCore;
use super::state::HubState;
use crate::policy::Merge;
use crate::sync::{lock, Arc, AtomicUsize, Mutex, Ordering, Snapshot};
use std::hash::{BuildHasher, Hash};

/// The live receivers, in registration order (the fan-out order).
///
/// Senders read the list through an `arc-swap` snapshot: no lock, and a receiver
/// deregistered mid-fan-out stays alive (the snapshot's `Arc`) until that send is
/// done (DESIGN-NOTES conflate 5). Registration and deregistration copy the list
/// under `writer`, which no send ever takes.
pub(crate) type ReceiverList<K, V> = Vec<Arc<RxCore<K, V>>>;

/// The hasher: seeded per hub, so colliding keys cannot be precomputed. Under loom
/// loom and shuttle it is fixed, because a model must run the same way on every
/// schedule (and replay from its seed).
#[cfg(not(any(loom, shuttle)))]
pub(crate) type HashState = foldhash::fast::RandomState;
#[cfg(any(loom, shuttle))]
pub(crate) type HashState = foldhash::fast::FixedState;

struct Writer {
    /// Set by `Hub::close`: receivers made afterwards are born closed.
    closed: bool,
}

pub(crate) struct Shared<K, V> {
    pub(crate) state: HubState,
    receivers: Snapshot<ReceiverList<K, V>>,
    writer: Mutex<Writer>,
    hasher: HashState,
    pub(crate) merge: Merge<V>,
    /// `Hub` and `Sender` handles alive; the last one to drop closes the send side.
    handles: AtomicUsize,
}

impl<K, V> Shared<K, V> {
    pub(crate) fn new(merge: Merge<V>) -> Self {
        Shared {
            state: HubState::new(),
            receivers: Snapshot::new(std::sync::Arc::new(Vec::new())),
            writer: Mutex::new(Writer { closed: false }),
            hasher: HashState::default(),
            merge,
            handles: AtomicUsize::new(1),
        }
    }

    /// The key's hash, computed once per send and reused for every receiver's shard
    /// choice and table probe (DESIGN-NOTES conflate 7).
    pub(crate) fn hash(&self, key: &K) -> u64
    where
        K: Hash,
    {
        self.hasher.hash_one(key)
    }

    pub(crate) fn with_receivers<R>(&self, f: impl FnOnce(&[Arc<RxCore<K, V>>]) -> R) -> R {
        f(&self.receivers.load())
    }

    /// Adds a receiver, unless the hub or the send side is closed (then it is
    /// born closed: nothing could ever reach it).
    pub(crate) fn register(&self, core: &Arc<RxCore<K, V>>) {
        let w = lock(&self.writer);
        // Under the writer lock: `close_tx` marks every registered receiver under
        // it too, so a receiver either is born closed or gets marked.
        if w.closed || self.state.load().tx_closed() {
            core.close();
            return;
        }
        let mut list = ReceiverList::clone(&self.receivers.load());
        list.push(core.clone());
        self.receivers.store(std::sync::Arc::new(list));
        // After the store: a sender that sees the count sees the receiver.
        self.state.add_receiver();
    }

    pub(crate) fn deregister(&self, core: &RxCore<K, V>) {
        let _w = lock(&self.writer);
        let current = self.receivers.load();
        let Some(pos) = current.iter().position(|c| std::ptr::eq(&**c, core)) else {
            return; // already gone (hub closed, or deregistered before)
        };
        let mut list = ReceiverList::clone(&current);
        drop(current);
        list.remove(pos);
        self.receivers.store(std::sync::Arc::new(list));
        self.state.remove_receivers(1);
    }

    /// Wakes every registered receiver (a close happened, or the last send in
    /// flight after a close finished).
    pub(crate) fn wake_all(&self) {
        for core in self.receivers.load().iter() {
            core.notify.notify(usize::MAX);
        }
    }

    pub(crate) fn close_tx(&self) {
        self.state.close_tx();
        let _w = lock(&self.writer);
        for core in self.receivers.load().iter() {
            core.mark_tx_closed();
        }
    }

    /// Hard close: the send side and every receiver, now; nothing drains.
    pub(crate) fn close_hub(&self) {
        self.state.close_hub();
        let old = {
            let mut w = lock(&self.writer);
            w.closed = true;
            let old = self.receivers.load().clone();
            self.receivers.store(std::sync::Arc::new(Vec::new()));
            self.state.remove_receivers(old.len() as u64);
            old
        };
        for core in old.iter() {
            core.close();
            core.clear();
        }
    }

    pub(crate) fn acquire_handle(&self) {
        // Relaxed: like `Arc::clone`, a new handle is made from an existing one,
        // which keeps the count above zero meanwhile.
        self.handles.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn release_handle(&self) {
        // AcqRel: the last release must see every other handle's work done.
        if self.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.close_tx();
        }
    }
}
