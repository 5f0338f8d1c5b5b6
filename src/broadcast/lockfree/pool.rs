//! The writer's supply of nodes, [`Pool`]: evicted nodes are recycled once no
//! read has them pinned, so a full-ring append allocates nothing in steady
//! state (docs/design.md, "Broadcast: reclamation" and "Broadcast: memory bound
//! while a reader is stalled").

use super::cell::{free, Node};
use std::collections::VecDeque;
use std::ptr::NonNull;

/// Claims tried per append before allocating. Two, so that one read pinning the
/// oldest evicted node never makes the writer allocate.
pub(super) const CLAIM_TRIES: usize = 2;

pub(super) struct Pool<T> {
    free: VecDeque<NonNull<Node<T>>>,
    held: VecDeque<NonNull<Node<T>>>,
    /// Nodes allocated so far (in places, `free` and `held`).
    nodes: usize,
}

// SAFETY: the pool owns its nodes (and the `T` in each) exclusively; moving it to
// another thread moves that ownership, which needs `T: Send`. Readers that touch
// these nodes' pin counts use atomics only.
unsafe impl<T: Send> Send for Pool<T> {}

impl<T> Pool<T> {
    pub(super) fn new() -> Self {
        Pool {
            // Room for the steady state, so the first appends after the ring
            // fills do not allocate queue space.
            free: VecDeque::with_capacity(4),
            held: VecDeque::with_capacity(4),
            nodes: 0,
        }
    }

    /// Nodes allocated so far (a high-water mark: docs/design.md, "Broadcast:
    /// memory bound while a reader is stalled").
    #[cfg(test)]
    pub(super) fn nodes(&self) -> usize {
        self.nodes
    }

    /// A node holding `value`, not in any place, ready to publish; and the value
    /// the node held before, if it was recycled (to be dropped by the caller
    /// after the writer lock is released).
    ///
    /// Precondition: the caller holds the writer lock.
    pub(super) fn take(&mut self, value: T) -> (NonNull<Node<T>>, Option<T>) {
        if let Some(node) = self.held.pop_front() {
            // SAFETY: (deref) pooled nodes are allocated until the pool drops.
            if unsafe { node.as_ref() }.is_pinned() {
                self.held.push_back(node);
            } else {
                self.free.push_back(node);
            }
        }
        for _ in 0..CLAIM_TRIES {
            let Some(node) = self.free.pop_front() else {
                break;
            };
            // SAFETY: pooled nodes are allocated until the pool drops.
            let n = unsafe { node.as_ref() };
            if n.claim_while_locked() {
                // SAFETY: claimed under the writer lock, in no place (it is in
                // the pool) and not published until the caller does so.
                let old = unsafe { n.replace_while_claimed(value) };
                return (node, Some(old));
            }
            self.held.push_back(node);
        }
        self.nodes += 1;
        (Node::alloc(value), None)
    }

    /// Takes back a node just evicted from its place.
    ///
    /// Precondition: the caller holds the writer lock and stored the place's
    /// writing mark before unpublishing the node.
    pub(super) fn retire(&mut self, node: NonNull<Node<T>>) {
        self.free.push_back(node);
    }
}

impl<T> Drop for Pool<T> {
    fn drop(&mut self) {
        for node in self.free.drain(..).chain(self.held.drain(..)) {
            // SAFETY: the pool owns these nodes; it is dropped with the ring, when
            // no reader exists.
            unsafe { free(node) };
        }
    }
}
