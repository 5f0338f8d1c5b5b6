//! A ring place's value cell, [`PlaceCell`]: a pointer to a type-stable
//! [`Node`], a value next to its pin count (docs/design.md, "Broadcast:
//! reclamation"; the reads that use it: "Broadcast: place protocol").

use crate::sync::{AtomicPtr, AtomicUsize, Ordering, UnsafeCell};
use std::marker::PhantomData;
use std::ptr::{self, NonNull};

/// One value and the number of reads in progress on it.
pub(super) struct Node<T> {
    /// Reads that pinned this node and have not unpinned it yet. Changed only by
    /// read-modify-writes (readers' pin and unpin, the writer's claim), so the
    /// count's modification order decides every pin-versus-claim race.
    pins: AtomicUsize,
    value: UnsafeCell<T>,
}

impl<T> Node<T> {
    /// A fresh node holding `value`, owned by the caller as a raw pointer (freed
    /// with [`free`]).
    pub(super) fn alloc(value: T) -> NonNull<Node<T>> {
        let node = Box::new(Node {
            pins: AtomicUsize::new(0),
            value: UnsafeCell::new(value),
        });
        NonNull::from(Box::leak(node))
    }

    /// The writer's claim: succeeds, and makes the node the writer's to rewrite,
    /// only if no read has it pinned.
    ///
    /// A compare-and-swap of 0 with 0: on success it is a write in the count's
    /// modification order, so every pin is ordered before or after it.
    /// - Acquire: it reads the last unpin (Release) or a later read-modify-write in
    ///   that unpin's release sequence, so every clone that pinned the node before
    ///   happens before the writer overwrites or drops its value.
    /// - Release: a pin ordered after the claim reads from it (or from a later
    ///   read-modify-write in its release sequence) and so synchronizes with it: the
    ///   place's writing mark that evicted this node (stored before the claim)
    ///   happens before that reader's stamp re-check, which therefore fails and the
    ///   reader never touches the value.
    ///
    /// Precondition: the caller holds the writer lock and the node is in no place.
    pub(super) fn claim_while_locked(&self) -> bool {
        self.pins
            .compare_exchange(0, 0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// Whether a read has the node pinned now. A hint only (Relaxed): whoever acts
    /// on it claims first.
    pub(super) fn is_pinned(&self) -> bool {
        self.pins.load(Ordering::Relaxed) != 0
    }

    /// Replaces the value of a claimed node and returns the old one.
    ///
    /// # Safety
    ///
    /// The caller holds the writer lock and claimed the node
    /// ([`claim_while_locked`](Self::claim_while_locked) returned `true`) after it
    /// left its place, and has not published it in a place since: no reader will
    /// read the value until the node is published again.
    pub(super) unsafe fn replace_while_claimed(&self, value: T) -> T {
        // SAFETY: exclusive access by the caller's contract: the claim ordered
        // every earlier clone before this write, and every later pin fails its
        // stamp re-check without reading the value.
        self.value.with_mut(|p| unsafe { ptr::replace(p, value) })
    }
}

/// Frees a node and drops its value.
///
/// # Safety
///
/// `node` came from [`Node::alloc`], is in no place and no pool, and no read can
/// reach it (the ring is being dropped, so no reader exists).
pub(super) unsafe fn free<T>(node: NonNull<Node<T>>) {
    // SAFETY: allocated by `Box` in `Node::alloc`; unreachable by the contract.
    drop(unsafe { Box::from_raw(node.as_ptr()) });
}

/// The pointer half of a place: the node of the revision the place holds (null
/// before the place's first write). Owns that node.
pub(super) struct PlaceCell<T> {
    node: AtomicPtr<Node<T>>,
    /// Owns a `T` (in the node) for auto traits and drop check: the ring is
    /// `Send`/`Sync` only for `T: Send + Sync` (values move in on the appending
    /// thread, are cloned through `&T` on reading threads, and dropped on
    /// whichever thread appends or drops the ring).
    _owns: PhantomData<Box<T>>,
}

/// A read's pin on a node: while it lives, the writer does not claim the node.
/// Dropping it unpins, also when the clone run under it panics.
pub(super) struct Pinned<'a, T> {
    node: &'a Node<T>,
}

impl<T> PlaceCell<T> {
    pub(super) fn empty() -> Self {
        PlaceCell {
            node: AtomicPtr::new(ptr::null_mut()),
            _owns: PhantomData,
        }
    }

