//! The consumer side of a receiver with its own values: `pop`, `peek` and
//! the cut (`cut_into`), which take tickets from the first-touch queue and
//! their entries from the key shards (docs/design.md, "Own-value receivers:
//! the core", "The cut is one instant").

use super::*;

impl<K, V> RxCore<K, V> {
    /// Forgets an annihilated (or merge-panicked) pending value's ticket; called
    /// with its shard locked. `epoch` is the cut epoch the value became pending
    /// in.
    pub(super) fn retire(&self, seg: u32, ticket: NonZeroU32, epoch: u32) {
        let cell = &*self.queue;
        let mut q = cell.lock.lock();
        if seg == q.seg {
            q.shared.remove(ticket.get() - 1);
            cell.queued.store(q.shared.len(), Ordering::Release);
        }
        // Otherwise the ticket is in the consumer's private list, which skips it.
        if self.max_pending.is_some() && epoch != q.epoch {
            // A cut started after this value became pending (a send read the
            // old epoch, then its merge ran while the cut's queue section
            // ran): that cut counted the value in `taken`, but it will find
            // the ticket stale and deliver nothing. Take it back out, or
            // `live - taken` would wrap once `live` drops below.
            q.taken = q
                .taken
                .checked_sub(1)
                .expect("keybus: a cut counted this value in `taken`");
        }
        let live = cell.live.load(Ordering::Relaxed);
        cell.live.store(
            live.checked_sub(1)
                .expect("keybus: a retired value was counted live"),
            Ordering::Release,
        );
    }

    /// Moves the shared list into the consumer's (empty) private list. O(1).
    fn refill(&self, local: &mut Local) -> bool {
        debug_assert!(local.private.is_empty());
        let cell = &*self.queue;
        // An empty queue costs the consumer one load, not the senders' lock. A
        // ticket pushed after this load is found by the waiter's next look (see
        // `wait.rs` for why the wake-up cannot be lost).
        if cell.queued.load(Ordering::Acquire) == 0 {
            return false;
        }
        let mut q = cell.lock.lock();
        if q.shared.is_empty() {
            return false;
        }
        mem::swap(&mut q.shared, &mut local.private);
        local.private_seg = q.seg;
        cell.queued.store(0, Ordering::Release);
        q.seg = q.seg.wrapping_add(1);
        true
    }

    /// Takes the entry `ticket` (of the list of segment `seg`) names, if it is
    /// still pending (consumer only, outside a cut). A bounded receiver also
    /// counts the take where senders check the bound, before the key's shard is
    /// released (see `enqueue`).
    fn claim(&self, ticket: Ticket, seg: u32) -> Option<Event<K, V>> {
        let (shard, index) = unpack(ticket.place);
        let mut keys = self.shards[shard].lock.lock();
        let found = keys.take_ticket(index, ticket.index, seg);
        if found.is_some() && self.max_pending.is_some() {
            self.queue.lock.lock().taken += 1;
        }
        drop(keys);
        found.map(event)
    }

    /// Pops the oldest pending key (consumer only). Out of line: a cell
    /// receiver's pop, beside it in `Kind::pop`, stays lean.
    #[inline(never)]
    pub(crate) fn pop(&self, local: &mut Local) -> Option<Event<K, V>> {
        loop {
            let ticket = match local.private.pop_front() {
                Some(t) => t,
                None if self.refill(local) => continue,
                None => return None,
            };
            if let Some(event) = self.claim(ticket, local.private_seg) {
                self.consumed.took(1, event.sends);
                return Some(event);
            }
            // A stale ticket: its value was annihilated after the ticket left the
            // shared list, or a hard close cleared it. In the second case stop
            // here: the next ticket's shard may not be cleared yet, and
            // delivering it would skip this one.
            if self.is_closed() {
                return None;
            }
        }
    }

