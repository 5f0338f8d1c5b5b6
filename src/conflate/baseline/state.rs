//! The hub's state word: both closed bits and the live-receiver count in one
//! `AtomicU64`, so the send path decides "closed? anybody listening?" with one load.

use crate::conflate::common::hub_word::{HubWord, HUB_CLOSED, TX_CLOSED};
use crate::sync::{AtomicU64, Ordering};

/// Layout of the word:
///
/// | bits   | meaning                                                        |
/// |--------|----------------------------------------------------------------|
/// | 63     | `TX_CLOSED`: the send side is closed (by either close kind)    |
/// | 62     | `HUB_CLOSED`: [`Hub::close_now`](super::Hub::close_now) ran             |
/// | 0..=61 | live receivers: registered, not closed, not yet deregistered   |
///
/// Every write happens with the hub mutex held, so the word never changes under
/// a thread that holds the mutex; the only lock-free reader is the send path.
pub(super) struct HubState(AtomicU64);

/// One observed value of the [`HubState`] word.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Word(u64);

const RECEIVER_MASK: u64 = HUB_CLOSED - 1;

impl HubWord for Word {
    const RECEIVER_MASK: u64 = RECEIVER_MASK;

    #[inline]
    fn bits(self) -> u64 {
        self.0
    }
}

impl HubState {
    pub(super) fn new() -> Self {
        HubState(AtomicU64::new(0))
    }

    /// The send path's one load, taken without the hub mutex.
    ///
    /// Acquire pairs with the Release of every locked transition below: a sender
    /// that is told "closed" or "nobody listening" also sees everything the closing
    /// or deregistering thread did before that transition, as with any channel.
    /// Correctness of the bus itself does not hang on it: every answer other than
    /// those two is re-decided under the mutex.
    pub(super) fn load(&self) -> Word {
        Word(self.0.load(Ordering::Acquire))
    }

    /// A read by a thread holding the hub mutex. Relaxed is enough: every write
    /// happens under that mutex, whose acquisition orders them before this read.
    pub(super) fn load_locked(&self) -> Word {
        Word(self.0.load(Ordering::Relaxed))
    }

    /// One more live receiver. Caller holds the hub mutex and saw the send side
    /// open. Release publishes the registration to the send path's Acquire load.
    pub(super) fn register_locked(&self) {
        self.0.fetch_add(1, Ordering::Release);
    }

    /// One fewer live receiver. Caller holds the hub mutex and just removed a
    /// registered receiver, so the count is at least one.
    pub(super) fn deregister_locked(&self) {
        self.0.fetch_sub(1, Ordering::Release);
    }

    /// Graceful close. Caller holds the hub mutex. Returns whether this call closed
    /// the send side (false: it was already closed, by either kind).
    pub(super) fn close_send_locked(&self) -> bool {
        let before = Word(self.0.fetch_or(TX_CLOSED, Ordering::Release));
        !before.tx_closed()
    }

    /// Hard close. Caller holds the hub mutex and deregisters every receiver in
    /// the same critical section, hence the count of zero. Returns whether this
    /// call did it (false: `Hub::close` already ran).
    pub(super) fn close_hub_locked(&self) -> bool {
        let before = Word(self.0.swap(TX_CLOSED | HUB_CLOSED, Ordering::Release));
        !before.hub_closed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transitions_keep_count_and_bits_apart() {
        let s = HubState::new();
        assert_eq!(s.load().receivers(), 0);
        s.register_locked();
        s.register_locked();
        s.deregister_locked();
        assert_eq!(s.load().receivers(), 1);
        assert!(!s.load().tx_closed());
        assert!(s.close_send_locked());
        assert!(!s.close_send_locked());
        assert!(s.load().tx_closed() && !s.load().hub_closed());
        assert_eq!(s.load().receivers(), 1);
        assert!(s.close_hub_locked());
        assert!(!s.close_hub_locked());
        let w = s.load();
        assert!(w.tx_closed() && w.hub_closed());
        assert_eq!(w.receivers(), 0);
    }
}
