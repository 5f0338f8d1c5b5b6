//! A lock-free receiver's two close flags, the same for both kinds
//! (own-value and cell receivers): its own close, and the send side's, which
//! the receiver is told of after the hub's state word (docs/design.md, "Close
//! versus send").

use crate::sync::{AtomicBool, Notify, Ordering};

pub(crate) struct CloseFlags {
    closed: AtomicBool,
    /// Set (after the hub's state word) when the send side closes, so an idle
    /// consumer polls this read-mostly line instead of the state word every
    /// send writes.
    tx_closed: AtomicBool,
}

impl CloseFlags {
    pub(crate) fn new() -> Self {
        CloseFlags {
            closed: AtomicBool::new(false),
            tx_closed: AtomicBool::new(false),
        }
    }

    /// Marks the receiver closed; `true` the first time. AcqRel: Release
    /// publishes what led to the close to whoever sees the flag (`is_closed`);
    /// Acquire orders a later closer after the first.
    pub(crate) fn close(&self) -> bool {
        !self.closed.swap(true, Ordering::AcqRel)
    }

    /// Acquire pairs with the Release in `close`: whoever sees the flag also
    /// sees the hub-side state that led to it.
    #[inline]
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// [`CloseFlags::is_closed`] for a caller that only skips work on it, and
    /// checks again (Acquire) before anything a stale `false` would break.
    #[inline]
    pub(crate) fn is_closed_relaxed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// Whether the send side closed. Acquire pairs with the Release in
    /// `mark_tx_closed`.
    #[inline]
    pub(crate) fn tx_closed(&self) -> bool {
        self.tx_closed.load(Ordering::Acquire)
    }

    /// Tells the consumer the send side closed, and wakes it (`notify`: the
    /// receiver's).
    pub(crate) fn mark_tx_closed(&self, notify: &Notify) {
        self.tx_closed.store(true, Ordering::Release);
        notify.notify(usize::MAX);
    }
}

/// A lock-free receiver (either kind), by its close flags and the `Notify`
/// its consumer parks on: the close calls written once for both kinds.
pub(crate) trait Closing {
    fn close_flags(&self) -> &CloseFlags;
    fn close_notify(&self) -> &Notify;

    /// Marks the receiver closed; `true` the first time.
    fn close(&self) -> bool {
        self.close_flags().close()
    }

    fn is_closed(&self) -> bool {
        self.close_flags().is_closed()
    }

    fn tx_closed(&self) -> bool {
        self.close_flags().tx_closed()
    }

    /// Tells the consumer the send side closed, and wakes it.
    fn mark_tx_closed(&self) {
        self.close_flags().mark_tx_closed(self.close_notify());
    }
}
