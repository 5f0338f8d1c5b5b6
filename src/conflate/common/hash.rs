//! The key hasher of both conflate implementations: one hash per send, reused
//! for every receiver's shard choice and probe (`docs/design.md`, "One hash
//! per send").

use std::hash::{BuildHasher, Hash};

/// The hasher's state: seeded per hub, so colliding keys cannot be
/// precomputed. Under loom and shuttle it is fixed, because a model must run
/// the same way on every schedule (and replay from its seed).
#[cfg(not(any(loom, shuttle)))]
type HashState = foldhash::fast::RandomState;
#[cfg(any(loom, shuttle))]
type HashState = foldhash::fast::FixedState;

/// One hub's key hasher.
#[derive(Default)]
pub(crate) struct KeyHasher(HashState);

impl KeyHasher {
    /// The key's hash. `K: Hash` is user code: callers run it before they
    /// lock or change anything.
    #[inline]
    pub(crate) fn hash<K: Hash + ?Sized>(&self, key: &K) -> u64 {
        self.0.hash_one(key)
    }
}
