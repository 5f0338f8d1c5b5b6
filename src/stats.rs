//! Accounting shared by both `conflate` implementations: the public
//! [`ReceiverStats`] and [`HubStats`], and the counters behind them.
//!
//! Every counter here is written by one thread at a time (under a lock the
//! writer holds anyway: a plain load and store, no read-modify-write); the
//! hub's `sent` count lives in per-thread stripes (`conflate/stripes.rs`).
//! Readers never take a lock, so a stats read never blocks a sender.

use crate::sync::{AtomicU64, Ordering};

/// What became of the sends that reached one receiver, from
/// [`Receiver::stats`](crate::conflate::Receiver::stats).
///
/// Every send that reached the receiver past its key filter is in exactly one
/// of `folded`, `annihilated`, `overflowed`, `dropped` or `pending_sends`, so
/// whenever no send is in flight:
///
/// ```text
/// received == folded + annihilated + overflowed + dropped + pending_sends
/// ```
///
/// Read while sends run, the fields may lag each other (each is exact for some
/// recent instant, and `received` is read last, so the right-hand side never
/// exceeds it); once the sends have finished (their threads joined, or their
/// effects otherwise observed) the law holds exactly.
///
/// ```
/// use keybus::conflate::Hub;
///
/// let hub = Hub::with_merge(|a: i64, b: i64| Some(a + b).filter(|s| *s != 0));
/// let tx = hub.sender();
/// let mut rx = hub.receiver_builder().key_filter(|k: &&str| *k != "debug").build();
/// tx.send("cpu", 1).unwrap();
/// tx.send("cpu", 2).unwrap(); // folded into the pending "cpu"
/// tx.send("mem", 5).unwrap();
/// tx.send("mem", -5).unwrap(); // sums to zero: annihilated, with the send before it
/// tx.send("debug", 1).unwrap(); // rejected by the filter
/// let cpu = rx.recv().unwrap();
/// assert_eq!(cpu.sends, 2);
///
/// let s = rx.stats();
/// assert_eq!((s.received, s.filtered), (4, 1));
/// assert_eq!((s.delivered, s.folded, s.annihilated), (1, 2, 2));
/// assert_eq!((s.pending, s.pending_sends), (0, 0));
/// assert_eq!(
///     s.received,
///     s.folded + s.annihilated + s.overflowed + s.dropped + s.pending_sends
/// );
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct ReceiverStats {
    /// Sends that reached this receiver past its key filter.
    pub received: u64,
    /// Sends its key filter rejected.
    pub filtered: u64,
    /// Events taken by any receive method.
    pub delivered: u64,
    /// The sum of [`Event::sends`](crate::Event::sends) over the delivered events.
    pub folded: u64,
    /// Sends removed by a merge returning `None`: the annihilating send and every
    /// send folded into the value it removed.
    pub annihilated: u64,
    /// Sends refused because the receiver already had `max_pending` keys pending.
    pub overflowed: u64,
    /// Sends folded into values that were dropped undelivered: by closing this
    /// receiver (or dropping it), by a hard close of the hub, or by a panicking
    /// merge (which also drops the panicking send).
    pub dropped: u64,
    /// Keys pending now.
    pub pending: u64,
    /// Sends folded into the values pending now (a snapshot entry folds none).
    pub pending_sends: u64,
}

/// The send side's accounting, from
/// [`Hub::stats`](crate::conflate::Hub::stats).
///
/// ```
/// use keybus::conflate::Hub;
///
/// let hub: Hub<u32, u32> = Hub::new();
/// let tx = hub.sender();
/// tx.send(1, 1).unwrap(); // no receiver: accepted all the same
/// let _rx = hub.receiver();
/// tx.send(2, 2).unwrap();
/// tx.close();
/// assert!(tx.send(3, 3).is_err());
///
/// let s = hub.stats();
/// assert_eq!((s.sent, s.refused, s.receivers), (2, 1, 1));
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct HubStats {
    /// Sends accepted (not refused), with or without a receiver. A send whose
    /// user code panicked counts here too: it was accepted before it ran.
    pub sent: u64,
    /// Sends that returned `Err` because the send side was closed.
    pub refused: u64,
    /// Receivers live now: registered, not closed, not yet deregistered.
    pub receivers: u64,
}

impl ReceiverStats {
    /// Builds the public value from counters read in the order `Counted::read`
    /// documents: `pending_sends` is what `received` has not yet accounted for.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn derived(
        received: u64,
        filtered: u64,
        delivered: u64,
        folded: u64,
        annihilated: u64,
        overflowed: u64,
        dropped: u64,
        pending: u64,
    ) -> Self {
        ReceiverStats {
            received,
            filtered,
            delivered,
            folded,
            annihilated,
            overflowed,
            dropped,
            pending,
            pending_sends: 0,
        }
        .with_pending_sends()
    }

    /// Fills in `pending_sends`: what `received` has not yet accounted for.
    pub(crate) fn with_pending_sends(self) -> Self {
        let settled = self.folded + self.annihilated + self.overflowed + self.dropped;
        ReceiverStats {
            // `received` is read after the counters it bounds, so this does not
            // underflow (see the readers); saturate rather than wrap if a future
            // change broke that.
            pending_sends: self.received.saturating_sub(settled),
            ..self
        }
    }
}

/// Adds `n` to a counter that only one thread writes at a time (the writer holds
/// the lock that guards what the counter describes). A plain load and store, no
/// read-modify-write. Release: a reader that Acquire-loads this value also sees
/// every store made before it in the same critical section (notably `received`,
/// which writers store first and readers load last).
#[inline]
pub(crate) fn bump(counter: &AtomicU64, n: u64) {
    let now = counter.load(Ordering::Relaxed);
    counter.store(now + n, Ordering::Release);
}
