//! A hub's sole plain receiver, with its values in its queue: *valued
//! entries* (docs/design.md, "The sole receiver owns its values").
//!
//! While a hub without a state table has exactly one plain receiver (every
//! key, newer wins, no bound), that receiver's pending values live in the
//! places of its first-touch queue, and an index of its own, in 32 shards,
//! maps each key to its place, the place's push position and the cut epoch
//! it was pushed in. In a hub with a newer-wins table and no tombstones the
//! hub's cells name the places instead (`Owned`, `Cells::send_owned`), and
//! the cells' shard locks are the part's (docs/design.md, "In a table
//! hub"). A coalescing send writes the place under the key's
//! shard lock; a pop marks its place taken under that lock (the index goes
//! stale without being touched); a cut moves the epoch, waits until the
//! lock of each shard its batch names reads free (`SpinLock::wait_free`),
//! and reads its places in order, touching nothing shared. A second plain receiver converts the entries into the
//! hub's cells (`Solo::convert`), and the receiver goes on as a cell
//! receiver.

use super::cell_rx::CellRx;
use super::cells::Cells;
use super::lock::{SpinGuard, SpinLock};
use crate::conflate::common::event::Event;
use crate::sync::{Arc, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering, UnsafeCell};
use crossbeam_utils::CachePadded;
use hashbrown::HashTable;
use std::mem::MaybeUninit;
use std::ptr;

/// Index shards (bits 40 and up of the hash, as the cells').
pub(crate) const SHARDS: usize = 32;
/// Places per block of the queue.
pub(crate) const BLOCK: usize = if cfg!(any(loom, shuttle)) {
    2
} else if cfg!(miri) {
    16
} else {
    256
};
/// A place's position once its value was taken by a pop or moved out by the
/// conversion or a hard close (a cut's places need no mark, the epoch tells:
/// it resets them to `EMPTY` as it takes them).
const TAKEN: u64 = u64::MAX;
/// A place's position before its push wrote it (a new or recycled place),
/// and once a cut took it.
const EMPTY: u64 = u64::MAX - 1;
/// Taken entries between two looks at the index's size (`maybe_compact`).
const COMPACT_EVERY: u64 = if cfg!(any(loom, shuttle, miri)) {
    2
} else {
    4096
};
/// Stale index entries kept at least, for keys that come back.
const STALE_KEEP: usize = if cfg!(any(loom, shuttle, miri)) {
    1
} else {
    4096
};

fn shard_of(hash: u64) -> usize {
    (hash >> 40) as usize & (SHARDS - 1)
}

