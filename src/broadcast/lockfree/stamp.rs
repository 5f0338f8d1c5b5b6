//! The per-place sequence stamp: which revision a ring place holds, and whether it
//! is being rewritten.
//!
//! The argument: `docs/design.md`, "Broadcast: place protocol".

use crate::sync::{AtomicU64, Ordering};

/// A place's sequence stamp, classic seqlock style: even = committed, odd = being
/// written.
///
/// Encoding (one `u64`):
///
/// ```text
/// 2r      the place holds revision r, fully written (r = 0: nothing written yet)
/// 2r - 1  an append has claimed the place for revision r and may be replacing its
///         node; a reader that sees it, or sees the stamp change across its
///         read, discards what it read
/// ```
///
/// Per place the stamp only grows: committed(r) < writing(r + cap + 1) <
/// committed(r + cap + 1). Equal stamps around a read therefore mean no append
/// touched the place in between: there is no ABA. Revisions stay below 2^63, far
/// beyond any run (2^63 appends at 1 ns each take 292 years).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Stamp(u64);

impl Stamp {
    /// The initial state of every place: revision 0, nothing to read.
    pub(super) const EMPTY: Stamp = Stamp(0);

    /// The place holds `revision`, fully written.
    pub(super) fn committed(revision: u64) -> Stamp {
        debug_assert!(revision < 1 << 63, "revision counter exhausted");
        Stamp(revision << 1)
    }

    /// The place is being rewritten to hold `revision` (`revision >= 1`).
    pub(super) fn writing(revision: u64) -> Stamp {
        debug_assert!((1..1 << 63).contains(&revision));
        Stamp((revision << 1) - 1)
    }

    /// The revision held, or being written.
    pub(super) fn revision(self) -> u64 {
        (self.0 + 1) >> 1
    }
}

/// The atomic cell of a [`Stamp`]. One method per transition; the names carry the
/// ordering role each plays in the place protocol (see `place.rs`).
pub(super) struct AtomicStamp(AtomicU64);

impl AtomicStamp {
    pub(super) fn new() -> Self {
        AtomicStamp(AtomicU64::new(Stamp::EMPTY.0))
    }

    /// A reader's first look. Acquire pairs with
    /// [`commit_while_locked`](Self::commit_while_locked)'s Release: seeing
    /// `committed(r)` makes the node published for `r` (and its value) visible. (It also pairs
    /// with the writing mark's Release, for progress; see below.)
    pub(super) fn load_before_read(&self) -> Stamp {
        Stamp(self.0.load(Ordering::Acquire))
    }

    /// A reader's re-check, after it pinned the node. What it must see (a
    /// writing mark stored before the node it loaded, or before a claim its pin
    /// synchronized with) reaches it through those Acquire operations (see
    /// `place.rs`); Acquire here adds progress: a reader
    /// that sees a newer stamp (both transitions are Release stores) also sees the
    /// tail that append's predecessor published, so a retry finds a newer tail
    /// instead of spinning on a stale one.
    pub(super) fn load_after_read(&self) -> Stamp {
        Stamp(self.0.load(Ordering::Acquire))
    }

    /// The writer claims the place for `revision`. The caller's Release store of
    /// the new node right after it orders it before the node change (what a
    /// reader must be able to detect). Release on the store itself pairs with the readers'
    /// Acquire stamp loads: a reader that sees the mark also sees the previous
    /// append's tail store (`revision - 1`), which `latest` and the `Gap` answer's
    /// `oldest` rely on to make progress.
    ///
    /// Precondition: the caller holds the writer lock.
    pub(super) fn mark_writing_while_locked(&self, revision: u64) {
        self.0.store(Stamp::writing(revision).0, Ordering::Release);
    }

    /// The writer publishes the place's new value as `revision`. Release pairs with
    /// [`load_before_read`](Self::load_before_read)'s Acquire.
    ///
    /// Precondition: the caller holds the writer lock and marked the place writing
    /// for this `revision`.
    pub(super) fn commit_while_locked(&self, revision: u64) {
        self.0
            .store(Stamp::committed(revision).0, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::Stamp;

    #[test]
    fn broadcast_stamps_grow_through_every_transition() {
        let mut last = Stamp::EMPTY;
        for r in [1u64, 4, 7, 1 << 40] {
            assert!(Stamp::writing(r).0 > last.0);
            assert!(Stamp::committed(r).0 > Stamp::writing(r).0);
            assert_eq!(Stamp::writing(r).revision(), r);
            assert_eq!(Stamp::committed(r).revision(), r);
            assert_ne!(Stamp::writing(r), Stamp::committed(r));
            last = Stamp::committed(r);
        }
    }
}
