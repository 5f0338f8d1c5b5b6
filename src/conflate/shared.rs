//! What every handle of one hub shares: the state word, the receiver registry, the
//! hasher and the hub's default merge.

use super::core::RxCore;
use super::registry::{ListWriter, Listed, Registry};
use super::state::HubState;
use super::table::Table;
use crate::error::SendError;
use crate::hub_word::HubWord;
use crate::policy::{KeyFilter, Merge};
use crate::reentrancy::{forbid_inside_send, SendScope};
use crate::stats::{HubStats, SentCounter};
use crate::sync::{lock, spin_wait, Arc, AtomicU64, AtomicUsize, Mutex, Ordering};
use std::hash::{BuildHasher, Hash};

/// The hasher: seeded per hub, so colliding keys cannot be precomputed. Under
/// loom and shuttle it is fixed, because a model must run the same way on every
/// schedule (and replay from its seed).
#[cfg(not(any(loom, shuttle)))]
pub(crate) type HashState = foldhash::fast::RandomState;
#[cfg(any(loom, shuttle))]
pub(crate) type HashState = foldhash::fast::FixedState;

#[cfg(test)]
thread_local! {
    /// Acquisitions of any hub's writer lock on this thread (tests only).
    pub(crate) static WRITER_LOCKS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The registry writer's lock: serializes register, deregister and the closes'
/// walks over the list. No send ever takes it.
struct Writer<K, V> {
    /// Set by `Hub::close`: receivers made afterwards are born closed.
    closed: bool,
    /// The registry's writer side (its array, length and index). Dropped with
    /// the hub's shared state, it takes back the registry's count of every core
    /// still listed (receivers dropped inside a send stay listed).
    list: ListWriter<K, V>,
}

pub(crate) struct Shared<K, V> {
    pub(crate) state: HubState,
    pub(crate) registry: Registry<K, V>,
    writer: Mutex<Writer<K, V>>,
    hasher: HashState,
    pub(crate) merge: Merge<V>,
    /// `Hub` and `Sender` handles alive; the last one to drop closes the send side.
    handles: AtomicUsize,
    /// The state table, with `retain_latest` only (the state word's `RETAIN`
    /// bit says the same to the send path, in the word it loads anyway).
    pub(crate) table: Option<Table<K, V>>,
    /// Accepted sends.
    pub(crate) sent: SentCounter,
    /// Refused sends (rare: one shared counter).
    refused: AtomicU64,
}

/// Clears `QUIESCE` when a snapshot registration ends, also by a panic in the
/// user code it runs (key filter, clones), so sends can never stay held off.
struct Unquiesce<'a>(&'a HubState);

impl Drop for Unquiesce<'_> {
    fn drop(&mut self) {
        self.0.unquiesce();
    }
}

impl<K, V> Shared<K, V> {
    pub(crate) fn new(merge: Merge<V>, retain: bool) -> Self {
        Shared {
            state: HubState::new(retain),
            registry: Registry::new(),
            writer: Mutex::new(Writer {
                closed: false,
                list: ListWriter::new(),
            }),
            hasher: HashState::default(),
            merge,
            handles: AtomicUsize::new(1),
            table: retain.then(Table::new),
            sent: SentCounter::new(),
            refused: AtomicU64::new(0),
        }
    }

    /// A refused send: counted, key and value handed back.
    #[cold]
    pub(crate) fn refuse(&self, key: K, value: V) -> Result<(), SendError<K, V>> {
        // Relaxed: a count; nothing is published through it.
        self.refused.fetch_add(1, Ordering::Relaxed);
        Err(SendError { key, value })
    }

    /// The hub's accounting; lock-free loads only.
    pub(crate) fn stats(&self) -> HubStats {
        HubStats {
            sent: self.sent.read(),
            refused: self.refused.load(Ordering::Relaxed),
            receivers: self.state.load().receivers(),
        }
    }

