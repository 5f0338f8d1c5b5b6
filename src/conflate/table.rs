//! The hub's state table (`retain_latest`): per key, the hub's merge of every
//! accepted send, in first-touch order.
//!
//! Sharded like a receiver (`SHARDS` mutex-guarded hash tables, chosen by the
//! send's one hash), so senders of different keys rarely meet. Each entry carries
//! its *first-touch number*, taken from one counter only when the key enters the
//! table (a key that was removed and comes back gets a new number, so it sorts
//! at the back); a snapshot sorts by it.
//!
//! A send updates the table inside its in-flight window (between `enter_send`
//! and `leave_send`), in one critical section of one shard. Hence:
//!
//! - [`Table::snapshot`] locks every shard, in index order, before copying any:
//!   while it holds them all, no update is half done anywhere, so the copy is
//!   the table at one instant. Two entries' first-touch numbers compare like
//!   their insertions: an insertion the snapshot sees released its shard before
//!   the snapshot locked it, and one it does not see locked its shard after the
//!   snapshot released it, so the first took its number before the second.
//! - A snapshot registration reads the table with no send in flight at all
//!   (see `state.rs`, `QUIESCE`), so the table cannot change under it.

use super::core::shard_index;
use super::slab::SHARDS;
use crate::policy::Merge;
use crate::sync::{lock, AtomicU64, Mutex, Ordering};
use crossbeam_utils::CachePadded;
use hashbrown::hash_table::HashTable;
use std::panic::{self, AssertUnwindSafe};

struct Entry<K, V> {
    key: K,
    hash: u64,
    /// First-touch number: snapshots list entries in ascending order.
    order: u64,
    /// `None` only while the merge runs (the value is moved into it).
    value: Option<V>,
}

type TableShard<K, V> = CachePadded<Mutex<HashTable<Entry<K, V>>>>;

pub(crate) struct Table<K, V> {
    shards: Box<[TableShard<K, V>]>,
    /// The next first-touch number. Taken (one `fetch_add`) only when a key
    /// enters the table, never on a send that updates a present key.
    next_order: AtomicU64,
}

impl<K, V> Table<K, V> {
    pub(crate) fn new() -> Self {
        Table {
            shards: (0..SHARDS)
                .map(|_| CachePadded::new(Mutex::new(HashTable::new())))
                .collect(),
            next_order: AtomicU64::new(0),
        }
    }
}

impl<K: Eq + Clone, V: Clone> Table<K, V> {
    /// Folds one accepted send into the table with the hub's `merge`. Called by
    /// a send in flight, before its fan-out. `None` removes the key. A panicking
    /// merge removes the key too (its value was moved into the merge), and the
    /// panic continues once the shard is consistent.
    pub(crate) fn update(&self, hash: u64, key: &K, value: &V, merge: &Merge<V>) {
        let mut shard = lock(&self.shards[shard_index(hash)]);
        match shard.find_entry(hash, |e| e.key == *key) {
            Err(absent) => {
                // Clones first: a panicking clone changes nothing.
                let (key, value) = (key.clone(), value.clone());
                // Relaxed: the number only has to be unique and increase along
                // the happens-before order of insertions; the RMW's modification
                // order gives both (see the module docs).
                let order = self.next_order.fetch_add(1, Ordering::Relaxed);
                absent.into_table().insert_unique(
                    hash,
                    Entry {
                        key,
                        hash,
                        order,
                        value: Some(value),
                    },
                    |e| e.hash,
                );
            }
            Ok(mut present) => {
                let next = value.clone();
                let entry = present.get_mut();
                if let Merge::NewerWins = merge {
                    // In place: no user code but `V`'s drop (an assignment
                    // re-initializes its place if that unwinds).
                    entry.value = Some(next);
                    return;
                }
                let prev = entry.value.take().expect("a present entry has a value");
                match panic::catch_unwind(AssertUnwindSafe(|| merge.apply(prev, next))) {
                    Ok(Some(merged)) => entry.value = Some(merged),
                    Ok(None) => drop(present.remove()),
                    Err(payload) => {
                        drop(present.remove());
                        drop(shard);
                        panic::resume_unwind(payload);
                    }
                }
            }
        }
    }

    /// The value of `key`, if present. One shard lock, one clone.
    pub(crate) fn get(&self, hash: u64, key: &K) -> Option<V> {
        let shard = lock(&self.shards[shard_index(hash)]);
        shard
            .find(hash, |e| e.key == *key)
            .and_then(|e| e.value.clone())
    }

    /// Every entry as `(hash, key, value)`, in first-touch order, as of one
    /// instant: every shard is locked (in index order, the only place that
    /// holds more than one) before the first is read.
    pub(crate) fn snapshot(&self) -> Vec<(u64, K, V)> {
        let guards: Vec<_> = self.shards.iter().map(|s| lock(s)).collect();
        let mut out: Vec<(u64, u64, K, V)> = Vec::new();
        for shard in &guards {
            out.reserve(shard.len());
            for e in shard.iter() {
                if let Some(v) = &e.value {
                    out.push((e.order, e.hash, e.key.clone(), v.clone()));
                }
            }
        }
        drop(guards);
        out.sort_unstable_by_key(|&(order, ..)| order);
        out.into_iter().map(|(_, h, k, v)| (h, k, v)).collect()
    }
}
