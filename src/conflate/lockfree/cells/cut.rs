//! A cell receiver's cut taken from the cells: its entries a group at a
//! time, each group sorted by shard so that every shard it names is locked
//! once, and the events written into the batch in queue order
//! (docs/design.md, "The cut is one instant"; the figures in
//! docs/performance.md).

use super::*;
use std::ptr;

/// Entries per group of a cut (at most 128: [`Group`]'s bitmasks and the
/// `u8` positions of [`ByShard`]). About 32 shard locks per 128 entries, and a
/// publisher waits for one shard's share of a group, about four entries.
/// Two under the models, so that small models cross a group's end.
const CUT_GROUP: usize = if cfg!(any(loom, shuttle)) { 2 } else { 128 };

/// How many entries ahead, in the order they are taken, the cut fetches a
/// place.
const PREFETCH_AHEAD: usize = 8;

impl<K: Eq + Clone, V: Clone> Cells<K, V> {
    /// Takes a cut's entries (in queue order) for `rx`, `CUT_GROUP` at a
    /// time: each shard a group names is locked once, its entries taken in
    /// queue order, and unlocked before the next shard. The cut holds one
    /// shard at a time: a consumer preempted inside it stalls the senders of
    /// one shard, not of most of them.
    ///
    /// The events are appended to `batch`, in queue order (no allocation once
    /// it has room for one per entry). If a clone unwinds, the events taken
    /// so far are in the batch and every entry not taken is in `untaken`, as
    /// it was (the caller accounts for them, see `CellLocal::cut_into`).
    pub(crate) fn take_batch_into(
        &self,
        entries: &[(CellId, u64)],
        rx: &CellRx,
        epoch: u8,
        batch: &mut Vec<Event<K, V>>,
        untaken: &mut Vec<(CellId, u64)>,
    ) {
        batch.reserve(entries.len());
        // Read once: the loops below write through raw pointers the compiler
        // cannot tell apart from `rx`.
        let id = rx.id;
        let inline = (id as usize) < INLINE;
        let want = PENDING | u16::from(epoch);
        let mut freed = Vec::new();
        // Declared after `freed`, so dropped (its shard unlocked) before the
        // freed cells are, also when a clone unwinds.
        let mut group = Group::new(self, batch, entries, untaken);
        while group.next() {
            let sorted = ByShard::new(self, group.entries);
            let n = group.entries.len();
            let mut k = 0;
            for (s, &end) in sorted.ends.iter().enumerate() {
                let end = usize::from(end);
                if k == end {
                    continue;
                }
                group.lock(s);
                while k < end {
                    if let Some(&ahead) = sorted.order[..n].get(k + PREFETCH_AHEAD) {
                        // SAFETY: as for `place` below.
                        prefetch(unsafe { &*sorted.places[usize::from(ahead)] });
                    }
                    let j = usize::from(sorted.order[k]);
                    k += 1;
                    // SAFETY: `places[j]` is the place of entry `j`
                    // (`ByShard::new`): a reference into the shard's slab,
                    // whose places never move or go away while the hub lives.
                    let place = unsafe { &*sorted.places[j] };
                    let (c, start) = group.entries[j];
                    // SAFETY: `group` holds the lock of entry `j`'s shard
                    // (`s`: `order` lists shard `s`'s entries up to
                    // `ends[s]`); the place is in use (the entry's mark or
                    // deposit keeps it); no other cell reference is live
                    // across this use.
                    let event = match unsafe { place.cell() }.take_common(inline, id, want) {
                        Some((key, value, idle)) => {
                            let seq = place.seq.load(Ordering::Relaxed);
                            if idle {
                                let (s, i) = split(c);
                                Self::settle_taken(&self.shards[s], i, &mut freed);
                            }
                            Some(Event::new(key, value, seq - start))
                        }
                        None => self.take_rare(c, place, start, id, epoch, &mut freed),
                    };
                    // SAFETY: `j` is an entry of the group (`order` is a
                    // permutation of `0..n`), recorded once.
                    unsafe { group.done(j, event) };
                }
                group.unlock();
            }
        }
        drop(group);
        drop(freed);
    }
}

/// A group's entries sorted by shard, found before any lock is taken: a
/// stable counting sort, so each shard's entries keep their queue order
/// (two entries naming one cell, a stale one and a live one, are taken in
/// queue order as before).
struct ByShard<K, V> {
    /// Entry `j`'s place.
    places: [*const Place<K, V>; CUT_GROUP],
    /// The entries (their indices in the group), shard by shard.
    order: [u8; CUT_GROUP],
    /// `ends[s]`: one past the last of shard `s`'s entries in `order`.
    ends: [u8; SHARDS],
}

impl<K, V> ByShard<K, V> {
    fn new(cells: &Cells<K, V>, entries: &[(CellId, u64)]) -> Self {
        debug_assert!(entries.len() <= CUT_GROUP);
        let mut shard = [0u8; CUT_GROUP];
        let mut places: [*const Place<K, V>; CUT_GROUP] = [ptr::null(); CUT_GROUP];
        let mut counts = [0u8; SHARDS];
        for (j, &(c, _)) in entries.iter().enumerate() {
            let (s, i) = split(c);
            shard[j] = s as u8;
            places[j] = cells.shards[s].slab.place(i);
            counts[s] += 1;
        }
        // `next[s]` walks up from shard `s`'s first place in `order`.
        let mut next = [0u8; SHARDS];
        let mut ends = [0u8; SHARDS];
        let mut sum = 0u8;
        for s in 0..SHARDS {
            next[s] = sum;
            sum += counts[s];
            ends[s] = sum;
        }
        let mut order = [0u8; CUT_GROUP];
        for (j, &s) in shard[..entries.len()].iter().enumerate() {
            let at = &mut next[usize::from(s)];
            order[usize::from(*at)] = j as u8;
            *at += 1;
        }
        ByShard {
            places,
            order,
            ends,
        }
    }
}