    /// Takes everything pending as of one instant, in queue order (consumer only).
    ///
    /// The instant is the queue-lock critical section below, which bumps the epoch
    /// and detaches the shared list together. Ordering argument:
    /// - A send that pushed its ticket before it is in the detached list; one that
    ///   pushes after lands in the new list and stamps its entry with the new epoch
    ///   (it reads the epoch under the queue lock).
    /// - A send that merges into a detached key's entry holds that shard's lock
    ///   while it reads `self.epoch` and merges. If it locked the shard before the
    ///   drain visits the shard, the drain sees its merge; if after, it
    ///   happens-after the drain's lock, hence after the epoch store, so it reads
    ///   the new epoch and does not merge into the cut's value. A merge included
    ///   in the batch read the old epoch, so no send that happened-before it can
    ///   have read the new one (coherence): the batch is closed under
    ///   happens-before, i.e. one cut.
    ///
    /// The drain visits each shard once, under its lock. A shard whose newest
    /// entry is older than the cut's epoch holds only entries the cut owns (every
    /// entry made since the bump carries the new epoch; older cuts drained
    /// theirs): the cut takes its slab whole and clears its table (O(1) plus a
    /// memset of the control bytes) and then reads the entries its tickets name
    /// with no lock held and no probe. A shard where a send already made an entry
    /// of the new epoch is claimed ticket by ticket, `CLAIM_CHUNK` per lock.
    ///
    /// The batch is appended to `out`; returns how many events it holds. No
    /// allocation once `out` has room for the batch, unless sends race the cut
    /// into a shard it cannot take whole (`claim_mixed` then allocates its
    /// scratch lists).
    pub(crate) fn cut_into(&self, local: &mut Local, out: &mut Vec<Event<K, V>>) -> usize {
        // Nothing queued anywhere: the empty batch is the instant of this load (a
        // pending value always has its ticket in one of the two lists).
        if local.private.is_empty() && self.queue.queued.load(Ordering::Acquire) == 0 {
            return 0;
        }
        let (epoch, spare_seg) = {
            let mut q = self.queue.lock.lock();
            q.epoch = q.epoch.wrapping_add(1);
            // Release pairs with the Acquire in `deliver` (the lock order already
            // gives the ordering the argument above needs; this keeps the atomic's
            // own contract readable in isolation).
            self.epoch.store(u64::from(q.epoch), Ordering::Release);
            let spare_seg = q.seg;
            q.seg = q.seg.wrapping_add(1);
            mem::swap(&mut q.shared, &mut local.spare);
            self.queue.queued.store(0, Ordering::Release);
            if self.max_pending.is_some() {
                // Everything pending now belongs to this cut: to senders checking
                // the bound, nothing is pending any more (see `enqueue`). Relaxed:
                // `live` is written only under this lock.
                q.taken = self.queue.live.load(Ordering::Relaxed);
            }
            (q.epoch, spare_seg)
        };
        // Each shard once: take its slab whole if every entry in it is the cut's.
        let mut whole: [Option<Box<Slab<K, V>>>; SHARDS] = Default::default();
        let mut mixed = [false; SHARDS];
        for (s, shard) in self.shards.iter().enumerate() {
            let mut keys = shard.lock.lock();
            match keys.slab.as_deref() {
                Some(slab) if slab.newest == epoch => mixed[s] = true,
                Some(_) => {
                    keys.table.clear();
                    whole[s] = keys.slab.take();
                }
                None => {} // no entry: its tickets, if any, are stale
            }
        }
        let Local {
            private,
            private_seg,
            spare,
            ..
        } = &mut *local;
        let lists = [(private, *private_seg), (spare, spare_seg)];
        let total = lists.iter().map(|(l, _)| l.len()).sum();
        let start = out.len();
        if mixed.contains(&true) {
            out.extend(self.claim_mixed(lists, total, &mut whole, &mixed));
        } else {
            out.reserve(total);
            for (list, seg) in lists {
                list.drain(|t| {
                    let (s, index) = unpack(t.place);
                    if let Some(e) = whole[s]
                        .as_deref_mut()
                        .and_then(|slab| slab.take_ticket_whole(index, t.index, seg))
                    {
                        out.push(event(e));
                    }
                });
            }
        }
        self.return_slabs(whole);
        let batch = out.len() - start;
        let sends: u64 = out[start..].iter().map(|e| e.sends).sum();
        if self.is_closed() {
            // A hard close raced the drain and may have cleared part of it: the
            // cut then falls after the close, which abandons everything. What
            // the cut had claimed is dropped, like what the close cleared.
            self.consumed.dropped(sends);
            out.truncate(start);
            0
        } else {
            self.consumed.took(batch as u64, sends);
            batch
        }
    }