    /// Pins the node the place points at now, or `None` before its first write.
    /// Lock-free: one load and one read-modify-write on the node.
    ///
    /// The pinned node may already be evicted (or recycled for a later revision):
    /// the caller must re-check the place's stamp before reading the value.
    pub(super) fn pin(&self) -> Option<Pinned<'_, T>> {
        // Acquire pairs with `publish_while_locked`'s Release store: the node's
        // contents and the place's writing mark stored before it are visible.
        let node = NonNull::new(self.node.load(Ordering::Acquire))?;
        // SAFETY: nodes are freed only when the ring drops, and the caller
        // borrows the ring; the node may be stale but is allocated.
        let node = unsafe { node.as_ref() };
        // Acquire: pairs with the writer's claim (Release) when the claim came
        // first in the count's order (see `Node::claim_while_locked`). No
        // overflow: each pin is one read in progress on one thread.
        node.pins.fetch_add(1, Ordering::Acquire);
        Some(Pinned { node })
    }

    /// Points the place at `node` and returns the node it pointed at (now evicted,
    /// still holding its value, possibly pinned by a read in progress).
    ///
    /// Release pairs with [`pin`](Self::pin)'s Acquire load: a reader that loads
    /// `node` sees its value and the place's writing mark stored before this call.
    ///
    /// Precondition: the caller holds the writer lock (the only writer of the
    /// pointer) and stored the place's writing mark just before.
    pub(super) fn publish_while_locked(&self, node: NonNull<Node<T>>) -> Option<NonNull<Node<T>>> {
        // Relaxed: only the writer stores the pointer, under the lock.
        let old = self.node.load(Ordering::Relaxed);
        self.node.store(node.as_ptr(), Ordering::Release);
        NonNull::new(old)
    }

    /// Runs `f` on the current value, for the writer's own use.
    ///
    /// Precondition: the caller holds the writer lock, so no append changes the
    /// place or rewrites its node during `f`.
    pub(super) fn with_value_while_locked<R>(&self, f: impl FnOnce(Option<&T>) -> R) -> R {
        // Relaxed: only the writer stores the pointer, under the lock.
        match NonNull::new(self.node.load(Ordering::Relaxed)) {
            None => f(None),
            // SAFETY: the node in a place is allocated and only the writer
            // rewrites values, never while the node is in a place; readers only
            // read it too.
            Some(node) => unsafe { node.as_ref() }.value.with(|p| {
                // SAFETY: as above: no one writes the value meanwhile.
                f(Some(unsafe { &*p }))
            }),
        }
    }
}

impl<T> Drop for PlaceCell<T> {
    fn drop(&mut self) {
        if let Some(node) = NonNull::new(self.node.load(Ordering::Relaxed)) {
            // SAFETY: the cell owns its node; `&mut self` means the ring is being
            // dropped, so no reader exists.
            unsafe { free(node) };
        }
    }
}

impl<T> Pinned<'_, T> {
    /// Runs `f` on the value.
    ///
    /// # Safety
    ///
    /// After [`PlaceCell::pin`], the caller re-checked the place's stamp and found
    /// it equal to the committed stamp it loaded before pinning.
    /// (`Place::read_with` is the one caller.)
    pub(super) unsafe fn with_value<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        // SAFETY: the unchanged stamp proves the pin was ordered before any claim
        // of this node (a pin after a claim sees the eviction's writing mark), and
        // no claim succeeds while the pin lives: nothing writes the value until
        // the unpin in `drop`, which happens after `f` returns.
        self.node.value.with(|p| f(unsafe { &*p }))
    }
}

impl<T> Drop for Pinned<'_, T> {
    fn drop(&mut self) {
        // Release pairs with the claim's Acquire: the clone happens before the
        // writer overwrites or drops the value.
        self.node.pins.fetch_sub(1, Ordering::Release);
    }
}
