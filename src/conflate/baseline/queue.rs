//! One baseline receiver's pending set: a slot per key, in first-touch order,
//! under the hub's mutex (docs/design.md, "The baseline's pending set").

use crate::conflate::common::event::Event;
use crate::conflate::common::policy::Merge;
use hashbrown::HashTable;
use std::mem;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// "No node": the end of the list or of the free list.
const NIL: usize = usize::MAX;

struct Node<K, V> {
    key: K,
    value: V,
    sends: u64,
    links: Links,
}

/// Where a node sits: enough to unlink it without touching its key or value.
#[derive(Clone, Copy)]
struct Links {
    /// The hub's hash of the key, kept so the index never rehashes through `K`.
    hash: u64,
    prev: usize,
    next: usize,
}

enum Place<K, V> {
    Used(Node<K, V>),
    /// Next free place, or `NIL`.
    Free(usize),
}

/// What a send did to a pending slot.
pub(super) enum Merged {
    /// The merge returned `Some`: the slot holds the merged value.
    Kept,
    /// The merge returned `None`: slot and queue entry are gone, with the sends
    /// that had been folded into the removed value.
    Annihilated { sends: u64 },
    /// The merge panicked: the slot is gone (as if annihilated), with the sends
    /// folded into it. The caller accounts for them, then resumes the panic.
    Panicked {
        sends: u64,
        payload: Box<dyn std::any::Any + Send>,
    },
}

pub(super) struct KeyQueue<K, V> {
    /// Slab indices of the pending nodes, found by the hub's hash of the key.
    index: HashTable<usize>,
    places: Vec<Place<K, V>>,
    head: usize,
    tail: usize,
    free: usize,
}

impl<K, V> KeyQueue<K, V> {
    pub(super) fn new() -> Self {
        KeyQueue {
            index: HashTable::new(),
            places: Vec::new(),
            head: NIL,
            tail: NIL,
            free: NIL,
        }
    }

    /// Pending keys.
    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    fn node(&self, at: usize) -> &Node<K, V> {
        match &self.places[at] {
            Place::Used(node) => node,
            Place::Free(_) => unreachable!("the list and the index only name used places"),
        }
    }

    fn node_mut(&mut self, at: usize) -> &mut Node<K, V> {
        match &mut self.places[at] {
            Place::Used(node) => node,
            Place::Free(_) => unreachable!("the list and the index only name used places"),
        }
    }

    /// Takes the node out of its place, leaving the links around it and the index
    /// entry in place: the caller either puts it back or calls [`Self::detach`].
    fn vacate(&mut self, at: usize) -> Node<K, V> {
        match mem::replace(&mut self.places[at], Place::Free(NIL)) {
            Place::Used(node) => node,
            Place::Free(_) => unreachable!("the list and the index only name used places"),
        }
    }

    /// Finishes removing a vacated node: unlinks it, drops its index entry and
    /// frees its place. Runs no user code.
    fn detach(&mut self, at: usize, links: Links) {
        match links.prev {
            NIL => self.head = links.next,
            prev => self.node_mut(prev).links.next = links.next,
        }
        match links.next {
            NIL => self.tail = links.prev,
            next => self.node_mut(next).links.prev = links.prev,
        }
        match self.index.find_entry(links.hash, |&i| i == at) {
            Ok(entry) => {
                entry.remove();
            }
            Err(_) => unreachable!("a pending node always has an index entry"),
        }
        if self.index.is_empty() {
            // Only free places remain: start over so the next burst is contiguous.
            self.places.clear();
            self.free = NIL;
        } else {
            self.places[at] = Place::Free(self.free);
            self.free = at;
        }
    }

    /// The head of the queue: the oldest first touch still pending.
    pub(super) fn head(&self) -> Option<(&K, &V, u64)> {
        match self.head {
            NIL => None,
            at => {
                let node = self.node(at);
                Some((&node.key, &node.value, node.sends))
            }
        }
    }

    /// Removes and returns the head.
    pub(super) fn pop_front(&mut self) -> Option<Event<K, V>> {
        match self.head {
            NIL => None,
            at => {
                let node = self.vacate(at);
                self.detach(at, node.links);
                Some(Event::new(node.key, node.value, node.sends))
            }
        }
    }