    /// A cut's drain when some shards could not be taken whole: tickets of the
    /// shards taken whole are read from their slabs, the others are claimed
    /// under their shard's lock, grouped by shard, `CLAIM_CHUNK` per lock; the
    /// batch keeps queue order.
    fn claim_mixed(
        &self,
        lists: [(&mut TicketList, u32); 2],
        total: usize,
        whole: &mut [Option<Box<Slab<K, V>>>; SHARDS],
        mixed: &[bool; SHARDS],
    ) -> impl Iterator<Item = Event<K, V>> {
        let mut out: Vec<Option<Event<K, V>>> = Vec::with_capacity(total);
        // (position in `out`, ticket, segment) of each ticket of a mixed shard.
        let mut later: Vec<(usize, Ticket, u32)> = Vec::new();
        for (list, seg) in lists {
            list.drain(|t| {
                let (s, index) = unpack(t.place);
                if mixed[s] {
                    later.push((out.len(), t, seg));
                    out.push(None);
                } else if let Some(e) = whole[s]
                    .as_deref_mut()
                    .and_then(|slab| slab.take_ticket_whole(index, t.index, seg))
                {
                    out.push(Some(event(e)));
                }
            });
        }
        // Stable: queue order within a shard (not needed for the batch's order,
        // which `out` keeps, but it keeps the claims' slab accesses in order).
        later.sort_by_key(|&(_, t, _)| unpack(t.place).0);
        for chunk in later.chunk_by(|a, b| unpack(a.1.place).0 == unpack(b.1.place).0) {
            let shard = &self.shards[unpack(chunk[0].1.place).0];
            for part in chunk.chunks(CLAIM_CHUNK) {
                let mut keys = shard.lock.lock();
                for &(pos, t, seg) in part {
                    out[pos] = keys.take_ticket(unpack(t.place).1, t.index, seg).map(event);
                }
            }
        }
        out.into_iter().flatten()
    }

    /// Gives the emptied slabs a cut took whole back to their shards, if no
    /// send has made a new one there meanwhile, so that a receiver drained by
    /// cuts reuses its slabs' capacity instead of regrowing them.
    fn return_slabs(&self, whole: [Option<Box<Slab<K, V>>>; SHARDS]) {
        for (shard, slab) in self.shards.iter().zip(whole) {
            let Some(mut slab) = slab else { continue };
            // Every entry in it had its ticket in the cut's lists and was taken,
            // unless a hard close raced the cut; either way the rest is dropped
            // here, outside any lock.
            debug_assert!(slab.len() == 0 || self.is_closed());
            slab.clear();
            let mut keys = shard.lock.lock();
            if keys.slab.is_none() && !self.is_closed() {
                keys.slab = Some(slab);
            }
        }
    }
}

impl<K, V> RxCore<K, V>
where
    K: Eq + Clone,
{
    /// A copy of the oldest pending key's event (consumer only).
    pub(crate) fn peek(&self, local: &mut Local) -> Option<Event<K, V>>
    where
        V: Clone,
    {
        loop {
            if local.private.is_empty() && !self.refill(local) {
                return None;
            }
            let ticket = local.private.front().expect("refilled");
            let (shard, index) = unpack(ticket.place);
            let keys = self.shards[shard].lock.lock();
            let found = keys
                .slab
                .as_deref()
                .and_then(|slab| slab.get(index))
                .filter(|e| e.is_ticket(ticket.index, local.private_seg))
                .map(|e| Event::new(e.key.clone(), e.value.clone(), e.sends));
            drop(keys);
            match found {
                Some(event) => return Some(event),
                None if self.is_closed() => return None,
                None => drop(local.private.pop_front()), // stale ticket
            }
        }
    }
}
