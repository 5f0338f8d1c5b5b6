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
use crate::sync::{AtomicU64, Ordering, UnsafeCell};
use crossbeam_utils::CachePadded;
use hashbrown::hash_table::HashTable;
use slab::{mark_epoch, CellData, Slab, Slot, PENDING, STALE};
use std::panic::{self, AssertUnwindSafe};

/// Bits of a `CellId` that name the shard.
const SHARD_BITS: u32 = 5;
/// Shards per hub.
pub(crate) const SHARDS: usize = 1 << SHARD_BITS;

/// A take claims a cut's entries of one shard this many per lock hold, so a
/// publisher of that shard waits for at most one chunk.
const CLAIM_CHUNK: usize = 64;

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
    d: &'a mut ShardData<V>,
    _guard: ShardGuard<'a>,
}

impl<K, V> Shard<K, V> {
    fn lock(&self) -> Locked<'_, K, V> {
        let guard = self.lock.lock();
        Locked {
            shard: self,
            // SAFETY: the lock is held for the life of `Locked`, and only a
            // lock holder makes this reference.
            d: self.data.with_mut(|p| unsafe { &mut *p }),
            _guard: guard,
        }
    }
}

impl<K, V> Locked<'_, K, V> {
    fn slot(&self, i: u32) -> &Slot<K, V> {
        self.shard.slab.slot(i)
    }

    /// Cell `i`, which is in use.
    #[allow(clippy::mut_from_ref)]
    fn cell(&self, i: u32) -> &mut CellData<K, V> {
        // SAFETY: the shard lock is held; callers name only slots in use and
        // hold one cell reference at a time.
        unsafe { self.slot(i).cell() }
    }

    fn find(&self, hash32: u32, key: &K) -> Option<u32>
    where
        K: Eq,
    {
        self.d
            .index
            .find(table_hash(hash32), |&i| {
                let c = self.cell(i);
                c.hash32 == hash32 && c.key == *key
            })
            .copied()
    }

    /// A new cell for `key`, indexed. Returns its slab index.
    fn insert(&mut self, key: K, hash32: u32) -> u32 {
        let i = match self.d.free.pop() {
            Some(i) => i,
            None => {
                self.shard.slab.ensure(self.d.next);
                self.d.next += 1;
                self.d.next - 1
            }
        };
        // SAFETY: lock held; `i` was unused (free or fresh).
        unsafe { self.slot(i).fill(CellData::new(key, hash32)) };
        let slab = &self.shard.slab;
        self.d.index.insert_unique(table_hash(hash32), i, |&j| {
            // SAFETY: lock held; every indexed slot is in use.
            table_hash(unsafe { slab.slot(j).cell() }.hash32)
        });
        self.d.used += 1;
        self.d.idle += 1;
        i
    }

    /// Notes that cell `i`'s idleness may have changed from `was_idle`, and
    /// frees idle cells once they outnumber the others by `SWEEP_SLACK`.
    /// Returns the cells freed, to drop outside the lock.
    fn settle(&mut self, i: u32, was_idle: bool) -> Vec<CellData<K, V>> {
        let idle = self.cell(i).idle();
        match (was_idle, idle) {
            (true, false) => self.d.idle -= 1,
            (false, true) => self.d.idle += 1,
            _ => {}
        }
        if self.d.idle <= self.d.used - self.d.idle + SWEEP_SLACK {
            return Vec::new();
        }
        self.sweep()
    }

    /// Frees every idle cell of the shard.
    fn sweep(&mut self) -> Vec<CellData<K, V>> {
        let mut freed = Vec::new();
        let slab = &self.shard.slab;
        let free = &mut self.d.free;
        self.d.index.retain(|&mut i| {
            let slot = slab.slot(i);
            // SAFETY: lock held; indexed slots are in use.
            if unsafe { slot.cell() }.idle() {
                // SAFETY: as above; the slot is unused afterwards and leaves
                // the index here.
                freed.push(unsafe { slot.empty() });
                free.push(i);
                false
            } else {
                true
            }
        });
        self.d.used -= freed.len() as u32;
        self.d.idle -= freed.len() as u32;
        freed
    }
}

/// Idle cells kept, beyond as many as the cells in use, before a sweep.
const SWEEP_SLACK: u32 = if cfg!(any(loom, shuttle)) { 0 } else { 32 };

/// A short list kept on the stack (a send's receivers to re-pend or wake):
/// `N` inline, the rest in a vector, so a send with few receivers allocates
/// nothing.
struct Few<T: Copy, const N: usize> {
    inline: [Option<T>; N],
    len: usize,
    more: Vec<T>,
}

impl<T: Copy, const N: usize> Few<T, N> {
    fn new() -> Self {
        Few {
            inline: [None; N],
            len: 0,
            more: Vec::new(),
        }
    }

