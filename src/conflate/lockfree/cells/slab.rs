//! One shard's cells at stable addresses (`Slab`, in chunks that never move),
//! and what a cell holds (`CellData`) (docs/design.md, "One cell per key").

use crate::sync::{AtomicPtr, AtomicU64, Ordering, UnsafeCell};
use std::mem::{ManuallyDrop, MaybeUninit};
use std::ptr;

/// Cells in the first chunk; chunk `k` holds `FIRST << k`.
const FIRST: usize = 32;
/// Chunks: one per chunk a `u32` index can name (`locate` gives at most 27
/// for `u32::MAX`), so that indexing by it needs no bounds check; the 23
/// first hold `FIRST * (2^23 - 1)` cells, past `MAX_CELLS`, and the others
/// stay null.
const CHUNKS: usize = 28;
/// The most cells one shard holds (a slab index fits the bits `CellId` gives it).
pub(crate) const MAX_CELLS: u32 = 1 << 27;

/// A receiver's mark in a cell: pending, and the cut epoch its entry landed in.
pub(crate) const PENDING: u16 = 1 << 15;

/// A mark's epoch.
pub(crate) fn mark_epoch(mark: u16) -> u8 {
    mark as u8
}

/// Marks of receiver ids below this live inside the cell.
pub(crate) const INLINE: usize = 4;

/// Per receiver id, its mark (0: not pending). Inline for the first four
/// ids; a boxed vector once any id past them is marked (`Meta::HEAP_MARKS`).
// A thin pointer to the vector (a `Vec` itself is three words): the union
// stays one word.
#[allow(clippy::box_collection)]
union Marks {
    inline: [u16; INLINE],
    heap: ManuallyDrop<Box<Vec<u16>>>,
}

/// The count of receivers the key is pending at, and the cell's flags, in one
/// word (24 bits of count).
#[derive(Clone, Copy)]
struct Meta(u32);

impl Meta {
    const COUNT: u32 = (1 << 24) - 1;
    const HAS_VALUE: u32 = 1 << 24;
    const RETAINED: u32 = 1 << 25;
    const HEAP_MARKS: u32 = 1 << 26;
    const DEPOSITS: u32 = 1 << 27;

    fn has(self, flag: u32) -> bool {
        self.0 & flag != 0
    }

    fn set(&mut self, flag: u32, on: bool) {
        if on {
            self.0 |= flag;
        } else {
            self.0 &= !flag;
        }
    }
}

/// One key's cell (`K` and `V` of `u64`: 48 bytes with its sequence).
pub(crate) struct CellData<K, V> {
    pub(crate) key: K,
    /// Present unless every receiver took it and the table does not keep it
    /// (`Meta::HAS_VALUE`).
    value: MaybeUninit<V>,
    /// The hub's clock when a send last made the key pending at every cell
    /// receiver in its current cut epoch; `STALE` once a receiver took it.
    pub(crate) stamp: u64,
    marks: Marks,
    /// The low 32 bits of the hub's hash of `key` (the index's hash).
    pub(crate) hash32: u32,
    meta: Meta,
}

/// A stamp that equals no clock value.
pub(crate) const STALE: u64 = u64::MAX;

impl<K, V> CellData<K, V> {
    pub(crate) fn new(key: K, hash32: u32) -> Self {
        CellData {
            key,
            value: MaybeUninit::uninit(),
            stamp: STALE,
            marks: Marks {
                inline: [0; INLINE],
            },
            hash32,
            meta: Meta(0),
        }
    }

    pub(crate) fn value(&self) -> Option<&V> {
        // SAFETY: `HAS_VALUE` says `value` is initialized.
        self.meta
            .has(Meta::HAS_VALUE)
            .then(|| unsafe { self.value.assume_init_ref() })
    }

    /// Stores `value`, returning the one it replaces.
    pub(crate) fn replace_value(&mut self, value: V) -> Option<V> {
        // The flag is left set, not cleared and set again: one store of
        // the word on every table send. Nothing between the read and the
        // write can unwind (no user code runs).
        let old = self.meta.has(Meta::HAS_VALUE).then(|| {
            // SAFETY: it was initialized (`HAS_VALUE`), and it is read out
            // once: overwritten just below.
            unsafe { self.value.assume_init_read() }
        });
        self.value.write(value);
        self.meta.set(Meta::HAS_VALUE, true);
        old
    }

    pub(crate) fn take_value(&mut self) -> Option<V> {
        if !self.meta.has(Meta::HAS_VALUE) {
            return None;
        }
        self.meta.set(Meta::HAS_VALUE, false);
        // SAFETY: it was initialized (`HAS_VALUE`), and the flag is cleared
        // first, so it is read out once.
        Some(unsafe { self.value.assume_init_read() })
    }