/// The index's hash of a key, from the low 32 bits of the hub's hash it
/// keeps (as the cells' index: an odd multiplier mixes them into hashbrown's
/// tag bits).
fn table_hash(low: u32) -> u64 {
    u64::from(low).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// What a place keeps of its key's hash: the low 32 bits and the shard's
/// bits (40 and up, `shard_of`), all that the index, the shards and the
/// cells read of it, in one word (a push writes it with one store).
#[derive(Clone, Copy)]
struct Hashed(u64);

impl Hashed {
    /// The bits kept: the low 32 and the shard's.
    const KEPT: u64 = (SHARDS as u64 - 1) << 40 | 0xFFFF_FFFF;

    fn of(hash: u64) -> Self {
        Hashed(hash & Self::KEPT)
    }

    fn shard(self) -> usize {
        shard_of(self.0)
    }

    /// A hash with the same low bits and shard as the hub's.
    fn hash(self) -> u64 {
        self.0
    }
}

/// One place of the queue, 40 bytes with `u64` keys and values. `position`
/// is atomic (a send with a stale index entry reads a recycled place's for a
/// compare; the consumer reads it before it synchronizes); the rest is
/// written by a push under the push lock, by a coalescing send under the
/// key's shard lock, and read by the consumer after the push's Release store
/// of the position, a lock, or the cut's barrier ordered those writes first.
struct Place<K, V> {
    /// `EMPTY`, then the push's number (stored Release once the place is
    /// written), then `TAKEN` once the value left.
    position: AtomicU64,
    sends: UnsafeCell<u64>,
    hash: UnsafeCell<Hashed>,
    key: UnsafeCell<MaybeUninit<K>>,
    value: UnsafeCell<MaybeUninit<V>>,
}

impl<K, V> Place<K, V> {
    fn new() -> Self {
        Place {
            position: AtomicU64::new(EMPTY),
            sends: UnsafeCell::new(0),
            hash: UnsafeCell::new(Hashed(0)),
            key: UnsafeCell::new(MaybeUninit::uninit()),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// Whether the push wrote the place. Acquire: pairs with the push's
    /// Release store of the position.
    fn ready(&self) -> bool {
        self.position.load(Ordering::Acquire) != EMPTY
    }

    /// # Safety
    /// The place is written (`ready`, or under a lock after the push).
    unsafe fn hash(&self) -> Hashed {
        // SAFETY: the caller's contract: the push's write happened before.
        self.hash.with(|p| unsafe { *p })
    }

    /// Replaces the pending value with `value` and counts the send; returns
    /// the value replaced.
    ///
    /// # Safety
    /// The place is pending (its value initialized) and its taker's lock is
    /// held: the key's shard lock, under which its position was found to
    /// be the pusher's.
    unsafe fn coalesce(&self, value: V) -> V {
        // SAFETY: the caller's contract.
        let old = self
            .value
            .with_mut(|p| unsafe { std::mem::replace((*p).assume_init_mut(), value) });
        // SAFETY: as above.
        self.sends.with_mut(|p| unsafe { *p += 1 });
        old
    }

    /// Moves the key, value and sends out.
    ///
    /// # Safety
    /// The place holds a value nothing else takes (its taker holds the
    /// place's shard lock, or is a cut past its barrier, or the tear-down).
    unsafe fn take(&self) -> (K, V, u64) {
        // SAFETY: the caller's contract.
        unsafe {
            (
                self.key.with(|p| (*p).assume_init_read()),
                self.value.with(|p| (*p).assume_init_read()),
                self.sends.with(|p| *p),
            )
        }
    }
}

struct Block<K, V> {
    places: Box<[Place<K, V>]>,
    /// The next block, stored (Release) when the last place is claimed.
    next: AtomicPtr<Block<K, V>>,
}

fn new_block<K, V>() -> *mut Block<K, V> {
    Box::into_raw(Box::new(Block {
        places: (0..BLOCK).map(|_| Place::new()).collect(),
        next: AtomicPtr::new(ptr::null_mut()),
    }))
}

/// An index entry: where the key's latest place is (32 bytes with `u64`
/// keys).
struct Ix<K, V> {
    key: K,
    place: *const Place<K, V>,
    /// The place's position when this key was pushed there: the place is
    /// still this key's while the two agree (and `epoch` is current).
    position: u64,
    /// The hash's low 32 bits.
    low: u32,
    /// The cut epoch it was pushed in. 32 bits wrap only after 2^32 cuts
    /// that each took a place, by when the place was recycled and carries
    /// another position.
    epoch: u32,
}

/// A shard's part under its lock.
struct ShardData<K, V> {
    index: HashTable<Ix<K, V>>,
    /// Sends still reach the receiver (cleared by its close, a hard close
    /// or the conversion).
    open: bool,
}

struct Shard<K, V> {
    lock: SpinLock,
    data: UnsafeCell<ShardData<K, V>>,
    /// Sends that reached the receiver through this shard (written under
    /// the lock, read anywhere: `received`).
    received: AtomicU64,
}

/// The producers' end, under the push lock.
struct Tail<K, V> {
    block: *mut Block<K, V>,
    idx: usize,
    /// The cut epoch (the atomic `Solo::epoch` mirrors it).
    epoch: u32,
    /// The consumer is about to park: the next push wakes it.
    parked: bool,
    /// The entries became cells (`Solo::convert`).
    converted: bool,
    /// A hard close took the values (`Solo::shut`): cuts find nothing.
    shut: bool,
    /// Blocks the consumer finished, for reuse.
    free: Vec<*mut Block<K, V>>,
}

/// The consumer's end.
struct Head<K, V> {
    block: *mut Block<K, V>,
    idx: usize,
    position: u64,
    /// Blocks passed and not yet handed back.
    spent: Vec<*mut Block<K, V>>,
    /// A pop marked a place of `block` `TAKEN`: its places are reset when
    /// the head passes it (a cut resets its places as it takes them). Kept
    /// here, not in the block, whose first line every push reads.
    popped: bool,
    /// Entries taken since the last look at the index's size.
    taken: u64,
    /// The most entries pending at once, as the consumer saw it.
    peak: u64,
    /// The blocks were freed: the receiver left or was converted.
    gone: bool,
}

impl<K, V> Head<K, V> {
    /// Moves the head onto `next`, the block after its own, and sets its
    /// own aside for `spend`, its places reset if a pop marked any `TAKEN`.
    /// Places the conversion or a hard close marked are never pushed again
    /// (both shut every index shard first).
    fn pass_block(&mut self, next: *mut Block<K, V>) {
        if std::mem::take(&mut self.popped) {
            // SAFETY: the head's block is live, and passed: the consumer's
            // alone (every place pushed and taken, the tail moved on).
            for p in unsafe { &*self.block }.places.iter() {
                // Relaxed: published to the producers by the push lock that
                // hands the block back (`spend`).
                p.position.store(EMPTY, Ordering::Relaxed);
            }
        }
        self.spent.push(self.block);
        self.block = next;
        self.idx = 0;
    }
}

/// What a pop, a peek or a cut found.
pub(crate) enum Took<T> {
    Some(T),
    Empty,
    /// The entries became cells: the receiver goes on as a cell receiver.
    Converted,
}

/// One key the conversion moves into the cells.
pub(crate) struct Moved<K, V> {
    pub(crate) hash: u64,
    pub(crate) key: K,
    pub(crate) value: V,
    pub(crate) sends: u64,
}

/// Where a table hub's cell names its key's place at the part (`Owned`):
/// kept by the cell, read and written under its shard lock by the sends
/// (`Cells::send_owned`), read by the conversion and a hard close.
#[derive(Clone, Copy)]
pub(crate) struct Owned {
    /// The part's number (`Solo::part`); 0 names none. A reference of
    /// another part is never followed: its blocks may be freed.
    part: u64,
    /// The place (a `Place<K, V>` of part `part`).
    place: *const (),
    /// The place's position when the key was pushed there.
    position: u64,
    /// The cut epoch it was pushed in.
    epoch: u32,
}

impl Owned {
    /// No place.
    pub(crate) const NONE: Owned = Owned {
        part: 0,
        place: ptr::null(),
        position: 0,
        epoch: 0,
    };
}

/// The sole receiver's values, index and queue.
pub(crate) struct Solo<K, V> {
    shards: Box<[CachePadded<Shard<K, V>>]>,
    /// In a hub with a state table, the hub's cells: their shard locks are
    /// this part's, the cells name its places and its index stays empty
    /// (`Solo::for_table`). Null otherwise. The cells outlive every use:
    /// the part's lockers are sends in flight, the registrar and the
    /// consumer, which all hold the hub; its drop takes no lock.
    cells: *const Cells<K, V>,
    /// In a table hub, shard `s`'s lock of the cells (`Solo::shard_lock`),
    /// found once here so that a cut's barrier reads one pointer per shard
    /// (docs/performance.md, "session twenty-nine"); the cells outlive every
    /// locker. Null otherwise (pointers into `shards` would not do: moving
    /// the part moves its box, which asserts it is the one way to them).
    cell_locks: [*const SpinLock; SHARDS],
    /// This part's number in its hub (`Owned::part`), from 1.
    part: u64,
    /// The cut epoch, read by every send under its shard lock.
    epoch: CachePadded<AtomicU32>,
    /// What the producers write on every push, on lines of their own.
    push: CachePadded<PushSide<K, V>>,
    /// What the consumer writes on every take, on lines of its own.
    take: CachePadded<TakeSide<K, V>>,
    /// The receiver: its wake-up event, flags and consumer counts.
    rx: Arc<CellRx>,
    /// Loom builds: the hub let go of this part (`mark_let_go`).
    #[cfg(loom)]
    let_go: AtomicBool,
}

struct PushSide<K, V> {
    lock: SpinLock,
    tail: UnsafeCell<Tail<K, V>>,
    /// Positions pushed so far: the next push's position (written under
    /// the push lock, the one count of it: a push stores it once).
    pushed: AtomicU64,
}

struct TakeSide<K, V> {
    head: UnsafeCell<Head<K, V>>,
    /// Positions the consumer is past (written by it only).
    popped: AtomicU64,
    /// Set with `Tail::converted`, for readers without the push lock.
    converted: AtomicBool,
    /// Sends of entries a panicking conversion dropped: the registrar
    /// counts them here, the consumer (the only writer of its counts) adds
    /// them to its `dropped` when it lets the solo part go.
    lost: AtomicU64,
}

// SAFETY: the shards' data is reached only under their locks, the tail only
// under the push lock, the head only by the consumer (or its close, which
// excludes it), and a place's contents as the `Place` comment says. Keys and
// values move between threads with sends and takes, hence the bounds.
unsafe impl<K: Send, V: Send> Sync for Solo<K, V> {}
// SAFETY: as above; the structure owns its keys and values.
unsafe impl<K: Send, V: Send> Send for Solo<K, V> {}

/// What `Solo::send` did.
pub(crate) struct Sent<V> {
    /// The value the send replaced, to drop after the lock.
    pub(crate) old: Option<V>,
    /// The consumer parked and must be woken.
    pub(crate) wake: bool,
}

impl<K, V> Solo<K, V> {
    pub(crate) fn new(rx: Arc<CellRx>) -> Self {
        Self::with_locks(rx, ptr::null(), 0)
    }

    /// A part for a hub with a state table: its places are named by the
    /// hub's `cells`, whose shard locks it takes as its own (docs/design.md,
    /// "The sole receiver owns its values"). `part`: a number no other part
    /// of the hub had.
    ///
    /// # Safety
    /// `cells` outlives every call on this part but its drop.
    pub(crate) unsafe fn for_table(rx: Arc<CellRx>, cells: &Cells<K, V>, part: u64) -> Self {
        debug_assert!(part != 0, "part 0 names none");
        Self::with_locks(rx, cells, part)
    }

    fn with_locks(rx: Arc<CellRx>, cells: *const Cells<K, V>, part: u64) -> Self {
        let first = new_block();
        let shards: Box<[CachePadded<Shard<K, V>>]> = (0..SHARDS)
            .map(|_| {
                CachePadded::new(Shard {
                    lock: SpinLock::new(),
                    data: UnsafeCell::new(ShardData {
                        index: HashTable::new(),
                        open: true,
                    }),
                    received: AtomicU64::new(0),
                })
            })
            .collect();
        let cell_locks = std::array::from_fn(|s| -> *const SpinLock {
            if cells.is_null() {
                ptr::null()
            } else {
                // SAFETY: the caller of `for_table` keeps the cells alive.
                unsafe { &*cells }.spin_lock(s)
            }
        });
        Solo {
            cells,
            cell_locks,
            part,
            shards,
            epoch: CachePadded::new(AtomicU32::new(0)),
            push: CachePadded::new(PushSide {
                lock: SpinLock::new(),
                tail: UnsafeCell::new(Tail {
                    block: first,
                    idx: 0,
                    epoch: 0,
                    parked: false,
                    converted: false,
                    shut: false,
                    free: Vec::new(),
                }),
                pushed: AtomicU64::new(0),
            }),
            take: CachePadded::new(TakeSide {
                head: UnsafeCell::new(Head {
                    block: first,
                    idx: 0,
                    position: 0,
                    spent: Vec::new(),
                    popped: false,
                    taken: 0,
                    peak: 0,
                    gone: false,
                }),
                popped: AtomicU64::new(0),
                converted: AtomicBool::new(false),
                lost: AtomicU64::new(0),
            }),
            rx,
            #[cfg(loom)]
            let_go: AtomicBool::new(false),
        }
    }

    /// Loom builds: the hub let go of this part after a grace period; a
    /// send that reaches it later panics.
    #[cfg(loom)]
    pub(crate) fn mark_let_go(&self) {
        self.let_go.store(true, Ordering::Relaxed);
    }

    /// Whether the hub's cells name this part's places (a hub with a
    /// state table).
    pub(crate) fn in_table(&self) -> bool {
        !self.cells.is_null()
    }

    /// Shard `s`'s lock: the part's own, or in a table hub the cells' lock
    /// of the same shard.
    #[inline]
    fn shard_lock(&self, s: usize) -> &SpinLock {
        if self.cells.is_null() {
            &self.shards[s].lock
        } else {
            // SAFETY: the cells' lock of shard `s` (a table part's), and the
            // cells outlive every locker (`Solo::for_table`).
            unsafe { &*self.cell_locks[s] }
        }
    }

    /// Locks `own` (a shard's lock or the push lock), or in a table hub
    /// whose cells are merged their one lock, which then stands for both
    /// (`Cells::lock_or`). Returns whether they are merged.
    #[inline]
    fn lock_or<'a>(&'a self, own: &'a SpinLock) -> (SpinGuard<'a>, bool) {
        if self.cells.is_null() {
            (own.lock(), false)
        } else {
            // SAFETY: a table part's cells outlive every locker
            // (`Solo::for_table`).
            unsafe { &*self.cells }.lock_or(own)
        }
    }

    /// Locks shard `s` of the part ([`Solo::shard_lock`], through
    /// [`Solo::lock_or`]).
    #[inline]
    fn lock_shard(&self, s: usize) -> SpinGuard<'_> {
        self.lock_or(self.shard_lock(s)).0
    }

    /// Locks the push side (through [`Solo::lock_or`]); returns whether
    /// that took the cells' merged lock.
    #[inline]
    fn lock_push(&self) -> (SpinGuard<'_>, bool) {
        self.lock_or(&self.push.lock)
    }

    /// Every shard lock and the push lock, in that order (through
    /// [`Solo::lock_or`]: the one lock while the cells are merged). The
    /// guards hold the shards (all of them, the first one, while merged);
    /// the last guard holds the push side.
    fn lock_everything(&self) -> (Vec<SpinGuard<'_>>, Option<SpinGuard<'_>>) {
        let (first, merged) = self.lock_or(self.shard_lock(0));
        if merged {
            return (vec![first], None);
        }
        // Not merged: for good (the split is), so each lock is its own.
        let mut guards = vec![first];
        guards.extend((1..SHARDS).map(|s| self.shard_lock(s).lock()));
        (guards, Some(self.push.lock.lock()))
    }

    /// The cut epoch, for a send holding its key's shard lock. SeqCst, after
    /// the lock's SeqCst CAS: the pairing of the cut's barrier
    /// ([`SpinLock::wait_free`]), which reads the lock free only if this
    /// load comes after the cut's fence and reads the new epoch. The models
    /// treat SeqCst accesses as acquire and release ones, which would find
    /// this pairing broken where C++20's order of SeqCst operations keeps
    /// it; under them a SeqCst fence stands between the lock and this load
    /// (the same instruction on x86, where the lock's is a full barrier).
    #[inline(always)]
    fn epoch_under_lock(&self) -> u32 {
        #[cfg(loom)]
        crate::sync::fence(Ordering::SeqCst);
        self.epoch.load(Ordering::SeqCst)
    }

    /// The receiver whose values these are.
    pub(crate) fn owner(&self) -> &CellRx {
        &self.rx
    }

    /// Whether `rx` is the receiver whose values these are.
    pub(crate) fn owned_by(&self, rx: &CellRx) -> bool {
        ptr::eq(&*self.rx, rx)
    }

    /// The shard's data.
    ///
    /// # Safety
    /// The caller holds the shard's lock, and the reference ends before it
    /// releases it.
    #[allow(clippy::mut_from_ref)]
    unsafe fn data<'a>(shard: &'a Shard<K, V>, _held: &SpinGuard<'a>) -> &'a mut ShardData<K, V> {
        // SAFETY: the caller's contract.
        shard.data.with_mut(|p| unsafe { &mut *p })
    }

    /// The tail, under the push lock.
    ///
    /// # Safety
    /// As [`Solo::data`], for the push lock.
    #[allow(clippy::mut_from_ref)]
    unsafe fn tail<'a>(&'a self, _held: &SpinGuard<'a>) -> &'a mut Tail<K, V> {
        // SAFETY: the caller's contract.
        unsafe { self.tail_held() }
    }

    /// [`Solo::tail`] for a caller that holds the push side some other way
    /// (the cells' merged lock, under which a table hub's send pushes).
    ///
    /// # Safety
    /// As [`Solo::tail`].
    #[allow(clippy::mut_from_ref)]
    #[inline(always)]
    unsafe fn tail_held(&self) -> &mut Tail<K, V> {
        // SAFETY: the caller's contract.
        self.push.tail.with_mut(|p| unsafe { &mut *p })
    }

    /// The consumer's end.
    ///
    /// # Safety
    /// The caller is the receiver's consumer (or its close, which excludes
    /// it), and no other reference to the head is live.
    #[allow(clippy::mut_from_ref)]
    unsafe fn head(&self) -> &mut Head<K, V> {
        // SAFETY: the caller's contract.
        self.take.head.with_mut(|p| unsafe { &mut *p })
    }

    /// Links the tail's next block after `block`, the tail's full one, and
    /// moves the tail onto it; under the push lock. Out of line: once per
    /// `BLOCK` pushes.
    #[cold]
    #[inline(never)]
    fn next_block(t: &mut Tail<K, V>, block: &Block<K, V>) {
        let next = t.free.pop().unwrap_or_else(new_block);
        // Release: the consumer that follows the link sees the block reset
        // (`spend`) or built.
        block.next.store(next, Ordering::Release);
        t.block = next;
        t.idx = 0;
    }

    /// Claims the next place and writes it; under the key's shard lock.
    /// Returns the place, its position and epoch, and whether to wake the
    /// consumer.
    ///
    /// Always inline: called out of line, it returned these through memory,
    /// and the send read them back with one 16-byte load over two 8-byte
    /// stores, which the store buffer cannot forward, so the load waited for
    /// the stores to reach the cache: about 5 ns of a 24 ns send
    /// (docs/performance.md, "session twenty-seven").
    #[inline(always)]
    fn push(
        &self,
        hash: u64,
        key: K,
        value: V,
        merged: bool,
    ) -> (*const Place<K, V>, u64, u32, bool) {
        // While the cells are merged, their lock, which the caller holds,
        // is the push lock too (`Cells::lock_or`).
        let _guard = (!merged).then(|| self.push.lock.lock());
        // SAFETY: the push lock is held, or the merged lock that stands for
        // it.
        let t = unsafe { self.tail_held() };
        // SAFETY: `t.block` is a live block of this queue (blocks are freed
        // only by `free_blocks`, after which no send reaches a push).
        let block = unsafe { &*t.block };
        let place = &block.places[t.idx];
        // Relaxed: written only under the push lock, which this holds.
        let position = self.push.pushed.load(Ordering::Relaxed);
        // The place at the tail is the pusher's alone (claimed under the
        // push lock, not ready, so no consumer reads it, and no index entry
        // matches its next position yet); its old contents were taken (a
        // recycled block's places all were).
        // SAFETY: as said above.
        place.hash.with_mut(|p| unsafe { *p = Hashed::of(hash) });
        // SAFETY: as above.
        place.sends.with_mut(|p| unsafe { *p = 1 });
        // SAFETY: as above.
        place.key.with_mut(|p| unsafe { (*p).write(key) });
        // SAFETY: as above.
        place.value.with_mut(|p| unsafe { (*p).write(value) });
        // Release: the consumer that sees it (`ready`) sees the place
        // written; sends read it under this key's shard lock, which the
        // caller holds (one with a stale index entry, for a compare only).
        place.position.store(position, Ordering::Release);
        t.idx += 1;
        if t.idx == BLOCK {
            Self::next_block(t, block);
        }
        // Relaxed: a count for `len` and the stats; the places are published
        // by their positions.
        self.push.pushed.store(position + 1, Ordering::Relaxed);
        // Read, and cleared only when set: no store on the common push.
        let wake = t.parked;
        if wake {
            t.parked = false;
        }
        (place, position, t.epoch, wake)
    }

    /// Sends that reached the receiver, over every shard.
    pub(crate) fn received(&self) -> u64 {
        self.shards
            .iter()
            // Acquire: pairs with the Release store of each count, so a
            // reader that sees a send counted sees it pushed.
            .map(|s| s.received.load(Ordering::Acquire))
            .sum()
    }

    /// Keys pending: pushed less taken, the two counts as of one instant.
    /// `pushed` is loaded on both sides of `popped`, and the pair kept only
    /// if it did not move between: `popped` then `pushed` alone, a reader
    /// preempted between its loads counted every push since against the
    /// pops before (a watch read 980 pending over 300 keys; loom:
    /// `sole_receivers_pending_stays_within_its_keys`). Saturating: a pop
    /// may be counted before the push it took (`push` stores its count
    /// after the place). Each retry follows a push, so it ends.
    pub(crate) fn len(&self) -> u64 {
        // Acquire on `popped` pairs with its Release stores (`advance`,
        // `cut_into`); on `pushed` (stored Relaxed under the push lock) it
        // only keeps the three loads in the order written.
        let mut pushed = self.push.pushed.load(Ordering::Acquire);
        loop {
            let popped = self.take.popped.load(Ordering::Acquire);
            let again = self.push.pushed.load(Ordering::Acquire);
            if again == pushed {
                return pushed.saturating_sub(popped);
            }
            pushed = again;
        }
    }

    /// Whether the entries became cells.
    pub(crate) fn is_converted(&self) -> bool {
        // Acquire: pairs with the Release in `convert`.
        self.take.converted.load(Ordering::Acquire)
    }

    /// Counts the sends of an entry the conversion dropped (a panic in user
    /// code), for the consumer to take over (`tear_down`).
    pub(crate) fn count_lost(&self, sends: u64) {
        // Relaxed: read by the consumer after the conversion's Release.
        self.take.lost.fetch_add(sends, Ordering::Relaxed);
    }

    /// Announces that the consumer is about to park: the next push wakes it.
    pub(crate) fn arm(&self) {
        let (guard, _) = self.lock_push();
        // SAFETY: the push lock is held.
        unsafe { self.tail(&guard) }.parked = true;
    }
}

impl<K, V> Solo<K, V> {
    /// The place `o` names if it is still pending there in epoch `now`:
    /// `o` is of this part (a reference of another part is never followed),
    /// of the epoch, and the place still carries its position. Under the
    /// place's shard lock.
    #[inline(always)]
    fn owned_place(&self, o: &Owned, now: u32) -> Option<*const Place<K, V>> {
        if o.part != self.part || o.epoch != now {
            return None;
        }
        let place = o.place.cast::<Place<K, V>>();
        // SAFETY: a reference of this part names one of its places, and its
        // blocks live as long as it does. Relaxed: written under the lock
        // the caller holds (or by the consumer's cut, for a place of an
        // older epoch, which the epoch test ruled out).
        (unsafe { &*place }.position.load(Ordering::Relaxed) == o.position).then_some(place)
    }
}

impl<K: Clone, V> Solo<K, V> {
    /// A table hub's send, at the part (docs/design.md, "The sole receiver
    /// owns its values"): coalesces into the place the key's cell names if
    /// it is pending in the current epoch, else pushes a new place and names
    /// it in `owned`. `value` is the receiver's copy (the table keeps its
    /// own). Clones the key (a push) before anything changes.
    ///
    /// # Safety
    /// The caller holds the cells' lock of the key's shard (this part's),
    /// or their merged lock if `merged` (`Cells::lock_or`), `owned` is the
    /// key's reference in its cell, and the part is a table hub's.
    #[inline(always)]
    pub(crate) unsafe fn send_held(
        &self,
        hash: u64,
        key: &K,
        value: V,
        owned: &mut Owned,
        merged: bool,
    ) -> Sent<V> {
        debug_assert!(self.in_table());
        // Relaxed: as in `send`.
        #[cfg(loom)]
        assert!(
            !self.let_go.load(Ordering::Relaxed),
            "a send reached a solo part the hub let go of"
        );
        let shard = &self.shards[shard_of(hash)];
        // SAFETY: the caller holds the shard's lock (this function's
        // contract); the reference ends before this returns.
        let data = shard.data.with_mut(|p| unsafe { &mut *p });
        if !data.open {
            // The receiver left, was converted or closed by the hub.
            return Sent {
                old: Some(value),
                wake: false,
            };
        }
        let now = self.epoch_under_lock();
        let sent = match self.owned_place(owned, now) {
            Some(place) => {
                // SAFETY: the place is this key's (pending in this epoch)
                // and its shard lock is held: no one else writes or takes
                // it.
                let old = unsafe { (*place).coalesce(value) };
                Sent {
                    old: Some(old),
                    wake: false,
                }
            }
            None => {
                let (place, position, epoch, wake) = self.push(hash, key.clone(), value, merged);
                *owned = Owned {
                    part: self.part,
                    place: place.cast(),
                    position,
                    epoch,
                };
                Sent { old: None, wake }
            }
        };
        // Release: pairs with `received`'s Acquire.
        let n = shard.received.load(Ordering::Relaxed);
        shard.received.store(n + 1, Ordering::Release);
        sent
    }
}

impl<K: Eq + Clone, V> Solo<K, V> {
    /// One send: coalesces into the key's place if it is pending in the
    /// current epoch, else pushes a new place. The key's clones are made
    /// before anything changes (a panicking `K::clone` leaves all as it was).
    #[inline]
    pub(crate) fn send(&self, hash: u64, key: &K, value: V) -> Sent<V> {
        debug_assert!(!self.in_table(), "a table hub's sends go through its cells");
        // Relaxed: a correct hub lets go of a part only after a grace period
        // that waited for this send (its leave happens before the mark).
        #[cfg(loom)]
        assert!(
            !self.let_go.load(Ordering::Relaxed),
            "a send reached a solo part the hub let go of"
        );
        let shard = &self.shards[shard_of(hash)];
        let guard = shard.lock.lock();
        // SAFETY: the shard lock is held; `data` ends before `guard`.
        let data = unsafe { Self::data(shard, &guard) };
        if !data.open {
            // The receiver left: the send does not reach it.
            return Sent {
                old: Some(value),
                wake: false,
            };
        }
        // A cut that this send must see moved the epoch before its barrier
        // read this shard's lock free (docs/design.md, "The sole receiver
        // owns its values").
        let now = self.epoch_under_lock();
        let found = data.index.find_mut(table_hash(hash as u32), |ix| {
            ix.low == hash as u32 && ix.key == *key
        });
        let sent = match found {
            Some(ix)
                if ix.epoch == now
                    // SAFETY: blocks outlive every index entry naming them
                    // (freed only with the index cleared).
                    && unsafe { &*ix.place }.position.load(Ordering::Relaxed) == ix.position =>
            {
                // SAFETY: the place is this key's (position and epoch agree)
                // and its shard lock is held: no one else writes or takes it;
                // blocks outlive every index entry naming them.
                let old = unsafe { (*ix.place).coalesce(value) };
                Sent {
                    old: Some(old),
                    wake: false,
                }
            }
            Some(ix) => {
                let (place, position, epoch, wake) = self.push(hash, key.clone(), value, false);
                ix.place = place;
                ix.position = position;
                ix.epoch = epoch;
                Sent { old: None, wake }
            }
            None => {
                let (indexed, queued) = (key.clone(), key.clone());
                let (place, position, epoch, wake) = self.push(hash, queued, value, false);
                data.index.insert_unique(
                    table_hash(hash as u32),
                    Ix {
                        key: indexed,
                        place,
                        position,
                        low: hash as u32,
                        epoch,
                    },
                    |ix| table_hash(ix.low),
                );
                Sent { old: None, wake }
            }
        };
        // Release: pairs with `received`'s Acquire.
        let n = shard.received.load(Ordering::Relaxed);
        shard.received.store(n + 1, Ordering::Release);
        drop(guard);
        sent
    }
}

impl<K, V> Solo<K, V> {
    /// The consumer's next place, moving to the next block as needed.
    fn head_place(h: &mut Head<K, V>) -> Option<&Place<K, V>> {
        if h.gone {
            return None;
        }
        if h.idx == BLOCK {
            // SAFETY: `h.block` is live (the consumer's block).
            let next = unsafe { &*h.block }.next.load(Ordering::Acquire);
            if next.is_null() {
                return None;
            }
            h.pass_block(next);
        }
        // SAFETY: as above.
        Some(unsafe { &(*h.block).places[h.idx] })
    }

    /// Hands the blocks the consumer passed back to the producers, reset.
    fn spend(&self, h: &mut Head<K, V>) {
        if h.spent.is_empty() {
            return;
        }
        for &b in &h.spent {
            // SAFETY: a spent block is the consumer's alone: every place was
            // pushed and taken, and no producer holds it (the tail moved on).
            // Its places were reset as the head passed (`pass_block`).
            unsafe { &*b }
                .next
                .store(ptr::null_mut(), Ordering::Relaxed);
        }
        let (guard, _) = self.lock_push();
        // SAFETY: the push lock is held.
        unsafe { self.tail(&guard) }.free.append(&mut h.spent);
    }

    /// Moves the consumer past `n` taken places.
    fn advance(&self, h: &mut Head<K, V>, n: u64) {
        h.position += n;
        // Release: `len` and the stats read it after the counts it follows.
        self.take.popped.store(h.position, Ordering::Release);
        h.taken += n;
    }

    /// Takes the oldest pending key. Consumer only.
    #[inline]
    pub(crate) fn pop(&self) -> Took<Event<K, V>> {
        // SAFETY: the consumer calls this.
        let h = unsafe { self.head() };
        let Some((place, guard)) = self.pending_head(h) else {
            return self.empty();
        };
        place.position.store(TAKEN, Ordering::Relaxed);
        // SAFETY: the place is pending (not taken) and its shard lock is
        // held; marked taken, no send writes it again.
        let (key, value, sends) = unsafe { place.take() };
        drop(guard);
        h.popped = true;
        h.idx += 1;
        self.advance(h, 1);
        if h.idx == BLOCK {
            let _ = Self::head_place(h);
        }
        self.spend(h);
        Took::Some(Event::new(key, value, sends))
    }

    /// The place at the consumer's head if it is pending, with its shard
    /// lock held; `None` if the queue is empty there, or its values were
    /// taken by the conversion or a hard close.
    fn pending_head<'a>(
        &'a self,
        h: &'a mut Head<K, V>,
    ) -> Option<(&'a Place<K, V>, SpinGuard<'a>)> {
        let place = Self::head_place(h)?;
        // Acquire (`ready`): pairs with the push's Release.
        if !place.ready() {
            return None;
        }
        // SAFETY: ready.
        let shard = unsafe { place.hash() }.shard();
        let guard = self.lock_shard(shard);
        // Relaxed: written under this lock. Only the conversion or a hard
        // close marks a place the consumer has not passed; either one did
        // so before this lock.
        if place.position.load(Ordering::Relaxed) == TAKEN {
            // Either holds the push lock until it marked the queue converted
            // or shut (in a table hub it lets the shard locks go first, to
            // send into the cells): wait for it, so that `empty` reads the
            // mark.
            drop(guard);
            drop(self.lock_push());
            return None;
        }
        Some((place, guard))
    }

    /// Nothing pending here: converted, or empty.
    fn empty<T>(&self) -> Took<T> {
        if self.is_converted() {
            Took::Converted
        } else {
            Took::Empty
        }
    }
}

