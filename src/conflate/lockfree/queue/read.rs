//! The consumer's side of a cell receiver's first-touch queue: parking, `pop`,
//! `front`, the cut's drain (`drain_into`) and the walks over pending entries
//! (docs/design.md, "The first-touch queue").

use super::*;

impl Queue {
    /// Announces that the consumer is about to park, if the queue is still
    /// empty at `head`: `false` if a push got in first (look again instead).
    pub(crate) fn park(&self, head: &Head) -> bool {
        let mut tail = self.tail.load(Ordering::Acquire);
        loop {
            let t = Tail(tail);
            if t.parked() {
                return true;
            }
            if count(t.pos()) != count(head.pos) {
                return false;
            }
            // AcqRel: one point in the word's order; a later push sees it.
            match self.tail.compare_exchange_weak(
                tail,
                tail | PARKED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(now) => tail = now,
            }
        }
    }

    /// Entries pushed and not yet read by the consumer at `head`.
    pub(crate) fn len(&self, head: &Head) -> u64 {
        count(self.tail().pos()).saturating_sub(count(head.pos))
    }

    /// Reads the next entry at `head` if its position is below `end` (a
    /// position from a tail word): `(cell, start)`. Waits for a producer that
    /// claimed the place but has not written it yet. Consumer only.
    #[inline]
    pub(crate) fn pop(&self, head: &mut Head, end: Tail) -> Option<(CellId, u64)> {
        // The common case: a written place inside the current block. With
        // the head at a place (not a lap's marker), positions compare as
        // their counts do (`count` is monotonic and strict below a marker),
        // so the test needs no division; at a marker `take_written` declines
        // whatever the test said.
        if head.pos < end.pos() {
            if let Some(entry) = self.take_written(head) {
                return Some(entry);
            }
        }
        self.read(head, end, true)
    }

    /// [`Queue::pop`] with no bound but the tail: the next entry pushed, if
    /// any. A written place at the head was pushed (its producer claimed it
    /// from the tail first), so the common case reads that place only and
    /// leaves the tail word, the line every push writes, to the producers;
    /// the tail is loaded only when the place is not written yet or the head
    /// is at a block boundary. Consumer only.
    #[inline]
    pub(crate) fn pop_ready(&self, head: &mut Head) -> Option<(CellId, u64)> {
        self.take_written(head)
            .or_else(|| self.pop(head, self.tail()))
    }

    /// The place at `head`, if it is a place of the head's block (not a
    /// lap's marker) and written: its entry, and the head moves past it.
    #[inline(always)]
    fn take_written(&self, head: &mut Head) -> Option<(CellId, u64)> {
        let offset = head.pos % LAP;
        if head.block.is_null() || offset >= BLOCK_CAP {
            return None;
        }
        // SAFETY: the block is live (only the consumer frees blocks).
        let block = unsafe { &*head.block };
        let i = offset as usize;
        // Acquire pairs with the producer's Release store of the id.
        let c = block.cells[i].load(Ordering::Acquire);
        if c == 0 {
            return None;
        }
        head.pos += 1;
        self.publish(head);
        Some((c - 1, block.starts[i].load(Ordering::Relaxed)))
    }

    /// The entry [`Queue::pop`] would return, left in place (the head may
    /// move past a block boundary). Consumer only.
    pub(crate) fn front(&self, head: &mut Head, end: Tail) -> Option<(CellId, u64)> {
        self.read(head, end, false)
    }

