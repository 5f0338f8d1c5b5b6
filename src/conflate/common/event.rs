//! [`Event`], what a conflate receiver of either implementation delivers.
//!
//! The argument: `docs/design.md`, "Conflate rules".

/// One delivery from a [`conflate`](crate::conflate) receiver: the latest merged
/// value of `key`, and how many sends were merged into it.
///
/// `sends` is 1 when nothing was coalesced. A value skipped by coalescing is thus
/// visible as a count, never hidden: `sends - 1` sends were folded into this one.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Event<K, V> {
    /// The key the value was sent under.
    pub key: K,
    /// The slot's merged value at the moment it was taken.
    pub value: V,
    /// How many sends were merged into this delivery since the key became pending.
    pub sends: u64,
}

impl<K, V> Event<K, V> {
    pub(crate) fn new(key: K, value: V, sends: u64) -> Self {
        Event { key, value, sends }
    }
}
