//! The first-touch key queue of one own-value receiver, `TicketList`: a
//! slab-backed doubly linked list of tickets, one per pending key, each naming
//! its entry by shard and slab index (docs/design.md, "Own-value receivers: the
//! core").

const NIL: u32 = u32::MAX;

/// `place` of a node on the free list (never a packed shard and index: see
/// `slab::MAX_SLAB`).
const FREE: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Node {
    place: u32,
    prev: u32,
    next: u32,
}

/// A ticket taken out of (or read at the front of) the list: the entry it names,
/// and its own index in the list, which the entry compares with what it
/// recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ticket {
    pub(crate) place: u32,
    pub(crate) index: u32,
}

#[derive(Default)]
pub(crate) struct TicketList {
    nodes: Vec<Node>,
    head: Link,
    tail: Link,
    free: Link,
    len: usize,
}

/// A node index or `NIL`; `NIL` by default.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Link(u32);

impl Default for Link {
    fn default() -> Self {
        Link(NIL)
    }
}

impl TicketList {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends a ticket naming `place` and returns its index (stable until it
    /// leaves the list). An index is below `u32::MAX - 1`, so the entry can store
    /// it plus one in a `NonZeroU32`.
    ///
    /// # Panics
    /// If more than `u32::MAX - 2` tickets are pending at once.
    pub(crate) fn push_back(&mut self, place: u32) -> u32 {
        debug_assert_ne!(place, FREE, "a packed place is never FREE");
        let node = Node {
            place,
            prev: self.tail.0,
            next: NIL,
        };
        let idx = if self.free.0 != NIL {
            let idx = self.free.0;
            self.free = Link(self.nodes[idx as usize].next);
            self.nodes[idx as usize] = node;
            idx
        } else {
            let idx = u32::try_from(self.nodes.len())
                .ok()
                .filter(|&i| i < NIL - 1)
                .expect("more than u32::MAX - 2 keys pending on one receiver");
            self.nodes.push(node);
            idx
        };
        match self.tail.0 {
            NIL => self.head = Link(idx),
            tail => self.nodes[tail as usize].next = idx,
        }
        self.tail = Link(idx);
        self.len += 1;
        idx
    }

    /// The oldest ticket, without removing it.
    pub(crate) fn front(&self) -> Option<Ticket> {
        match self.head.0 {
            NIL => None,
            head => Some(Ticket {
                place: self.nodes[head as usize].place,
                index: head,
            }),
        }
    }

    pub(crate) fn pop_front(&mut self) -> Option<Ticket> {
        match self.head.0 {
            NIL => None,
            head => Some(self.unlink(head)),
        }
    }

    /// Unlinks the ticket at `index`, which must be linked (the caller knows it
    /// is: its entry recorded this list's segment and this index).
    pub(crate) fn remove(&mut self, index: u32) {
        debug_assert!(
            self.nodes
                .get(index as usize)
                .is_some_and(|n| n.place != FREE),
            "removing a ticket that is not linked"
        );
        self.unlink(index);
    }

    /// Calls `f` on every ticket, oldest first, and empties the list (keeping
    /// its capacity). Walks the links once; no per-ticket unlinking.
    pub(crate) fn drain(&mut self, mut f: impl FnMut(Ticket)) {
        let mut at = self.head.0;
        while at != NIL {
            let node = self.nodes[at as usize];
            f(Ticket {
                place: node.place,
                index: at,
            });
            at = node.next;
        }
        self.clear();
    }

    /// Empties the list, keeping its capacity.
    pub(crate) fn clear(&mut self) {
        self.nodes.clear();
        self.head = Link(NIL);
        self.tail = Link(NIL);
        self.free = Link(NIL);
        self.len = 0;
    }

    fn unlink(&mut self, idx: u32) -> Ticket {
        let Node { place, prev, next } = self.nodes[idx as usize];
        match prev {
            NIL => self.head = Link(next),
            p => self.nodes[p as usize].next = next,
        }
        match next {
            NIL => self.tail = Link(prev),
            n => self.nodes[n as usize].prev = prev,
        }
        self.nodes[idx as usize] = Node {
            place: FREE,
            prev: NIL,
            next: self.free.0,
        };
        self.free = Link(idx);
        self.len -= 1;
        if self.len == 0 {
            // Nothing linked: drop the free list too, so indices restart at 0 and
            // the slab never holds more nodes than the peak pending count.
            self.clear();
        }
        Ticket { place, index: idx }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places(list: &mut TicketList) -> Vec<u32> {
        std::iter::from_fn(|| list.pop_front().map(|t| t.place)).collect()
    }

    #[test]
    fn fifo_order_and_removal_from_every_position() {
        let mut l = TicketList::default();
        let idx: Vec<u32> = (0..5).map(|k| l.push_back(k)).collect();
        l.remove(idx[0]); // head
        l.remove(idx[2]); // middle
        l.remove(idx[4]); // tail
        assert_eq!(l.len(), 2);
        assert_eq!(l.front(), Some(Ticket { place: 1, index: 1 }));
        let reused = l.push_back(9);
        assert!(idx.contains(&reused), "a freed node is reused");
        assert_eq!(places(&mut l), vec![1, 3, 9]);
        assert!(l.is_empty());
    }

    #[test]
    fn drain_walks_in_order_and_indices_restart_after_emptying() {
        let mut l = TicketList::default();
        for k in 0..4 {
            l.push_back(k);
        }
        l.remove(1);
        let mut seen = Vec::new();
        l.drain(|t| seen.push((t.place, t.index)));
        assert_eq!(seen, vec![(0, 0), (2, 2), (3, 3)]);
        assert!(l.is_empty());
        assert_eq!(l.push_back(7), 0, "indices restart once the list is empty");
        l.remove(0);
        assert_eq!(l.push_back(8), 0);
    }
}
