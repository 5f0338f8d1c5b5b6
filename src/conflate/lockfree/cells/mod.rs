//! The hub's cells: one per live key, shared by every cell receiver and by
//! the state table (docs/design.md, "One cell per key").
//!
//! A cell holds the key, its latest value, a send sequence, the hub clock's
//! value when it was last made pending everywhere (`stamp`), and one mark per
//! cell receiver (pending or not, and the cut epoch of its entry). Cells are
//! sharded by the send's hash; each shard is one lock ([`ShardLock`]), a hash
//! index of slab indices, and a slab of cells at stable addresses.
//!
//! - **A coalescing send** finds its cell and, if the cell's stamp equals the
//!   hub clock, replaces the value and bumps the sequence: one probe and one
//!   line written, whatever the number of receivers. The clock moves on every
//!   cut and every change of the cell receivers, and a take sets the stamp to
//!   `STALE`, so an equal stamp means every cell receiver of the registry has
//!   the key pending in its current epoch.
//! - **Otherwise** (the slow path) the send visits every cell receiver: it
//!   pushes an entry to each one that does not have the key pending; for one
//!   whose entry belongs to a cut that has not taken it yet (the mark's epoch
//!   is older than the receiver's), it first *deposits* the value the cut
//!   needs, then re-pends the key in the new epoch. Then it stamps the cell
//!   with the clock it read.
//! - **A take** (pop or cut) clears the receiver's mark and reads the value
//!   (moving it out if no receiver still has the key pending and the table
//!   does not keep it), or takes the receiver's deposit.
//!
//! Why the clock makes this one instant per receiver, and the "helping" rule
//! that keeps it so, is argued in docs/design.md ("The cut is one instant").

mod slab;

use super::cell_rx::CellRx;
use super::lock::{ShardGuard, ShardLock};
use super::queue::CellId;
use super::registry::Registry;
use crate::event::Event;
use crate::policy::Merge;
use crate::removal::Tombstones;
use crate::sync::{AtomicU64, Ordering, UnsafeCell};
use crossbeam_utils::CachePadded;
use hashbrown::hash_table::HashTable;
use slab::{mark_epoch, CellData, Slab, Slot, PENDING, STALE};
use std::panic::{self, AssertUnwindSafe};

/// Bits of a `CellId` that name the shard.
const SHARD_BITS: u32 = 5;
/// Shards per hub.
pub(crate) const SHARDS: usize = 1 << SHARD_BITS;

/// Hints that `slot` will be read soon. A cut's entries name cells spread
/// over every shard, too many streams for the hardware prefetcher, so a cut
/// fetches each window's cells itself.
#[inline(always)]
fn prefetch<T>(slot: &T) {
    #[cfg(all(target_arch = "x86_64", not(any(loom, shuttle, miri))))]
    // SAFETY: a prefetch is a hint: it reads nothing architecturally and
    // cannot fault; `slot` is a valid reference anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch(
            slot as *const T as *const i8,
            std::arch::x86_64::_MM_HINT_T0,
        );
    }
    #[cfg(not(all(target_arch = "x86_64", not(any(loom, shuttle, miri)))))]
    let _ = slot;
}

/// The shards a cut's window holds (a bitmask), unlocked on drop.
struct Held<'a, K, V> {
    cells: &'a Cells<K, V>,
    named: u64,
}

impl<'a, K, V> Held<'a, K, V> {
    /// Locks every shard in `named`, in index order.
    fn lock(cells: &'a Cells<K, V>, named: u64) -> Self {
        let mut rest = named;
        while rest != 0 {
            let s = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            cells.shards[s]
                .lock
                .spin()
                .expect("only hubs with cell receivers cut, and their shards spin")
                .lock_raw();
        }
        Held { cells, named }
    }
}

impl<K, V> Drop for Held<'_, K, V> {
    fn drop(&mut self) {
        let mut rest = self.named;
        while rest != 0 {
            let s = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            let lock = self.cells.shards[s]
                .lock
                .spin()
                .expect("locked as a spin lock");
            // SAFETY: `lock` locked this shard (`named`) and nothing
            // released it since.
            unsafe { lock.unlock_raw() };
        }
    }
}