impl<K: Clone, V: Clone> Solo<K, V> {
    /// A copy of the oldest pending key's event. Consumer only.
    pub(crate) fn peek(&self) -> Took<Event<K, V>> {
        // SAFETY: the consumer calls this.
        let h = unsafe { self.head() };
        let Some((place, guard)) = self.pending_head(h) else {
            return self.empty();
        };
        // SAFETY: pending, and its shard lock is held.
        let event = unsafe {
            Event::new(
                place.key.with(|p| (*p).assume_init_ref().clone()),
                place.value.with(|p| (*p).assume_init_ref().clone()),
                place.sends.with(|p| *p),
            )
        };
        drop(guard);
        Took::Some(event)
    }
}

impl<K, V> Solo<K, V> {
    /// The cut's barrier (see `cut_into`): a SeqCst fence, then each lock
    /// of a shard the batch up to (`end_block`, `end_idx`) names, read until
    /// it is free; every shard's for a batch of more than `SHARDS`.
    #[inline]
    fn barrier(&self, h: &Head<K, V>, batch: usize, end_block: *mut Block<K, V>, end_idx: usize) {
        crate::sync::fence(Ordering::SeqCst);
        let mut named: u32 = u32::MAX;
        if batch <= SHARDS {
            named = 0;
            self.for_each_place(h, end_block, end_idx, |p| {
                // SAFETY: places before the tail are written (the push lock
                // ordered their pushes before this cut).
                named |= 1 << unsafe { p.hash() }.shard();
            });
        }
        while named != 0 {
            let s = named.trailing_zeros() as usize;
            named &= named - 1;
            self.shard_lock(s).wait_free();
        }
    }

