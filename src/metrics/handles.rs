//! The per-key handles `metrics` asks a recorder for, and the map that keeps one
//! handle per key and kind.
//!
//! No atomic protocol of its own: plain `std` read-write locks around hash tables,
//! and the conflate [`Sender`] for the updates. Nothing here runs under the model
//! checkers (the `metrics` feature is not built with them).

use super::update::{CounterUpdate, GaugeUpdate, Summary, Update};
use crate::conflate::Sender;
use hashbrown::HashTable;
use metrics::{CounterFn, GaugeFn, HistogramFn, Key};
use std::sync::{Arc, PoisonError, RwLock};

/// What `register_counter`, `register_gauge` and `register_histogram` hand out
/// (one type serves the three kinds; each `metrics` wrapper calls only its own
/// trait). It owns everything an update needs, so an update is one send: the key
/// is cloned (retained at registration, so that clone copies no string and
/// allocates nothing: static parts are copied, owned parts are reference counted)
/// and the value is a `Copy` type.
pub(crate) struct Handle {
    key: Key,
    tx: Sender<Key, Update>,
}

impl Handle {
    #[inline]
    fn send(&self, update: Update) {
        // Err only once the recorder was closed: updates after that go nowhere,
        // like those recorded into a dropped exporter.
        let _ = self.tx.send(self.key.clone(), update);
    }
}

impl CounterFn for Handle {
    #[inline]
    fn increment(&self, value: u64) {
        self.send(Update::Counter(CounterUpdate::increment(value)));
    }

    #[inline]
    fn absolute(&self, value: u64) {
        self.send(Update::Counter(CounterUpdate::absolute(value)));
    }
}

impl GaugeFn for Handle {
    #[inline]
    fn increment(&self, value: f64) {
        self.send(Update::Gauge(GaugeUpdate::Add(value)));
    }

    #[inline]
    fn decrement(&self, value: f64) {
        self.send(Update::Gauge(GaugeUpdate::Add(-value)));
    }

    #[inline]
    fn set(&self, value: f64) {
        self.send(Update::Gauge(GaugeUpdate::Set(value)));
    }
}

impl HistogramFn for Handle {
    #[inline]
    fn record(&self, value: f64) {
        self.send(Update::Histogram(Summary::of(value, 1)));
    }

    fn record_many(&self, value: f64, count: usize) {
        if count > 0 {
            self.send(Update::Histogram(Summary::of(value, count as u64)));
        }
    }
}

/// Shards per map: registration through the macros looks a handle up on every
/// call, so readers of different keys should not share one lock word.
const SHARDS: usize = 16;

/// One shard of a [`HandleMap`]: the handles whose key hashes to it.
type Shard = RwLock<HashTable<(Key, Arc<Handle>)>>;

/// One handle per key, for one kind. Handles live as long as the recorder (the
/// key set bounds them), like the registries of `metrics` exporters.
pub(crate) struct HandleMap {
    shards: [Shard; SHARDS],
}

impl HandleMap {
    pub(crate) fn new() -> Self {
        HandleMap {
            shards: std::array::from_fn(|_| RwLock::new(HashTable::new())),
        }
    }

    /// The handle of `key`, made on first use. The common case (the key is known)
    /// takes a shared lock on one shard, compares keys and clones an `Arc`: it
    /// allocates nothing. `Key`'s hash is computed once, when the key is built
    /// (at compile time for the macros' static keys), and used as is here.
    #[inline]
    pub(crate) fn get_or_insert(&self, key: &Key, tx: &Sender<Key, Update>) -> Arc<Handle> {
        let hash = key.get_hash();
        // The table indexes with the low bits and tags with the top seven: shard
        // on bits in between.
        let shard = &self.shards[(hash >> 32) as usize % SHARDS];
        {
            let table = shard.read().unwrap_or_else(PoisonError::into_inner);
            if let Some((_, h)) = table.find(hash, |(k, _)| k == key) {
                return h.clone();
            }
        }
        self.insert_slow(shard, hash, key, tx)
    }

    #[cold]
    fn insert_slow(
        &self,
        shard: &Shard,
        hash: u64,
        key: &Key,
        tx: &Sender<Key, Update>,
    ) -> Arc<Handle> {
        let mut table = shard.write().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, h)) = table.find(hash, |(k, _)| k == key) {
            return h.clone();
        }
        let key = key.to_retained();
        let handle = Arc::new(Handle {
            key: key.clone(),
            tx: tx.clone(),
        });
        table.insert_unique(hash, (key, handle.clone()), |(k, _)| k.get_hash());
        handle
    }

    /// Handles made so far.
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.read().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }
}
