//! What the two conflate state words (lock-free and baseline) share: both
//! closed bits at the top of one `u64`, a receiver count at the bottom, and
//! how a `Hub` or `Sender` handle prints them. The bits in between are each
//! implementation's own (docs/design.md, "The state word").

use std::fmt;

/// The send side is closed (by either close kind).
pub(crate) const TX_CLOSED: u64 = 1 << 63;
/// `Hub::close` ran: every receiver was torn down, new ones are born closed.
pub(crate) const HUB_CLOSED: u64 = 1 << 62;

/// One observed value of a conflate hub's state word.
pub(crate) trait HubWord: Copy {
    /// The bits that count live receivers.
    const RECEIVER_MASK: u64;

    /// The word's raw value.
    fn bits(self) -> u64;

    /// Sends fail: `Sender::close`, `Hub::close`, or every send handle dropped.
    #[inline]
    fn tx_closed(self) -> bool {
        self.bits() & TX_CLOSED != 0
    }

    /// `Hub::close` ran.
    #[inline]
    fn hub_closed(self) -> bool {
        self.bits() & HUB_CLOSED != 0
    }

    /// Receivers registered and not yet deregistered.
    #[inline]
    fn receivers(self) -> u64 {
        self.bits() & Self::RECEIVER_MASK
    }

    /// How a `Hub` or `Sender` handle prints itself: the state they share.
    fn fmt_handle(self, f: &mut fmt::Formatter<'_>, name: &str) -> fmt::Result {
        f.debug_struct(name)
            .field("tx_closed", &self.tx_closed())
            .field("hub_closed", &self.hub_closed())
            .field("receivers", &self.receivers())
            .finish()
    }
}
