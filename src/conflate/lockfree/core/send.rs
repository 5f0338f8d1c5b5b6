//! The send side of a receiver with its own values: `deliver` (filter,
//! coalesce or start a pending entry, append its ticket) and `seed` (a
//! snapshot receiver's start) (docs/design.md, "Own-value receivers: the
//! core", "The cut is one instant").

use super::*;

impl<K, V> RxCore<K, V> {
    /// Appends a ticket naming slab index `index` of shard `shard`; called with
    /// that shard locked, before the entry is stored there. Reports where the
    /// ticket went and whether the shared list was empty before.
    ///
    /// A bounded receiver with `max_pending` keys pending refuses (drop-new)
    /// and nothing changes. The count it compares is exact at this critical
    /// section: `live` changes only under this lock, and so does `taken` for a
    /// bounded receiver (a pop adds to it before it releases the taken key's
    /// shard, so no send can see that key gone while the count still holds it;
    /// a cut zeroes the pending count in the same section that makes it one
    /// instant).
    fn enqueue(&self, shard: usize, index: u32) -> Option<Queued> {
        let cell = &*self.queue;
        let mut q = cell.lock.lock();
        if let Some(max) = self.max_pending {
            // Relaxed: written only under this lock.
            // `taken <= live` here: a pop counts a value it took (which was
            // live), a cut sets `taken = live`, and a value a cut counted but
            // that is then annihilated is taken back out in `retire`.
            let pending = cell
                .live
                .load(Ordering::Relaxed)
                .checked_sub(q.taken)
                .expect("keybus: a bounded receiver counted more values taken than live");
            if pending >= max {
                return None;
            }
        }
        let ticket = q.shared.push_back(pack(shard, index));
        let queued = q.shared.len();
        // Plain stores under the lock (no read-modify-write). Release pairs with
        // the consumer's lock-free Acquire loads in `refill` and `len`.
        cell.queued.store(queued, Ordering::Release);
        let live = cell.live.load(Ordering::Relaxed);
        cell.live.store(live + 1, Ordering::Release);
        // The epoch is read under the queue lock, so it names the list the ticket
        // is really in, even if a cut ran since this send read `self.epoch`.
        Some(Queued {
            epoch: q.epoch,
            seg: q.seg,
            ticket: NonZeroU32::new(ticket + 1).expect("a ticket index is below u32::MAX"),
            first: queued == 1,
        })
    }
}

