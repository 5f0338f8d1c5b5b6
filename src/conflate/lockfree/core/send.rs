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
    pub(crate) fn admits(&self, key: &K) -> bool {
        // Relaxed: a stale `false` only delivers into a receiver that is closing,
        // whose values are dropped with it.
        if self.flags.is_closed_relaxed() {
            return false;
        }
        if !self.filter.accepts(key) {
            // In this thread's slot: no shared read-modify-write.
            self.filtered.add_one();
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
    /// Inline here, the two cases of a send that coalesces into an entry of
    /// the current epoch: the default merge (an assignment) and the
    /// receiver's own (in place). Every other case is out of line, so this
    /// frame keeps few values live: [`Self::deliver_new`] for a key with no
    /// entry or an entry a cut owns, [`Self::merge_ended`] for a merge that
    /// annihilated or panicked.
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
        // `find` never reserves room for an insert (which could grow a full
        // table), so coalescing never allocates.
        let Some((index, entry)) = keys.find(hash, key) else {
            return self.deliver_new(keys, hash, key, value, None);
        };
        // Acquire pairs with the Release in `cut_into`. The argument that a cut is one
        // instant needs only that this load happens under the shard lock: see `cut_into`.
        // (After the probe, which then has one register more; a new entry's
        // epoch is the queue's, read under the queue lock in `enqueue`.)
        let epoch = self.epoch.load(Ordering::Acquire) as u32;
        match &self.merge {
            Merge::NewerWins if entry.epoch == epoch => {
                // The default merge, in place. No user code, nothing to repair
                // if it unwinds (only `V`'s own drop runs here, and an
                // assignment re-initializes its place on unwind).
                bump(&cell.received, 1);
                entry.value = value;
                entry.sends += 1;
            }
            Merge::With(merge) if entry.epoch == epoch => {
                bump(&cell.received, 1);
                // The merge consumes the pending value: it is moved out of its
                // place, which stays in slab and table (and its ticket in the
                // queue) while the merge runs.
                // From here until it is written back the place is never read
                // or dropped: the shard lock is held throughout (no other
                // thread reaches the entry), the merge's panics are caught, a
                // merged value is written back before anything else, and
                // otherwise `merge_ended` takes the entry out and forgets
                // this field before anything that could panic.
                // SAFETY: so reading `entry.value` (initialized) moves it out.
                let prev = unsafe { ptr::read(&entry.value) };
                match panic::catch_unwind(AssertUnwindSafe(|| merge(prev, value))) {
                    Ok(Some(merged)) => {
                        // SAFETY: the place `prev` was read from; writing
                        // leaves the moved-out copy undropped.
                        unsafe { ptr::write(&mut entry.value, merged) };
                        entry.sends += 1;
                    }
                    ended => self.merge_ended(keys, index, ended.err()),
                }
            }
            // The entry's value belongs to a cut that has not drained it yet:
            // leave it to the cut and start afresh at the back.
            _ => self.deliver_new(keys, hash, key, value, Some(index)),
        }
    }

    /// A send that starts a pending entry ([`Self::start_pending`]): for a key
    /// with no entry in its shard, or whose entry `detach` a cut owns. Takes
    /// the shard's guard from [`Self::deliver`], and releases it before the
    /// wake or the drops that follow.
    #[inline(never)]
    fn deliver_new(
        &self,
        mut keys: ShardMutexGuard<'_, Keys<K, V>>,
        hash: u64,
        key: &K,
        value: V,
        detach: Option<u32>,
    ) {
        // Recomputed, not passed: one value fewer live across `deliver`'s probe.
        let shard = shard_index(hash);
        let cell = &self.shards[shard];
        let outcome = self.start_pending(cell, &mut keys, shard, hash, key, value, detach);
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
        }
    }

    /// A merge in place (in [`Self::deliver`]) that handed no value back: it
    /// annihilated the key's pending value (`panicked` is `None`) or panicked
    /// (its payload); either way the merge consumed that value. Takes the
    /// entry out of slab and table and its ticket out of the queue, releases
    /// the shard, drops the entry's key, and continues the panic if there was
    /// one.
    #[cold]
    #[inline(never)]
    fn merge_ended(
        &self,
        mut keys: ShardMutexGuard<'_, Keys<K, V>>,
        index: u32,
        panicked: Option<Box<dyn Any + Send>>,
    ) {
        let slab = keys
            .slab
            .as_deref_mut()
            .expect("an indexed entry has a slab");
        let Pending {
            key,
            value,
            sends,
            hash: hash32,
            epoch,
            seg,
            ticket,
        } = slab.vacate(index);
        // The merge moved this value out (see `deliver`): these bits are a
        // copy of what it consumed, never to be dropped.
        mem::forget(value);
        slab.release(index);
        keys.unindex(hash32, index);
        let counter = match panicked {
            None => &self.rare.annihilated,
            Some(_) => &self.rare.dropped,
        };
        counter.fetch_add(sends + 1, Ordering::Release);
        self.retire(seg, ticket, epoch);
        drop(keys);
        // Outside the lock: a key's drop is user code.
        drop(key);
        if let Some(payload) = panicked {
            panic::resume_unwind(payload);
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
}
