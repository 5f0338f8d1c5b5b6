//! [`ReceiverWatch`]: a read-only view of one receiver for other threads.
//!
//! It holds the receiver's shared part (an own-value receiver's core, or a
//! cell receiver's queue side) and the hub's shared state, and reads the same
//! counters [`Receiver::stats`](super::Receiver::stats) reads: the per-shard
//! counters sends write, the consumer's counts (`Consumed`, which only the
//! consumer writes) and, for a cell receiver, the consumer's published head
//! (`Queue::for_each_seen`). Nothing here is written by a send for the
//! watch's sake.
//!
//! The argument: `docs/design.md`, "Accounting".

use super::cell_rx::CellRx;
use super::close_flags::Closing;
use super::core::RxCore;
use super::shared::Shared;
use super::solo::Solo;
use crate::conflate::common::hub_word::HubWord;
use crate::conflate::common::stats::ReceiverStats;
use crate::sync::Arc;
use std::fmt;

/// A read-only view of one [`Receiver`](super::Receiver), from
/// [`Receiver::watch`](super::Receiver::watch): its stats, its name and
/// whether it is closed, for a task that does not own the receiver (an
/// operator's alerting loop, a metrics exporter).
///
/// `Clone + Send + Sync`; a clone is one reference count. Watching costs a
/// send nothing. The watch outlives its receiver (it then reports the final
/// stats, and closed) and does not keep the send side open.
///
/// ```
/// use keybus::conflate::Hub;
///
/// let hub: Hub<u32, u32> = Hub::new();
/// let tx = hub.sender();
/// let mut slow = hub.receiver_builder().name("slow").build();
/// let watch = slow.watch();
/// for k in 0..100 {
///     tx.send(k % 10, k).unwrap();
/// }
/// let alert = std::thread::spawn(move || {
///     let s = watch.stats();
///     (s.pending, s.pending_sends) // 10 keys behind, folding 100 sends
/// });
/// assert_eq!(alert.join().unwrap(), (10, 100));
/// assert_eq!(slow.try_recv_all().unwrap().len(), 10);
/// ```
pub struct ReceiverWatch<K, V> {
    inner: Arc<Watched<K, V>>,
}

struct Watched<K, V> {
    shared: Arc<Shared<K, V>>,
    target: Target<K, V>,
}

/// The receiver's shared part, by kind.
pub(crate) enum Target<K, V> {
    Own(Arc<RxCore<K, V>>),
    /// With its solo part if it was registered the hub's sole receiver (the
    /// watch holds it: the hub may retire it while the watch lives).
    Cells(Arc<CellRx>, Option<Arc<Solo<K, V>>>),
}

impl<K, V> ReceiverWatch<K, V> {
    pub(crate) fn new(shared: Arc<Shared<K, V>>, target: Target<K, V>) -> Self {
        ReceiverWatch {
            inner: Arc::new(Watched { shared, target }),
        }
    }

    /// The receiver's accounting, as [`Receiver::stats`](super::Receiver::stats)
    /// returns it: the same counters, read from this thread. Exact whenever no
    /// send, receive or close is running; while they run, the fields may lag
    /// each other (never with `pending_sends` underflowing), and the
    /// conservation law holds once they are done.
    ///
    /// Never blocks a sender: lock-free loads (for a receiver of every key
    /// with the hub's newer-wins merge, a walk of its pending entries,
    /// O(pending keys), during which its consumer waits only if it reaches
    /// the end of one of its queue's blocks or starts a `try_recv_all`).
    pub fn stats(&self) -> ReceiverStats {
        match &self.inner.target {
            Target::Own(core) => core.stats(),
            Target::Cells(rx, solo) => rx.current_stats(solo.as_deref(), &self.inner.shared.cells),
        }
    }

    /// The name given with
    /// [`ReceiverBuilder::name`](super::ReceiverBuilder::name), if any.
    pub fn name(&self) -> Option<&str> {
        match &self.inner.target {
            Target::Own(core) => core.name.as_deref(),
            Target::Cells(rx, _) => rx.name.as_deref(),
        }
    }

    /// The receiver's number on its hub ([`ReceiverInfo::id`](crate::ReceiverInfo::id)).
    pub fn id(&self) -> u64 {
        match &self.inner.target {
            Target::Own(core) => core.id,
            Target::Cells(rx, _) => rx.serial,
        }
    }

    /// Whether the receiver's next receive would report closed, as
    /// [`Receiver::is_closed`](super::Receiver::is_closed): it was closed or
    /// dropped, the hub was closed hard, or the send side closed and nothing
    /// is left to deliver.
    pub fn is_closed(&self) -> bool {
        let shared = &*self.inner.shared;
        let (closed, tx_closed) = match &self.inner.target {
            Target::Own(core) => (core.is_closed(), core.tx_closed()),
            Target::Cells(rx, _) => (rx.is_closed(), rx.tx_closed()),
        };
        closed
            || shared.state.load().hub_closed()
            || (tx_closed && shared.quiescent_closed() && self.stats().pending == 0)
    }
}

impl<K, V> Clone for ReceiverWatch<K, V> {
    fn clone(&self) -> Self {
        ReceiverWatch {
            inner: self.inner.clone(),
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
