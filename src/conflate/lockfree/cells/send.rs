//! The send path of the hub's cells: the coalescing fast path, the slow path
//! that visits every cell receiver (entries, deposits, helping), and the
//! state table's fold (docs/design.md, "One cell per key", "The cut is one
//! instant", "The state table is the cells").

use super::*;

/// Makes sure a send that saw `epoch` at `rx` is followed, for every later send,
/// by a clock change: the first thread that sees a receiver's new epoch before
/// the receiver announced it bumps the clock itself (docs/design.md, "The cut
/// is one instant"). Inline: called from code generic over `K` and `V`,
/// which crosses into this crate through an indirect call otherwise.
#[inline]
fn help(rx: &CellRx, epoch: u8, clock: &AtomicU64) {
    // Acquire pairs with the Release store below and in the cut: a thread that
    // reads the announcement also sees the clock bump before it.
    if rx.announced.load(Ordering::Acquire) != u32::from(epoch) {
        clock.fetch_add(1, Ordering::AcqRel);
        rx.announced.store(u32::from(epoch), Ordering::Release);
    }
}

/// Keeps `value` (if any) for receiver `rx`, whose entry at cell `i` belongs
/// to a cut that has not taken it yet: its sends end at `seq`.
#[inline]
fn deposit<K, V>(
    sh: &mut Locked<'_, K, V>,
    cell: &mut CellData<K, V>,
    i: u32,
    rx: u32,
    value: Option<V>,
    seq: u64,
) {
    if let Some(value) = value {
        sh.d().deposits.push(Deposit {
            cell: i,
            rx,
            value,
            seq_end: seq,
        });
        cell.set_deposits(true);
    }
}

/// Makes the key pending at `rx` in the epoch its push lands in: an entry
/// (cell `name`, sends counted from `seq`), the helping, the mark, and the
/// wake-up if its consumer asked for one.
#[inline]
fn pend<'a, K, V>(
    cell: &mut CellData<K, V>,
    name: CellId,
    seq: u64,
    rx: &'a CellRx,
    clock: &AtomicU64,
    wakes: &mut Wakes<'a>,
) {
    let pushed = rx.queue.push(name, seq);
    help(rx, pushed.epoch, clock);
    cell.set_mark(rx.id, PENDING | u16::from(pushed.epoch));
    if pushed.wake {
        wakes.push(rx);
    }
}

impl<K: Eq, V> Cells<K, V> {
    /// Adds `extra` sends to the sequence of `key`'s cell: the sends a
    /// converted entry folded before it became a cell entry (`Solo::convert`),
    /// so the entry's `sends` and its receiver's stats carry them.
    pub(crate) fn credit(&self, hash: u64, key: &K, extra: u64) {
        if extra == 0 {
            return;
        }
        let sh = self.lock(shard_of(hash));
        if let Some((_, place)) = sh.find_place(hash as u32, key) {
            // Relaxed: written under the lock, as a send's bump.
            let seq = place.seq.load(Ordering::Relaxed);
            place.seq.store(seq + extra, Ordering::Relaxed);
        }
    }
}

