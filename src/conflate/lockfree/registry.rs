//! The receiver lists, one per kind (`RxCore` own-value receivers in
//! registration order, `CellRx` cell receivers by id): read by every send
//! without a lock, changed by the rare register / deregister / hard close
//! under the writer lock (docs/design.md, "The registry").

use super::cell_rx::{CellRx, RxId};
use super::core::RxCore;
use crate::sync::{Arc, AtomicPtr, AtomicUsize, Ordering};
use std::collections::HashMap;
use std::ptr;

/// Retirements batched into one grace period (one under the model checkers
/// and in unit tests, so that small models reach it).
const RETIRE_BATCH: usize = if cfg!(any(loom, shuttle, test)) {
    1
} else {
    32
};

/// Holes tolerated in the own-value list before a compaction, whatever the
/// number of live receivers.
const HOLES_MIN: usize = if cfg!(any(loom, shuttle, test)) {
    1
} else {
    16
};

/// The smallest array.
const MIN_CAPACITY: usize = if cfg!(any(loom, shuttle, test)) { 2 } else { 8 };

/// The most receivers of one kind a hub lists (ids fit a cell's marks).
pub(crate) const MAX_LISTED: usize = 1 << 20;

/// An array of receiver pointers and its published length.
struct Array<T> {
    len: AtomicUsize,
    entries: Box<[AtomicPtr<T>]>,
}

impl<T> Array<T> {
    fn allocate(capacity: usize) -> Owned<T> {
        let array = Box::new(Array {
            len: AtomicUsize::new(0),
            entries: (0..capacity)
                .map(|_| AtomicPtr::new(ptr::null_mut()))
                .collect(),
        });
        Owned(std::ptr::NonNull::from(Box::leak(array)))
    }
}

/// An array the writer owns, by raw pointer: sends read it through the
/// published pointer while the writer moves its handle around, so the handle
/// must not be a `Box` (whose moves would claim unique access to the array).
struct Owned<T>(std::ptr::NonNull<Array<T>>);

// SAFETY: `Owned` is the writer's handle on an array of atomics that sends
// read concurrently; the array holds `AtomicPtr<T>`s only, shareable across
// threads for any `T` (the pointees' sharing is argued where they are used).
unsafe impl<T> Send for Owned<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Owned<T> {}

impl<T> Owned<T> {
    fn as_ptr(&self) -> *mut Array<T> {
        self.0.as_ptr()
    }
}

impl<T> std::ops::Deref for Owned<T> {
    type Target = Array<T>;
    fn deref(&self) -> &Array<T> {
        // SAFETY: the array is live until `Owned` drops (it was leaked from a
        // box in `Array::allocate`), and only shared references to it exist.
        unsafe { self.0.as_ref() }
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: from `Box::leak` in `Array::allocate`; dropped once, after every
        // send that could read it left (it is retired until a grace period).
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

/// One list as sends see it.
struct List<T> {
    array: AtomicPtr<Array<T>>,
}

/// A borrowed receiver list: every receiver in it stays alive for `'a`.
pub(crate) struct Listed<'a, T>(&'a [AtomicPtr<T>]);

impl<'a, T> Listed<'a, T> {
    fn at(entry: &'a AtomicPtr<T>) -> Option<&'a T> {
        // Acquire pairs with the Release store in `register`: the receiver's
        // construction is visible.
        let p = entry.load(Ordering::Acquire);
        // SAFETY: a non-null entry is the registry's count of a live receiver;
        // it is released only after a grace period that waits for every send
        // in flight when it was nulled, and a `Listed` lives only inside one
        // send in flight (or a writer holding the lock).
        unsafe { p.as_ref() }
    }

    /// The live receivers, in list order (holes skipped).
    #[inline]
    pub(crate) fn iter(&self) -> impl Iterator<Item = &'a T> + 'a {
        self.0.iter().filter_map(Self::at)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The one receiver of a list of length one (`None` for a hole, or any
    /// other length): for the send paths that specialise it.
    #[inline]
    pub(crate) fn single(&self) -> Option<&'a T> {
        match self.0 {
            [only] => Self::at(only),
            _ => None,
        }
    }

    /// The last live receiver and the list before it (to move the value into
    /// the last).
    #[inline]
    pub(crate) fn split_last(&self) -> Option<(&'a T, Listed<'a, T>)> {
        let mut end = self.0.len();
        while end > 0 {
            end -= 1;
            if let Some(last) = Self::at(&self.0[end]) {
                return Some((last, Listed(&self.0[..end])));
            }
        }
        None
    }
}

impl<T> List<T> {
    fn new(first: &Owned<T>) -> Self {
        List {
            array: AtomicPtr::new(first.as_ptr()),
        }
    }

    /// # Safety
    /// The caller is a send in flight (or holds the writer lock) for as long
    /// as it uses the result.
    unsafe fn listed(&self) -> Listed<'_, T> {
        // Acquire: pairs with the Release publication of a new array (its
        // entries were copied before) and of the length.
        let array = self.array.load(Ordering::Acquire);
        // SAFETY: the published array is retired only after a grace period
        // that waits for the caller (the contract), and freed after it.
        let array = unsafe { &*array };
        let len = array.len.load(Ordering::Acquire);
        debug_assert!(len <= array.entries.len());
        // A published length never exceeds its array's capacity: `Side::add`
        // grows the array before the length passes it, and `Side::compact`
        // stores at most the entries it copied into a larger array (every
        // store of `len` is one of those two).
        // SAFETY: so the range is in bounds, without a check on every send.
        Listed(unsafe { array.entries.get_unchecked(..len) })
    }
}

/// The registry's shared side.
pub(crate) struct Registry<K, V> {
    own: List<RxCore<K, V>>,
    cells: List<CellRx>,
}

impl<K, V> Registry<K, V> {
    /// The own-value receivers, in registration order.
    ///
    /// # Safety
    /// The caller is a send in flight for as long as it uses the list.
    #[inline]
    pub(crate) unsafe fn own(&self) -> Listed<'_, RxCore<K, V>> {
        // SAFETY: the caller's contract.
        unsafe { self.own.listed() }
    }