impl<K, V> RxCore<K, V>
where
    K: Eq + Clone,
{
    /// Makes `entries` (hash, key, value; a snapshot of the hub's table, in its
    /// order) pending with `sends == 0`. Called before the receiver is
    /// registered, so nothing races it.
    pub(crate) fn seed(&self, entries: impl IntoIterator<Item = (u64, K, V)>) {
        for (hash, key, value) in entries {
            let shard = shard_index(hash);
            let mut keys = self.shards[shard].lock.lock();
            let made = self.make_entry(&mut keys, shard, hash, key, value, 0, None);
            assert!(made.is_ok(), "the caller seeds at most max_pending keys");
        }
    }

    /// Whether one send reaches this receiver: it is open and its key filter
    /// accepts the key (a rejection is counted here). Runs the key filter (no
    /// lock held); if it panics, nothing changed at this receiver. Called
    /// before the caller clones the value for it, so a receiver that rejects
    /// the key costs no clone.
    #[inline]
    pub(crate) fn admits(&self, hash: u64, key: &K) -> bool {
        // Relaxed: a stale `false` only delivers into a receiver that is closing,
        // whose values are dropped with it.
        if self.flags.is_closed_relaxed() {
            return false;
        }
        if !self.filter.accepts(key) {
            // Relaxed: a count that orders nothing (and is in no conservation
            // sum); the only shard-counter RMW, and only on a rejection.
            self.shards[shard_index(hash)]
                .filtered
                .fetch_add(1, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Fans one send that this receiver [admits](Self::admits) into it. Runs
    /// the merge (this key's shard lock held, nothing else). If it panics, the
    /// panic continues after this receiver's state is repaired: a panicking
    /// merge drops the key's pending value here (conflate rule 9,
    /// docs/design.md).
    ///
    /// Two steps under the shard lock: [`Self::coalesce`] when the key has an
    /// entry, [`Self::start_pending`] when it has none.
    #[inline(never)]
    pub(crate) fn deliver(&self, hash: u64, key: &K, value: V) {
        let shard = shard_index(hash);
        let cell = &self.shards[shard];
        let mut keys = cell.lock.lock();
        // Checked again under the shard lock: `clear` marks the receiver closed
        // before it empties each shard under that shard's lock, so once a shard
        // was cleared nothing enters it again (a value landing after a hard close
        // could otherwise be delivered past a hole the close made).
        if self.flags.is_closed() {
            return;
        }
        // Acquire pairs with the Release in `cut_into`. The argument that a cut is one
        // instant needs only that this load happens under the shard lock: see `cut_into`.
        let epoch = self.epoch.load(Ordering::Acquire) as u32;
        // `find` never reserves room for an insert (which could grow a full
        // table), so coalescing never allocates.
        let outcome = match keys.find(hash, key) {
            None => self.start_pending(cell, &mut keys, shard, hash, key, value, None),
            Some((_, entry)) if entry.epoch == epoch && matches!(self.merge, Merge::NewerWins) => {
                // The common case, inline: the default merge, in place. No user
                // code, nothing to repair if it unwinds (only `V`'s own drop runs
                // here, and an assignment re-initializes its place on unwind).
                bump(&cell.received, 1);
                entry.value = value;
                entry.sends += 1;
                Delivered::Done
            }
            Some((index, _)) => {
                self.coalesce(cell, &mut keys, shard, index, epoch, hash, key, value)
            }
        };
        drop(keys);
        match outcome {
            Delivered::Done => {}
            Delivered::Wake => {
                // A parked consumer last saw the shared list empty, so only the
                // send that makes it non-empty needs to wake it (the consumer
                // registers its listener before its last look; see `wait.rs`).
                // Every listener: a `Stream` poll may have left one registered
                // that nobody waits on.
                self.notify.notify(usize::MAX);
            }
            // Outside the lock: a key's or value's drop is user code.
            Delivered::Refused(key, value) => drop((key, value)),
            Delivered::Annihilated(key) => drop(key),
        }
    }

    /// The start-pending step: a send for a key with no entry in this shard's
    /// table gets an entry and a ticket at the back, unless the receiver is
    /// full. `detach` is the key's entry that a cut owns, if there is one: it
    /// leaves the table (the cut reaches it by its ticket) once the new entry
    /// is certain. Called with the key's shard locked.
    #[allow(clippy::too_many_arguments)]
    fn start_pending(
        &self,
        cell: &Shard<K, V>,
        keys: &mut Keys<K, V>,
        shard: usize,
        hash: u64,
        key: &K,
        value: V,
        detach: Option<u32>,
    ) -> Delivered<K, V> {
        // The one copy of the key is made before anything changes, so a
        // panicking `K::clone` leaves this receiver as it was.
        let key = key.clone();
        bump(&cell.received, 1);
        match self.make_entry(keys, shard, hash, key, value, 1, detach) {
            Ok(first) => Delivered::queued(first),
            Err((key, value)) => {
                self.rare.overflowed.fetch_add(1, Ordering::Release);
                Delivered::Refused(key, value)
            }
        }
    }

    /// Queues a ticket for a new entry and stores the entry in `shard`'s slab
    /// and table (after taking `detach` out of the table), or hands key and
    /// value back if a bounded receiver is full. Returns whether the shared
    /// list was empty before. Called with the shard locked; runs no user code.
    #[allow(clippy::too_many_arguments)]
    fn make_entry(
        &self,
        keys: &mut Keys<K, V>,
        shard: usize,
        hash: u64,
        key: K,
        value: V,
        sends: u64,
        detach: Option<u32>,
    ) -> Result<bool, (K, V)> {
        // May panic (a full shard) before anything changed.
        let index = keys.slab_mut().next_index();
        let Some(queued) = self.enqueue(shard, index) else {
            return Err((key, value));
        };
        let hash32 = hash as u32;
        if let Some(old) = detach {
            let was_indexed = keys.unindex(hash32, old);
            debug_assert!(was_indexed, "the cut's entry was found in the table");
        }
        let slab = keys.slab_mut();
        slab.newest = queued.epoch;
        let stored = slab.insert(Pending {
            key,
            value,
            sends,
            hash: hash32,
            epoch: queued.epoch,
            seg: queued.seg,
            ticket: queued.ticket,
        });
        debug_assert_eq!(stored, index);
        keys.index(hash32, index);
        Ok(queued.first)
    }

    /// The coalesce step: a send for a key that has an entry merges into its
    /// pending value of the current epoch, or, if the entry's value belongs to a
    /// cut, starts a fresh entry at the back. Called with the key's shard locked;
    /// a panicking merge unwinds from here with the shard repaired.
    #[allow(clippy::too_many_arguments)]
    fn coalesce(
        &self,
        cell: &Shard<K, V>,
        keys: &mut Keys<K, V>,
        shard: usize,
        index: u32,
        epoch: u32,
        hash: u64,
        key: &K,
        value: V,
    ) -> Delivered<K, V> {
        let slab = keys
            .slab
            .as_deref_mut()
            .expect("an indexed entry has a slab");
        let entry = slab.get_mut(index).expect("the table names full places");
        if entry.epoch != epoch {
            // The entry's value belongs to a cut that has not drained it yet:
            // leave it to the cut and start afresh at the back.
            return self.start_pending(cell, keys, shard, hash, key, value, Some(index));
        }
        bump(&cell.received, 1);
        if let Merge::NewerWins = &self.merge {
            // The default merge, in place: no user code, nothing to repair if
            // it unwinds (only `V`'s own drop runs here, and an assignment
            // re-initializes its place on unwind).
            entry.value = value;
            entry.sends += 1;
            return Delivered::Done;
        }
        // The merge consumes the pending value: vacate the place (its index stays
        // reserved, and table and ticket still name it), and put the entry back
        // only if the merge returns a value.
        let Pending {
            key: own_key,
            value: prev,
            sends,
            hash: hash32,
            epoch,
            seg,
            ticket,
        } = slab.vacate(index);
        let merge = &self.merge;
        match panic::catch_unwind(AssertUnwindSafe(|| merge.apply(prev, value))) {
            Ok(Some(value)) => {
                slab.restore(
                    index,
                    Pending {
                        key: own_key,
                        value,
                        sends: sends + 1,
                        hash: hash32,
                        epoch,
                        seg,
                        ticket,
                    },
                );
                Delivered::Done
            }
            Ok(None) => {
                self.rare
                    .annihilated
                    .fetch_add(sends + 1, Ordering::Release);
                slab.release(index);
                keys.unindex(hash32, index);
                self.retire(seg, ticket, epoch);
                Delivered::Annihilated(own_key)
            }
            Err(payload) => {
                self.rare.dropped.fetch_add(sends + 1, Ordering::Release);
                slab.release(index);
                keys.unindex(hash32, index);
                self.retire(seg, ticket, epoch);
                // The caller's shard guard is released as this unwinds.
                panic::resume_unwind(payload);
            }
        }
    }
}
