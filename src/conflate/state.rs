//! The hub's linearizing state word.
//!
//! One `AtomicU64` decides every question that must have a single answer across
//! threads without a lock:
//!
//! ```text
//!  63          62           61 ..= 43          42 ..= 24          23        22         21       20 ..= 0
//! [TX_CLOSED] [HUB_CLOSED] [in flight on 1] [in flight on 0] [CURRENT] [QUIESCE] [RETAIN] [live receivers]
//! ```
//!
//! - **No-receiver fast path**: a send loads the word once; no live receiver and
//!   no state table (`RETAIN` clear) means `Ok(())` with nothing else touched
//!   but the sent count. Both are tested with one mask, so a hub without a table
//!   pays nothing for the table's existence.
//! - **Snapshot registration** (`QUIESCE`): a registrar building a receiver from
//!   the state table sets `QUIESCE` (under the registry writer lock), waits until
//!   no send is in flight, copies the table into the new receiver, registers it
//!   and clears the bit. A send does not enter while the bit is set, and entering
//!   is a compare-and-swap on this word, so every send is wholly before the
//!   registration (its table update is copied, and it never reaches the new
//!   receiver) or wholly after it (it reaches the receiver, and its table update
//!   is not in the copy). Only a hub with `RETAIN` can ever set the bit.
//! - **Close versus send**: a send *enters* with one compare-and-swap that adds
//!   it to the in-flight count of the `CURRENT` receiver list; the CAS only
//!   succeeds on a word without `TX_CLOSED`. A send that entered publishes and
//!   returns `Ok`; `Sender::close` (a `fetch_or` of `TX_CLOSED`) comes after it in
//!   the word's modification order. A send that saw `TX_CLOSED` returns `Err` and
//!   publishes nothing. There is no third outcome.
//! - **Drained**: a receiver is finished after a graceful close only when it sees
//!   `TX_CLOSED` with *no sender in flight* and nothing pending. A send that passed
//!   the check but has not reached the receiver yet keeps the in-flight count raised,
//!   so the receiver cannot report `Closed` early (docs/design.md, "Close versus send"). The
//!   sender that takes the count to zero after a close wakes every receiver.
//! - **Which receiver list a send reads** (see `registry.rs`): there are two view
//!   slots (array, length) of the receiver array; `CURRENT` names the one new
//!   sends use, and each slot has its own in-flight count. A registry writer
//!   writes the other slot's view, flips `CURRENT` in the same word, and may only
//!   overwrite a view again, or free or reuse what it named, once its slot's
//!   count is zero: a grace period, as in RCU, counted by the word every send
//!   already touches.

use crate::hub_word::{HubWord, HUB_CLOSED, TX_CLOSED};
use crate::sync::{spin_wait, AtomicU64, Ordering};

const RECEIVER_MASK: u64 = (1 << 21) - 1;
/// The most live receivers one hub counts.
pub(crate) const MAX_RECEIVERS: u64 = RECEIVER_MASK;
const RETAIN: u64 = 1 << 21;
const QUIESCE: u64 = 1 << 22;
const CURRENT: u64 = 1 << 23;
const SENDER_SHIFT: [u32; 2] = [24, 43];
const SENDER_MAX: u64 = (1 << 19) - 1;

/// A decoded copy of the state word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Snapshot(u64);

impl HubWord for Snapshot {
    const RECEIVER_MASK: u64 = RECEIVER_MASK;

    #[inline]
    fn bits(self) -> u64 {
        self.0
    }
}

impl Snapshot {
    /// No live receiver and no state table: a send has nothing to do.
    #[inline]
    pub(crate) fn idle(self) -> bool {
        self.0 & (RECEIVER_MASK | RETAIN) == 0
    }

    /// A snapshot registration holds sends off.
    pub(crate) fn quiescing(self) -> bool {
        self.0 & QUIESCE != 0
    }

    /// The receiver-list slot new sends read.
    pub(crate) fn current(self) -> usize {
        usize::from(self.0 & CURRENT != 0)
    }

    pub(crate) fn in_flight(self, slot: usize) -> u64 {
        (self.0 >> SENDER_SHIFT[slot]) & SENDER_MAX
    }

    pub(crate) fn senders_in_flight(self) -> u64 {
        self.in_flight(0) + self.in_flight(1)
    }

    /// The send side is closed and no send can still publish: what a receiver sees
    /// now is everything it will ever get.
    pub(crate) fn quiescent_closed(self) -> bool {
        self.tx_closed() && self.senders_in_flight() == 0
    }
}

/// What [`HubState::enter_send`] decided.
pub(crate) enum Entered {
    /// The send side is closed: publish nothing, return `Err`.
    Closed,
    /// No live receiver and no state table: nothing to publish, return `Ok`.
    NoReceivers,
    /// In flight on this receiver-list slot: publish, then `leave_send(slot)`.
    InFlight(usize),
    /// A snapshot registration holds sends off: call
    /// [`HubState::wait_quiesced`], then `enter_send` again. Only a hub with a
    /// table can answer this.
    Quiescing,
}

pub(crate) struct HubState(AtomicU64);