    /// Receivers (live or not yet cleaned up) the key is pending at.
    pub(crate) fn pending(&self) -> u32 {
        self.meta.0 & Meta::COUNT
    }

    pub(crate) fn retained(&self) -> bool {
        self.meta.has(Meta::RETAINED)
    }

    pub(crate) fn set_retained(&mut self, on: bool) {
        self.meta.set(Meta::RETAINED, on);
    }

    pub(crate) fn has_deposits(&self) -> bool {
        self.meta.has(Meta::DEPOSITS)
    }

    pub(crate) fn set_deposits(&mut self, on: bool) {
        self.meta.set(Meta::DEPOSITS, on);
    }

    /// Pending nowhere, not in the table, no deposit: the cell may be freed.
    #[inline]
    pub(crate) fn idle(&self) -> bool {
        // One test of the word: no count, not retained, no deposit.
        self.meta.0 & (Meta::COUNT | Meta::RETAINED | Meta::DEPOSITS) == 0
    }

    #[inline]
    pub(crate) fn mark(&self, id: u32) -> u16 {
        let id = id as usize;
        if self.meta.has(Meta::HEAP_MARKS) {
            // SAFETY: `HEAP_MARKS` says the union holds the box.
            let heap = unsafe { &self.marks.heap };
            heap.get(id).copied().unwrap_or(0)
        } else {
            // SAFETY: without `HEAP_MARKS` the union holds the inline array.
            let inline = unsafe { &self.marks.inline };
            inline.get(id).copied().unwrap_or(0)
        }
    }

    /// Sets receiver `id`'s mark, counting it in `pending` when it becomes
    /// (or stops being) pending. May allocate (a first id past the inline
    /// ones); panics before changing anything if the count would overflow.
    #[inline]
    pub(crate) fn set_mark(&mut self, id: u32, mark: u16) {
        if !self.meta.has(Meta::HEAP_MARKS) && (id as usize) < INLINE {
            // The common case: an inline mark.
            // SAFETY: without `HEAP_MARKS` the union holds the inline array.
            let place = unsafe { &mut self.marks.inline[id as usize] };
            let was = *place & PENDING != 0;
            let now = mark & PENDING != 0;
            *place = mark;
            if now && !was {
                self.meta.0 += 1;
            } else if was && !now {
                self.meta.0 -= 1;
            }
            return;
        }
        self.set_mark_slow(id, mark);
    }

    /// [`CellData::set_mark`] for a mark that was 0 (the key not pending at
    /// `id`) and becomes `mark`, pending: the common inline case written out
    /// (the first send after a take).
    #[inline(always)]
    pub(crate) fn set_mark_from_none(&mut self, id: u32, mark: u16) {
        debug_assert!(self.mark(id) == 0 && mark & PENDING != 0);
        if !self.meta.has(Meta::HEAP_MARKS) && (id as usize) < INLINE {
            // SAFETY: without `HEAP_MARKS` the union holds the inline array.
            unsafe { self.marks.inline[id as usize] = mark };
            // One more receiver has it pending. Without `HEAP_MARKS` only the
            // four inline ids can be marked, so the count is at most four.
            self.meta.0 += 1;
            return;
        }
        self.set_mark_slow(id, mark);
    }

    /// A take of receiver `id`'s entry pending in `epoch`: clones the key,
    /// and the value unless this was the last receiver with the key pending
    /// and the table does not keep it (then the value moves out), *then*
    /// clears the mark and stamps the cell stale. `None`, changing nothing,
    /// if the mark is not pending in `epoch` (a deposit's entry, or stale).
    /// The value is `None` only after a hard close dropped it.
    ///
    /// The user code (`K::clone`, `V::clone`) runs before anything changes:
    /// if it panics, the cell is as it was.
    #[inline(always)]
    pub(crate) fn take_entry(&mut self, id: u32, epoch: u8) -> Option<(K, Option<V>)>
    where
        K: Clone,
        V: Clone,
    {
        let want = PENDING | u16::from(epoch);
        match self.take_common((id as usize) < INLINE, id, want) {
            Some((key, value, _)) => Some((key, Some(value))),
            None => self.take_other_entry(id, want),
        }
    }

