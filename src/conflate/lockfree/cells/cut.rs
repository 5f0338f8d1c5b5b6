//! A cell receiver's cut taken from the cells: a small batch in queue
//! order, one shard lock per run of entries of one shard; a larger one a
//! group at a time, each group sorted by shard so that every shard it names
//! is locked once, and the events written into the batch in queue order
//! (docs/design.md, "The cut is one instant"; the figures in
//! docs/performance.md).

use super::*;
use std::mem::MaybeUninit;
use std::ptr;

/// Entries per group of a cut (at most `u16::MAX`: the group's order and
/// its shards' counts are `u16`s, on the stack). A group names about 32 shards, so
/// a cut takes about one shard lock per 32 entries, and a publisher waits
/// for one shard's share of a group, about 32 entries. Two under the models,
/// so that small models cross a group's end.
const CUT_GROUP: usize = if cfg!(any(loom, shuttle)) { 2 } else { 1024 };

/// How many entries ahead, in the order they are taken, the cut fetches a
/// place (a power of two: the places found ahead wait in a ring).
const PREFETCH_AHEAD: usize = 8;

/// The most entries a cut takes in queue order rather than sorted by shard:
/// a consumer that keeps up cuts a few dozen entries, over most of the
/// shards, so sorting saves few locks and costs more than it saves (a
/// `retain_latest` hub cut every 64 sends: docs/performance.md, "session
/// twenty-three", which also says why the bound itself is not tuned).
const IN_ORDER_MAX: usize = 128;

/// Whether a cut of `n` entries in epoch `epoch` takes them in queue order.
/// Under the models, whose batches are a few entries, every other cut does,
/// so that both ways are explored against the sends.
fn in_queue_order(n: usize, epoch: u8) -> bool {
    if cfg!(any(loom, shuttle)) {
        epoch % 2 == 0
    } else {
        n <= IN_ORDER_MAX
    }
}

impl<K: Eq + Clone, V: Clone> Cells<K, V> {
    /// Takes a cut's entries (in queue order) for `rx`: a small batch in
    /// queue order (`take_in_queue_order`), a larger one `CUT_GROUP` at a
    /// time: each shard a group names is locked once, its entries taken in
    /// queue order, and unlocked before the next shard. The cut holds one
    /// shard at a time: a consumer preempted inside it stalls the senders of
    /// one shard, not of most of them.
    ///
    /// The events are appended to `batch`, in queue order (no allocation once
    /// it has room for one per entry); returns the sends they stand for. If a
    /// clone unwinds, the events taken so far are in the batch and every
    /// entry not taken is in `untaken`, as it was (the caller accounts for
    /// them, see `CellLocal::cut_into`).
    pub(crate) fn take_batch_into(
        &self,
        entries: &[(CellId, u64)],
        rx: &CellRx,
        epoch: u8,
        batch: &mut Vec<Event<K, V>>,
        untaken: &mut Vec<(CellId, u64)>,
    ) -> u64 {
        batch.reserve(entries.len());
        // Read once: the loops below write through raw pointers the compiler
        // cannot tell apart from `rx`.
        let id = rx.id;
        let taker = Taker {
            id,
            inline: (id as usize) < INLINE,
            want: PENDING | u16::from(epoch),
            epoch,
        };
        if in_queue_order(entries.len(), epoch) {
            return self.take_in_queue_order(entries, taker, batch, untaken);
        }
        let mut sends = 0;
        let mut freed = Vec::new();
        // The group's order lives here, beside the guard that reads it when
        // a clone unwinds (`Cut::drop`), so that the loop below reads it
        // without going through the guard. Not zeroed: a cut of a few
        // entries (a consumer that keeps up) would pay for clearing all of
        // it; `next_group` writes what is read.
        let mut order = [MaybeUninit::<u16>::uninit(); CUT_GROUP];
        // Declared after `freed` and `order`, so dropped (its shard unlocked,
        // its order read) before them, also when a clone unwinds.
        let mut cut = Cut::new(self, batch, entries, untaken);
        while let Some(ends) = cut.next_group(&mut order) {
            // Copies of what the loop reads: it writes the guard and the
            // batch, which the compiler cannot tell apart from these.
            let group = cut.entries;
            let n = group.len();
            // SAFETY: `next_group` wrote the first `n` places.
            let order = unsafe { std::slice::from_raw_parts(order.as_ptr().cast::<u16>(), n) };
            let events = cut.events();
            // The places of the entries next in taking order, found ahead
            // (and fetched): the one for order position `k` waits at
            // `k % PREFETCH_AHEAD` until it is taken.
            let mut ahead = [ptr::null::<Place<K, V>>(); PREFETCH_AHEAD];
            for (slot, &j) in ahead.iter_mut().zip(order) {
                *slot = self.place_of(group[usize::from(j)].0);
                // SAFETY: as for `place` below.
                prefetch(unsafe { &**slot });
            }
            let mut k = 0;
            for (s, &end) in ends.iter().enumerate() {
                let end = usize::from(end);
                if k == end {
                    continue;
                }
                cut.shard.lock(s);
                let shard = &self.shards[s];
                while k < end {
                    let place = ahead[k % PREFETCH_AHEAD];
                    if let Some(&next) = order.get(k + PREFETCH_AHEAD) {
                        let p = self.place_of(group[usize::from(next)].0);
                        // SAFETY: as for `place` below.
                        prefetch(unsafe { &*p });
                        ahead[k % PREFETCH_AHEAD] = p;
                    }
                    let j = usize::from(order[k]);
                    // Entries before `k` are taken; this one is being.
                    cut.taken = k;
                    k += 1;
                    // SAFETY: `place` is the place of entry `j` (`place_of`):
                    // a reference into its shard's slab, whose places never
                    // move or go away while the hub lives.
                    let place = unsafe { &*place };
                    let (c, start) = group[j];
                    // SAFETY: `cut` holds the lock of entry `j`'s shard `s`
                    // (`order` lists its entries up to `ends[s]`).
                    match unsafe { self.take_one(shard, c, place, start, taker, &mut freed) } {
                        Some(event) => {
                            sends += event.sends;
                            // SAFETY: `events` has room for the group's
                            // entries (`Cut::events`), and place `j` is
                            // unwritten: `order` is a permutation of `0..n`.
                            unsafe { events.add(j).write(event) };
                        }
                        None => cut.stale.push(j as u16),
                    }
                }
                cut.taken = k;
                cut.shard.unlock();
            }
        }
        drop(cut);
        drop(freed);
        sends
    }

