//! The hub's cells, `Cells`: one cell per live key, shared by every cell
//! receiver and by the state table, sharded by the send's hash, each shard one
//! [`ShardLock`], a hash index and a slab (docs/design.md, "One cell per key").

mod cut;
mod send;
mod slab;
mod table;
mod take;

use super::cell_rx::CellRx;
use super::lock::{ShardGuard, ShardLock, SpinGuard, SpinLock};
use super::queue::CellId;
use super::registry::{Listed, Registry};
use super::solo::{Owned, Solo};
use crate::conflate::common::event::Event;
use crate::conflate::common::policy::Merge;
use crate::conflate::common::removal::Tombstones;
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Ordering, UnsafeCell};
use crossbeam_utils::CachePadded;
use hashbrown::hash_table::HashTable;
use slab::{mark_epoch, CellData, Place, Slab, INLINE, PENDING, STALE};
use std::panic::{self, AssertUnwindSafe};

/// Bits of a `CellId` that name the shard.
const SHARD_BITS: u32 = 5;
/// Shards per hub.
pub(crate) const SHARDS: usize = 1 << SHARD_BITS;

/// Hints that `place` will be read soon. A cut's entries name cells spread
/// over every shard, too many streams for the hardware prefetcher, so a cut
/// fetches the cells of the entries it takes next itself.
#[inline(always)]
fn prefetch<T>(place: &T) {
    #[cfg(all(target_arch = "x86_64", not(any(loom, shuttle, miri))))]
    // SAFETY: a prefetch is a hint: it reads nothing architecturally and
    // cannot fault; `place` is a valid reference anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch(
            place as *const T as *const i8,
            std::arch::x86_64::_MM_HINT_T0,
        );
    }
    #[cfg(not(all(target_arch = "x86_64", not(any(loom, shuttle, miri)))))]
    let _ = place;
}

/// The shard of a hash (bits 40 and up; the index uses the low 32).
pub(crate) fn shard_of(hash: u64) -> usize {
    (hash >> 40) as usize & (SHARDS - 1)
}

fn cell_id(shard: usize, index: u32) -> CellId {
    index << SHARD_BITS | shard as u32
}

fn split(cell: CellId) -> (usize, u32) {
    ((cell & (SHARDS as u32 - 1)) as usize, cell >> SHARD_BITS)
}

/// The index's hash of a cell, from the 32 bits of the hub's hash it keeps:
/// multiplying by an odd constant keeps the low bits a bijection and mixes
/// all of them into the top 7 (hashbrown's tag).
fn table_hash(hash32: u32) -> u64 {
    u64::from(hash32).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// A value a cut still needs, kept for one receiver by the send that
/// overwrote it after the receiver's cut instant.
struct Deposit<V> {
    cell: u32,
    rx: u32,
    value: V,
    /// The cell's sequence when the deposit was made: the receiver's entry
    /// counts the sends before it.
    seq_end: u64,
}

/// What a shard keeps besides its places; under its lock.
struct ShardData<V> {
    index: HashTable<u32>,
    /// Unused place indices below `next`.
    free: Vec<u32>,
    /// Place indices ever used.
    next: u32,
    /// Cells in use, and of those the idle ones (kept indexed for reuse).
    used: u32,
    idle: u32,
    /// The most cells in use and not idle at once (see `Locked::settle`).
    peak: u32,
    deposits: Vec<Deposit<V>>,
    /// First-touch numbers of the table's cells, by slab index (only with
    /// `retain_latest`).
    orders: Vec<u64>,
    /// Where each cell names its key's place at the sole receiver's part,
    /// by slab index (a table hub's sole receiver only: `Cells::send_owned`).
    owned: Vec<Owned>,
}

struct Shard<K, V> {
    lock: ShardLock,
    data: UnsafeCell<ShardData<V>>,
    slab: Slab<K, V>,
}

// SAFETY: `data` and the cells in `slab` are reached only by a holder of
// `lock` (`Shard::lock`), which serializes every access across threads; the
// cells' sequences are atomics. Keys and values move between threads with
// the sends and takes, hence `Send` bounds.
unsafe impl<K: Send, V: Send> Sync for Shard<K, V> {}
// SAFETY: as above; the shard owns its keys and values.
unsafe impl<K: Send, V: Send> Send for Shard<K, V> {}

/// A cell the index found: its slab index and its place.
type Found<'a, K, V> = (u32, &'a Place<K, V>);