    /// The cell receivers (a hole where an id is free or retired).
    ///
    /// # Safety
    /// As [`Registry::own`].
    #[inline]
    pub(crate) unsafe fn cells(&self) -> Listed<'_, CellRx> {
        // SAFETY: the caller's contract.
        unsafe { self.cells.listed() }
    }
}

/// One list's writer side.
struct Side<T> {
    array: Owned<T>,
    /// The length published (entries in use or holes below it).
    len: usize,
    /// Indices below `len` free for a new receiver now.
    holes: Vec<usize>,
    /// Where each listed receiver is, by its address (foldhash, not std's
    /// SipHash: the keys are our own addresses, nothing
    /// an adversary picks, and SipHash was an eighth of a register + drop's
    /// instructions.)
    index: HashMap<usize, usize, foldhash::fast::FixedState>,
    live: usize,
}

impl<T> Side<T> {
    fn new() -> Self {
        Side {
            array: Array::allocate(MIN_CAPACITY),
            len: 0,
            holes: Vec::new(),
            index: HashMap::default(),
            live: 0,
        }
    }

    /// Lists `item` (one count of it, from the caller). Returns its index and
    /// the array it replaced, if it grew.
    fn add(&mut self, list: &List<T>, item: Arc<T>) -> (usize, Option<Owned<T>>) {
        assert!(self.live < MAX_LISTED, "too many receivers on one hub");
        let mut old = None;
        let at = match self.holes.pop() {
            Some(at) => at,
            None => {
                if self.len == self.array.entries.len() {
                    let grown = Array::allocate(2 * self.array.entries.len());
                    for (to, from) in grown.entries.iter().zip(self.array.entries.iter()) {
                        // Relaxed: only the writer stores entries; the new
                        // array is published (Release) below.
                        to.store(from.load(Ordering::Relaxed), Ordering::Relaxed);
                    }
                    grown.len.store(self.len, Ordering::Relaxed);
                    let prev = std::mem::replace(&mut self.array, grown);
                    // Release: a send that loads the new array sees its entries.
                    list.array.store(self.array.as_ptr(), Ordering::Release);
                    old = Some(prev);
                }
                self.len += 1;
                self.len - 1
            }
        };
        let raw = Arc::into_raw(item).cast_mut();
        // Release: a send that loads the pointer sees the receiver built.
        self.array.entries[at].store(raw, Ordering::Release);
        // Release (after the entry): a send that sees the length sees it.
        self.array.len.store(self.len, Ordering::Release);
        self.index.insert(raw as usize, at);
        self.live += 1;
        (at, old)
    }

    /// Copies the listed entries, in order, into a fresh array and publishes
    /// it; returns the old one (to retire: sends may still read it).
    fn compact(&mut self, list: &List<T>) -> Owned<T> {
        let fresh = Array::allocate(MIN_CAPACITY.max(2 * self.live + 1));
        let mut len = 0;
        for entry in &self.array.entries[..self.len] {
            // Relaxed: only the writer stores entries; published below.
            let p = entry.load(Ordering::Relaxed);
            if !p.is_null() {
                fresh.entries[len].store(p, Ordering::Relaxed);
                self.index.insert(p as usize, len);
                len += 1;
            }
        }
        fresh.len.store(len, Ordering::Relaxed);
        self.len = len;
        self.holes.clear();
        let old = std::mem::replace(&mut self.array, fresh);
        // Release: a send that loads the new array sees its entries.
        list.array.store(self.array.as_ptr(), Ordering::Release);
        old
    }