    /// [`CellData::take_entry`] where [`CellData::take_common`] declined: a
    /// value a hard close dropped, or a mark not pending in the entry's
    /// epoch (a deposit's entry, or stale).
    #[cold]
    #[inline(never)]
    fn take_other_entry(&mut self, id: u32, want: u16) -> Option<(K, Option<V>)>
    where
        K: Clone,
        V: Clone,
    {
        let inline = !self.meta.has(Meta::HEAP_MARKS) && (id as usize) < INLINE;
        let mark = if inline {
            // SAFETY: without `HEAP_MARKS` the union holds the inline array;
            // `id` is below its length.
            unsafe { self.marks.inline[id as usize] }
        } else {
            self.mark(id)
        };
        // Marks are 0 or `PENDING | epoch` (`set_mark`'s callers).
        if mark != want {
            return None;
        }
        let key = self.key.clone();
        // Pending here only, and not in the table (one test of the word).
        let last = self.meta.0 & (Meta::COUNT | Meta::RETAINED) == 1;
        let copy = if last { None } else { self.value().cloned() };
        if inline {
            // SAFETY: as above; the mark was pending, so the count is at
            // least one.
            unsafe { self.marks.inline[id as usize] = 0 };
            self.meta.0 -= 1;
        } else {
            self.set_mark_slow(id, 0);
        }
        self.stamp = STALE;
        let value = if last { self.take_value() } else { copy };
        Some((key, value))
    }

    /// A take in the common case only (a cut's, and the first try of
    /// [`CellData::take_entry`]): a mark pending in the entry's epoch
    /// (`want`: `PENDING | epoch`), inline (`inline`: `id` is below `INLINE`)
    /// or in the cell's vector of marks, and a value. Returns the key, the
    /// value, and whether the cell is idle now; `None`, changing nothing,
    /// otherwise (the caller then takes the general path). User code first,
    /// as there.
    #[inline(always)]
    pub(crate) fn take_common(&mut self, inline: bool, id: u32, want: u16) -> Option<(K, V, bool)>
    where
        K: Clone,
        V: Clone,
    {
        const HEAP_VALUE: u32 = Meta::HEAP_MARKS | Meta::HAS_VALUE;
        let meta = self.meta.0;
        let mark = match meta & HEAP_VALUE {
            Meta::HAS_VALUE if inline => {
                // SAFETY: without `HEAP_MARKS` the union holds the inline
                // array, and `id` is below its length (`inline`).
                unsafe { &mut self.marks.inline[id as usize] }
            }
            // Past four receivers, every cell a send marked for one of the
            // later ids keeps its marks in a vector.
            // SAFETY: `HEAP_MARKS` says the union holds the box.
            HEAP_VALUE => unsafe { &mut self.marks.heap }.get_mut(id as usize)?,
            _ => return None,
        };
        if *mark != want {
            return None;
        }
        let key = self.key.clone();
        // Pending here only, and not in the table (one test of the word).
        let last = meta & (Meta::COUNT | Meta::RETAINED) == 1;
        let value = if last {
            // SAFETY: `HAS_VALUE` (tested above) says it is initialized; the
            // flag is cleared below, so it is read out once.
            unsafe { self.value.assume_init_read() }
        } else {
            // SAFETY: as above, initialized.
            unsafe { self.value.assume_init_ref() }.clone()
        };
        *mark = 0;
        // The mark was pending, so the count is at least one.
        let meta = if last {
            (meta - 1) & !Meta::HAS_VALUE
        } else {
            meta - 1
        };
        self.meta.0 = meta;
        self.stamp = STALE;
        let idle = meta & (Meta::COUNT | Meta::RETAINED | Meta::DEPOSITS) == 0;
        Some((key, value, idle))
    }

    /// [`CellData::set_mark`] for a mark in the cell's vector (an id past
    /// the inline four, or a cell whose marks moved there): the vector is
    /// made or grown first if the mark needs a place, then the mark and the
    /// count change together. Panics before changing any mark or count if
    /// the count would overflow.
    #[cold]
    fn set_mark_slow(&mut self, id: u32, mark: u16) {
        let id = id as usize;
        if !self.meta.has(Meta::HEAP_MARKS) {
            debug_assert!(id >= INLINE, "inline ids take set_mark's inline path");
            if mark == 0 {
                return; // not pending, and nothing to clear
            }
            // SAFETY: without `HEAP_MARKS` the union holds the inline array.
            let inline = unsafe { self.marks.inline };
            let mut heap = Vec::with_capacity((id + 1).max(2 * INLINE));
            heap.extend_from_slice(&inline);
            self.marks.heap = ManuallyDrop::new(Box::new(heap));
            self.meta.set(Meta::HEAP_MARKS, true);
        }
        // SAFETY: `HEAP_MARKS` (set above if it was not) says the union holds
        // the box.
        let heap = unsafe { &mut self.marks.heap };
        if heap.len() <= id {
            if mark == 0 {
                return; // past the vector: not pending, nothing to clear
            }
            heap.resize(id + 1, 0);
        }
        let place = &mut heap[id];
        let was = *place & PENDING != 0;
        let now = mark & PENDING != 0;
        if now && !was {
            assert!(
                self.meta.0 & Meta::COUNT < Meta::COUNT,
                "keybus: too many receivers with one key pending"
            );
            self.meta.0 += 1;
        } else if was && !now {
            self.meta.0 -= 1;
        }
        *place = mark;
    }
}