    /// [`Cells::take_batch_into`] for a small batch: the entries in queue
    /// order, each under its shard's lock, held across a run of entries of
    /// one shard and switched when the next entry's shard differs (one shard
    /// at a time, as a group does). The events are pushed in order; the
    /// places of the entries `PREFETCH_AHEAD` on are fetched, for cells a
    /// consumer on another core has not touched since the sends.
    fn take_in_queue_order(
        &self,
        entries: &[(CellId, u64)],
        taker: Taker,
        batch: &mut Vec<Event<K, V>>,
        untaken: &mut Vec<(CellId, u64)>,
    ) -> u64 {
        let mut sends = 0;
        let mut freed = Vec::new();
        for &(c, _) in entries.iter().take(PREFETCH_AHEAD) {
            // SAFETY: `place_of` is a reference into the entry's shard's
            // slab, whose places never move or go away while the hub lives.
            prefetch(unsafe { &*self.place_of(c) });
        }
        // Declared after `freed`, so dropped (its shard unlocked, the
        // entries not taken given up) before it, also when a clone unwinds.
        let mut run = InOrder {
            shard: HeldShard::new(self),
            rest: entries,
            untaken,
        };
        while let Some((&(c, start), rest)) = run.rest.split_first() {
            if let Some(&(ahead, _)) = rest.get(PREFETCH_AHEAD - 1) {
                // SAFETY: as for the first ones above.
                prefetch(unsafe { &*self.place_of(ahead) });
            }
            let (s, i) = split(c);
            run.hold(s);
            let shard = &self.shards[s];
            let place = shard.slab.place(i);
            // SAFETY: `run` holds shard `s`'s lock.
            let event = unsafe { self.take_one(shard, c, place, start, taker, &mut freed) };
            // Taken: a clone that unwound above left this entry as it was,
            // and in `rest` for the guard to give up.
            run.rest = rest;
            if let Some(event) = event {
                sends += event.sends;
                batch.push(event);
            }
        }
        drop(run);
        drop(freed);
        sends
    }

    /// Takes one entry of a cut for `taker`: the entry names cell `c` of
    /// `shard`, at `place`, its sends counted from `start`. The event, or
    /// `None` for a stale entry; a cell the take left idle is settled (freed
    /// into `freed` past the shard's keep). The common take inline, the rest
    /// out of line (`take_rare`).
    ///
    /// # Safety
    /// The caller holds `shard`'s lock, and `place` is `c`'s place in it.
    #[inline(always)]
    unsafe fn take_one(
        &self,
        shard: &Shard<K, V>,
        c: CellId,
        place: &Place<K, V>,
        start: u64,
        taker: Taker,
        freed: &mut Vec<CellData<K, V>>,
    ) -> Option<Event<K, V>> {
        // SAFETY: the caller holds the shard's lock; the place is in use
        // (the entry's mark or deposit keeps it); no other cell reference is
        // live across this use.
        match unsafe { place.cell() }.take_common(taker.inline, taker.id, taker.want) {
            Some((key, value, idle)) => {
                let seq = place.seq.load(Ordering::Relaxed);
                if idle {
                    Self::settle_taken(shard, split(c).1, freed);
                }
                Some(Event::new(key, value, seq - start))
            }
            None => self.take_rare(c, place, start, taker.id, taker.epoch, freed),
        }
    }

