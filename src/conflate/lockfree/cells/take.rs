//! The take path of the hub's cells: a receiver's pop, peek and cut
//! (`take_batch_into`), which clear its marks and move or clone the values
//! out (docs/design.md, "One cell per key", "The cut is one instant").

use super::*;
use std::ptr;

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
        let guard = shard
            .lock
            .spin()
            .expect("only hubs with cell receivers take, and their shards spin")
            .lock();
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
        let sh = self.shards[s].lock();
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

    /// Takes a cut's entries (in queue order) for `rx`, `CUT_WINDOW` at a
    /// time: the shards a window names are locked together (in index order,
    /// as `snapshot` does, so no two lockers wait for each other), its
    /// entries taken in queue order, and the locks released. A publisher
    /// waits for at most one window; the cut pays about one lock per shard
    /// per window, and reads its entries and writes its batch in order.
    ///
    /// The events are appended to `batch` (no allocation once it has room for
    /// one per entry). `done` counts the entries taken so far: if a clone
    /// unwinds, the entries from `done` on are as they were (the caller
    /// accounts for them, see `CellLocal::cut_into`).
    pub(crate) fn take_batch_into(
        &self,
        entries: &[(CellId, u64)],
        rx: &CellRx,
        epoch: u8,
        batch: &mut Vec<Event<K, V>>,
        done: &mut usize,
    ) {
        // Room for one event per entry: the events are written straight into
        // the spare capacity (no capacity check or length store per entry),
        // and `out` sets the length, also when a clone unwinds.
        batch.reserve(entries.len());
        let mut out = Appended::new(batch, done);
        // Read once: the loops below write through raw pointers the compiler
        // cannot tell apart from `rx`.
        let id = rx.id;
        let inline = (id as usize) < INLINE;
        let want = PENDING | u16::from(epoch);
        let mut freed = Vec::new();
        for window in entries.chunks(CUT_WINDOW) {
            // The window's places, found once and fetched before the locks
            // are taken (their addresses are stable; reading them waits for
            // the locks).
            let mut places: [*const Place<K, V>; CUT_WINDOW] = [ptr::null(); CUT_WINDOW];
            let mut named = 0u64;
            for (slot, &(c, _)) in places.iter_mut().zip(window) {
                let (s, i) = split(c);
                named |= 1 << s;
                let place = self.shards[s].slab.place(i);
                prefetch(place);
                *slot = place;
            }
            out.room_for(window.len());
            // Unlocks every shard it holds, also when a clone unwinds.
            let held = Held::lock(self, named);
            for (&place, &(c, start)) in places.iter().zip(window) {
                // SAFETY: the first loop stored the place of this entry
                // (the same `zip` over the window): a reference into the
                // shard's slab, whose places never move or go away while
                // the hub lives.
                let place = unsafe { &*place };
                // SAFETY: `held` holds the lock of the entry's shard; the
                // place is in use (the entry's mark or deposit keeps it); no
                // other cell reference is live across this use.
                let common = unsafe { place.cell() }.take_common(inline, id, want);
                if let Some((key, value, idle)) = common {
                    let seq = place.seq.load(Ordering::Relaxed);
                    if idle {
                        let (s, i) = split(c);
                        Self::settle_taken(&self.shards[s], i, &mut freed);
                    }
                    // SAFETY: at most one event per entry of the window,
                    // which `room_for` made room for.
                    unsafe { out.push(Event::new(key, value, seq - start)) };
                } else {
                    out.with_vec(|batch| {
                        self.take_rare(c, place, start, id, epoch, batch, &mut freed)
                    });
                }
                out.taken += 1;
            }
            drop(held);
        }
        drop(out);
        drop(freed);
    }

    /// A cell left idle by a take (it was pending here, so not idle before),
    /// under its shard's lock: kept, or freed into `freed` past the shard's
    /// keep (`settle_as(i, false, true)`, written out so that the common case
    /// stays inline).
    #[inline(always)]
    fn settle_taken(shard: &Shard<K, V>, i: u32, freed: &mut Vec<CellData<K, V>>) {
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
    #[allow(clippy::too_many_arguments)]
    fn take_rare(
        &self,
        c: CellId,
        place: &Place<K, V>,
        start: u64,
        id: u32,
        epoch: u8,
        batch: &mut Vec<Event<K, V>>,
        freed: &mut Vec<CellData<K, V>>,
    ) {
        let (s, i) = split(c);
        let shard = &self.shards[s];
        // The cut's window holds the shard's lock.
        match Self::take_marked(shard, place, i, start, id, epoch, freed) {
            Some(event) => batch.extend(event),
            None => {
                // The window holds the shard's lock for this `Locked`.
                let mut sh = shard.locked(ShardGuard::None);
                let (event, f) = Self::take_other(&mut sh, i, start, id);
                batch.extend(event);
                freed.extend(f);
            }
        }
    }
}

/// A cut's writer of events into its batch's spare capacity, which the caller
/// reserved for one event per entry. The batch's length and the caller's
/// count of entries taken (`done`) are kept here, in registers, and stored
/// when it drops (also when a clone unwinds: the events written so far are
/// then in the batch, for the caller's accounting).
struct Appended<'a, K, V> {
    batch: &'a mut Vec<Event<K, V>>,
    len: usize,
    done: &'a mut usize,
    taken: usize,
}

impl<'a, K, V> Appended<'a, K, V> {
    fn new(batch: &'a mut Vec<Event<K, V>>, done: &'a mut usize) -> Self {
        Appended {
            len: batch.len(),
            taken: *done,
            batch,
            done,
        }
    }

    /// Checks that the batch has room for `n` more events (the caller
    /// reserved it: one per entry).
    fn room_for(&self, n: usize) {
        assert!(
            self.batch.capacity() - self.len >= n,
            "a cut reserves room for one event per entry"
        );
    }

    /// Appends `event`.
    ///
    /// # Safety
    /// The batch has room for it: [`Appended::room_for`] checked room for
    /// at least as many events as were appended since.
    #[inline(always)]
    unsafe fn push(&mut self, event: Event<K, V>) {
        debug_assert!(self.len < self.batch.capacity());
        // SAFETY: `len` is below the capacity (the caller's contract), and the
        // places from the batch's length up to `len` are written, so place
        // `len` is the first unwritten one.
        unsafe { self.batch.as_mut_ptr().add(self.len).write(event) };
        self.len += 1;
    }

    /// Runs `f` on the batch itself, its length up to date (the rare paths,
    /// which append through the `Vec`).
    fn with_vec(&mut self, f: impl FnOnce(&mut Vec<Event<K, V>>)) {
        // SAFETY: the places below `len` are written (see `push`).
        unsafe { self.batch.set_len(self.len) };
        f(self.batch);
        self.len = self.batch.len();
    }
}

impl<K, V> Drop for Appended<'_, K, V> {
    fn drop(&mut self) {
        // SAFETY: the places below `len` are written (see `push`), and no
        // more than that: `with_vec` keeps `len` up to date.
        unsafe { self.batch.set_len(self.len) };
        *self.done = self.taken;
    }
}
