//! The producers' side of a cell receiver's first-touch queue: the tail word,
//! `push` (one CAS on the tail word; at a block boundary, installing the next
//! block) and the cut's instant (`start_cut`) (docs/design.md, "The
//! first-touch queue").

use super::*;

impl Queue {
    /// The tail word now. Acquire: pairs with the cut's Release RMW, so a
    /// producer that sees a new epoch sees what the cut stored before it.
    #[inline]
    pub(crate) fn tail(&self) -> Tail {
        Tail(self.tail.load(Ordering::Acquire))
    }

    /// Appends an entry for `cell` whose sends are counted from `start`.
    /// One CAS on the tail word when uncontended; never waits for the consumer
    /// (only, at a block boundary, for the producer installing the next block).
    #[inline(always)]
    pub(crate) fn push(&self, cell: CellId, start: u64) -> Pushed {
        // The common case: a place inside an installed block, no contention.
        let tail = self.tail.load(Ordering::Acquire);
        let block = self.tail_block.load(Ordering::Acquire);
        let offset = Tail(tail).pos() % LAP;
        if offset + 1 < BLOCK_CAP && !block.is_null() {
            let claimed = (tail + POS_ONE) & !PARKED;
            // AcqRel: as in `push_slow`.
            if self
                .tail
                .compare_exchange_weak(tail, claimed, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                // SAFETY: the claim succeeded on a word whose position lies
                // in `block` (producers load the tail before the block, and
                // the block changes only after the tail passed its marker);
                // the consumer frees it only after reading this place.
                let b = unsafe { &*block };
                let i = offset as usize;
                b.starts[i].store(start, Ordering::Relaxed);
                // Release: the consumer's Acquire load of the id sees the
                // start too.
                b.cells[i].store(cell + 1, Ordering::Release);
                let t = Tail(tail);
                return Pushed {
                    epoch: t.epoch(),
                    wake: t.parked(),
                };
            }
        }
        self.push_slow(cell, start)
    }

    #[inline(never)]
    fn push_slow(&self, cell: CellId, start: u64) -> Pushed {
        let backoff = Backoff::new();
        let mut tail = self.tail.load(Ordering::Acquire);
        let mut block = self.tail_block.load(Ordering::Acquire);
        let mut next_block: Option<Box<Block>> = None;
        loop {
            let t = Tail(tail);
            let offset = t.pos() % LAP;
            if offset == BLOCK_CAP {
                // Another producer is installing the next block.
                snooze(&backoff);
                tail = self.tail.load(Ordering::Acquire);
                block = self.tail_block.load(Ordering::Acquire);
                continue;
            }
            if offset + 1 == BLOCK_CAP && next_block.is_none() {
                // Allocated before the claim, so the marker window is short.
                next_block = Some(self.fresh_block());
            }
            if block.is_null() {
                // The first push ever: install the first block.
                let new = Box::into_raw(next_block.take().unwrap_or_else(|| self.fresh_block()));
                // Release: the block's initialization, for producers that load
                // `tail_block` with Acquire.
                match self.tail_block.compare_exchange(
                    ptr::null_mut(),
                    new,
                    Ordering::Release,
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        // Release: the consumer's Acquire load of `first`.
                        self.first.store(new, Ordering::Release);
                        block = new;
                    }
                    Err(installed) => {
                        // SAFETY: `new` was never shared; kept for the next
                        // block this producer may need.
                        next_block = Some(unsafe { Box::from_raw(new) });
                        block = installed;
                    }
                }
                continue;
            }
            let claimed = (tail + POS_ONE) & !PARKED;
            // AcqRel: Acquire so a producer that lands after a cut sees what
            // the cut published; Release for the consumer's view of the tail
            // (the place itself is published by its own Release store below).
            match self.tail.compare_exchange_weak(
                tail,
                claimed,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    let b = block;
                    if offset + 1 == BLOCK_CAP {
                        let next = Box::into_raw(next_block.take().expect("allocated above"));
                        // The next block becomes the tail block before the
                        // tail moves past the marker (Release: producers that
                        // see the new tail position see the new block).
                        self.tail_block.store(next, Ordering::Release);
                        // Past the marker: an RMW, so a concurrent cut or
                        // park on the word is never lost.
                        self.tail.fetch_add(POS_ONE, Ordering::AcqRel);
                        // SAFETY: `b` is the block this producer claimed a
                        // place in; the consumer frees it only after reading
                        // every place, including the one written below.
                        unsafe { (*b).next.store(next, Ordering::Release) };
                    }
                    // SAFETY: as above: the block lives until the consumer
                    // has read this place, which waits for the store below.
                    let place = unsafe { &*b };
                    let i = offset as usize;
                    place.starts[i].store(start, Ordering::Relaxed);
                    // Release: the consumer's Acquire load of the id sees the
                    // start too.
                    place.cells[i].store(cell + 1, Ordering::Release);
                    if let Some(unused) = next_block {
                        // Allocated for a boundary another producer took.
                        self.keep_spare(unused);
                    }
                    return Pushed {
                        epoch: t.epoch(),
                        wake: t.parked(),
                    };
                }
                Err(now) => {
                    tail = now;
                    block = self.tail_block.load(Ordering::Acquire);
                    backoff.spin();
                }
            }
        }
    }

    /// Starts a cut: every entry pushed so far belongs to it, every later one
    /// to the next epoch. Returns the word before (its position ends the cut,
    /// its epoch is the cut's). AcqRel: the cut's instant in the tail word's
    /// modification order; Release so a producer landing in the new epoch
    /// sees what the consumer stored before (its announced epoch).
    ///
    /// The cut's end is published with the instant, under the published
    /// head's lock: a reader walking the queue then skips the cut's entries
    /// (a key of the cut sent again after the instant has a second entry,
    /// past the end; the first is the cut's to take), and one that walked
    /// before the instant saw no entry of the next epoch.
    pub(crate) fn start_cut(&self) -> Tail {
        let mut seen = lock(&self.seen.block);
        let before = Tail(self.tail.fetch_add(1 << EPOCH_SHIFT, Ordering::AcqRel));
        seen.cut_end = before.pos();
        before
    }
}