    /// Everything pending as of one instant, in first-touch order, appended
    /// to `out`: the epoch's move under the push lock is the instant.
    /// Returns the events and their sends. Consumer only.
    pub(crate) fn cut_into(&self, out: &mut Vec<Event<K, V>>) -> Took<(usize, u64)> {
        // SAFETY: the consumer calls this.
        let h = unsafe { self.head() };
        if h.gone {
            return Took::Empty;
        }
        let (end_block, end_idx, merged) = {
            let (guard, merged) = self.lock_push();
            // SAFETY: the push lock is held.
            let t = unsafe { self.tail(&guard) };
            if t.converted {
                return Took::Converted;
            }
            if t.shut {
                return Took::Empty;
            }
            let at_head = (t.block == h.block && t.idx == h.idx)
                || (h.idx == BLOCK && t.idx == 0 && {
                    // SAFETY: the consumer's block is live.
                    unsafe { &*h.block }.next.load(Ordering::Acquire) == t.block
                });
            if at_head {
                return Took::Empty;
            }
            t.epoch = t.epoch.wrapping_add(1);
            // Relaxed: sends read it under a shard lock this cut's barrier
            // reads free after this store and the fence below (or, for keys
            // not in the batch, after the push lock orders it; see `send`).
            self.epoch.store(t.epoch, Ordering::Relaxed);
            // The batch is taken as of this instant: `len` stops counting
            // it now, so a key sent again while the cut runs counts once
            // (Release: as in `advance`).
            // Relaxed load: written only under the push lock, held here.
            self.take
                .popped
                .store(self.push.pushed.load(Ordering::Relaxed), Ordering::Release);
            (t.block, t.idx, merged)
        };
        let batch = self.batch_len(h, end_block, end_idx);
        // The barrier: every send that read the old epoch under a shard the
        // batch names has finished writing its place once this shard's lock
        // reads free after the fence (`SpinLock::wait_free`; a send that
        // locks it later reads the new epoch). A small batch names its
        // shards; a large one, all of them (no extra pass over it). Reading
        // the locks, not taking them: 28 locked instructions fewer for a
        // batch of 64 keys (docs/performance.md, "session twenty-eight").
        //
        // No barrier while the cells are merged: every send then reads the
        // epoch under the lock this cut held to move it, so a send that read
        // the old one finished before that, and one after it reads the new
        // one, also a send after a split (which takes that lock too, after
        // this cut let go of it).
        if !merged {
            self.barrier(h, batch, end_block, end_idx);
        }
        out.reserve(batch);
        // The events are written into the room just reserved and counted
        // into the vector's length once, after the loop: a `push` per entry
        // tested the capacity and stored the length each time. Nothing in
        // the loop can unwind (no user code runs), so no event written is
        // left uncounted.
        let room = out.spare_capacity_mut();
        let mut written = 0;
        let mut sends = 0;
        loop {
            if h.idx == BLOCK {
                // SAFETY: the consumer's block is live; the cut's range goes
                // on past it, so the link was stored (before the cut's push
                // lock, which ordered it).
                let next = unsafe { &*h.block }.next.load(Ordering::Acquire);
                h.pass_block(next);
            }
            if h.block == end_block && h.idx == end_idx {
                break;
            }
            // SAFETY: as above.
            let block = unsafe { &*h.block };
            let end = if h.block == end_block { end_idx } else { BLOCK };
            for p in &block.places[h.idx..end] {
                // SAFETY: the place is in the cut's batch: pushed in an
                // older epoch, so no send writes it after the barrier, and
                // no pop took it (pops move the head).
                let (key, value, n) = unsafe { p.take() };
                // Reset for its block's next round now, while its line is
                // in cache (a second walk would find it evicted from a large
                // batch). Relaxed: published to the producers by the push
                // lock that hands the block back (`spend`); no send reads it
                // (an index entry naming it is of an older epoch now), and
                // the consumer has passed it.
                p.position.store(EMPTY, Ordering::Relaxed);
                sends += n;
                room[written].write(Event::new(key, value, n));
                written += 1;
            }
            h.idx = end;
        }
        debug_assert_eq!(written, batch);
        // SAFETY: the first `written` slots past the length were written
        // just above (`room` is the vector's spare capacity, which `reserve`
        // made at least `batch` long).
        unsafe { out.set_len(out.len() + written) };
        h.peak = h.peak.max(batch as u64);
        // `popped` already says so (above).
        h.position += batch as u64;
        h.taken += batch as u64;
        self.spend(h);
        Took::Some((batch, sends))
    }