/// The locked shard.
struct Locked<'a, K, V> {
    shard: &'a Shard<K, V>,
    /// The shard's data. A raw pointer, not a `&mut`: a `Locked` is passed
    /// by value and dropped early (`drop(sh)`) while the function it was
    /// passed to still runs; a reference field would stay protected past the
    /// unlock, while the next holder makes its own.
    data: *mut ShardData<V>,
    _guard: ShardGuard<'a>,
}

impl<K, V> Shard<K, V> {
    /// Locks this shard's own lock: only where the cells are known split, or
    /// their shards park (`Cells::lock` otherwise).
    fn lock(&self) -> Locked<'_, K, V> {
        self.locked(self.lock.lock())
    }

    /// `Locked` for a shard whose lock `guard` holds (`ShardGuard::None`: the
    /// caller holds it some other way, for at least the life of `Locked`).
    #[inline]
    fn locked<'a>(&'a self, guard: ShardGuard<'a>) -> Locked<'a, K, V> {
        Locked {
            shard: self,
            // SAFETY: the lock is held for the life of `Locked`, and only a
            // lock holder makes this reference.
            data: self.data.with_mut(|p| p),
            _guard: guard,
        }
    }
}

impl<'a, K, V> Locked<'a, K, V> {
    /// This `Locked` with `guard` (which holds the lock) as its guard.
    #[inline]
    fn with_guard(self, guard: ShardGuard<'a>) -> Self {
        Locked {
            _guard: guard,
            ..self
        }
    }

    /// The shard's data, while this holds the lock.
    #[inline]
    fn d(&mut self) -> &mut ShardData<V> {
        // SAFETY: the lock is held for the life of `self` (or by a cut for
        // its current shard, or by the spin guard `Cells::send` keeps beside
        // it), so no other holder's reference exists; this one lives no
        // longer than the borrow of `self`.
        unsafe { &mut *self.data }
    }

    /// [`Locked::d`], shared.
    #[inline]
    fn d_ref(&self) -> &ShardData<V> {
        // SAFETY: as in `d`.
        unsafe { &*self.data }
    }