    fn push(&mut self, item: T) {
        match self.inline.get_mut(self.len) {
            Some(slot) => *slot = Some(item),
            None => self.more.push(item),
        }
        self.len += 1;
    }

    fn iter(&self) -> impl Iterator<Item = T> + '_ {
        self.inline
            .iter()
            .flatten()
            .copied()
            .chain(self.more.iter().copied())
    }
}

/// A take's event (if the entry was live) and the cells it freed (to drop
/// outside the lock).
type Taken<K, V> = (Option<Event<K, V>>, Vec<CellData<K, V>>);

/// Receivers whose consumer asked to be woken by the next push.
pub(crate) struct Wakes<'a>(Few<&'a CellRx, 4>);

impl Wakes<'_> {
    fn none() -> Self {
        Wakes(Few::new())
    }

    pub(crate) fn wake(self) {
        for rx in self.0.iter() {
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
    /// The next first-touch number for the table.
    next_order: AtomicU64,
}

impl<K, V> Cells<K, V> {
    pub(crate) fn new(merge: Merge<V>, retain: bool) -> Self {
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
            let deps = &mut sh.d.deposits;
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
            let sh = shard.lock();
            let mut values = Vec::new();
            let indexed: Vec<u32> = sh.d.index.iter().copied().collect();
            for i in indexed {
                let c = sh.cell(i);
                if !c.retained() {
                    values.extend(c.take_value());
                }
                c.set_deposits(false);
                c.stamp = STALE;
            }
            values.extend(sh.d.deposits.drain(..).map(|d| d.value));
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
    pub(crate) unsafe fn send<'a>(
        &self,
        hash: u64,
        key: &K,
        value: V,
        registry: &'a Registry<K, V>,
        clock: &AtomicU64,
    ) -> Wakes<'a> {
        let shard_index = shard_of(hash);
        let mut sh = self.shards[shard_index].lock();
        let hash32 = hash as u32;
        // Acquire: pairs with the clock's RMWs (cuts, registry changes,
        // helpers): a send that sees the new clock sees what came before it.
        // Read under the lock: see docs/design.md for why it must be.
        let now = clock.load(Ordering::Acquire);
        let i = match sh.find(hash32, key) {
            Some(i) => i,
            // The one copy of the key is made before anything changes.
            None => {
                let key = key.clone();
                sh.insert(key, hash32)
            }
        };
        let seq = sh.slot(i).seq.load(Ordering::Relaxed);
        let cell = sh.cell(i);
        if !matches!(self.merge, Merge::NewerWins) {
            // A hub with its own merge: the cells are the table only.
            return self.merge_into_table(sh, i, value);
        }
        if cell.stamp == now && cell.value().is_some() {
            // Every cell receiver has the key pending in its current epoch.
            let old = cell.replace_value(value);
            // Relaxed: written under the lock; read by stats (see `seq`).
            sh.slot(i).seq.store(seq + 1, Ordering::Relaxed);
            drop(sh);
            drop(old);
            return Wakes::none();
        }
        let was_idle = cell.idle();
        let entering = self.retain && !cell.retained();
        // The cell receivers, read after the clock: a registry change moves
        // the clock after it changes the list, so a send that saw the new
        // clock sees the new list (docs/design.md, "Registration versus
        // send").
        // SAFETY: the caller is in flight (this function's contract).
        let rxs = unsafe { registry.cells() };
        // Which receivers need an entry, and how many of them a deposit
        // first (those come first in the pass below, in list order).
        let mut repend: Few<(&'a CellRx, bool), 8> = Few::new();
        let mut deposit_for = 0usize;
        for rx in rxs.iter() {
            let mark = cell.mark(rx.id);
            if mark & PENDING != 0 {
                let epoch = rx.queue.tail().epoch();
                help(rx, epoch, clock);
                if mark_epoch(mark) == epoch {
                    continue;
                }
                // Its entry belongs to a cut that has not taken it: keep the
                // value that cut needs.
                repend.push((rx, true));
                deposit_for += 1;
            } else {
                repend.push((rx, false));
            }
        }
        // Clones before anything changes (user code).
        let mut copies: Vec<V> = Vec::new();
        if deposit_for > 1 {
            // No value only after a hard close dropped it: then no cut will
            // deliver anything, and no deposit is needed.
            if let Some(v) = cell.value() {
                for _ in 1..deposit_for {
                    copies.push(v.clone());
                }
            }
        }
        let cell_name = cell_id(shard_index, i);
        let mut wakes = Wakes::none();
        for (rx, _) in repend.iter() {
            let pushed = rx.queue.push(cell_name, seq);
            help(rx, pushed.epoch, clock);
            cell.set_mark(rx.id, PENDING | u16::from(pushed.epoch));
            if pushed.wake {
                wakes.0.push(rx);
            }
        }
        let mut old = cell.replace_value(value);
        if entering {
            cell.set_retained(true);
        }
        if deposit_for > 0 {
            cell.set_deposits(true);
            for (rx, _) in repend.iter().filter(|&(_, deposit)| deposit) {
                // One value per deposit, unless a hard close dropped it.
                let Some(value) = copies.pop().or_else(|| old.take()) else {
                    continue;
                };
                sh.d.deposits.push(Deposit {
                    cell: i,
                    rx: rx.id,
                    value,
                    seq_end: seq,
                });
            }
        }
        sh.cell(i).stamp = now;
        sh.slot(i).seq.store(seq + 1, Ordering::Relaxed);
        if entering {
            self.note_order(&mut sh, i);
        }
        let freed = sh.settle(i, was_idle);
        drop(sh);
        drop(old);
        drop(freed);
        wakes
    }

    /// Gives cell `i` a first-touch number (it just entered the table).
    fn note_order(&self, sh: &mut Locked<'_, K, V>, i: u32) {
        // Relaxed: the number only has to be unique and increase along the
        // happens-before order of insertions (the RMW's modification order
        // gives both; see docs/design.md, "The table").
        let order = self.next_order.fetch_add(1, Ordering::Relaxed);
        let orders = &mut sh.d.orders;
        if orders.len() <= i as usize {
            orders.resize(i as usize + 1, 0);
        }
        orders[i as usize] = order;
    }

    /// A send in a hub with its own merge: the table's fold (`None` removes
    /// the key; a panicking merge removes it too and the panic continues).
    fn merge_into_table(&self, mut sh: Locked<'_, K, V>, i: u32, value: V) -> Wakes<'static> {
        let seq_word = &sh.slot(i).seq;
        seq_word.store(seq_word.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        let cell = sh.cell(i);
        let was_idle = cell.idle();
        let outcome = match cell.take_value() {
            None => {
                // Enters the table (again, if the merge removed it before).
                cell.replace_value(value);
                cell.set_retained(true);
                self.note_order(&mut sh, i);
                Ok(())
            }
            Some(prev) => {
                let merge = &self.merge;
                match panic::catch_unwind(AssertUnwindSafe(|| merge.apply(prev, value))) {
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
        let seq = sh.slot(i).seq.load(Ordering::Relaxed);
        let cell = sh.cell(i);
        let mark = cell.mark(id);
        if mark & PENDING != 0 && mark_epoch(mark) == epoch {
            let was_idle = cell.idle();
            let key = cell.key.clone();
            cell.set_mark(id, 0);
            cell.stamp = STALE;
            let value = if cell.pending() == 0 && !cell.retained() {
                cell.take_value()
            } else {
                cell.value().cloned()
            };
            let freed = sh.settle(i, was_idle);
            // No value only after a hard close dropped it (`drop_values`):
            // the take is stale then.
            return (value.map(|v| Event::new(key, v, seq - start)), freed);
        }
        if cell.has_deposits() {
            let deps = &mut sh.d.deposits;
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
        (None, Vec::new())
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

    /// Takes a cut's entries (in queue order) for `rx`, visiting each shard
    /// once per `CLAIM_CHUNK` entries; the batch keeps queue order.
    pub(crate) fn take_batch(
        &self,
        entries: &[(CellId, u64)],
        rx: &CellRx,
        epoch: u8,
    ) -> Vec<Event<K, V>> {
        // Bucket the entries by shard (a counting sort on positions).
        let mut counts = [0u32; SHARDS + 1];
        for &(c, _) in entries {
            counts[split(c).0 + 1] += 1;
        }
        for s in 0..SHARDS {
            counts[s + 1] += counts[s];
        }
        let mut order = vec![0u32; entries.len()];
        let mut fill = counts;
        for (pos, &(c, _)) in entries.iter().enumerate() {
            let s = split(c).0;
            order[fill[s] as usize] = pos as u32;
            fill[s] += 1;
        }
        let mut out: Vec<Option<Event<K, V>>> = Vec::with_capacity(entries.len());
        out.resize_with(entries.len(), || None);
        let mut freed = Vec::new();
        for s in 0..SHARDS {
            let mine = &order[counts[s] as usize..counts[s + 1] as usize];
            for chunk in mine.chunks(CLAIM_CHUNK) {
                let mut sh = self.shards[s].lock();
                for &pos in chunk {
                    let (c, start) = entries[pos as usize];
                    let (event, f) = Self::take_locked(&mut sh, split(c).1, start, rx.id, epoch);
                    out[pos as usize] = event;
                    freed.extend(f);
                }
            }
        }
        drop(freed);
        out.into_iter().flatten().collect()
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
            for &i in sh.d.index.iter() {
                let c = sh.cell(i);
                if let (true, Some(v)) = (c.retained(), c.value()) {
                    out.push((sh.d.orders[i as usize], f(cell_id(s, i), &c.key, v)));
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