/// A cut takes its entries this many at a time, holding the shards they name
/// (see `Cells::take_batch_into`): a publisher waits for at most one window.
const CUT_WINDOW: usize = 32;

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

/// What a shard keeps besides its slots; under its lock.
struct ShardData<V> {
    index: HashTable<u32>,
    /// Unused slot indices below `next`.
    free: Vec<u32>,
    /// Slot indices ever used.
    next: u32,
    /// Cells in use, and of those the idle ones (kept indexed for reuse).
    used: u32,
    idle: u32,
    deposits: Vec<Deposit<V>>,
    /// First-touch numbers of the table's cells, by slab index (only with
    /// `retain_latest`).
    orders: Vec<u64>,
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
    fn lock(&self) -> Locked<'_, K, V> {
        let guard = self.lock.lock();
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
    /// The shard's data, while this holds the lock.
    #[inline]
    fn d(&mut self) -> &mut ShardData<V> {
        // SAFETY: the lock is held for the life of `self` (or, for a
        // `Locked` made under a cut's window, by the window), so no other
        // holder's reference exists; this one lives no longer than the
        // borrow of `self`.
        unsafe { &mut *self.data }
    }

    /// [`Locked::d`], shared.
    #[inline]
    fn d_ref(&self) -> &ShardData<V> {
        // SAFETY: as in `d`.
        unsafe { &*self.data }
    }

    #[inline]
    fn slot(&self, i: u32) -> &'a Slot<K, V> {
        self.shard.slab.slot(i)
    }

    /// Cell `i`, which is in use.
    #[allow(clippy::mut_from_ref)]
    #[inline]
    fn cell(&self, i: u32) -> &mut CellData<K, V> {
        // SAFETY: the shard lock is held; callers name only slots in use and
        // hold one cell reference at a time.
        unsafe { self.slot(i).cell() }
    }

    #[inline]
    fn find(&self, hash32: u32, key: &K) -> Option<u32>
    where
        K: Eq,
    {
        self.d_ref()
            .index
            .find(table_hash(hash32), |&i| {
                let c = self.cell(i);
                c.hash32 == hash32 && c.key == *key
            })
            .copied()
    }

    /// A new cell for `key`, indexed. Returns its slab index.
    fn insert(&mut self, key: K, hash32: u32) -> u32 {
        let i = match self.d().free.pop() {
            Some(i) => i,
            None => {
                self.shard.slab.ensure(self.d().next);
                self.d().next += 1;
                self.d().next - 1
            }
        };
        // SAFETY: lock held; `i` was unused (free or fresh).
        unsafe { self.slot(i).fill(CellData::new(key, hash32)) };
        let slab = &self.shard.slab;
        self.d().index.insert_unique(table_hash(hash32), i, |&j| {
            // SAFETY: lock held; every indexed slot is in use.
            table_hash(unsafe { slab.slot(j).cell() }.hash32)
        });
        self.d().used += 1;
        self.d().idle += 1;
        i
    }

    /// Notes that cell `i`'s idleness may have changed from `was_idle`, and
    /// frees it if it became idle while the shard already keeps `IDLE_KEEP`
    /// idle cells. Returns the freed cell, to drop outside the lock.
    ///
    /// Idle cells (pending nowhere, not in the table) stay indexed, up to
    /// `IDLE_KEEP` per shard, so that a key that comes back finds its cell: a
    /// recurring key costs no insert and no removal. Past that, an idle cell
    /// is freed at once (one probe, by its stored hash, comparing indices). A
    /// shard thus holds its cells in use plus at most `IDLE_KEEP`.
    #[inline]
    fn settle(&mut self, i: u32, was_idle: bool) -> Option<CellData<K, V>> {
        // SAFETY: lock held; slot `i` is in use; callers hold no other cell
        // reference across this call.
        let idle = unsafe { self.slot(i).cell() }.idle();
        self.settle_as(i, was_idle, idle)
    }

    /// [`Locked::settle`] for a caller that knows whether the cell is idle now.
    #[inline]
    fn settle_as(&mut self, i: u32, was_idle: bool, idle: bool) -> Option<CellData<K, V>> {
        if was_idle == idle {
            return None;
        }
        if !idle {
            self.d().idle -= 1;
            return None;
        }
        if self.d().idle >= IDLE_KEEP {
            return Some(self.free(i));
        }
        self.d().idle += 1;
        None
    }

    /// Frees cell `i` (in use, not counted idle): out of the index and the
    /// slab.
    fn free(&mut self, i: u32) -> CellData<K, V> {
        let hash32 = self.cell(i).hash32;
        match self.d().index.find_entry(table_hash(hash32), |&j| j == i) {
            Ok(entry) => drop(entry.remove()),
            Err(_) => unreachable!("a cell in use is indexed"),
        }
        self.d().free.push(i);
        self.d().used -= 1;
        // SAFETY: lock held; the slot was in use and is unused from here on
        // (no longer indexed; no receiver has it pending).
        unsafe { self.slot(i).empty() }
    }
}