    /// Places from the head to (`end_block`, `end_idx`).
    fn batch_len(&self, h: &Head<K, V>, end_block: *mut Block<K, V>, end_idx: usize) -> usize {
        let mut n = 0;
        self.for_each_place(h, end_block, end_idx, |_| n += 1);
        n
    }

    fn for_each_place(
        &self,
        h: &Head<K, V>,
        end_block: *mut Block<K, V>,
        end_idx: usize,
        mut f: impl FnMut(&Place<K, V>),
    ) {
        let (mut b, mut i) = (h.block, h.idx);
        loop {
            if i == BLOCK {
                // SAFETY: live; the range goes on past it.
                b = unsafe { &*b }.next.load(Ordering::Acquire);
                i = 0;
            }
            if b == end_block && i == end_idx {
                return;
            }
            // SAFETY: live.
            let block = unsafe { &*b };
            let end = if b == end_block { end_idx } else { BLOCK };
            for p in &block.places[i..end] {
                f(p);
            }
            i = end;
        }
    }

    /// After enough taken entries: forgets stale index entries once they
    /// outnumber both `STALE_KEEP` and the most keys pending at once, so the
    /// index stays bounded by the peak live key set. Consumer only.
    pub(crate) fn maybe_compact(&self) {
        // SAFETY: the consumer calls this.
        let h = unsafe { self.head() };
        if h.taken < COMPACT_EVERY || self.in_table() {
            // (A table hub's part keeps no index: the cells name its places.)
            return;
        }
        h.taken = 0;
        h.peak = h.peak.max(self.len());
        let keep = STALE_KEEP.max(h.peak as usize);
        let mut indexed = 0;
        for (s, shard) in self.shards.iter().enumerate() {
            let guard = self.lock_shard(s);
            // SAFETY: the lock is held.
            indexed += unsafe { Self::data(shard, &guard) }.index.len();
        }
        if indexed <= 2 * keep {
            return;
        }
        for (s, shard) in self.shards.iter().enumerate() {
            let guard = self.lock_shard(s);
            let now = self.epoch.load(Ordering::Relaxed);
            // SAFETY: the lock is held.
            let data = unsafe { Self::data(shard, &guard) };
            data.index.retain(|ix| {
                ix.epoch == now
                    // SAFETY: blocks outlive the index entries naming them.
                    && unsafe { &*ix.place }.position.load(Ordering::Relaxed) == ix.position
            });
            // A table that grew for a burst gives the room back.
            if data.index.capacity() > 4 * data.index.len() {
                data.index
                    .shrink_to(2 * data.index.len(), |ix| table_hash(ix.low));
            }
        }
    }