impl<K, V> Drop for CellData<K, V> {
    fn drop(&mut self) {
        drop(self.take_value());
        if self.meta.has(Meta::HEAP_MARKS) {
            // SAFETY: the union holds the box (`HEAP_MARKS`), dropped once:
            // the flag is cleared with it.
            unsafe { ManuallyDrop::drop(&mut self.marks.heap) };
            self.meta.set(Meta::HEAP_MARKS, false);
        }
    }
}

/// A place of the slab: the cell's send sequence (lock-free readable) and the
/// cell itself (under the shard lock, initialized while the place is in use).
pub(crate) struct Place<K, V> {
    /// Sends folded into the cell since the place was first used (never reset:
    /// receivers count from the value they saw when their entry started).
    pub(crate) seq: AtomicU64,
    data: UnsafeCell<MaybeUninit<CellData<K, V>>>,
}

impl<K, V> Place<K, V> {
    fn new() -> Self {
        Place {
            seq: AtomicU64::new(0),
            data: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// The cell.
    ///
    /// # Safety
    /// The caller holds the shard lock, the place is in use, and no other
    /// reference to the cell is live.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn cell(&self) -> &mut CellData<K, V> {
        // SAFETY: the caller's contract: exclusive (the lock) and initialized.
        self.data.with_mut(|p| unsafe { (*p).assume_init_mut() })
    }

    /// Puts a cell in an unused place.
    ///
    /// # Safety
    /// The caller holds the shard lock and the place is not in use.
    pub(crate) unsafe fn fill(&self, cell: CellData<K, V>) {
        // SAFETY: exclusive by the caller's contract.
        self.data.with_mut(|p| unsafe { (*p).write(cell) });
    }

    /// Takes the cell out of a place in use, leaving it unused.
    ///
    /// # Safety
    /// As [`Place::cell`]; afterwards the place is unused.
    pub(crate) unsafe fn empty(&self) -> CellData<K, V> {
        // SAFETY: initialized and exclusive by the caller's contract; read
        // out once (the place is unused afterwards).
        self.data.with_mut(|p| unsafe { (*p).assume_init_read() })
    }
}

/// Which chunk holds slab index `i`, and where in it.
#[inline(always)]
fn locate(i: u32) -> (usize, usize) {
    // Chunk `k` starts at `FIRST * (2^k - 1)`: `i + FIRST` has its top bit
    // at `k + log2(FIRST)`.
    let shifted = i as usize + FIRST;
    let k = shifted.ilog2() as usize - FIRST.trailing_zeros() as usize;
    (k, shifted - (FIRST << k))
}

/// The places of one shard, at stable addresses.
pub(crate) struct Slab<K, V> {
    /// Per chunk `k`: null until it is allocated, then its *base*, the
    /// chunk's address less `FIRST << k` places (a wrapping offset, never
    /// dereferenced itself). Place `i` of chunk `k` is then the base plus
    /// `i + FIRST`, without subtracting where the chunk starts (`place`).
    bases: [AtomicPtr<Place<K, V>>; CHUNKS],
}

impl<K, V> Slab<K, V> {
    pub(crate) fn new() -> Self {
        Slab {
            bases: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
        }
    }

    /// Makes sure place `i` exists (allocating its chunk). Under the shard lock
    /// (one writer).
    pub(crate) fn ensure(&self, i: u32) {
        assert!(i < MAX_CELLS, "keybus: too many keys in one shard of a hub");
        let (k, _) = locate(i);
        if self.bases[k].load(Ordering::Relaxed).is_null() {
            let chunk: Box<[Place<K, V>]> = (0..FIRST << k).map(|_| Place::new()).collect();
            let base = Box::into_raw(chunk)
                .cast::<Place<K, V>>()
                .wrapping_sub(FIRST << k);
            // Null means "not allocated": a chunk this low in memory cannot
            // have a base (never happens: it would sit in the first pages).
            assert!(!base.is_null(), "keybus: a chunk at an impossible address");
            // Release: a lock-free reader that loads the base (Acquire) sees
            // the initialized places.
            self.bases[k].store(base, Ordering::Release);
        }
    }

