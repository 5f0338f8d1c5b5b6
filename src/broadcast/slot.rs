//! One ring slot: a sequence stamp and a protected value cell.
//!
//! # Protocol
//!
//! Writer (one at a time, under the ring's writer lock), installing revision `r`:
//!
//! 1. `stamp = writing(r)` (Release), then `fence(Release)`;
//! 2. `cell.swap(new value)` (arc-swap: a SeqCst read-modify-write);
//! 3. `stamp = committed(r)` (Release).
//!
//! Reader wanting revision `r`:
//!
//! 1. `s1 = stamp` (Acquire); anything but `committed(r)` ends the read;
//! 2. `guard = cell.load()` (protects the `Arc` it returns);
//! 3. `fence(Acquire)`, then `s2 = stamp` (Acquire);
//! 4. `s1 == s2`: the guard holds revision `r`'s value; clone it. Otherwise the
//!    slot was overwritten mid-read: report the newer revision, clone nothing.
//!
//! Why step 4 is sound. Step 1's Acquire pairs with writer step 3's Release, so
//! the reader's load in step 2 returns revision `r`'s `Arc` or one swapped in later
//! (coherence). A later one, for `r' = r + k(cap + 1)`, was swapped in after
//! `writing(r')` was stored, and that store happens before the reader's step 3:
//! arc-swap's load acquires the swap whose pointer it returns (it must, or
//! dereferencing the pointee would race), and independently, if the load read that
//! pointer directly, writer step 1's release fence synchronizes with reader step
//! 3's acquire fence. So `s2 >= writing(r') > committed(r)` and the read is
//! rejected. Stamps only grow, so `s1 == s2` cannot be an ABA.
//!
//! The Release on the writing mark and the Acquire on `s2` are not needed for the
//! value check; they give progress. A reader that sees a newer stamp (either
//! transition) also sees the tail the previous append published, so a retry
//! (`latest`) finds a newer tail rather than spinning on a stale one. Loom found
//! that spin when the mark was Relaxed: it explores the (real, if unlikely)
//! executions in which a relaxed tail load keeps returning the old value.
//!
//! Why cloning is sound (DESIGN-NOTES broadcast 1). The reader clones through its
//! guard, never through a bare pointer: the `Arc` cannot be freed while the guard
//! lives, and its `T` is never mutated while reachable, because the writer mutates
//! a value only through `Arc::get_mut` on an `Arc` it has already swapped out of
//! the cell (arc-swap's `swap` converts every outstanding guard into a real
//! reference count before returning, so `get_mut` succeeding proves no guard
//! exists). No `unsafe` is needed anywhere in the slot.

use super::stamp::{AtomicStamp, Stamp};
use crate::sync::{fence, CellArc, Ordering, SlotCell};

/// What a reader found in a slot.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum SlotRead<T> {
    /// The wanted revision's value, the reader's own clone.
    Value(T),
    /// The slot holds (or is receiving) a newer revision: the wanted one is gone.
    Overwritten {
        /// The revision in the slot's stamp (committed or being written).
        by: u64,
    },
    /// The slot has not reached the wanted revision. Readers only ask for
    /// revisions at or below the ring's tail, which is published after the slot
    /// commits, so this answer means a broken invariant.
    NotWritten,
}

pub(super) struct Slot<T> {
    stamp: AtomicStamp,
    cell: SlotCell<T>,
}

impl<T> Slot<T> {
    pub(super) fn new() -> Self {
        Slot {
            stamp: AtomicStamp::new(),
            cell: SlotCell::empty(),
        }
    }

    /// Reads `revision` through `f` if the slot holds it, without a lock and
    /// without waiting. `f` runs on a protected, fully written value.
    pub(super) fn read_with<R>(&self, revision: u64, f: impl FnOnce(&T) -> R) -> SlotRead<R> {
        let s1 = self.stamp.load_before_read();
        if s1 != Stamp::committed(revision) {
            return if s1.revision() > revision {
                SlotRead::Overwritten { by: s1.revision() }
            } else {
                SlotRead::NotWritten
            };
        }
        let guard = self.cell.load();
        // Pairs with the writer's fence(Release) after its writing mark: if the
        // load above saw a later swap, the re-check below sees that swap's mark.
        fence(Ordering::Acquire);
        let s2 = self.stamp.load_after_read();
        if s2 != s1 {
            return SlotRead::Overwritten { by: s2.revision() };
        }
        match guard.get() {
            Some(value) => SlotRead::Value(f(value)),
            // A committed stamp is stored only after a `Some` swap; seeing
            // `committed(r) >= 1` twice around a `None` is impossible.
            None => SlotRead::NotWritten,
        }
    }

    /// Clones `revision`'s value if the slot holds it.
    pub(super) fn read(&self, revision: u64) -> SlotRead<T>
    where
        T: Clone,
    {
        self.read_with(revision, T::clone)
    }

    /// Installs `value` as `revision` and returns the `Arc` it replaced (with an
    /// exact reference count: see the module docs).
    ///
    /// Precondition: the caller holds the ring's writer lock, and `revision` is the
    /// next revision of the ring and maps to this slot.
    pub(super) fn write_while_locked(
        &self,
        revision: u64,
        value: CellArc<T>,
    ) -> Option<CellArc<T>> {
        self.stamp.mark_writing_while_locked(revision);
        // Pairs with the reader's fence(Acquire) before its stamp re-check: orders
        // the writing mark before the swap, so a reader that sees the new value
        // sees the mark.
        fence(Ordering::Release);
        let old = self.cell.swap(Some(value));
        self.stamp.commit_while_locked(revision);
        old
    }

    /// The value of the revision the slot holds, for the writer's own use
    /// (`append_if_changed`).
    ///
    /// Precondition: the caller holds the writer lock, so no append can change the
    /// slot during `f`.
    pub(super) fn with_value_while_locked<R>(&self, f: impl FnOnce(Option<&T>) -> R) -> R {
        let guard = self.cell.load();
        f(guard.get())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{Slot, SlotRead};
    use crate::sync::CellArc;

    #[test]
    fn broadcast_slot_reads_only_the_committed_revision() {
        let slot = Slot::new();
        assert_eq!(slot.read(1), SlotRead::<String>::NotWritten);
        assert!(slot
            .write_while_locked(1, CellArc::new("one".to_string()))
            .is_none());
        assert_eq!(slot.read(1), SlotRead::Value("one".to_string()));
        let old = slot.write_while_locked(4, CellArc::new("four".to_string()));
        assert_eq!(old.as_deref().map(String::as_str), Some("one"));
        assert_eq!(slot.read(1), SlotRead::Overwritten { by: 4 });
        assert_eq!(slot.read(4), SlotRead::Value("four".to_string()));
        assert_eq!(slot.read(7), SlotRead::NotWritten);
    }

    #[test]
    fn broadcast_slot_returns_a_unique_arc_once_no_reader_holds_it() {
        let slot = Slot::new();
        slot.write_while_locked(1, CellArc::new(vec![1u8; 16]));
        let guard = slot.cell.load();
        let mut old = slot
            .write_while_locked(3, CellArc::new(vec![3u8; 16]))
            .expect("slot held revision 1");
        // The reader's guard was turned into a real count by the swap.
        assert!(CellArc::get_mut(&mut old).is_none());
        assert_eq!(guard.get().map(|v| v[0]), Some(1));
        drop(guard);
        assert!(CellArc::get_mut(&mut old).is_some());
    }
}