    fn read(&self, head: &mut Head, end: Tail, consume: bool) -> Option<(CellId, u64)> {
        let end = end.pos();
        loop {
            if count(head.pos) >= count(end) {
                return None;
            }
            if head.block.is_null() {
                // Acquire pairs with the first producer's Release store.
                let backoff = Backoff::new();
                loop {
                    head.block = self.first.load(Ordering::Acquire);
                    if !head.block.is_null() {
                        break;
                    }
                    snooze(&backoff);
                }
            }
            let offset = head.pos % LAP;
            if offset == BLOCK_CAP {
                // Past the block's last place: on to the next block, and free
                // this one (every place in it was read).
                // SAFETY: `head.block` is live: only the consumer frees blocks,
                // and it frees this one here, once.
                let next = unsafe { (*head.block).wait_next() };
                let old = head.block;
                head.block = next;
                head.pos += 1;
                {
                    // Readers walking from the old block hold this lock: wait
                    // for them before freeing it.
                    let mut seen = lock(&self.seen.block);
                    seen.block = next;
                    seen.lap_start = head.pos;
                }
                self.publish(head);
                // SAFETY: every producer that claimed a place in this block has
                // written it (the consumer read them all) and touches the
                // block no more; the next block is linked; no reader can
                // still see it (the block change above).
                self.recycle(unsafe { Box::from_raw(old) });
                continue;
            }
            // SAFETY: as above.
            let block = unsafe { &*head.block };
            let entry = block.wait_entry(offset as usize);
            if consume {
                head.pos += 1;
                self.publish(head);
            }
            return Some(entry);
        }
    }

    /// Moves every entry from `head` up to `end` into `out`, in order
    /// (what `pop` would return one by one, with one bounds check per block
    /// rather than per entry). Consumer only.
    pub(crate) fn drain_into(&self, head: &mut Head, end: Tail, out: &mut Vec<(CellId, u64)>) {
        let end = count(end.pos());
        out.reserve(end.saturating_sub(count(head.pos)) as usize);
        while count(head.pos) < end {
            let offset = head.pos % LAP;
            if head.block.is_null() || offset == BLOCK_CAP {
                // A block boundary (or the first read): one entry the slow
                // way, which also moves to the next block.
                match self.pop(head, Tail(end_word(head, end))) {
                    Some(e) => out.push(e),
                    None => return,
                }
                continue;
            }
            // SAFETY: the block is live (only the consumer frees blocks, and
            // it frees a block only after reading all of it).
            let block = unsafe { &*head.block };
            let in_block = (BLOCK_CAP - offset).min(end - count(head.pos));
            block.copy_entries(offset as usize..(offset + in_block) as usize, out);
            head.pos += in_block;
            self.publish(head);
        }
    }

    /// Visits the entries from `head` to the tail without consuming them.
    /// The consumer, or a reader holding the published head's lock
    /// (`for_each_seen`): either way no block from `head` on is freed
    /// meanwhile.
    pub(crate) fn for_each_pending(&self, head: &Head, f: impl FnMut(CellId, u64)) {
        self.walk(head, self.tail(), 0, f);
    }

    /// Visits the entries from `head` up to `end`, but for those before
    /// `skip` entries (a count, see [`count`]), without consuming any.
    pub(super) fn walk(&self, head: &Head, end: Tail, skip: u64, mut f: impl FnMut(CellId, u64)) {
        let mut h = Head {
            pos: head.pos,
            block: head.block,
        };
        // Walks with a copy of the head and must not free blocks: stop at a
        // block boundary instead of passing it, then step by hand.
        loop {
            if count(h.pos) >= count(end.pos()) {
                return;
            }
            if h.block.is_null() {
                h.block = self.first.load(Ordering::Acquire);
                if h.block.is_null() {
                    return;
                }
            }
            let offset = h.pos % LAP;
            if offset == BLOCK_CAP {
                // SAFETY: the block is live (only the consumer frees blocks,
                // and it is the caller or waits for the caller's lock).
                h.block = unsafe { (*h.block).wait_next() };
                h.pos += 1;
                continue;
            }
            // SAFETY: as above.
            let block = unsafe { &*h.block };
            if count(h.pos) >= skip {
                let (cell, start) = block.wait_entry(offset as usize);
                f(cell, start);
            }
            h.pos += 1;
        }
    }
}
