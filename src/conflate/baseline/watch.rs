//! [`ReceiverWatch`]: a read-only view of one baseline receiver for other
//! threads (its stats, name and whether it is closed).

use super::shared::RxCounters;
use crate::conflate::common::stats::ReceiverStats;
use crate::sync::{Arc, Ordering};
use std::fmt;

/// A read-only view of one [`Receiver`](super::Receiver), from
/// [`Receiver::watch`](super::Receiver::watch): its stats, name and whether it
/// is closed, for a task that does not own it.
///
/// `Clone + Send + Sync`; a clone is one reference count. It outlives its
/// receiver (then reporting the final stats, and closed) and does not keep
/// the send side open.
pub struct ReceiverWatch<K, V> {
    counters: Arc<RxCounters>,
    values: std::marker::PhantomData<fn() -> (K, V)>,
}

impl<K, V> ReceiverWatch<K, V> {
    pub(super) fn new(counters: Arc<RxCounters>) -> Self {
        ReceiverWatch {
            counters,
            values: std::marker::PhantomData,
        }
    }

    /// The receiver's accounting, as
    /// [`Receiver::stats`](super::Receiver::stats) returns it: the same
    /// counters, lock-free loads; never blocks a sender.
    pub fn stats(&self) -> ReceiverStats {
        self.counters.read()
    }

    /// The name given with [`ReceiverBuilder::name`](super::ReceiverBuilder::name), if any.
    pub fn name(&self) -> Option<&str> {
        self.counters.name.as_deref()
    }

    /// The receiver's number on its hub ([`ReceiverInfo::id`](crate::ReceiverInfo::id)).
    pub fn id(&self) -> u64 {
        self.counters.id
    }

    /// Whether the receiver's next receive would answer `Closed`: closed,
    /// dropped or torn down, or the send side closed and nothing is pending.
    /// Lock-free loads (Acquire, pairing with the Release stores made under
    /// the hub mutex).
    pub fn is_closed(&self) -> bool {
        let c = &*self.counters;
        c.closed.load(Ordering::Acquire)
            || (c.tx_closed.load(Ordering::Acquire) && self.stats().pending == 0)
    }
}

impl<K, V> Clone for ReceiverWatch<K, V> {
    fn clone(&self) -> Self {
        ReceiverWatch {
            counters: self.counters.clone(),
            values: std::marker::PhantomData,
        }
    }
}

impl<K, V> fmt::Debug for ReceiverWatch<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReceiverWatch")
            .field("id", &self.id())
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}
