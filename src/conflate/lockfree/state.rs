//! The hub's state word, `HubState`: the closed bits, `QUIESCE`, `RETAIN` and
//! the live receiver count that every send loads once, the one place that
//! decides close versus send (docs/design.md, "The state word").

use crate::conflate::common::hub_word::{HubWord, HUB_CLOSED, TX_CLOSED};
use crate::sync::{spin_wait, AtomicU64, Ordering};

const RECEIVER_MASK: u64 = (1 << 21) - 1;
const RETAIN: u64 = 1 << 60;
const QUIESCE: u64 = 1 << 61;

/// A decoded copy of the state word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Word(u64);

impl HubWord for Word {
    const RECEIVER_MASK: u64 = RECEIVER_MASK;

    #[inline]
    fn bits(self) -> u64 {
        self.0
    }
}

impl Word {
    /// No live receiver and no state table: a send has nothing to do.
    #[inline]
    pub(crate) fn idle(self) -> bool {
        self.0 & (RECEIVER_MASK | RETAIN) == 0
    }

    /// Open and idle: a send only counts itself (rule 4). One test of the
    /// word for both, so the no-receiver path is one compare and branch.
    #[inline]
    pub(crate) fn open_and_idle(self) -> bool {
        self.0 & (TX_CLOSED | RECEIVER_MASK | RETAIN) == 0
    }

    /// A send that entered may publish: not closed, not idle, not
    /// quiescing (one test of the word for the path every send takes;
    /// `Sender::held_off` sorts out the rest).
    #[inline]
    pub(crate) fn publishes(self) -> bool {
        self.0 & (TX_CLOSED | QUIESCE) == 0 && !self.idle()
    }

    /// A snapshot registration holds sends off.
    #[inline]
    pub(crate) fn quiescing(self) -> bool {
        self.0 & QUIESCE != 0
    }
}

/// The state word:
///
/// ```text
///  63          62           61        60       59 ..= 21   20 ..= 0
/// [TX_CLOSED] [HUB_CLOSED] [QUIESCE] [RETAIN] [unused]    [live receivers]
/// ```
pub(crate) struct HubState(AtomicU64);

impl HubState {
    /// `retain`: the hub keeps a state table, so every send enters (it has the
    /// table to update even with no receiver). Fixed for the hub's life.
    pub(crate) fn new(retain: bool) -> Self {
        HubState(AtomicU64::new(if retain { RETAIN } else { 0 }))
    }

    /// Acquire pairs with the Release of `add_receiver` (a sender that sees a
    /// receiver counted also sees the list that holds it) and of the closes.
    #[inline]
    pub(crate) fn load(&self) -> Word {
        Word(self.0.load(Ordering::Acquire))
    }

    /// Closes the send side. AcqRel: one point in the word's modification
    /// order; the caller then runs `barrier::heavy` before it looks at any
    /// stripe.
    pub(crate) fn close_tx(&self) {
        self.0.fetch_or(TX_CLOSED, Ordering::AcqRel);
    }

    /// Hard close: the send side and the hub.
    pub(crate) fn close_hub(&self) {
        self.0.fetch_or(TX_CLOSED | HUB_CLOSED, Ordering::AcqRel);
    }

    /// Counts one more live receiver (under the registry writer lock, after it
    /// is listed). Release: a send that sees the count sees the list entry.
    pub(crate) fn add_receiver(&self) {
        let before = self.0.fetch_add(1, Ordering::AcqRel);
        assert!(
            before & RECEIVER_MASK < RECEIVER_MASK,
            "too many receivers on one hub"
        );
    }

    /// Counts one live receiver less (under the registry writer lock).
    pub(crate) fn remove_receiver(&self) {
        let before = self.0.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(before & RECEIVER_MASK > 0, "a receiver was counted");
    }

    /// Zeroes the count (hard close, under the writer lock).
    pub(crate) fn clear_receivers(&self) {
        self.0.fetch_and(!RECEIVER_MASK, Ordering::AcqRel);
    }

    /// Waits, holding nothing, until no snapshot registration holds sends off.
    pub(crate) fn wait_quiesced(&self) {
        spin_wait(|| !self.load().quiescing());
    }

    /// Holds new sends off (docs/design.md, "Snapshot registration is one
    /// instant"). The caller holds the
    /// registry writer lock and must call [`unquiesce`](Self::unquiesce) on
    /// every path, panics included. AcqRel: one point in the word's order; the
    /// caller then waits for the sends in flight.
    pub(crate) fn quiesce(&self) {
        let before = Word(self.0.fetch_or(QUIESCE, Ordering::AcqRel));
        debug_assert!(!before.quiescing(), "one registrar at a time");
    }

    /// Lets sends in again. Release: a send that sees the bit clear sees the
    /// new receiver, seeded and listed before this.
    pub(crate) fn unquiesce(&self) {
        self.0.fetch_and(!QUIESCE, Ordering::AcqRel);
    }
}