    #[inline]
    fn place(&self, i: u32) -> &'a Place<K, V> {
        self.shard.slab.place(i)
    }

    /// Cell `i`, which is in use.
    #[allow(clippy::mut_from_ref)]
    #[inline]
    fn cell(&self, i: u32) -> &mut CellData<K, V> {
        // SAFETY: the shard lock is held; callers name only places in use and
        // hold one cell reference at a time.
        unsafe { self.place(i).cell() }
    }

    #[inline]
    fn find(&self, hash32: u32, key: &K) -> Option<u32>
    where
        K: Eq,
    {
        self.find_place(hash32, key).map(|(i, _)| i)
    }

    /// A send's first look under the lock: the hub clock, then the key's
    /// cell ([`Locked::find_place`]). Acquire: pairs with the clock's RMWs
    /// (cuts, registry changes, helpers): a send that sees the new clock sees
    /// what came before it. Read under the lock: see docs/design.md ("The cut
    /// is one instant") for why it must be.
    #[inline]
    fn look(&self, clock: &AtomicU64, hash32: u32, key: &K) -> (u64, Option<Found<'a, K, V>>)
    where
        K: Eq,
    {
        let now = clock.load(Ordering::Acquire);
        (now, self.find_place(hash32, key))
    }

    /// [`Locked::find`], with the cell's place as the probe found it (so a
    /// caller does not locate it in the slab a second time).
    #[inline]
    fn find_place(&self, hash32: u32, key: &K) -> Option<Found<'a, K, V>>
    where
        K: Eq,
    {
        let mut hit = None;
        self.d_ref().index.find(table_hash(hash32), |&i| {
            let place = self.place(i);
            // SAFETY: the shard lock is held and every indexed place is in
            // use; this reference ends before the next one is made.
            let c = unsafe { place.cell() };
            let found = c.hash32 == hash32 && c.key == *key;
            if found {
                hit = Some((i, place));
            }
            found
        })?;
        hit
    }

    /// A new cell for `key`, indexed. Returns its slab index and place.
    fn insert(&mut self, key: K, hash32: u32) -> Found<'a, K, V> {
        let i = match self.d().free.pop() {
            Some(i) => i,
            None => {
                self.shard.slab.ensure(self.d().next);
                self.d().next += 1;
                self.d().next - 1
            }
        };
        let place = self.place(i);
        // SAFETY: lock held; `i` was unused (free or fresh).
        unsafe { place.fill(CellData::new(key, hash32)) };
        let slab = &self.shard.slab;
        self.d().index.insert_unique(table_hash(hash32), i, |&j| {
            // SAFETY: lock held; every indexed place is in use.
            table_hash(unsafe { slab.place(j).cell() }.hash32)
        });
        self.d().used += 1;
        self.d().idle += 1;
        if let Some(o) = self.d().owned.get_mut(i as usize) {
            // A new key names no place yet.
            *o = Owned::NONE;
        }
        (i, place)
    }

    /// Notes that cell `i`'s idleness may have changed from `was_idle`, and
    /// frees it if it became idle while the shard already keeps as many idle
    /// cells as it may. Returns the freed cell, to drop outside the lock.
    ///
    /// Idle cells (pending nowhere, not in the table) stay indexed, up to
    /// `IDLE_KEEP` per shard or the most cells the shard had live (pending or
    /// in the table) at once, whichever is more, so that a key that comes
    /// back finds its cell: a recurring key set costs no insert and no
    /// removal. Past that, an idle cell is freed at once (one probe, by its
    /// stored hash, comparing indices). A shard thus holds at most twice its
    /// peak live cells, plus `IDLE_KEEP`, however many keys come and go (as a
    /// hash table keeps the capacity of its peak).
    #[inline]
    fn settle(&mut self, i: u32, was_idle: bool) -> Option<CellData<K, V>> {
        // SAFETY: lock held; place `i` is in use; callers hold no other cell
        // reference across this call.
        let idle = unsafe { self.place(i).cell() }.idle();
        self.settle_as(i, was_idle, idle)
    }

    /// [`Locked::settle`] for a caller that knows whether the cell is idle now.
    #[inline]
    fn settle_as(&mut self, i: u32, was_idle: bool, idle: bool) -> Option<CellData<K, V>> {
        if was_idle == idle {
            return None;
        }
        let d = self.d();
        if !idle {
            d.idle -= 1;
            d.peak = d.peak.max(d.used - d.idle);
            return None;
        }
        if d.idle < d.idle_cap() {
            d.idle += 1;
            return None;
        }
        Some(self.free(i))
    }

    /// Frees cell `i` (in use, not counted idle): out of the index and the
    /// slab. Out of line: a recurring key set frees nothing.
    #[cold]
    #[inline(never)]
    fn free(&mut self, i: u32) -> CellData<K, V> {
        let hash32 = self.cell(i).hash32;
        match self.d().index.find_entry(table_hash(hash32), |&j| j == i) {
            Ok(entry) => drop(entry.remove()),
            Err(_) => unreachable!("a cell in use is indexed"),
        }
        self.d().free.push(i);
        self.d().used -= 1;
        // SAFETY: lock held; the place was in use and is unused from here on
        // (no longer indexed; no receiver has it pending).
        unsafe { self.place(i).empty() }
    }
}

/// Idle cells a shard keeps for keys that come back (see `Locked::settle`)
/// whatever its peak: 256 per shard, 8,192 per hub.
const IDLE_KEEP: u32 = if cfg!(any(loom, shuttle)) { 1 } else { 256 };