    /// The place entry cell `c` names.
    #[inline(always)]
    fn place_of(&self, c: CellId) -> *const Place<K, V> {
        let (s, i) = split(c);
        self.shards[s].slab.place(i)
    }
}

/// Who takes a cut's entries, read once: the receiver's id, whether its
/// marks are the cells' inline ones, the mark a pending entry of the cut's
/// epoch has, and that epoch.
#[derive(Clone, Copy)]
struct Taker {
    id: u32,
    inline: bool,
    want: u16,
    epoch: u8,
}

/// The one shard lock a cut holds, if any (one at a time: a consumer
/// preempted inside a cut stalls the senders of one shard).
struct HeldShard<'a, K, V> {
    cells: &'a Cells<K, V>,
    /// The shard held and the lock that holds it (shard 0's while the cells
    /// are merged, `Cells::lock_or`).
    held: Option<(usize, &'a SpinLock)>,
}

impl<'a, K, V> HeldShard<'a, K, V> {
    fn new(cells: &'a Cells<K, V>) -> Self {
        HeldShard { cells, held: None }
    }

    /// Locks shard `s`; holds none before.
    fn lock(&mut self, s: usize) {
        debug_assert!(self.held.is_none(), "one shard at a time");
        let own = self.cells.shards[s]
            .lock
            .spin()
            .expect("only hubs with cell receivers cut, and their shards spin");
        let (guard, merged) = self.cells.lock_or(own);
        std::mem::forget(guard);
        let lock = if merged { self.cells.spin_lock(0) } else { own };
        self.held = Some((s, lock));
    }

    /// Lets go of the shard it holds, if any.
    fn unlock(&mut self) {
        if let Some((_, lock)) = self.held.take() {
            // SAFETY: `lock` was locked for this shard (`held`) and nothing
            // released it since (`held` is taken once).
            unsafe { lock.unlock_raw() };
        }
    }
}

/// A cut's progress through a small batch in queue order: the shard it
/// holds, and the entries not taken yet. On drop, also when a clone unwinds,
/// it lets go of the shard and puts the entries not taken in `untaken`.
struct InOrder<'a, K, V> {
    shard: HeldShard<'a, K, V>,
    rest: &'a [(CellId, u64)],
    untaken: &'a mut Vec<(CellId, u64)>,
}

impl<K, V> InOrder<'_, K, V> {
    /// Holds shard `s`'s lock (and no other).
    #[inline(always)]
    fn hold(&mut self, s: usize) {
        if self.shard.held.map(|(h, _)| h) == Some(s) {
            return;
        }
        self.shard.unlock();
        self.shard.lock(s);
    }
}

impl<K, V> Drop for InOrder<'_, K, V> {
    fn drop(&mut self) {
        self.shard.unlock();
        self.untaken.extend_from_slice(self.rest);
    }
}

/// A cut's progress through its entries, a group at a time. Each group is
/// sorted by shard (a stable counting sort, so each shard's entries keep
/// their queue order: two entries naming one cell, a stale one and a live
/// one, are taken in queue order), and its events are written straight into
/// the batch's spare capacity, each at its entry's place (no capacity check
/// or length store per event); the gaps of entries that gave none (stale
/// ones, rare) are closed when the group ends. On drop, also when a clone
/// unwinds, it lets go of the shard it holds, leaves the events written so
/// far in the batch (in queue order) and puts every entry not taken in
/// `untaken`.
struct Cut<'a, K, V> {
    batch: &'a mut Vec<Event<K, V>>,
    /// The current group's entries.
    entries: &'a [(CellId, u64)],
    /// The entries after it.
    rest: &'a [(CellId, u64)],
    untaken: &'a mut Vec<(CellId, u64)>,
    /// Entry `j`'s event goes to the batch's place `len + j`.
    len: usize,
    /// The group's entries (their indices in it), shard by shard: the
    /// caller's array, which outlives this (`next_group`).
    order: *const u16,
    /// The entries at `order[..taken]` are taken.
    taken: usize,
    /// The taken entries that gave no event.
    stale: Vec<u16>,
    /// The shard whose lock this holds.
    shard: HeldShard<'a, K, V>,
}

