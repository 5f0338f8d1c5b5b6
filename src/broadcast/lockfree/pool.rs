//! The writer's supply of nodes: evicted nodes are recycled once no read has them
//! pinned, so a full-ring append allocates nothing in steady state
//! (docs/design.md, "Broadcast: reclamation" and "Broadcast: memory bound
//! while a reader is stalled").
//!
//! Everything here runs under the ring's writer lock; readers never see the pool.
//!
//! # Algorithm (O(1) per append)
//!
//! - `free`: evicted nodes, oldest eviction first. Each still holds its evicted
//!   value (dropped when the node is reused, or when the ring drops).
//! - `held`: nodes a claim found pinned. One of them is re-checked per append and
//!   goes back to `free` once unpinned.
//!
//! [`take`](Pool::take) tries to claim at most [`CLAIM_TRIES`] nodes from the front
//! of `free`; a node found pinned moves to `held`. If no claim succeeds it
//! allocates a new node: the writer never waits for a reader.
//!
//! # Memory bound
//!
//! With no read in progress on an evicted node, the ring holds `capacity + 2`
//! nodes (`capacity + 1` places and the one node evicted by the last append). A
//! read pins one node at a time. Each failed claim moves a pinned node to `held`,
//! where it stays while pinned; each allocation past the first `capacity + 2`
//! follows at least one failed claim. So `k` reads stalled on evicted nodes (for
//! example inside a slow `T::clone`) add at most `k` nodes, however many appends
//! happen meanwhile, and a read that is merely slow adds nodes only while it
//! spans the eviction of the node it pinned. Nodes are not returned to the
//! allocator before the ring drops: the count is a high-water mark.

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

    /// Nodes allocated so far (a high-water mark: see the module docs).
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