impl<V> ShardData<V> {
    /// How many idle cells the shard keeps (see `Locked::settle`). The models
    /// keep one, whatever the peak, so that their few keys still exercise the
    /// freeing of cells.
    #[inline]
    fn idle_cap(&self) -> u32 {
        if cfg!(any(loom, shuttle)) {
            IDLE_KEEP
        } else {
            IDLE_KEEP.max(self.peak)
        }
    }
}

/// A take's event (if the entry was live) and the cells it freed (to drop
/// outside the lock).
type Taken<K, V> = (Option<Event<K, V>>, Option<CellData<K, V>>);

/// Receivers whose consumer asked to be woken by the next push (usually
/// none, at most one per receiver; the first kept inline, so a send that wakes
/// nobody or one allocates nothing).
pub(crate) struct Wakes<'a> {
    first: Option<&'a CellRx>,
    more: Vec<&'a CellRx>,
}

impl<'a> Wakes<'a> {
    #[inline]
    fn none() -> Self {
        Wakes {
            first: None,
            more: Vec::new(),
        }
    }

    fn push(&mut self, rx: &'a CellRx) {
        if self.first.is_none() {
            self.first = Some(rx);
        } else {
            self.more.push(rx);
        }
    }

    #[inline]
    fn wake(self) {
        if let Some(first) = self.first {
            Self::wake_all(first, self.more);
        }
    }

    #[cold]
    fn wake_all(first: &CellRx, more: Vec<&CellRx>) {
        first.notify.notify(usize::MAX);
        for rx in more {
            rx.notify.notify(usize::MAX);
        }
    }
}

/// The hub's cells.
pub(crate) struct Cells<K, V> {
    /// A fixed-size array: `shard_of` masks to `SHARDS`, so indexing it by a
    /// hash needs no bounds check.
    shards: Box<[CachePadded<Shard<K, V>>; SHARDS]>,
    /// `retain_latest`: cells stay (and keep their value) while in the table.
    retain: bool,
    /// The hub's merge: newer wins for hubs with cell receivers; a hub with its
    /// own merge uses its cells for the table only.
    merge: Merge<V>,
    /// Which values remove their key from the table.
    tombstones: Tombstones<V>,
    /// The next first-touch number for the table.
    next_order: AtomicU64,
    /// One lock for every shard: while set, shard 0's lock guards every
    /// shard and a table part's push side, and no other of their locks is
    /// taken (docs/design.md, "One lock while one thread sends"). Set at
    /// the start in a newer-wins table hub; cleared for good (the *split*)
    /// under that lock, by a send from a second thread or by a registration
    /// that lists a cell receiver other than a sole one.
    merged: AtomicBool,
    /// The one sending thread while `merged` (its stripe's address; 0:
    /// none yet). Written under shard 0's lock while `merged`.
    sender: AtomicUsize,
}

impl<K, V> Cells<K, V> {
    pub(crate) fn new(merge: Merge<V>, retain: bool, tombstones: Tombstones<V>) -> Self {
        let park = !matches!(merge, Merge::NewerWins);
        Cells {
            shards: (0..SHARDS)
                .map(|_| {
                    CachePadded::new(Shard {
                        lock: ShardLock::new(park),
                        data: UnsafeCell::new(ShardData {
                            index: HashTable::new(),
                            free: Vec::new(),
                            next: 0,
                            used: 0,
                            idle: 0,
                            peak: 0,
                            deposits: Vec::new(),
                            orders: Vec::new(),
                            owned: Vec::new(),
                        }),
                        slab: Slab::new(),
                    })
                })
                .collect::<Box<[_]>>()
                .try_into()
                .unwrap_or_else(|_| unreachable!("SHARDS shards")),
            retain,
            merge,
            tombstones,
            next_order: AtomicU64::new(0),
            merged: AtomicBool::new(!park && retain),
            sender: AtomicUsize::new(0),
        }
    }