    /// Removes everything, in queue order, appending it to `out`: `(events,
    /// sends)` of what it appended, `None` (and `out` untouched) when nothing is
    /// pending. Allocates nothing once `out` has room: the places and the index
    /// keep their capacity.
    pub(super) fn drain_into(&mut self, out: &mut Vec<Event<K, V>>) -> Option<(usize, u64)> {
        if self.head == NIL {
            return None;
        }
        out.reserve(self.len());
        let (mut events, mut sends) = (0, 0);
        let mut at = self.head;
        while at != NIL {
            let node = self.vacate(at);
            at = node.links.next;
            events += 1;
            sends += node.sends;
            out.push(Event::new(node.key, node.value, node.sends));
        }
        self.index.clear();
        self.places.clear();
        self.head = NIL;
        self.tail = NIL;
        self.free = NIL;
        Some((events, sends))
    }

    /// Every pending entry in queue order, as `(hash, key, value)`.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, &K, &V)> + '_ {
        let mut at = self.head;
        std::iter::from_fn(move || match at {
            NIL => None,
            now => {
                let node = self.node(now);
                at = node.links.next;
                Some((node.links.hash, &node.key, &node.value))
            }
        })
    }

    /// Appends a key that is not pending (the caller checked with [`Self::find`]).
    /// Allocates only when the slab or the index must grow.
    pub(super) fn push_back(&mut self, hash: u64, key: K, value: V) {
        self.push_back_with(hash, key, value, 1);
    }

    /// [`Self::push_back`] with the entry's `sends` given: 0 for a snapshot entry.
    pub(super) fn push_back_with(&mut self, hash: u64, key: K, value: V, sends: u64) {
        let node = Node {
            key,
            value,
            sends,
            links: Links {
                hash,
                prev: self.tail,
                next: NIL,
            },
        };
        let at = match self.free {
            NIL => {
                self.places.push(Place::Used(node));
                self.places.len() - 1
            }
            at => {
                match mem::replace(&mut self.places[at], Place::Used(node)) {
                    Place::Free(next) => self.free = next,
                    Place::Used(_) => unreachable!("the free list only names free places"),
                }
                at
            }
        };
        match self.tail {
            NIL => self.head = at,
            tail => self.node_mut(tail).links.next = at,
        }
        self.tail = at;
        let places = &self.places;
        self.index.insert_unique(hash, at, |&i| match &places[i] {
            Place::Used(node) => node.links.hash,
            Place::Free(_) => unreachable!("the index only names used places"),
        });
    }

    /// Folds `next` into the pending slot at `at` (from [`Self::find`]): the slot
    /// keeps its queue position, or goes entirely if `merge` returns `None`.
    ///
    /// If `merge` panics the slot is dropped (as if annihilated: the pending
    /// value was moved into the merge and is gone) and the panic is handed back
    /// for the caller to resume. Allocates nothing.
    pub(super) fn merge_into(&mut self, at: usize, next: V, merge: &Merge<V>) -> Merged {
        // Out of the slab, the node cannot be seen half-merged; if the merge does
        // not keep it, only its slot needs repair.
        let Node {
            key,
            value: prev,
            sends,
            links,
        } = self.vacate(at);
        match catch_unwind(AssertUnwindSafe(|| merge.apply(prev, next))) {
            Ok(Some(value)) => {
                self.places[at] = Place::Used(Node {
                    key,
                    value,
                    sends: sends.saturating_add(1),
                    links,
                });
                Merged::Kept
            }
            Ok(None) => {
                self.detach(at, links);
                Merged::Annihilated { sends }
            }
            Err(payload) => {
                self.detach(at, links);
                drop(key);
                Merged::Panicked { sends, payload }
            }
        }
    }
}

impl<K: Eq, V> KeyQueue<K, V> {
    /// The slot of `key` if it is pending. Runs `K: Eq` (user code) and changes
    /// nothing.
    pub(super) fn find(&self, hash: u64, key: &K) -> Option<usize> {
        let places = &self.places;
        self.index
            .find(hash, |&i| match &places[i] {
                Place::Used(node) => node.key == *key,
                Place::Free(_) => false,
            })
            .copied()
    }

    /// The pending value of `key`, if any. Runs `K: Eq`; changes nothing.
    pub(super) fn get(&self, hash: u64, key: &K) -> Option<&V> {
        self.find(hash, key).map(|at| &self.node(at).value)
    }
}
