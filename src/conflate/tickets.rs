//! The first-touch key queue of one receiver: a slab-backed doubly linked list of
//! *tickets*, one per pending key, in the order the keys became pending.
//!
//! A ticket names a pending value without owning it (the value lives in the key's
//! shard, see `core.rs`): it carries the key and its hash, to find the slot again,
//! and a receiver-unique `id`, so a ticket whose value was annihilated and re-sent is
//! recognisably stale. Indices into the slab are stable while the ticket is in the
//! list, which is what makes unlinking an annihilated key O(1), so the queue holds no
//! dead entries and its size stays bounded by the pending key set.

const NIL: u32 = u32::MAX;

struct Node<K> {
    /// `None` only while the node is on the free list.
    key: Option<K>,
    hash: u64,
    id: u64,
    prev: u32,
    next: u32,
}

/// A ticket taken out of the list.
pub(crate) struct Ticket<K> {
    pub(crate) key: K,
    pub(crate) hash: u64,
    pub(crate) id: u64,
}

pub(crate) struct TicketList<K> {
    nodes: Vec<Node<K>>,
    head: u32,
    tail: u32,
    free: u32,
    len: usize,
}

impl<K> Default for TicketList<K> {
    fn default() -> Self {
        TicketList {
            nodes: Vec::new(),
            head: NIL,
            tail: NIL,
            free: NIL,
            len: 0,
        }
    }
}

impl<K> TicketList<K> {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends a ticket and returns its slab index (stable until it leaves the list).
    ///
    /// # Panics
    /// If more than `u32::MAX - 1` tickets are pending at once.
    pub(crate) fn push_back(&mut self, key: K, hash: u64, id: u64) -> u32 {
        let node = Node {
            key: Some(key),
            hash,
            id,
            prev: self.tail,
            next: NIL,
        };
        let idx = if self.free != NIL {
            let idx = self.free;
            self.free = self.nodes[idx as usize].next;
            self.nodes[idx as usize] = node;
            idx
        } else {
            let idx = u32::try_from(self.nodes.len())
                .ok()
                .filter(|&i| i != NIL)
                .expect("more than u32::MAX - 1 keys pending on one receiver");
            self.nodes.push(node);
            idx
        };
        match self.tail {
            NIL => self.head = idx,
            tail => self.nodes[tail as usize].next = idx,
        }
        self.tail = idx;
        self.len += 1;
        idx
    }

    /// The oldest ticket, without removing it.
    pub(crate) fn front(&self) -> Option<(&K, u64, u64)> {
        match self.head {
            NIL => None,
            head => {
                let n = &self.nodes[head as usize];
                Some((n.key.as_ref().expect("linked node has a key"), n.hash, n.id))
            }
        }
    }

    pub(crate) fn pop_front(&mut self) -> Option<Ticket<K>> {
        match self.head {
            NIL => None,
            head => Some(self.unlink(head)),
        }
    }

    /// Unlinks the ticket at `idx` if it is still the one with `id`.
    pub(crate) fn remove(&mut self, idx: u32, id: u64) -> bool {
        let live = self
            .nodes
            .get(idx as usize)
            .is_some_and(|n| n.key.is_some() && n.id == id);
        if live {
            drop(self.unlink(idx));
        }
        live
    }

    /// Moves every ticket, oldest first, into `out`, and empties the list (keeping
    /// its capacity). Walks the links once; no per-ticket unlinking.
    pub(crate) fn drain_into(&mut self, out: &mut Vec<Ticket<K>>) {
        out.reserve(self.len);
        let mut at = self.head;
        while at != NIL {
            let node = &mut self.nodes[at as usize];
            out.push(Ticket {
                key: node.key.take().expect("linked node has a key"),
                hash: node.hash,
                id: node.id,
            });
            at = node.next;
        }
        self.clear();
    }

    /// Empties the list, keeping its capacity.
    pub(crate) fn clear(&mut self) {
        self.nodes.clear();
        self.head = NIL;
        self.tail = NIL;
        self.free = NIL;
        self.len = 0;
    }

    fn unlink(&mut self, idx: u32) -> Ticket<K> {
        let (prev, next) = {
            let n = &self.nodes[idx as usize];
            (n.prev, n.next)
        };
        match prev {
            NIL => self.head = next,
            p => self.nodes[p as usize].next = next,
        }
        match next {
            NIL => self.tail = prev,
            n => self.nodes[n as usize].prev = prev,
        }
        let node = &mut self.nodes[idx as usize];
        let key = node.key.take().expect("linked node has a key");
        let ticket = Ticket {
            key,
            hash: node.hash,
            id: node.id,
        };
        node.next = self.free;
        self.free = idx;
        self.len -= 1;
        if self.len == 0 {
            // Nothing linked: drop the free list too, so indices restart at 0 and
            // the slab never holds more nodes than the peak pending count.
            self.clear();
        }
        ticket
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(list: &mut TicketList<u32>) -> Vec<u32> {
        std::iter::from_fn(|| list.pop_front().map(|t| t.key)).collect()
    }

    #[test]
    fn fifo_order_and_removal_from_every_position() {
        let mut l = TicketList::default();
        let idx: Vec<u32> = (0..5).map(|k| l.push_back(k, 0, u64::from(k))).collect();
        assert!(l.remove(idx[0], 0)); // head
        assert!(l.remove(idx[2], 2)); // middle
        assert!(l.remove(idx[4], 4)); // tail
        assert!(!l.remove(idx[4], 4), "removing twice is a no-op");
        assert_eq!(l.len(), 2);
        l.push_back(9, 0, 9); // reuses a freed node
        assert_eq!(keys(&mut l), vec![1, 3, 9]);
        assert!(l.is_empty());
    }

    #[test]
    fn stale_id_does_not_remove_a_reused_node() {
        let mut l = TicketList::default();
        let a = l.push_back(1, 0, 10);
        l.push_back(2, 0, 11);
        assert!(l.remove(a, 10));
        let b = l.push_back(3, 0, 12);
        assert_eq!(a, b, "node reused");
        assert!(!l.remove(a, 10), "old id must not unlink the new ticket");
        assert_eq!(keys(&mut l), vec![2, 3]);
    }
}