    /// Unlists `item`; returns the registry's count of it and where it was.
    fn remove(&mut self, item: *const T) -> Option<(usize, Arc<T>)> {
        let at = self.index.remove(&(item as usize))?;
        // Relaxed: a send reads null or the receiver; either is fine, and the
        // grace period before the count is released orders the rest.
        let p = self.array.entries[at].swap(ptr::null_mut(), Ordering::Relaxed);
        debug_assert!(!p.is_null());
        self.live -= 1;
        // SAFETY: `p` was listed, so the registry owns one count of it from
        // `Arc::into_raw` in `add`; it is taken back once (its index entry is
        // gone).
        Some((at, unsafe { Arc::from_raw(p) }))
    }

    /// Every listed item, unlisted.
    fn clear(&mut self) -> Vec<Arc<T>> {
        let all: Vec<_> = self.index.keys().map(|&p| p as *const T).collect();
        all.into_iter()
            .filter_map(|p| self.remove(p).map(|(_, item)| item))
            .collect()
    }
}

impl<T> Drop for Side<T> {
    fn drop(&mut self) {
        drop(self.clear());
    }
}

/// What waits for a grace period.
struct Retired<K, V> {
    own: Vec<Arc<RxCore<K, V>>>,
    /// With the id each had.
    cells: Vec<(usize, Arc<CellRx>)>,
    own_arrays: Vec<Owned<RxCore<K, V>>>,
    cell_arrays: Vec<Owned<CellRx>>,
}

impl<K, V> Retired<K, V> {
    fn len(&self) -> usize {
        self.own.len() + self.cells.len() + self.own_arrays.len() + self.cell_arrays.len()
    }
}

/// The registry's writer side, under the hub's writer lock.
pub(crate) struct Writer<K, V> {
    own: Side<RxCore<K, V>>,
    cells: Side<CellRx>,
    retired: Retired<K, V>,
}

/// The registry, shared and writer sides. The writer side is handed to the
/// hub's writer lock; the shared side to every send.
pub(crate) fn new<K, V>() -> (Registry<K, V>, Writer<K, V>) {
    let own = Side::new();
    let cells = Side::new();
    let registry = Registry {
        own: List::new(&own.array),
        cells: List::new(&cells.array),
    };
    let writer = Writer {
        own,
        cells,
        retired: Retired {
            own: Vec::new(),
            cells: Vec::new(),
            own_arrays: Vec::new(),
            cell_arrays: Vec::new(),
        },
    };
    (registry, writer)
}

impl<K, V> Writer<K, V> {
    pub(crate) fn register_own(&mut self, registry: &Registry<K, V>, core: &Arc<RxCore<K, V>>) {
        let (_, old) = self.own.add(&registry.own, core.clone());
        self.retired.own_arrays.extend(old);
    }

    /// The id the next cell receiver will get (its index in the cell list):
    /// the receiver is built with it, then registered with
    /// [`Writer::register_cell`] under the same lock hold.
    pub(crate) fn next_cell_id(&self) -> RxId {
        let id = self.cells.holes.last().copied().unwrap_or(self.cells.len);
        id as RxId
    }

    pub(crate) fn register_cell(&mut self, registry: &Registry<K, V>, rx: &Arc<CellRx>) {
        let (at, old) = self.cells.add(&registry.cells, rx.clone());
        debug_assert_eq!(at as RxId, rx.id, "built with next_cell_id");
        self.retired.cell_arrays.extend(old);
    }

    /// Unlists an own-value receiver; `true` if it was listed.
    ///
    /// The hole is not reused (the fan-out order is the registration order);
    /// once holes outnumber the live receivers (and `HOLES_MIN`), the live
    /// ones are copied in order into a new array, which is published; the old
    /// one is retired. Each copy is paid for by the removals since the last:
    /// O(1) amortized.
    pub(crate) fn deregister_own(
        &mut self,
        registry: &Registry<K, V>,
        core: &RxCore<K, V>,
    ) -> bool {
        let Some((_, core)) = self.own.remove(core) else {
            return false;
        };
        self.retired.own.push(core);
        if self.own.len - self.own.live > self.own.live.max(HOLES_MIN) {
            let old = self.own.compact(&registry.own);
            self.retired.own_arrays.push(old);
        }
        true
    }