impl<'a, K, V> Cut<'a, K, V> {
    fn new(
        cells: &'a Cells<K, V>,
        batch: &'a mut Vec<Event<K, V>>,
        entries: &'a [(CellId, u64)],
        untaken: &'a mut Vec<(CellId, u64)>,
    ) -> Self {
        Cut {
            len: batch.len(),
            batch,
            entries: &[],
            rest: entries,
            untaken,
            order: ptr::null(),
            taken: 0,
            stale: Vec::new(),
            shard: HeldShard::new(cells),
        }
    }

    /// Ends the current group (its gaps closed) and starts the next, sorted
    /// by shard into `order`: `ends[s]` is one past the last of shard `s`'s
    /// entries there. `None` if no entry is left. `order` must outlive this
    /// guard (it reads the group's order when it drops).
    fn next_group(&mut self, order: &mut [MaybeUninit<u16>; CUT_GROUP]) -> Option<[u16; SHARDS]> {
        self.close_gaps();
        let n = self.rest.len().min(CUT_GROUP);
        if n == 0 {
            return None;
        }
        (self.entries, self.rest) = self.rest.split_at(n);
        assert!(
            self.batch.capacity() - self.len >= n,
            "a cut reserves room for one event per entry"
        );
        let mut ends = [0u16; SHARDS];
        for &(c, _) in self.entries {
            ends[split(c).0] += 1;
        }
        // `ends[s]` becomes where shard `s`'s entries start; the scatter
        // below moves it to their end.
        let mut sum = 0;
        for end in ends.iter_mut() {
            let count = *end;
            *end = sum;
            sum += count;
        }
        for (j, &(c, _)) in self.entries.iter().enumerate() {
            let at = &mut ends[split(c).0];
            order[usize::from(*at)].write(j as u16);
            *at += 1;
        }
        // The scatter wrote each of `order[..n]` once: `ends` started at the
        // prefix sums of the shards' counts, which tile `0..n`.
        self.order = order.as_ptr().cast();
        Some(ends)
    }

    /// Where the current group's events go: entry `j`'s at `events() + j`,
    /// with room for the whole group (`next_group` checked it).
    fn events(&mut self) -> *mut Event<K, V> {
        // SAFETY: `len` is within the batch's capacity.
        unsafe { self.batch.as_mut_ptr().add(self.len) }
    }

    /// The current group's order, as `next_group` left it.
    fn order(&self) -> &[u16] {
        if self.entries.is_empty() {
            return &[];
        }
        // SAFETY: `next_group` set `order` to an array of at least the
        // group's length that outlives this guard (its contract), and
        // initialized its first `entries.len()` places.
        unsafe { std::slice::from_raw_parts(self.order, self.entries.len()) }
    }

    /// Moves the events of the group's taken entries down over the gaps
    /// (the stale ones, and after an unwind the entries not taken), sets the
    /// batch's length past them, and forgets the group.
    fn close_gaps(&mut self) {
        let n = self.entries.len();
        let mut to = self.len;
        if self.taken == n && self.stale.is_empty() {
            // Every entry gave an event: nothing to move.
            to += n;
        } else {
            // The events written: the taken entries that are not stale.
            let mut written = vec![false; n];
            for &j in &self.order()[..self.taken] {
                written[usize::from(j)] = true;
            }
            for &j in &self.stale {
                written[usize::from(j)] = false;
            }
            let base = self.batch.as_mut_ptr();
            for (j, _) in written.iter().enumerate().filter(|(_, &w)| w) {
                // SAFETY: place `len + j` holds an event (`written[j]`), and
                // `to` is at most `len + j` (one step per event before it):
                // a move within the spare capacity, down or in place.
                unsafe { ptr::copy(base.add(self.len + j), base.add(to), 1) };
                to += 1;
            }
        }
        // SAFETY: the places below `to` are written: the batch's own, then
        // the group's events, moved down just now.
        unsafe { self.batch.set_len(to) };
        self.len = to;
        self.taken = 0;
        self.stale.clear();
        self.entries = &[];
    }
}

impl<K, V> Drop for Cut<'_, K, V> {
    fn drop(&mut self) {
        self.shard.unlock();
        // The entries not taken: none after a cut that finished.
        let entries = self.entries;
        let not_taken: Vec<_> = self.order()[self.taken..]
            .iter()
            .map(|&j| entries[usize::from(j)])
            .collect();
        self.untaken.extend_from_slice(&not_taken);
        self.untaken.extend_from_slice(self.rest);
        self.close_gaps();
    }
}