    /// Hard close: shuts sends out and takes every value pending in the
    /// current epoch (returned, to drop after the locks); a cut in progress
    /// keeps its batch (and drops it, seeing the receiver closed), and later
    /// cuts find nothing.
    pub(crate) fn shut(&self) -> Vec<Moved<K, V>> {
        let mut taken = Vec::new();
        self.seize(false, |moved| taken = moved);
        taken
    }

    /// The consumer's last step (its close, its drop after a hard close, or
    /// its switch to the cells after the conversion): shuts the sends out,
    /// moves every value still pending out (returned, to be dropped after
    /// the locks, with the sends they folded and any a panicking conversion
    /// dropped), and frees the queue. Consumer
    /// (or its close) only; idempotent.
    pub(crate) fn tear_down(&self) -> (Vec<(K, V)>, Vec<K>, u64) {
        // SAFETY: the consumer (or its close) calls this.
        let h = unsafe { self.head() };
        if h.gone {
            return (Vec::new(), Vec::new(), 0);
        }
        let mut keys = Vec::new();
        let (guards, push) = self.lock_everything();
        for shard in self.shards.iter() {
            // SAFETY: every shard's lock is held (`lock_everything`).
            let data = unsafe { Self::data(shard, &guards[0]) };
            data.open = false;
            // Taken, not drained: a retired part keeps no table.
            keys.extend(std::mem::take(&mut data.index).into_iter().map(|ix| ix.key));
        }
        // SAFETY: the push side is held (`lock_everything`).
        let t = unsafe { self.tail_held() };
        let mut values = Vec::new();
        let mut sends = 0;
        let (end_block, end_idx) = (t.block, t.idx);
        self.for_each_place(h, end_block, end_idx, |p| {
            if p.position.load(Ordering::Relaxed) != TAKEN {
                // SAFETY: pending: every shard lock is held, no cut runs
                // (the consumer is here), and it is taken only here.
                let (key, value, n) = unsafe { p.take() };
                values.push((key, value));
                sends += n;
            }
        });
        // Free every block: the consumer's chain and the spare ones. No send
        // reaches a place again (every shard is shut and its index empty).
        let mut b = h.block;
        while !b.is_null() {
            // SAFETY: a block of this queue, freed once (the chain ends at
            // the tail's block, whose link is null).
            let next = unsafe { &*b }.next.load(Ordering::Relaxed);
            // SAFETY: as above.
            drop(unsafe { Box::from_raw(b) });
            b = next;
        }
        for b in t.free.drain(..).chain(h.spent.drain(..)) {
            // SAFETY: spare blocks are in no chain.
            drop(unsafe { Box::from_raw(b) });
        }
        t.block = ptr::null_mut();
        h.block = ptr::null_mut();
        h.gone = true;
        drop(push);
        drop(guards);
        // With what a panicking conversion dropped (`count_lost`).
        let lost = self.take.lost.swap(0, Ordering::Relaxed);
        (values, keys, sends + lost)
    }