impl HubState {
    /// `retain`: the hub keeps a state table, so every send enters (it has the
    /// table to update even with no receiver). Fixed for the hub's life.
    pub(crate) fn new(retain: bool) -> Self {
        HubState(AtomicU64::new(if retain { RETAIN } else { 0 }))
    }

    /// Acquire pairs with the Release of `flip_list` (a sender that sees a
    /// receiver counted also sees the list that holds it) and with the Release of
    /// `leave_send` (a receiver that sees no sender in flight sees everything those
    /// senders published).
    #[inline]
    pub(crate) fn load(&self) -> Snapshot {
        Snapshot(self.0.load(Ordering::Acquire))
    }

    /// Decides a send, starting from `seen` (a fresh `load`). On `InFlight(slot)`
    /// the caller must publish and then call [`leave_send`](Self::leave_send) with
    /// that slot exactly once (a drop guard does).
    ///
    /// The CAS is the single point in the word's modification order that orders
    /// this send against `close_tx` and against a list flip. AcqRel on success:
    /// Acquire for the reasons in `load`; Release is not needed by readers but
    /// costs nothing extra on an RMW. Acquire on failure: the retry decides on the
    /// word it just read.
    pub(crate) fn enter_send(&self, mut seen: Snapshot) -> Entered {
        loop {
            if seen.tx_closed() {
                return Entered::Closed;
            }
            if seen.idle() {
                return Entered::NoReceivers;
            }
            if seen.quiescing() {
                // A snapshot registration is copying the table: the caller
                // waits (`wait_quiesced`) and decides afresh.
                return Entered::Quiescing;
            }
            let slot = seen.current();
            assert!(
                seen.in_flight(slot) < SENDER_MAX,
                "too many sends in flight"
            );
            let entered = seen.0 + (1 << SENDER_SHIFT[slot]);
            match self
                .0
                .compare_exchange_weak(seen.0, entered, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Entered::InFlight(slot),
                Err(now) => seen = Snapshot(now),
            }
        }
    }

    /// Ends a send that entered on `slot`. Returns `true` when this was the last
    /// send in flight after the send side closed: the caller must wake every
    /// receiver, whose drain may now be complete.
    ///
    /// Release: everything this send published into receivers (and every read of
    /// the receiver list in `slot`) happens-before an Acquire load that sees the
    /// count drop: a receiver's drain check, or a registry writer's grace period.
    pub(crate) fn leave_send(&self, slot: usize) -> bool {
        let prev = Snapshot(self.0.fetch_sub(1 << SENDER_SHIFT[slot], Ordering::Release));
        prev.tx_closed() && prev.senders_in_flight() == 1
    }

    /// Closes the send side. AcqRel: one point in the modification order against
    /// every `enter_send`.
    pub(crate) fn close_tx(&self) {
        self.0.fetch_or(TX_CLOSED, Ordering::AcqRel);
    }

    /// Waits, holding nothing, until no snapshot registration holds sends off;
    /// returns the word that says so.
    pub(crate) fn wait_quiesced(&self) -> Snapshot {
        spin_wait(|| !self.load().quiescing());
        self.load()
    }

    /// Holds new sends off (see the module docs). The caller holds the registry
    /// writer lock (so at most one registrar quiesces at a time) and must call
    /// [`unquiesce`](Self::unquiesce), on every path, panics included.
    ///
    /// AcqRel: the RMW puts the bit at one point in the word's modification
    /// order; every `enter_send` CAS before it is counted in flight (the
    /// registrar then waits for it), every one after it fails on the changed
    /// word and sees the bit.
    pub(crate) fn quiesce(&self) {
        let before = Snapshot(self.0.fetch_or(QUIESCE, Ordering::AcqRel));
        debug_assert!(!before.quiescing(), "one registrar at a time");
        debug_assert!(before.0 & RETAIN != 0, "only a hub with a table quiesces");
    }

    /// Lets sends enter again. Release: a send that enters after seeing the bit
    /// clear (its CAS reads this value or a later one) sees the new receiver
    /// list, seeded with the table, and flipped before this.
    pub(crate) fn unquiesce(&self) {
        self.0.fetch_and(!QUIESCE, Ordering::AcqRel);
    }

    /// Hard close: the send side and the hub.
    pub(crate) fn close_hub(&self) {
        self.0.fetch_or(TX_CLOSED | HUB_CLOSED, Ordering::AcqRel);
    }

    /// Makes the other list slot current and sets the receiver count to
    /// `receivers` (the live receivers in its view), in one step. Only the
    /// registry writer (under its lock) calls this, after writing the other
    /// slot's view. Release pairs
    /// with the Acquire of `enter_send` / `load`: a sender that sees the new
    /// `CURRENT` sees the list stored there.
    pub(crate) fn flip_list(&self, receivers: u64) {
        assert!(receivers <= RECEIVER_MASK, "too many receivers on one hub");
        let mut seen = self.0.load(Ordering::Relaxed);
        loop {
            let next = ((seen ^ CURRENT) & !RECEIVER_MASK) | receivers;
            match self
                .0
                .compare_exchange_weak(seen, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(now) => seen = now,
            }
        }
    }
}