    /// Locks `own` (one of the cells' shard locks, or a table part's push
    /// lock), or, while the cells are merged, shard 0's lock, which then
    /// stands for every one of them. Returns whether the hub is merged.
    #[inline(always)]
    pub(crate) fn lock_or<'a>(&'a self, own: &'a SpinLock) -> (SpinGuard<'a>, bool) {
        self.lock_merged_or(|| own, || true)
    }

    /// [`Cells::lock_or`] for a send from the thread `who` (its stripe's
    /// address; 0: a thread on the shared stripe, which cannot be told
    /// apart): the first sender owns the merged lock, and a send from any
    /// other thread splits the cells.
    #[inline(always)]
    fn lock_for_send(&self, s: usize, who: usize) -> (SpinGuard<'_>, bool) {
        self.lock_merged_or(
            || self.spin_lock(s),
            || {
                // Relaxed: written only under the one lock, which is held.
                match self.sender.load(Ordering::Relaxed) {
                    _ if who == 0 => false,
                    0 => {
                        self.sender.store(who, Ordering::Relaxed);
                        true
                    }
                    sender => sender == who,
                }
            },
        )
    }

    /// The one protocol behind [`Cells::lock_or`] and
    /// [`Cells::lock_for_send`]: while merged, takes shard 0's lock and keeps
    /// it if the cells are still merged, nobody held it (a second thread at
    /// work on the hub now splits them: the shard locks let it run beside
    /// the first) and `keeps` (run under it) agrees; otherwise splits the
    /// cells for good and locks `own` (found only then: a send's shard lock
    /// is looked up off the merged path).
    ///
    /// Acquire on the first load: pairs with the split's Release store, so
    /// a holder of `own` that saw the split sees everything the merged
    /// holders wrote (they let go of shard 0's lock before the split took
    /// it). The split is for good, so no holder of `own` needs to look
    /// again; a merged holder does, under the lock, where the flag only
    /// changes (Relaxed).
    #[inline(always)]
    fn lock_merged_or<'a>(
        &'a self,
        own: impl FnOnce() -> &'a SpinLock,
        keeps: impl FnOnce() -> bool,
    ) -> (SpinGuard<'a>, bool) {
        if self.merged.load(Ordering::Acquire) {
            let (guard, contended) = self.spin_lock(0).lock_noting_contention();
            if self.merged.load(Ordering::Relaxed) {
                if !contended && keeps() {
                    return (guard, true);
                }
                // Release: pairs with the Acquire above.
                self.merged.store(false, Ordering::Release);
            }
        }
        (own().lock(), false)
    }

    /// Ends the merged mode for good (a registration that lists a cell
    /// receiver besides a sole one, whose cell machinery takes the shard
    /// locks one by one). Waits for the merged lock's holder.
    pub(crate) fn split(&self) {
        if self.merged.load(Ordering::Acquire) {
            let _guard = self.spin_lock(0).lock();
            // Release: pairs with `lock_or`'s Acquire.
            self.merged.store(false, Ordering::Release);
        }
    }

    /// Whether the cells are merged (tests).
    #[cfg(test)]
    pub(crate) fn is_merged(&self) -> bool {
        self.merged.load(Ordering::Acquire)
    }

    /// Shard `s`, locked (through [`Cells::lock_or`]).
    #[inline]
    fn lock(&self, s: usize) -> Locked<'_, K, V> {
        let shard = &self.shards[s];
        match shard.lock.spin() {
            Some(spin) => shard.locked(ShardGuard::Spin(self.lock_or(spin).0)),
            None => shard.locked(shard.lock.lock()),
        }
    }

    /// Every shard, locked (through [`Cells::lock_or`]: the one lock while
    /// merged, else each in index order), and the guard that holds them
    /// while merged.
    fn lock_all(&self) -> (Option<SpinGuard<'_>>, Vec<Locked<'_, K, V>>) {
        if let Some(spin) = self.shards[0].lock.spin() {
            let (guard, merged) = self.lock_or(spin);
            if merged {
                let all = self
                    .shards
                    .iter()
                    .map(|s| s.locked(ShardGuard::None))
                    .collect();
                return (Some(guard), all);
            }
            let mut all = vec![self.shards[0].locked(ShardGuard::Spin(guard))];
            all.extend(self.shards[1..].iter().map(|s| s.lock()));
            return (None, all);
        }
        (None, self.shards.iter().map(|s| s.lock()).collect())
    }

    /// Clears receiver `id`'s mark (a closed receiver's entry) and any deposit
    /// it has at `cell`; returns the sends the entry stood for.
    pub(crate) fn forget(&self, cell: CellId, start: u64, id: u32) -> u64 {
        let (s, i) = split(cell);
        let mut sh = self.lock(s);
        let seq = sh.place(i).seq.load(Ordering::Relaxed);
        let c = sh.cell(i);
        let was_idle = c.idle();
        let mut sends = 0;
        let mut dropped_values = Vec::new();
        if c.mark(id) & PENDING != 0 {
            c.set_mark(id, 0);
            c.stamp = STALE;
            // Wrapping: a second walk over entries whose cell was freed and
            // reused meanwhile reads another key's sequence (its count is
            // then not used).
            sends = seq.wrapping_sub(start);
            if c.pending() == 0 && !c.retained() {
                dropped_values.extend(c.take_value());
            }
        }
        if c.has_deposits() {
            let deps = &mut sh.d().deposits;
            while let Some(at) = deps.iter().position(|d| d.cell == i && d.rx == id) {
                let d = deps.swap_remove(at);
                sends = d.seq_end.wrapping_sub(start);
                dropped_values.push(d.value);
            }
            let more = deps.iter().any(|d| d.cell == i);
            sh.cell(i).set_deposits(more);
        }
        let freed = sh.settle(i, was_idle);
        drop(sh);
        drop(dropped_values);
        drop(freed);
        sends
    }

    /// A hard close: drops every value the table does not keep (and every
    /// deposit) now. The cells and marks stay until each receiver's consumer
    /// lets go of its entries (their sequences count its dropped sends).
    pub(crate) fn drop_values(&self) {
        for s in 0..SHARDS {
            let mut sh = self.lock(s);
            let mut values = Vec::new();
            let indexed: Vec<u32> = sh.d().index.iter().copied().collect();
            for i in indexed {
                let c = sh.cell(i);
                if !c.retained() {
                    values.extend(c.take_value());
                }
                c.set_deposits(false);
                c.stamp = STALE;
            }
            values.extend(sh.d().deposits.drain(..).map(|d| d.value));
            drop(sh);
            drop(values);
        }
    }

    /// Shard `s`'s lock, which a table hub's sole receiver takes as its own
    /// (`Solo::for_table`): a spin lock, since such a hub's merge is newer
    /// wins.
    pub(crate) fn spin_lock(&self, s: usize) -> &SpinLock {
        self.shards[s]
            .lock
            .spin()
            .expect("a table hub's sole receiver needs a newer-wins hub")
    }

    /// Shard `s`'s cells' references to the sole receiver's places.
    ///
    /// # Safety
    /// The caller holds shard `s`'s lock, and the slice ends before it lets
    /// go of it.
    pub(crate) unsafe fn owned_held(&self, s: usize) -> &[Owned] {
        // SAFETY: the caller's contract.
        self.shards[s].data.with(|p| {
            // SAFETY: as above.
            let data: &ShardData<V> = unsafe { &*p };
            data.owned.as_slice()
        })
    }

    /// The send sequence of a cell that is pending at the caller (so it stays
    /// in use). Lock-free. Relaxed: stats are exact once no send runs, and
    /// whatever made the sends finish orders their stores before this.
    pub(crate) fn seq(&self, cell: CellId) -> u64 {
        let (s, i) = split(cell);
        self.shards[s].slab.place(i).seq.load(Ordering::Relaxed)
    }
}

impl<K, V> Drop for Cells<K, V> {
    fn drop(&mut self) {
        for shard in self.shards.iter_mut() {
            let d = shard.data.with_mut(|p| {
                // SAFETY: `&mut self`: nothing else uses the shard.
                unsafe { &mut *p }
            });
            for &i in d.index.iter() {
                // SAFETY: indexed places are in use; `&mut self` is exclusive.
                drop(unsafe { shard.slab.place(i).empty() });
            }
        }
    }
}