impl<K: Eq + Clone, V: Clone> Cells<K, V> {
    /// Folds one send into its key's cell and makes the key pending at every
    /// cell receiver of `rxs` (a send in flight's view), then wakes the
    /// consumers that asked for it. Runs no user code but `K::eq`,
    /// `K::clone` (a new cell), `V::clone` (deposits) and, in a hub with its
    /// own merge, the merge; a panic in any of them leaves the shard
    /// consistent and reaches the caller.
    ///
    /// # Safety
    /// The caller is a send in flight until this returns (the wakes name
    /// receivers of the registry's cell list).
    ///
    /// `tombstone`: `value` removes the key (the caller ran the hub's test
    /// before anything was locked): the table forgets the key, and the value
    /// still reaches every cell receiver as any send does. `who`: the
    /// sending thread (`Cells::lock_for_send`).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(crate) unsafe fn send(
        &self,
        hash: u64,
        key: &K,
        value: V,
        tombstone: bool,
        registry: &Registry<K, V>,
        clock: &AtomicU64,
        who: usize,
    ) {
        // `shard_of` masks to `SHARDS`: the fixed-size array needs no
        // bounds check.
        let shard = &self.shards[shard_of(hash)];
        let hash32 = hash as u32;
        // A shard spins exactly when the hub's merge is newer-wins
        // (`Cells::new`), so the lock's kind alone picks the path.
        if shard.lock.spin().is_none() {
            // A hub with its own merge: the cells are the table only.
            let sh = shard.lock();
            // The clock and the key's cell, under the lock (`Locked::look`).
            let (now, found) = sh.look(clock, hash32, key);
            // SAFETY: the caller's contract, passed on.
            return unsafe {
                self.send_slow(sh, found, hash, key, value, tombstone, registry, clock, now)
            };
        }
        // Newer wins. The spin guard is kept apart from `Locked` until the
        // fast path is ruled out, so that path unlocks with its one store and
        // no guard dispatch.
        let (guard, _) = self.lock_for_send(shard_of(hash), who);
        // The guard above holds the lock for this `Locked`.
        let sh = shard.locked(ShardGuard::None);
        // The clock and the key's cell, under the lock (`Locked::look`).
        let (now, found) = sh.look(clock, hash32, key);
        if let Some((i, place)) = found {
            // SAFETY: the shard lock is held and the place is in use
            // (indexed).
            let cell = unsafe { place.cell() };
            if cell.stamp == now && cell.value().is_some() && !tombstone {
                // Every cell receiver has the key pending in its current
                // epoch: one write, whatever their number. (A tombstone takes
                // the slow path: it changes the table.)
                let old = cell.replace_value(value);
                // Relaxed: written under the lock; read by stats (see `seq`).
                let seq = place.seq.load(Ordering::Relaxed);
                place.seq.store(seq + 1, Ordering::Relaxed);
                // `sh` owns nothing here (its guard is `None`): forgetting it
                // skips an out-of-line drop call.
                std::mem::forget(sh);
                drop(guard);
                drop(old);
                return;
            }
            if !tombstone {
                // SAFETY: the caller is in flight (this function's contract).
                let rxs = unsafe { registry.cells() };
                if let Some(rx) = rxs.single() {
                    if cell.mark(rx.id) == 0 && (!self.retain || cell.retained()) {
                        // The key's first send since its sole cell receiver
                        // took it (`send_slow`'s steps for that case, written
                        // out without its other cases, measured in
                        // docs/performance.md).
                        let was_idle = cell.idle();
                        let seq = place.seq.load(Ordering::Relaxed);
                        let pushed = rx.queue.push(cell_id(shard_of(hash), i), seq);
                        help(rx, pushed.epoch, clock);
                        cell.set_mark_from_none(rx.id, PENDING | u16::from(pushed.epoch));
                        let old = cell.replace_value(value);
                        cell.stamp = now;
                        // Relaxed: as on the fast path above.
                        place.seq.store(seq + 1, Ordering::Relaxed);
                        let mut sh = sh;
                        // Pending here now: not idle.
                        let freed = sh.settle_as(i, was_idle, false);
                        debug_assert!(freed.is_none(), "a cell that stops being idle stays");
                        // As on the fast path: `sh` owns nothing.
                        std::mem::forget(sh);
                        drop(guard);
                        drop(old);
                        if pushed.wake {
                            rx.notify.notify(usize::MAX);
                        }
                        return;
                    }
                }
            }
        }
        let sh = sh.with_guard(ShardGuard::Spin(guard));
        // SAFETY: the caller's contract, passed on.
        unsafe { self.send_slow(sh, found, hash, key, value, tombstone, registry, clock, now) }
    }

    /// A send in a table hub whose sole plain receiver keeps its values
    /// itself (docs/design.md, "The sole receiver owns its values"): under
    /// the key's shard lock, one probe finds the cell, the receiver's copy
    /// goes to the place the cell names (coalesced, or a new place pushed
    /// and named), and the table's value to the cell. No cell receiver is
    /// visited: the hub has none but the sole receiver, which reads its
    /// part. Runs no user code but `V::clone` (before the lock), `K::eq`
    /// and `K::clone` (a new cell, a new place), before anything changes.
    ///
    /// # Safety
    /// The caller is a send in flight until this returns, and `solo` is the
    /// hub's part it loaded (a table hub's, `Solo::for_table` over these
    /// cells).
    #[inline(always)]
    pub(crate) unsafe fn send_owned(
        &self,
        hash: u64,
        key: &K,
        value: V,
        solo: &Solo<K, V>,
        who: usize,
    ) {
        let copy = value.clone();
        let s = shard_of(hash);
        let shard = &self.shards[s];
        let hash32 = hash as u32;
        let (guard, merged) = self.lock_for_send(s, who);
        let mut sh = shard.locked(ShardGuard::Spin(guard));
        let (i, place) = match sh.find_place(hash32, key) {
            Some(found) => found,
            // The one copy of the key is made before anything changes.
            None => sh.insert(key.clone(), hash32),
        };
        let owned = &mut sh.d().owned;
        if owned.len() <= i as usize {
            owned.resize(i as usize + 1, Owned::NONE);
        }
        // SAFETY: the shard's lock is held, which is the part's (the
        // caller's contract); `owned[i]` is the key's reference.
        let sent = unsafe { solo.send_held(hash, key, copy, &mut owned[i as usize], merged) };
        // SAFETY: the shard lock is held and the place is in use; no other
        // reference to this cell is made while this one lives.
        let cell = unsafe { place.cell() };
        let was_idle = cell.idle();
        let entering = !cell.retained();
        let old = cell.replace_value(value);
        if entering {
            cell.set_retained(true);
        }
        // The stamp is left as it is: it is older than the clock (every
        // registration moves the clock after it, and no cell send stamps a
        // cell while the part takes the sends), so the key's first cell send
        // after the part, the conversion's or one after its receiver left,
        // takes the slow path.
        // Relaxed: written under the lock; read by stats (see `seq`).
        let seq = place.seq.load(Ordering::Relaxed);
        place.seq.store(seq + 1, Ordering::Relaxed);
        if entering {
            self.note_order(&mut sh, i);
        }
        let freed = sh.settle_as(i, was_idle, false);
        debug_assert!(freed.is_none(), "a cell in the table stays");
        drop(sh);
        drop(old);
        drop(sent.old);
        if sent.wake {
            solo.owner().notify.notify(usize::MAX);
        }
    }

    /// The rest of [`Cells::send`]: a new key, a hub with its own merge, or a
    /// cell that needs its receivers visited. `found`: the key's cell as the
    /// probe under this lock found it.
    ///
    /// # Safety
    /// As [`Cells::send`].
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    unsafe fn send_slow(
        &self,
        mut sh: Locked<'_, K, V>,
        found: Option<Found<'_, K, V>>,
        hash: u64,
        key: &K,
        value: V,
        tombstone: bool,
        registry: &Registry<K, V>,
        clock: &AtomicU64,
        now: u64,
    ) {
        let hash32 = hash as u32;
        let (i, place) = match found {
            Some(found) => found,
            // The one copy of the key is made before anything changes.
            None => {
                let key = key.clone();
                sh.insert(key, hash32)
            }
        };
        if !matches!(self.merge, Merge::NewerWins) {
            // A hub with its own merge: the cells are the table only.
            return self.merge_into_table(sh, i, value, tombstone);
        }
        let seq = place.seq.load(Ordering::Relaxed);
        // SAFETY: the shard lock is held and place `i` is in use; no other
        // reference to this cell is made while this one lives.
        let cell = unsafe { place.cell() };
        let was_idle = cell.idle();
        let entering = self.retain && !cell.retained() && !tombstone;
        // The cell receivers, read after the clock: a registry change moves
        // the clock after it changes the list, so a send that saw the new
        // clock sees the new list (docs/design.md, "Registration versus
        // send").
        // SAFETY: the caller is in flight (this function's contract).
        let rxs = unsafe { registry.cells() };
        let cell_name = cell_id(shard_of(hash), i);
        let mut wakes = Wakes::none();
        let old = if let Some(rx) = rxs.single() {
            // One cell receiver: one pass, and no clone (its one deposit,
            // if it needs one, takes the old value by move).
            let mark = cell.mark(rx.id);
            let mut needs_entry = true;
            if mark & PENDING != 0 {
                let epoch = rx.queue.tail().epoch();
                help(rx, epoch, clock);
                if mark_epoch(mark) == epoch {
                    // Pending in its current epoch: nothing to add.
                    needs_entry = false;
                } else {
                    // Its entry belongs to a cut that has not taken it yet:
                    // keep the value that cut needs. (No value only after a
                    // hard close dropped it: no cut delivers anything then.)
                    let value = cell.take_value();
                    deposit(&mut sh, cell, i, rx.id, value, seq);
                }
            }
            if needs_entry {
                pend(cell, cell_name, seq, rx, clock, &mut wakes);
            }
            cell.replace_value(value)
        } else {
            let old = self.pend_all(&mut sh, cell, i, cell_name, seq, &rxs, clock, &mut wakes);
            // `pend_all` took the value out: nothing is replaced.
            let none = cell.replace_value(value);
            debug_assert!(none.is_none());
            old
        };
        if entering {
            cell.set_retained(true);
        } else if tombstone {
            // The table forgets the key; the cell stays while the tombstone
            // is pending somewhere (`settle_as` frees it otherwise).
            cell.set_retained(false);
        }
        // A tombstone that left the table stamps the cell stale, so the key's
        // next value takes this path too and re-enters the table.
        cell.stamp = if tombstone && self.retain { STALE } else { now };
        place.seq.store(seq + 1, Ordering::Relaxed);
        let idle = cell.idle();
        // A value pending nowhere is kept by nobody: an idle cell holds no
        // value. A tombstone with no cell receiver, or any value of a send
        // that found the list emptied by the last receiver's departure
        // after its look at the count (the sole receiver leaving: its part
        // retired first, then the list).
        let gone = if idle { cell.take_value() } else { None };
        if entering {
            self.note_order(&mut sh, i);
        }
        let freed = sh.settle_as(i, was_idle, idle);
        drop(sh);
        drop(old);
        drop(gone);
        drop(freed);
        wakes.wake();
    }

    /// The slow path's visit of every cell receiver of `rxs` (more than one,
    /// or holes): deposits for the cuts that have not taken their entry,
    /// then an entry for every receiver the key is not pending at in its
    /// current epoch. Takes the cell's value out; returns it if no deposit
    /// took it (to drop outside the lock).
    #[allow(clippy::too_many_arguments)]
    fn pend_all<'a>(
        &self,
        sh: &mut Locked<'_, K, V>,
        cell: &mut CellData<K, V>,
        i: u32,
        cell_name: CellId,
        seq: u64,
        rxs: &Listed<'a, CellRx>,
        clock: &AtomicU64,
        wakes: &mut Wakes<'a>,
    ) -> Option<V> {
        // First pass, changing nothing: how many receivers need a deposit
        // (their entry belongs to a cut that has not taken it yet).
        let mut deposit_for = 0usize;
        for rx in rxs.iter() {
            let mark = cell.mark(rx.id);
            if mark & PENDING != 0 {
                let epoch = rx.queue.tail().epoch();
                help(rx, epoch, clock);
                if mark_epoch(mark) != epoch {
                    deposit_for += 1;
                }
            }
        }
        // The clones those deposits need, before anything changes (user
        // code). No value only after a hard close dropped it: then no cut
        // will deliver anything, and no deposit is needed.
        let mut copies: Vec<V> = Vec::new();
        if deposit_for > 1 {
            if let Some(v) = cell.value() {
                for _ in 1..deposit_for {
                    copies.push(v.clone());
                }
            }
        }
        let mut old = cell.take_value();
        for rx in rxs.iter() {
            let mark = cell.mark(rx.id);
            if mark & PENDING != 0 {
                let epoch = rx.queue.tail().epoch();
                if mark_epoch(mark) == epoch {
                    continue;
                }
                // Keep the value the cut needs for it. (A cut that started
                // since the first pass needs one more than prepared: cloned
                // from the last deposit here, the one clone that can run
                // after a change; a panic in it loses that receiver's value
                // of the key, as a panicking merge would.)
                let value = match copies.pop().or_else(|| old.take()) {
                    Some(v) => Some(v),
                    None => sh.d().deposits.last().map(|d| d.value.clone()),
                };
                deposit(sh, cell, i, rx.id, value, seq);
            }
            pend(cell, cell_name, seq, rx, clock, wakes);
        }
        old
    }

    /// Gives cell `i` a first-touch number (it just entered the table).
    fn note_order(&self, sh: &mut Locked<'_, K, V>, i: u32) {
        // Relaxed: the number only has to be unique and increase along the
        // happens-before order of insertions (the RMW's modification order
        // gives both; see docs/design.md, "The state table is the cells").
        let order = self.next_order.fetch_add(1, Ordering::Relaxed);
        let orders = &mut sh.d().orders;
        if orders.len() <= i as usize {
            orders.resize(i as usize + 1, 0);
        }
        orders[i as usize] = order;
    }

    /// A send in a hub with its own merge: the table's fold (`None` removes
    /// the key; a panicking merge removes it too and the panic continues). A
    /// tombstone removes the key, and so does a merge whose result is one.
    fn merge_into_table(&self, mut sh: Locked<'_, K, V>, i: u32, value: V, tombstone: bool) {
        let seq_word = &sh.place(i).seq;
        seq_word.store(seq_word.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        let cell = sh.cell(i);
        let was_idle = cell.idle();
        let outcome = match cell.take_value() {
            None if tombstone => {
                // Not in the table: nothing to remove.
                drop(value);
                Ok(())
            }
            None => {
                // Enters the table (again, if the merge removed it before).
                cell.replace_value(value);
                cell.set_retained(true);
                self.note_order(&mut sh, i);
                Ok(())
            }
            Some(prev) if tombstone => {
                drop(prev);
                drop(value);
                cell.set_retained(false);
                Ok(())
            }
            Some(prev) => {
                let merge = &self.merge;
                let tombstones = &self.tombstones;
                let fold = || {
                    merge
                        .apply(prev, value)
                        .filter(|merged| !tombstones.is(merged))
                };
                match panic::catch_unwind(AssertUnwindSafe(fold)) {
                    Ok(Some(merged)) => {
                        sh.cell(i).replace_value(merged);
                        Ok(())
                    }
                    Ok(None) => {
                        sh.cell(i).set_retained(false);
                        Ok(())
                    }
                    Err(payload) => {
                        // Both inputs were moved into the merge: the key
                        // leaves the table.
                        sh.cell(i).set_retained(false);
                        Err(payload)
                    }
                }
            }
        };
        let freed = sh.settle(i, was_idle);
        drop(sh);
        drop(freed);
        if let Err(payload) = outcome {
            panic::resume_unwind(payload);
        }
    }
}
