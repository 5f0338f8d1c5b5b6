//! The take path of the hub's cells: a receiver's pop and peek, and the
//! entries a cut (`cut.rs`) cannot take the common way; each clears the
//! receiver's mark and moves or clones the value out (docs/design.md, "One
//! cell per key", "The cut is one instant").

use super::*;

impl<K: Eq + Clone, V: Clone> Cells<K, V> {
    /// Takes receiver `rx`'s entry `(cell, start)` of cut epoch `epoch`:
    /// the key, the value as of the entry's end, and its sends. `None` if the
    /// entry is stale (its receiver was cleared by a close). Consumer only.
    #[inline]
    pub(crate) fn take(
        &self,
        cell: CellId,
        start: u64,
        rx: &CellRx,
        epoch: u8,
    ) -> Option<Event<K, V>> {
        let (s, i) = split(cell);
        let shard = &self.shards[s];
        // The spin guard directly (no `ShardGuard` dispatch): unlocks also
        // when a clone unwinds.
        let spin = shard
            .lock
            .spin()
            .expect("only hubs with cell receivers take, and their shards spin");
        let (guard, _) = self.lock_or(spin);
        let place = shard.slab.place(i);
        let mut freed = Vec::new();
        let event = match Self::take_marked(shard, place, i, start, rx.id, epoch, &mut freed) {
            Some(event) => event,
            None => {
                // `guard` holds the shard's lock for this `Locked`.
                let mut sh = shard.locked(ShardGuard::None);
                let (event, f) = Self::take_other(&mut sh, i, start, rx.id);
                freed.extend(f);
                event
            }
        };
        drop(guard);
        drop(freed);
        event
    }

    /// The common take, for a caller holding `shard`'s lock, of its place
    /// `i` (`place`, as the caller found it): the entry's own mark, pending
    /// in `epoch` ([`CellData::take_entry`]). A cell left idle is kept or
    /// freed (into `freed`, to drop outside the lock) as
    /// [`Locked::settle_as`] decides. Returns the event (`None` if a hard
    /// close dropped the value), or `None` (nothing changed) if the entry is
    /// a deposit's or stale.
    #[inline(always)]
    fn take_marked(
        shard: &Shard<K, V>,
        place: &Place<K, V>,
        i: u32,
        start: u64,
        id: u32,
        epoch: u8,
        freed: &mut Vec<CellData<K, V>>,
    ) -> Option<Option<Event<K, V>>> {
        // SAFETY: the caller holds the shard's lock; `place` is place `i` of
        // its slab, in use (the caller's entry names it and its mark or
        // deposit keeps it); no other cell reference is live across the uses
        // below.
        let cell = unsafe { place.cell() };
        let (key, value) = cell.take_entry(id, epoch)?;
        let seq = place.seq.load(Ordering::Relaxed);
        if cell.idle() {
            // Pending nowhere now; `cell` is not used past here.
            Self::settle_taken(shard, i, freed);
        }
        // No value only after a hard close dropped it (`drop_values`): the
        // take is stale then.
        Some(value.map(|v| Event::new(key, v, seq - start)))
    }

    /// Frees cell `i`, idle after a take, past the shard's keep (into
    /// `freed`). Out of line: a recurring key set frees nothing.
    #[cold]
    #[inline(never)]
    fn free_taken(shard: &Shard<K, V>, i: u32, freed: &mut Vec<CellData<K, V>>) {
        // The caller holds the shard's lock for this `Locked`.
        let mut sh = shard.locked(ShardGuard::None);
        freed.push(sh.free(i));
    }

    /// An entry that is not its own mark's: the receiver's deposit for the
    /// cell, or stale (`(None, None)`).
    #[cold]
    #[inline(never)]
    fn take_other(sh: &mut Locked<'_, K, V>, i: u32, start: u64, id: u32) -> Taken<K, V> {
        let cell = sh.cell(i);
        if cell.has_deposits() {
            if let Some(at) = sh
                .d()
                .deposits
                .iter()
                .position(|d| d.cell == i && d.rx == id)
            {
                // The user code first (see `take_marked`).
                let key = sh.cell(i).key.clone();
                let deps = &mut sh.d().deposits;
                let d = deps.swap_remove(at);
                let more = deps.iter().any(|d| d.cell == i);
                let cell = sh.cell(i);
                let was_idle = cell.idle();
                if !more {
                    cell.set_deposits(false);
                }
                let freed = sh.settle(i, was_idle);
                return (Some(Event::new(key, d.value, d.seq_end - start)), freed);
            }
        }
        (None, None)
    }

    /// A copy of what [`Cells::take`] would return, left in place.
    pub(crate) fn peek(
        &self,
        cell: CellId,
        start: u64,
        rx: &CellRx,
        epoch: u8,
    ) -> Option<Event<K, V>> {
        let (s, i) = split(cell);
        let sh = self.lock(s);
        let seq = sh.place(i).seq.load(Ordering::Relaxed);
        let c = sh.cell(i);
        let mark = c.mark(rx.id);
        if mark & PENDING != 0 && mark_epoch(mark) == epoch {
            // No value only after a hard close (see `take_locked`).
            let v = c.value()?;
            return Some(Event::new(c.key.clone(), v.clone(), seq - start));
        }
        None
    }

    /// A cell left idle by a take (it was pending here, so not idle before),
    /// under its shard's lock: kept, or freed into `freed` past the shard's
    /// keep (`settle_as(i, false, true)`, written out so that the common case
    /// stays inline).
    #[inline(always)]
    pub(super) fn settle_taken(shard: &Shard<K, V>, i: u32, freed: &mut Vec<CellData<K, V>>) {
        // SAFETY: the caller holds the lock; no other reference to the
        // shard's data is live.
        let d = shard.data.with_mut(|p| unsafe { &mut *p });
        if d.idle < d.idle_cap() {
            d.idle += 1;
        } else {
            Self::free_taken(shard, i, freed);
        }
    }

    /// A cut's take of an entry [`CellData::take_common`] left alone: a
    /// value a hard close dropped, a deposit, or a stale entry.
    #[cold]
    #[inline(never)]
    pub(super) fn take_rare(
        &self,
        c: CellId,
        place: &Place<K, V>,
        start: u64,
        id: u32,
        epoch: u8,
        freed: &mut Vec<CellData<K, V>>,
    ) -> Option<Event<K, V>> {
        let (s, i) = split(c);
        let shard = &self.shards[s];
        // The cut holds the shard's lock.
        match Self::take_marked(shard, place, i, start, id, epoch, freed) {
            Some(event) => event,
            None => {
                // The cut holds the shard's lock for this `Locked`.
                let mut sh = shard.locked(ShardGuard::None);
                let (event, f) = Self::take_other(&mut sh, i, start, id);
                freed.extend(f);
                event
            }
        }
    }
}