/// Idle cells a shard keeps for keys that come back (see `Locked::settle`):
/// 256 per shard, 8,192 per hub at most.
const IDLE_KEEP: u32 = if cfg!(any(loom, shuttle)) { 1 } else { 256 };

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
    pub(crate) fn wake(self) {
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
    shards: Box<[CachePadded<Shard<K, V>>]>,
    /// `retain_latest`: cells stay (and keep their value) while in the table.
    retain: bool,
    /// The hub's merge: newer wins for hubs with cell receivers; a hub with its
    /// own merge uses its cells for the table only.
    merge: Merge<V>,
    /// Which values remove their key from the table.
    tombstones: Tombstones<V>,
    /// The next first-touch number for the table.
    next_order: AtomicU64,
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
                            deposits: Vec::new(),
                            orders: Vec::new(),
                        }),
                        slab: Slab::new(),
                    })
                })
                .collect(),
            retain,
            merge,
            tombstones,
            next_order: AtomicU64::new(0),
        }
    }

    /// Clears receiver `id`'s mark (a closed receiver's entry) and any deposit
    /// it has at `cell`; returns the sends the entry stood for.
    pub(crate) fn forget(&self, cell: CellId, start: u64, id: u32) -> u64 {
        let (s, i) = split(cell);
        let mut sh = self.shards[s].lock();
        let seq = sh.slot(i).seq.load(Ordering::Relaxed);
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
        for shard in self.shards.iter() {
            let mut sh = shard.lock();
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

    /// The send sequence of a cell that is pending at the caller (so it stays
    /// in use). Lock-free. Relaxed: stats are exact once no send runs, and
    /// whatever made the sends finish orders their stores before this.
    pub(crate) fn seq(&self, cell: CellId) -> u64 {
        let (s, i) = split(cell);
        self.shards[s].slab.slot(i).seq.load(Ordering::Relaxed)
    }
}

/// Makes sure a send that saw `epoch` at `rx` is followed, for every later send,
/// by a clock change: the first thread that sees a receiver's new epoch before
/// the receiver announced it bumps the clock itself (docs/design.md, "The cut
/// is one instant").
fn help(rx: &CellRx, epoch: u8, clock: &AtomicU64) {
    // Acquire pairs with the Release store below and in the cut: a thread that
    // reads the announcement also sees the clock bump before it.
    if rx.announced.load(Ordering::Acquire) != u32::from(epoch) {
        clock.fetch_add(1, Ordering::AcqRel);
        rx.announced.store(u32::from(epoch), Ordering::Release);
    }
}

impl<K: Eq + Clone, V: Clone> Cells<K, V> {
    /// Folds one send into its key's cell and makes the key pending at every
    /// cell receiver of `rxs` (a send in flight's view). Runs no user code but
    /// `K::eq`, `K::clone` (a new cell), `V::clone` (deposits) and, in a hub
    /// with its own merge, the merge; a panic in any of them leaves the shard
    /// consistent and reaches the caller.
    ///
    /// # Safety
    /// The caller is a send in flight until it is done with the returned
    /// wakes (they name receivers of the registry's cell list).
    ///
    /// `tombstone`: `value` removes the key (the caller ran the hub's test
    /// before anything was locked): the table forgets the key, and the value
    /// still reaches every cell receiver as any send does.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(crate) unsafe fn send<'a>(
        &self,
        hash: u64,
        key: &K,
        value: V,
        tombstone: bool,
        registry: &'a Registry<K, V>,
        clock: &AtomicU64,
    ) -> Wakes<'a> {
        let shard_index = shard_of(hash);
        let sh = self.shards[shard_index].lock();
        let hash32 = hash as u32;
        // Acquire: pairs with the clock's RMWs (cuts, registry changes,
        // helpers): a send that sees the new clock sees what came before it.
        // Read under the lock: see docs/design.md for why it must be.
        let now = clock.load(Ordering::Acquire);
        let found = sh.find(hash32, key);
        if let (Merge::NewerWins, Some(i)) = (&self.merge, found) {
            let slot = sh.slot(i);
            // SAFETY: the shard lock is held and slot `i` is in use (indexed).
            let cell = unsafe { slot.cell() };
            if cell.stamp == now && cell.value().is_some() && !tombstone {
                // Every cell receiver has the key pending in its current
                // epoch: one write, whatever their number. (A tombstone
                // takes the slow path: it changes the table.)
                let old = cell.replace_value(value);
                // Relaxed: written under the lock; read by stats (see `seq`).
                let seq = slot.seq.load(Ordering::Relaxed);
                slot.seq.store(seq + 1, Ordering::Relaxed);
                drop(sh);
                drop(old);
                return Wakes::none();
            }
        }
        // SAFETY: the caller's contract, passed on.
        unsafe {
            self.send_slow(
                sh,
                found,
                shard_index,
                hash32,
                key,
                value,
                tombstone,
                registry,
                clock,
                now,
            )
        }
    }

    /// The rest of [`Cells::send`]: a new key, a hub with its own merge, or a
    /// cell that needs its receivers visited.
    ///
    /// # Safety
    /// As [`Cells::send`].
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    unsafe fn send_slow<'a>(
        &self,
        mut sh: Locked<'_, K, V>,
        found: Option<u32>,
        shard_index: usize,
        hash32: u32,
        key: &K,
        value: V,
        tombstone: bool,
        registry: &'a Registry<K, V>,
        clock: &AtomicU64,
        now: u64,
    ) -> Wakes<'a> {
        let i = match found {
            Some(i) => i,
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
        let slot = sh.slot(i);
        let seq = slot.seq.load(Ordering::Relaxed);
        // SAFETY: the shard lock is held and slot `i` is in use; no other
        // reference to this cell is made while this one lives.
        let cell = unsafe { slot.cell() };
        let was_idle = cell.idle();
        let entering = self.retain && !cell.retained() && !tombstone;
        // The cell receivers, read after the clock: a registry change moves
        // the clock after it changes the list, so a send that saw the new
        // clock sees the new list (docs/design.md, "Registration versus
        // send").
        // SAFETY: the caller is in flight (this function's contract).
        let rxs = unsafe { registry.cells() };
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
        let cell_name = cell_id(shard_index, i);
        let mut wakes = Wakes::none();
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
                if let Some(value) = value {
                    sh.d().deposits.push(Deposit {
                        cell: i,
                        rx: rx.id,
                        value,
                        seq_end: seq,
                    });
                    cell.set_deposits(true);
                }
            }
            let pushed = rx.queue.push(cell_name, seq);
            help(rx, pushed.epoch, clock);
            cell.set_mark(rx.id, PENDING | u16::from(pushed.epoch));
            if pushed.wake {
                wakes.push(rx);
            }
        }
        cell.replace_value(value);
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
        slot.seq.store(seq + 1, Ordering::Relaxed);
        let idle = cell.idle();
        // A tombstone pending nowhere (no cell receiver) is kept by nobody:
        // an idle cell holds no value.
        let gone = if idle && tombstone {
            cell.take_value()
        } else {
            None
        };
        if entering {
            self.note_order(&mut sh, i);
        }
        let freed = sh.settle_as(i, was_idle, idle);
        drop(sh);
        drop(old);
        drop(gone);
        drop(freed);
        wakes
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
    fn merge_into_table(
        &self,
        mut sh: Locked<'_, K, V>,
        i: u32,
        value: V,
        tombstone: bool,
    ) -> Wakes<'static> {
        let seq_word = &sh.slot(i).seq;
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
        Wakes::none()
    }

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
        let slot = sh.slot(i);
        let seq = slot.seq.load(Ordering::Relaxed);
        // SAFETY: lock held (`sh`); slot `i` is in use (the caller's entry
        // names it and its mark or deposit keeps it); no other cell reference
        // is live across the uses below.
        let cell = unsafe { slot.cell() };
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
        let seq = sh.slot(i).seq.load(Ordering::Relaxed);
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
            // The window's slots, found once and fetched before the locks
            // are taken (their addresses are stable; reading them waits for
            // the locks).
            let mut slots: [Option<&Slot<K, V>>; CUT_WINDOW] = [None; CUT_WINDOW];
            let mut named = 0u64;
            for (n, &(c, _)) in window.iter().enumerate() {
                let (s, i) = split(c);
                named |= 1 << s;
                let slot = self.shards[s].slab.slot(i);
                prefetch(slot);
                slots[n] = Some(slot);
            }
            // Unlocks every shard it holds, also when a clone unwinds.
            let held = Held::lock(self, named);
            for (&(c, start), slot) in window.iter().zip(slots) {
                let Some(slot) = slot else {
                    unreachable!("one slot per entry of the window")
                };
                let (s, i) = split(c);
                let shard = &self.shards[s];
                // SAFETY: `held` holds shard `s`'s lock; slot `i` is in use
                // (this receiver's entry names it and its mark or deposit
                // keeps it); one cell reference at a time.
                let cell = unsafe { slot.cell() };
                let mark = cell.mark(rx.id);
                if mark & PENDING != 0 && mark_epoch(mark) == epoch {
                    // The common case, inline: the entry's own mark.
                    let seq = slot.seq.load(Ordering::Relaxed);
                    let key = cell.key.clone();
                    cell.set_mark(rx.id, 0);
                    cell.stamp = STALE;
                    let value = if cell.pending() == 0 && !cell.retained() {
                        let v = cell.take_value();
                        if cell.idle() {
                            // SAFETY: as above: held; no other reference.
                            let d = shard.data.with_mut(|p| unsafe { &mut *p });
                            d.idle += 1;
                        }
                        v
                    } else {
                        cell.value().cloned()
                    };
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

    /// The table's value for `key` (`retain_latest`).
    pub(crate) fn latest(&self, hash: u64, key: &K) -> Option<V> {
        let sh = self.shards[shard_of(hash)].lock();
        let i = sh.find(hash as u32, key)?;
        let c = sh.cell(i);
        if c.retained() {
            c.value().cloned()
        } else {
            None
        }
    }

    /// The whole table as of one instant, in first-touch order: every shard
    /// is locked (in index order, the only place that holds more than one)
    /// before the first is read.
    pub(crate) fn snapshot(&self) -> Vec<(K, V)> {
        self.table_entries(|_, k, v| (k.clone(), v.clone()))
    }

    fn table_entries<T>(&self, mut f: impl FnMut(CellId, &K, &V) -> T) -> Vec<T> {
        let guards: Vec<_> = self.shards.iter().map(|s| s.lock()).collect();
        let mut out: Vec<(u64, T)> = Vec::new();
        for (s, sh) in guards.iter().enumerate() {
            for &i in sh.d_ref().index.iter() {
                let c = sh.cell(i);
                if let (true, Some(v)) = (c.retained(), c.value()) {
                    out.push((sh.d_ref().orders[i as usize], f(cell_id(s, i), &c.key, v)));
                }
            }
        }
        drop(guards);
        out.sort_unstable_by_key(|&(order, _)| order);
        out.into_iter().map(|(_, t)| t).collect()
    }

    /// Seeds a snapshot cell receiver with the whole table, in table order,
    /// `sends == 0`. Called with no send in flight (the registration holds
    /// sends off), before `rx` is registered.
    pub(crate) fn seed(&self, rx: &CellRx) {
        let cells = self.table_entries(|c, _, _| c);
        for c in cells {
            let (s, i) = split(c);
            let sh = self.shards[s].lock();
            let seq = sh.slot(i).seq.load(Ordering::Relaxed);
            let pushed = rx.queue.push(c, seq);
            let cell = sh.cell(i);
            cell.set_mark(rx.id, PENDING | u16::from(pushed.epoch));
            cell.stamp = STALE;
        }
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
                // SAFETY: indexed slots are in use; `&mut self` is exclusive.
                drop(unsafe { shard.slab.slot(i).empty() });
            }
        }
    }
}