/// A cut's progress through its entries, a group at a time. The events of
/// the current group are written straight into the batch's spare capacity,
/// each at its entry's place (no capacity check or length store per event),
/// and the gaps of entries that gave none (stale ones) are closed when the
/// group ends. On drop, also when a clone unwinds, it lets go of the shard
/// it holds, leaves the events written so far in the batch (in queue order)
/// and puts every entry not taken in `untaken`.
struct Group<'a, K, V> {
    cells: &'a Cells<K, V>,
    batch: &'a mut Vec<Event<K, V>>,
    /// The current group's entries.
    entries: &'a [(CellId, u64)],
    /// The entries after it.
    rest: &'a [(CellId, u64)],
    untaken: &'a mut Vec<(CellId, u64)>,
    /// Entry `j`'s event goes to the batch's place `len + j`.
    len: usize,
    /// The group's entries taken (bit `j`), and of them those that gave an
    /// event.
    taken: u128,
    written: u128,
    /// The shard whose lock this holds.
    held: Option<usize>,
}

impl<'a, K, V> Group<'a, K, V> {
    fn new(
        cells: &'a Cells<K, V>,
        batch: &'a mut Vec<Event<K, V>>,
        entries: &'a [(CellId, u64)],
        untaken: &'a mut Vec<(CellId, u64)>,
    ) -> Self {
        Group {
            cells,
            len: batch.len(),
            batch,
            entries: &[],
            rest: entries,
            untaken,
            taken: 0,
            written: 0,
            held: None,
        }
    }

    /// Ends the current group (its gaps closed) and starts the next: `false`
    /// if none is left.
    fn next(&mut self) -> bool {
        self.close_gaps();
        let n = self.rest.len().min(CUT_GROUP);
        (self.entries, self.rest) = self.rest.split_at(n);
        assert!(
            self.batch.capacity() - self.len >= n,
            "a cut reserves room for one event per entry"
        );
        n > 0
    }

    fn lock(&mut self, s: usize) {
        debug_assert!(self.held.is_none(), "one shard at a time");
        self.cells.shards[s]
            .lock
            .spin()
            .expect("only hubs with cell receivers cut, and their shards spin")
            .lock_raw();
        self.held = Some(s);
    }

    fn unlock(&mut self) {
        if let Some(s) = self.held.take() {
            let lock = self.cells.shards[s]
                .lock
                .spin()
                .expect("locked as a spin lock");
            // SAFETY: `lock` locked this shard (`held`) and nothing released
            // it since (`held` is taken once).
            unsafe { lock.unlock_raw() };
        }
    }

    /// Records entry `j` of the group as taken, with its event if any.
    ///
    /// # Safety
    /// `j` is below the group's length, and is recorded once per group.
    #[inline(always)]
    unsafe fn done(&mut self, j: usize, event: Option<Event<K, V>>) {
        debug_assert!(j < self.entries.len() && self.taken & (1u128 << j) == 0);
        if let Some(event) = event {
            // SAFETY: `next` checked room for the group's entries from `len`
            // on, and place `len + j` is unwritten (`j` is recorded once).
            unsafe { self.batch.as_mut_ptr().add(self.len + j).write(event) };
            self.written |= 1u128 << j;
        }
        self.taken |= 1u128 << j;
    }

    /// Moves the group's events down over its gaps, sets the batch's length
    /// past them, and forgets the group.
    fn close_gaps(&mut self) {
        let n = self.entries.len();
        let all = if n == 128 {
            u128::MAX
        } else {
            (1u128 << n) - 1
        };
        let mut to = self.len;
        if self.written == all {
            to += n;
        } else {
            let base = self.batch.as_mut_ptr();
            let mut written = self.written;
            while written != 0 {
                let j = written.trailing_zeros() as usize;
                written &= written - 1;
                // SAFETY: place `len + j` holds an event (bit `j`), and `to`
                // is at most `len + j` (one step per event before it): a
                // move within the spare capacity, down or in place.
                unsafe { ptr::copy(base.add(self.len + j), base.add(to), 1) };
                to += 1;
            }
        }
        // SAFETY: the places below `to` are written: the batch's own, then
        // the group's events, moved down just now.
        unsafe { self.batch.set_len(to) };
        self.len = to;
        self.taken = 0;
        self.written = 0;
        self.entries = &[];
    }
}

impl<K, V> Drop for Group<'_, K, V> {
    fn drop(&mut self) {
        self.unlock();
        // The entries not taken: none after a cut that finished.
        for (j, &entry) in self.entries.iter().enumerate() {
            if self.taken & (1u128 << j) == 0 {
                self.untaken.push(entry);
            }
        }
        self.untaken.extend_from_slice(self.rest);
        self.close_gaps();
    }
}
