//! One ring place, `Place`: a sequence stamp and a [`PlaceCell`] pointing at a
//! pinnable node; the writer's three steps and the reader's four
//! (docs/design.md, "Broadcast: place protocol").

use super::cell::{Node, PlaceCell};
use super::stamp::{AtomicStamp, Stamp};
use std::ptr::NonNull;

/// What a reader found in a place.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum PlaceRead<T> {
    /// The wanted revision's value, the reader's own clone.
    Value(T),
    /// The place holds (or is receiving) a newer revision: the wanted one is gone.
    Overwritten {
        /// The revision in the place's stamp (committed or being written).
        by: u64,
    },
    /// The place has not reached the wanted revision. Readers only ask for
    /// revisions at or below the ring's tail, which is published after the place
    /// commits, so this answer means a broken invariant.
    NotWritten,
}

pub(super) struct Place<T> {
    stamp: AtomicStamp,
    cell: PlaceCell<T>,
}

impl<T> Place<T> {
    pub(super) fn new() -> Self {
        Place {
            stamp: AtomicStamp::new(),
            cell: PlaceCell::empty(),
        }
    }

    /// Reads `revision` through `f` if the place holds it, without a lock and
    /// without waiting. `f` runs on a pinned, fully written value.
    pub(super) fn read_with<R>(&self, revision: u64, f: impl FnOnce(&T) -> R) -> PlaceRead<R> {
        let s1 = self.stamp.load_before_read();
        if s1 != Stamp::committed(revision) {
            return if s1.revision() > revision {
                PlaceRead::Overwritten { by: s1.revision() }
            } else {
                PlaceRead::NotWritten
            };
        }
        // A committed stamp `>= 1` is stored only after a node was published.
        let Some(pinned) = self.cell.pin() else {
            return PlaceRead::NotWritten;
        };
        let s2 = self.stamp.load_after_read();
        if s2 != s1 {
            return PlaceRead::Overwritten { by: s2.revision() };
        }
        // SAFETY: the stamp was `s1` before the pin and is unchanged after it
        // (docs/design.md, "Broadcast: place protocol").
        PlaceRead::Value(unsafe { pinned.with_value(f) })
    }

    /// Clones `revision`'s value if the place holds it.
    pub(super) fn read(&self, revision: u64) -> PlaceRead<T>
    where
        T: Clone,
    {
        self.read_with(revision, T::clone)
    }

    /// Publishes `node` (already holding the value) as `revision` and returns the
    /// node it evicted.
    ///
    /// Precondition: the caller holds the ring's writer lock, `revision` is the
    /// next revision of the ring and maps to this place, and `node` is in no place
    /// and not readable by any read (fresh, or claimed).
    pub(super) fn write_while_locked(
        &self,
        revision: u64,
        node: NonNull<Node<T>>,
    ) -> Option<NonNull<Node<T>>> {
        self.stamp.mark_writing_while_locked(revision);
        // The store is Release and follows the mark in program order: a reader
        // whose Acquire load returns `node` sees the mark (step 2 -> step 3).
        let old = self.cell.publish_while_locked(node);
        self.stamp.commit_while_locked(revision);
        old
    }

    /// The value of the revision the place holds, for the writer's own use
    /// (`append_if_changed`).
    ///
    /// Precondition: the caller holds the writer lock, so no append can change the
    /// place during `f`.
    pub(super) fn with_value_while_locked<R>(&self, f: impl FnOnce(Option<&T>) -> R) -> R {
        self.cell.with_value_while_locked(f)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::cell::Node;
    use super::{Place, PlaceRead};

    #[test]
    fn broadcast_place_reads_only_the_committed_revision() {
        let place = Place::new();
        assert_eq!(place.read(1), PlaceRead::<String>::NotWritten);
        assert!(place
            .write_while_locked(1, Node::alloc("one".to_string()))
            .is_none());
        assert_eq!(place.read(1), PlaceRead::Value("one".to_string()));
        let old = place.write_while_locked(4, Node::alloc("four".to_string()));
        assert_eq!(place.read(1), PlaceRead::Overwritten { by: 4 });
        assert_eq!(place.read(4), PlaceRead::Value("four".to_string()));
        assert_eq!(place.read(7), PlaceRead::NotWritten);
        // SAFETY: evicted, in no place, and no read is in progress.
        unsafe { super::super::cell::free(old.expect("place held revision 1")) };
    }

    #[test]
    fn broadcast_place_claim_fails_while_a_read_has_the_node_pinned() {
        let place = Place::new();
        place.write_while_locked(1, Node::alloc(vec![1u8; 16]));
        let pinned = place.cell.pin().expect("written");
        let old = place
            .write_while_locked(3, Node::alloc(vec![3u8; 16]))
            .expect("place held revision 1");
        // SAFETY: (deref) `old` is allocated until freed below.
        let node = unsafe { old.as_ref() };
        assert!(node.is_pinned());
        assert!(!node.claim_while_locked(), "claimed a pinned node");
        drop(pinned);
        assert!(node.claim_while_locked());
        // SAFETY: claimed, in no place; the value is ours to replace.
        let previous = unsafe { node.replace_while_claimed(vec![5u8]) };
        assert_eq!(previous, vec![1u8; 16]);
        // SAFETY: evicted, in no place, and no read is in progress.
        unsafe { super::super::cell::free(old) };
    }
}