    /// The hub-wide lock (registry writers only). Tests count its acquisitions
    /// to show that no send takes it.
    fn lock_writer(&self) -> crate::sync::MutexGuard<'_, Writer<K, V>> {
        #[cfg(test)]
        WRITER_LOCKS.with(|n| n.set(n.get() + 1));
        lock(&self.writer)
    }

    /// The key's hash, computed once per send and reused for every receiver's shard
    /// choice and table probe (docs/design.md, "One hash per send").
    pub(crate) fn hash(&self, key: &K) -> u64
    where
        K: Hash,
    {
        self.hasher.hash_one(key)
    }

    /// Runs `f` on the registry's writer side under the writer lock (tests).
    #[cfg(test)]
    pub(crate) fn with_list_writer<R>(&self, f: impl FnOnce(&ListWriter<K, V>) -> R) -> R {
        f(&self.lock_writer().list)
    }

    /// Runs `f` on the receiver list under the writer lock.
    fn with_list_locked<R>(&self, f: impl FnOnce(Listed<'_, K, V>) -> R) -> R {
        let w = self.lock_writer();
        f(w.list.listed())
    }

    /// Adds a receiver, unless the hub or the send side is closed (then it is
    /// born closed: nothing could ever reach it).
    pub(crate) fn register(&self, core: &Arc<RxCore<K, V>>) {
        forbid_inside_send(self, "Hub::receiver (ReceiverBuilder::build)");
        let mut w = self.lock_writer();
        // Under the writer lock: `close_tx` marks every registered receiver under
        // it too, so a receiver either is born closed or gets marked.
        if w.closed || self.state.load().tx_closed() {
            core.close();
            return;
        }
        self.registry.register(&mut w.list, &self.state, core);
    }

    /// Registers a receiver born with the state table pending (rule 12), as one
    /// instant against every send: sends are held off (`QUIESCE`) and drained,
    /// the table (which only sends in flight change) is copied into `core`,
    /// `core` is registered, and sends resume. A send is thus either in the
    /// copy and never reaches `core`, or reaches `core` and is not in the copy.
    ///
    /// Senders stall meanwhile for O(table) clones plus the key filter over the
    /// table: the price of the instant, paid only by hubs with a table and only
    /// while a snapshot receiver registers.
    pub(crate) fn register_snapshot(
        &self,
        core: &Arc<RxCore<K, V>>,
        filter: &KeyFilter<K>,
        limit: usize,
    ) where
        K: Eq + Clone,
        V: Clone,
    {
        forbid_inside_send(self, "Hub::receiver (ReceiverBuilder::build)");
        let mut w = self.lock_writer();
        if w.closed || self.state.load().tx_closed() {
            core.close();
            return;
        }
        let table = self
            .table
            .as_ref()
            .expect("ReceiverBuilder::snapshot checked that the hub keeps a table");
        self.state.quiesce();
        let _resume = Unquiesce(&self.state);
        // Acquire (in `load`) pairs with each send's Release `leave_send`: once
        // the count reads zero, every table update of a send that entered
        // before the quiesce happens-before the copy below.
        spin_wait(|| self.state.load().senders_in_flight() == 0);
        {
            // The clones and the filter are user code: a call back into this
            // hub from them would wait for this registration (a send spins on
            // QUIESCE, the others need the writer lock); make it panic instead.
            let _scope = SendScope::enter(self);
            let entries = table.snapshot();
            core.seed(
                entries
                    .into_iter()
                    .filter(|(_, key, _)| filter.accepts(key))
                    .take(limit),
            );
        }
        self.registry.register(&mut w.list, &self.state, core);
        // `_resume` clears QUIESCE (after the flip: a send that enters then
        // reads the list with `core` in it), then the writer lock is released.
    }

    pub(crate) fn deregister(&self, core: &RxCore<K, V>) {
        let released = {
            let mut w = self.lock_writer();
            self.registry.deregister(&mut w.list, &self.state, core)
        };
        // The registry's count, dropped outside the lock (the caller holds
        // another, so nothing is freed here in practice).
        drop(released);
    }

    /// Wakes every registered receiver: the last send in flight after a close
    /// finished, so a drain may be complete. Takes the writer lock (the caller is
    /// no longer in flight, so the list must be read under it); rare.
    pub(crate) fn wake_all(&self) {
        self.with_list_locked(|list| {
            for core in list.iter() {
                core.notify.notify(usize::MAX);
            }
        });
    }

    pub(crate) fn close_tx(&self) {
        forbid_inside_send(self, "Sender::close");
        self.state.close_tx();
        self.with_list_locked(|list| {
            for core in list.iter() {
                core.mark_tx_closed();
            }
        });
    }

    /// Hard close: the send side and every receiver, now; nothing drains.
    pub(crate) fn close_hub(&self) {
        forbid_inside_send(self, "Hub::close");
        self.state.close_hub();
        let old = {
            let mut w = self.lock_writer();
            w.closed = true;
            self.registry.clear(&mut w.list, &self.state)
        };
        for core in &old {
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
