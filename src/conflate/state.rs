//! The hub's linearizing state word.
//!
//! One `AtomicU64` decides every question that must have a single answer across
//! threads without a lock:
//!
//! ```text
//!  63          62           61 ..= 32              31 ..= 0
//! [TX_CLOSED] [HUB_CLOSED] [senders in flight: 30] [live receivers: 32]
//! ```
//!
//! - **No-receiver fast path**: a send loads the word once; no live receiver means
//!   `Ok(())` with nothing else touched.
//! - **Close versus send**: a send *enters* with one `fetch_add` of a sender; if the
//!   word it replaced already had `TX_CLOSED`, the send backs out and returns `Err`,
//!   publishing nothing. Otherwise it is in flight, and `Sender::close` (a `fetch_or`
//!   of `TX_CLOSED`) was ordered after it in the word's modification order, so the
//!   send publishes and returns `Ok`. There is no third outcome.
//! - **Drained**: a receiver is finished after a graceful close only when it sees
//!   `TX_CLOSED` with *no sender in flight* and nothing pending. A send that passed
//!   the check but has not reached the receiver yet keeps the in-flight count raised,
//!   so the receiver cannot report `Closed` early (DESIGN-NOTES conflate 3). The
//!   sender that takes the count to zero after a close wakes every receiver.

use crate::sync::{AtomicU64, Ordering};

const RECEIVER: u64 = 1;
const RECEIVER_MASK: u64 = (1 << 32) - 1;
const SENDER: u64 = 1 << 32;
const SENDER_MASK: u64 = ((1 << 30) - 1) << 32;
const HUB_CLOSED: u64 = 1 << 62;
const TX_CLOSED: u64 = 1 << 63;

/// A decoded copy of the state word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Snapshot(u64);

impl Snapshot {
    pub(crate) fn tx_closed(self) -> bool {
        self.0 & TX_CLOSED != 0
    }

    pub(crate) fn hub_closed(self) -> bool {
        self.0 & HUB_CLOSED != 0
    }

    pub(crate) fn senders_in_flight(self) -> u64 {
        (self.0 & SENDER_MASK) >> 32
    }

    pub(crate) fn receivers(self) -> u64 {
        self.0 & RECEIVER_MASK
    }

    /// The send side is closed and no send can still publish: what a receiver sees
    /// now is everything it will ever get.
    pub(crate) fn quiescent_closed(self) -> bool {
        self.tx_closed() && self.senders_in_flight() == 0
    }
}

pub(crate) struct HubState(AtomicU64);

impl HubState {
    pub(crate) fn new() -> Self {
        HubState(AtomicU64::new(0))
    }

    /// Acquire pairs with the Release in `add_receiver`: a sender that sees a
    /// receiver counted also sees it in the registry snapshot. It also pairs with the
    /// Release of `leave_send`, so a receiver that sees no sender in flight sees
    /// everything those senders published.
    #[inline]
    pub(crate) fn load(&self) -> Snapshot {
        Snapshot(self.0.load(Ordering::Acquire))
    }

    /// Registers a send in flight and returns the word it replaced. Whatever that
    /// says, the caller must call [`leave_send`](Self::leave_send) exactly once (a
    /// drop guard does); it publishes only if the word had no `TX_CLOSED` and at
    /// least one receiver.
    ///
    /// AcqRel: Acquire for the same reason as [`load`](Self::load); the RMW is the
    /// single point in the word's modification order that decides this send against
    /// `close_tx`.
    pub(crate) fn enter_send(&self) -> Snapshot {
        let prev = Snapshot(self.0.fetch_add(SENDER, Ordering::AcqRel));
        debug_assert!(
            prev.senders_in_flight() < (SENDER_MASK >> 32),
            "sender overflow"
        );
        prev
    }

    /// Ends a send. Returns `true` when this was the last send in flight after the
    /// send side closed: the caller must wake every receiver, whose drain may now be
    /// complete.
    ///
    /// Release: everything this send published into receivers happens-before a
    /// receiver's Acquire load that sees the count drop.
    pub(crate) fn leave_send(&self) -> bool {
        let prev = Snapshot(self.0.fetch_sub(SENDER, Ordering::Release));
        prev.tx_closed() && prev.senders_in_flight() == 1
    }

    /// Closes the send side. Returns `true` the first time.
    pub(crate) fn close_tx(&self) -> bool {
        !Snapshot(self.0.fetch_or(TX_CLOSED, Ordering::AcqRel)).tx_closed()
    }

    /// Hard close: the send side and the hub. Returns `true` the first time.
    pub(crate) fn close_hub(&self) -> bool {
        !Snapshot(self.0.fetch_or(TX_CLOSED | HUB_CLOSED, Ordering::AcqRel)).hub_closed()
    }

    /// Release: the registry snapshot that holds the new receiver was stored before
    /// this, and a sender's Acquire `load` that sees the count must see it.
    pub(crate) fn add_receiver(&self) {
        let prev = self.0.fetch_add(RECEIVER, Ordering::Release);
        assert!(
            prev & RECEIVER_MASK != RECEIVER_MASK,
            "too many receivers on one hub"
        );
    }

    pub(crate) fn remove_receivers(&self, n: u64) {
        if n > 0 {
            self.0.fetch_sub(n * RECEIVER, Ordering::Release);
        }
    }
}
