//! The take path of the hub's cells: a receiver's pop, peek and cut
//! (`take_batch_into`), which clear its marks and move or clone the values
//! out (docs/design.md, "One cell per key", "The cut is one instant").

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
        let mut sh = self.shards[s].lock();
        let (event, freed) = Self::take_locked(&mut sh, i, start, rx.id, epoch);
        drop(sh);
        drop(freed);
        event
    }

    fn take_locked(
        sh: &mut Locked<'_, K, V>,
        i: u32,
        start: u64,
        id: u32,
        epoch: u8,
    ) -> Taken<K, V> {
        let place = sh.place(i);
        let seq = place.seq.load(Ordering::Relaxed);
        // SAFETY: lock held (`sh`); place `i` is in use (the caller's entry
        // names it and its mark or deposit keeps it); no other cell reference
        // is live across the uses below.
        let cell = unsafe { place.cell() };
        let mark = cell.mark(id);
        if mark & PENDING != 0 && mark_epoch(mark) == epoch {
            // Pending here, so it was not idle.
            let key = cell.key.clone();
            cell.set_mark(id, 0);
            cell.stamp = STALE;
            let value = if cell.pending() == 0 && !cell.retained() {
                cell.take_value()
            } else {
                cell.value().cloned()
            };
            let idle = cell.idle();
            let freed = sh.settle_as(i, false, idle);
            // No value only after a hard close dropped it (`drop_values`):
            // the take is stale then.
            return (value.map(|v| Event::new(key, v, seq - start)), freed);
        }
        if cell.has_deposits() {
            let deps = &mut sh.d().deposits;
            if let Some(at) = deps.iter().position(|d| d.cell == i && d.rx == id) {
                let d = deps.swap_remove(at);
                let more = deps.iter().any(|d| d.cell == i);
                let cell = sh.cell(i);
                let was_idle = cell.idle();
                if !more {
                    cell.set_deposits(false);
                }
                let key = cell.key.clone();
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
    /// one per entry).
    pub(crate) fn take_batch_into(
        &self,
        entries: &[(CellId, u64)],
        rx: &CellRx,
        epoch: u8,
        batch: &mut Vec<Event<K, V>>,
    ) {
        batch.reserve(entries.len());
        let mut freed = Vec::new();
        for window in entries.chunks(CUT_WINDOW) {
            // The window's places, found once and fetched before the locks
            // are taken (their addresses are stable; reading them waits for
            // the locks).
            let mut places: [Option<&Place<K, V>>; CUT_WINDOW] = [None; CUT_WINDOW];
            let mut named = 0u64;
            for (n, &(c, _)) in window.iter().enumerate() {
                let (s, i) = split(c);
                named |= 1 << s;
                let place = self.shards[s].slab.place(i);
                prefetch(place);
                places[n] = Some(place);
            }
            // Unlocks every shard it holds, also when a clone unwinds.
            let held = Held::lock(self, named);
            for (&(c, start), place) in window.iter().zip(places) {
                let Some(place) = place else {
                    unreachable!("one place per entry of the window")
                };
                let (s, i) = split(c);
                let shard = &self.shards[s];
                // SAFETY: `held` holds shard `s`'s lock; place `i` is in use
                // (this receiver's entry names it and its mark or deposit
                // keeps it); one cell reference at a time.
                let cell = unsafe { place.cell() };
                let mark = cell.mark(rx.id);
                if mark & PENDING != 0 && mark_epoch(mark) == epoch {
                    // The common case, inline: the entry's own mark.
                    let seq = place.seq.load(Ordering::Relaxed);
                    let key = cell.key.clone();
                    cell.set_mark(rx.id, 0);
                    cell.stamp = STALE;
                    let value = if cell.pending() == 0 && !cell.retained() {
                        cell.take_value()
                    } else {
                        cell.value().cloned()
                    };
                    if cell.idle() {
                        // Pending nowhere now: kept for its key's return, or
                        // freed if the shard keeps enough idle cells (as
                        // `Locked::settle_as` decides for every other take;
                        // `cell` is not used past here).
                        // SAFETY: as above: held; no other reference.
                        let d = shard.data.with_mut(|p| unsafe { &mut *p });
                        if d.idle < d.idle_cap() {
                            d.idle += 1;
                        } else {
                            let mut sh = Locked {
                                shard,
                                // SAFETY: as above.
                                data: shard.data.with_mut(|p| p),
                                _guard: ShardGuard::None,
                            };
                            freed.push(sh.free(i));
                        }
                    }
                    batch.extend(value.map(|v| Event::new(key, v, seq - start)));
                    continue;
                }
                // A deposit, or a stale entry.
                let mut sh = Locked {
                    shard,
                    // SAFETY: as above.
                    data: shard.data.with_mut(|p| p),
                    _guard: ShardGuard::None,
                };
                let (event, f) = Self::take_locked(&mut sh, i, start, rx.id, epoch);
                batch.extend(event);
                freed.extend(f);
            }
            drop(held);
        }
        drop(freed);
    }
}