    /// Unlists a cell receiver; `true` if it was listed. Its id stays taken
    /// until [`Writer::collect`] cleans up after it.
    pub(crate) fn deregister_cell(&mut self, rx: &CellRx) -> bool {
        match self.cells.remove(rx) {
            Some((at, rx)) => {
                self.retired.cells.push((at, rx));
                true
            }
            None => false,
        }
    }

    /// Unlists everything (hard close); returns what was listed.
    pub(crate) fn clear(&mut self, registry: &Registry<K, V>) -> Unlisted<K, V> {
        let own = self.own.clear();
        let old = self.own.compact(&registry.own);
        self.retired.own_arrays.push(old);
        let cells_taken: Vec<_> = self.cells.index.iter().map(|(&p, &at)| (p, at)).collect();
        let mut cells = Vec::new();
        for (p, _) in cells_taken {
            if let Some((at, rx)) = self.cells.remove(p as *const CellRx) {
                cells.push(rx.clone());
                self.retired.cells.push((at, rx));
            }
        }
        self.retired.own.extend(own.iter().cloned());
        (own, cells)
    }

    /// Live cell receivers.
    pub(crate) fn cell_live(&self) -> usize {
        self.cells.live
    }

    /// Whether enough is retired to be worth a grace period.
    pub(crate) fn should_collect(&self) -> bool {
        self.retired.len() >= RETIRE_BATCH
    }

    /// Every cell receiver listed now (a close marks them).
    pub(crate) fn cell_rxs(&self) -> Vec<&CellRx> {
        let len = self.cells.len;
        self.cells.array.entries[..len]
            .iter()
            .filter_map(|e| {
                let p = e.load(Ordering::Relaxed);
                // SAFETY: listed entries are live receivers the registry holds
                // a count of, and the writer lock is held (`&self`).
                unsafe { p.as_ref() }
            })
            .collect()
    }

    /// Every own-value receiver listed now.
    pub(crate) fn own_cores(&self) -> Vec<&RxCore<K, V>> {
        let len = self.own.len;
        self.own.array.entries[..len]
            .iter()
            .filter_map(|e| {
                let p = e.load(Ordering::Relaxed);
                // SAFETY: as in `cell_rxs`.
                unsafe { p.as_ref() }
            })
            .collect()
    }

    /// After a grace period (the caller waited for every send in flight):
    /// releases what was retired before it. A cell receiver is cleaned up by
    /// `clean` first (it clears the marks that sends in flight may still have
    /// set), and only if its consumer has let go of it (`clean` returns
    /// `false` otherwise: it stays retired for the next collection); then its
    /// id is free again. Returns the released counts, to drop outside the
    /// writer lock.
    pub(crate) fn collect(&mut self, mut clean: impl FnMut(&CellRx) -> bool) -> Released<K, V> {
        // The retired lists keep their capacity (a warm registry churning
        // receivers reallocates nothing here); what is released is moved out
        // into vectors of its exact size.
        let own = self.retired.own.drain(..).collect();
        self.retired.own_arrays.clear();
        self.retired.cell_arrays.clear();
        // The receivers kept (not let go of yet) to the front, in place;
        // the released ones drained from behind them.
        let list = &mut self.retired.cells;
        let mut kept = 0;
        for j in 0..list.len() {
            if !clean(&list[j].1) {
                list.swap(kept, j);
                kept += 1;
            }
        }
        let mut cells = Vec::with_capacity(list.len() - kept);
        for (at, rx) in list.drain(kept..) {
            self.cells.holes.push(at);
            cells.push(rx);
        }
        Released { own, cells }
    }
}

/// What a hard close unlisted: the own-value receivers and the cell receivers.
pub(crate) type Unlisted<K, V> = (Vec<Arc<RxCore<K, V>>>, Vec<Arc<CellRx>>);

/// Receivers released by a collection.
pub(crate) struct Released<K, V> {
    #[allow(dead_code)]
    own: Vec<Arc<RxCore<K, V>>>,
    cells: Vec<Arc<CellRx>>,
}

impl<K, V> Released<K, V> {
    /// Moves released cell receivers into `spare`, up to `cap` there, for
    /// later registrations to reuse the allocations of those nothing else
    /// holds by then (the receiver whose drop ran the collection still holds
    /// itself now); the rest drop with `self`.
    pub(crate) fn keep_cells(&mut self, spare: &mut Vec<Arc<CellRx>>, cap: usize) {
        let room = cap.saturating_sub(spare.len()).min(self.cells.len());
        spare.extend(self.cells.drain(..room));
    }
}