    /// The conversion into the cells: every key pending in the current
    /// epoch moves out in first-touch order, handed to `then`, which runs
    /// with every lock still held, so the consumer sees the cells filled
    /// when it sees the conversion. The caller has held sends off; the
    /// consumer may be in a pop (which waits) or in a cut (whose batch is of
    /// older epochs and stays its own).
    pub(crate) fn convert(&self, then: impl FnOnce(Vec<Moved<K, V>>)) {
        self.seize(true, then);
    }

    /// Under every shard lock and the push lock: shuts sends out, moves
    /// every key pending in the current epoch out (its place marked taken)
    /// and hands them to `then` in first-touch order; then marks the queue
    /// converted or shut.
    fn seize(&self, converting: bool, then: impl FnOnce(Vec<Moved<K, V>>)) {
        let (mut guards, push) = self.lock_everything();
        // SAFETY: the push side is held (`lock_everything`).
        let t = unsafe { self.tail_held() };
        if t.block.is_null() {
            // The consumer tore the part down (`tear_down`: its receiver
            // closed, also after a hard close that left the hub holding
            // the part): nothing is pending, and in a table hub the cells
            // still name places of the freed blocks, which must not be
            // followed. (A second `Hub::close_now` comes here.)
            return;
        }
        let mut found = Vec::new();
        for (s, shard) in self.shards.iter().enumerate() {
            // SAFETY: every shard's lock is held (`lock_everything`).
            let data = unsafe { Self::data(shard, &guards[0]) };
            data.open = false;
            for ix in data.index.drain() {
                // SAFETY: blocks outlive the index entries naming them.
                let place = unsafe { &*ix.place };
                if ix.epoch == t.epoch && place.position.load(Ordering::Relaxed) == ix.position {
                    found.push((ix.position, ix.place));
                }
            }
            if !self.cells.is_null() {
                // A table hub: the cells name the places (the index is
                // empty). SAFETY: the cells outlive every locker, and the
                // lock of shard `s`, theirs, is held.
                for o in unsafe { (*self.cells).owned_held(s) } {
                    if let Some(place) = self.owned_place(o, t.epoch) {
                        found.push((o.position, place));
                    }
                }
            }
        }
        found.sort_unstable_by_key(|&(position, _)| position);
        let moved = found
            .into_iter()
            .map(|(_, place)| {
                // SAFETY: a live place (as above).
                let place = unsafe { &*place };
                place.position.store(TAKEN, Ordering::Relaxed);
                // SAFETY: pending in the current epoch, so no cut owns it,
                // and every shard lock is held.
                let (key, value, sends) = unsafe { place.take() };
                // SAFETY: written.
                let hash = unsafe { place.hash() }.hash();
                Moved {
                    hash,
                    key,
                    value,
                    sends,
                }
            })
            .collect();
        if self.in_table() {
            // The conversion's sends lock the cells' shards, which are this
            // part's: let them go, and keep the push lock until the mark
            // below (a pop that finds a place taken waits for it, and a cut
            // checks the mark under it). Those sends take a shard lock under
            // the push lock, the reverse of a send's order (its shard, then
            // the push lock to push), which cannot deadlock here: the
            // conversion holds sends off, a hard close's `then` takes no
            // lock, and the consumer never holds a shard lock while it waits
            // for the push lock (`pending_head` lets its go first; its
            // tear-down, which takes both, comes after its deregistration,
            // which waits for the registrar's writer lock). While the cells
            // are merged (no push guard: a hard close; a conversion split
            // them first) their one lock is the push lock too, and stays.
            if push.is_some() {
                guards.clear();
            }
        }
        then(moved);
        if converting {
            t.converted = true;
            // Release: a reader that sees it sees the cells filled.
            self.take.converted.store(true, Ordering::Release);
        } else {
            t.shut = true;
        }
        drop(push);
        drop(guards);
    }
}

impl<K, V> Drop for Solo<K, V> {
    fn drop(&mut self) {
        // Nothing else holds the part: no send reaches it (it was retired
        // and a grace period passed, or the hub is gone) and its consumer
        // let go of it. So its own locks do for the tear-down, also in a
        // table hub, whose cells may be gone by now.
        self.cells = ptr::null();
        let (values, keys, _) = self.tear_down();
        drop(values);
        drop(keys);
    }
}