    /// Place `i`, which [`Slab::ensure`] made.
    #[inline]
    pub(crate) fn place(&self, i: u32) -> &Place<K, V> {
        // As `locate`, without the offset: the base has it subtracted.
        let shifted = i as usize + FIRST;
        if i < FIRST as u32 {
            // The first chunk, the only one of a shard with at most `FIRST`
            // cells (a hub of up to about a thousand keys), by a branch the
            // predictor learns: its base's address does not depend on `i`,
            // so that load runs beside the probe instead of after it, and
            // the chain from the index to the place loses the chunk's
            // lookup (docs/design.md, "One cell per key"; measured in
            // docs/performance.md).
            // Acquire: pairs with the Release in `ensure`.
            let base = self.bases[0].load(Ordering::Acquire);
            assert!(!base.is_null(), "a place is made before it is named");
            // SAFETY: as below, for chunk 0 (`i < FIRST`, so `shifted` is
            // below `FIRST << 1`).
            return unsafe { &*base.wrapping_add(shifted) };
        }
        // At most 27 for a `u32` index (see `CHUNKS`): no bounds check.
        let k = shifted.ilog2() as usize - FIRST.trailing_zeros() as usize;
        // Acquire: pairs with the Release in `ensure`.
        let base = self.bases[k].load(Ordering::Acquire);
        assert!(!base.is_null(), "a place is made before it is named");
        // Chunk `k` is allocated (its base is not null) and holds `FIRST << k`
        // places from `base + (FIRST << k)`; `shifted` is below
        // `FIRST << (k + 1)` (`k` is its top bit less log2(FIRST)).
        // SAFETY: so `base + shifted` is one of them; chunks are freed only
        // by `drop(&mut self)`.
        unsafe { &*base.wrapping_add(shifted) }
    }
}

impl<K, V> Drop for Slab<K, V> {
    fn drop(&mut self) {
        for (k, base) in self.bases.iter().enumerate() {
            let base = base.load(Ordering::Relaxed);
            if !base.is_null() {
                let p = base.wrapping_add(FIRST << k);
                // SAFETY: `p` is the chunk `Box::into_raw` made of a slice of
                // `FIRST << k` places in `ensure` (its base, offset back); the
                // cells in use were dropped by the owner first (a `Place`
                // does not drop its cell).
                drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(p, FIRST << k)) });
            }
        }
    }
}

#[cfg(all(test, not(any(loom, shuttle))))]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(std::mem::size_of::<Place<u64, u64>>(), 48);
    }

    #[test]
    fn indices_map_to_distinct_stable_places() {
        for (i, want) in [
            (0, (0, 0)),
            (31, (0, 31)),
            (32, (1, 0)),
            (95, (1, 63)),
            (96, (2, 0)),
        ] {
            assert_eq!(locate(i), want);
        }
        let slab: Slab<u64, u64> = Slab::new();
        let mut seen = std::collections::HashSet::new();
        for i in 0..1_000 {
            slab.ensure(i);
            assert!(seen.insert(slab.place(i) as *const _ as usize));
        }
        // Every place, the first chunk's (found without `locate`) too, is
        // where `locate` says: place `off` of chunk `k`.
        for i in 0..1_000 {
            let (k, off) = locate(i);
            let chunk = slab.bases[k]
                .load(Ordering::Relaxed)
                .wrapping_add(FIRST << k);
            assert_eq!(
                slab.place(i) as *const _,
                chunk.wrapping_add(off).cast_const()
            );
        }
        assert_eq!(slab.place(7) as *const _, slab.place(7) as *const _);
    }

    #[test]
    fn marks_spill_to_the_heap_and_count_pending() {
        let mut c: CellData<u64, String> = CellData::new(1, 1);
        c.set_mark(0, PENDING | 3);
        c.set_mark(9, PENDING);
        assert_eq!(c.pending(), 2);
        assert_eq!(c.mark(0), PENDING | 3);
        assert_eq!(c.mark(9), PENDING);
        assert_eq!(c.mark(5), 0);
        c.set_mark(0, 0);
        assert_eq!(c.pending(), 1);
        assert_eq!(c.replace_value("a".into()), None);
        assert_eq!(c.replace_value("b".into()).as_deref(), Some("a"));
        assert_eq!(c.value().map(String::as_str), Some("b"));
        // Drops the value and the heap marks (miri checks for leaks).
    }
}
