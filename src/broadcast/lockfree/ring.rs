//! The shared state behind every `Buffer` handle and `Reader`, [`Ring`]: the
//! places, the state word (committed tail, writer lock, close flag, parking
//! flag, with [`arm_parking`](Ring::arm_parking) for a reader about to park),
//! the writer's node pool and the wake-up notifier (docs/design.md,
//! "Broadcast: the state word (writer lock, tail, close, parking)").

use super::place::{Place, PlaceRead};
use super::pool::Pool;
use crate::sync::{spin_wait, AtomicU64, AtomicUsize, Notify, Ordering, UnsafeCell};
use crate::{AppendError, Entry, ReadError};
use std::fmt;

/// An append or `close` is in progress (the writer lock).
const LOCKED: u64 = 1;
/// A reader may be parking: the next publishing swap notifies.
const PARKING: u64 = 2;
/// Closed: no append commits any more.
const CLOSED: u64 = 4;
/// The tail is stored above the flags.
const SHIFT: u32 = 3;

pub(super) struct Ring<T> {
    /// `capacity + 1` places; revision `r` lives in `places[r % (capacity + 1)]`.
    ///
    /// The extra place means an append in progress only ever rewrites a place whose
    /// revision is already outside retention (`r - capacity - 1` when writing `r`).
    /// The logical eviction of `r - capacity` therefore happens exactly at the
    /// commit of `r` (the publishing swap), so the tail alone decides `Gap` at the
    /// `a - 1` boundary, just as the one-mutex baseline does.
    places: Box<[Place<T>]>,
    capacity: u64,
    /// The state word, `tail << 3 | CLOSED | PARKING | LOCKED` (docs/design.md,
    /// "Broadcast: the state word (writer lock, tail, close, parking)").
    /// Release-swapped by the append that committed the tail in it, after its
    /// place's commit stamp; Acquire-loaded by
    /// readers, so every revision up to the loaded tail is committed in its place
    /// (or already overwritten by a later one, which the place's stamp reveals).
    state: AtomicU64,
    /// `Buffer` handles alive (readers do not count): the last one to drop closes
    /// the ring, since nothing can ever be appended again.
    handles: AtomicUsize,
    /// Evicted nodes, recycled once no read has them pinned (no allocation per
    /// append once the ring is full). Touched only while `LOCKED` is ours.
    pool: UnsafeCell<Pool<T>>,
    pub(super) notify: Notify,
    generation: u64,
}

// SAFETY: `pool` is only touched by the thread that holds the `LOCKED` bit
// (acquired with Acquire, released with Release, so accesses are ordered), which
// is what `Mutex<Pool<T>>` would give, and that is `Sync` for `T: Send`. Values
// are cloned through `&T` on reading threads, hence `T: Sync` too (the places
// already require it).
unsafe impl<T: Send + Sync> Sync for Ring<T> {}

/// The writer lock, held: the `LOCKED` bit is ours. Dropping it without
/// [`publish`](Locked::publish) (a panic in `T::eq`) releases the lock and changes
/// nothing else.
struct Locked<'a, T> {
    ring: &'a Ring<T>,
    /// The committed tail when the lock was taken.
    tail: u64,
}

impl<T> Locked<'_, T> {
    fn with_pool<R>(&mut self, f: impl FnOnce(&mut Pool<T>) -> R) -> R {
        // SAFETY: the `LOCKED` bit is ours (see the `Sync` impl); `&mut self`
        // keeps this access the only one.
        self.ring.pool.with_mut(|p| f(unsafe { &mut *p }))
    }

    /// Publishes `revision` as the tail and releases the lock; returns whether a
    /// reader announced it may park (then the caller notifies).
    ///
    /// AcqRel: Release pairs with readers' Acquire loads of the state (the place's
    /// commit stamp and node are visible to whoever sees the tail) and with the
    /// next locker's Acquire; Acquire pairs with a reader's Release `fetch_or`
    /// of `PARKING`, so the listener it registered before is visible to the
    /// `notify` that follows.
    fn publish(self, revision: u64) -> bool {
        debug_assert!(revision < 1 << (64 - SHIFT), "revision counter exhausted");
        let prev = self.ring.state.swap(revision << SHIFT, Ordering::AcqRel);
        debug_assert_eq!(prev & (LOCKED | CLOSED), LOCKED);
        std::mem::forget(self);
        prev & PARKING != 0
    }
}

impl<T> Drop for Locked<'_, T> {
    fn drop(&mut self) {
        // Release: the next locker sees what this holder did (nothing published).
        self.ring.state.fetch_and(!LOCKED, Ordering::Release);
    }
}

impl<T> Ring<T> {
    pub(super) fn new(capacity: usize) -> Self {
        assert!(
            capacity > 0,
            "broadcast::Buffer capacity must be at least 1"
        );
        let places = (0..=capacity).map(|_| Place::new()).collect();
        Ring {
            places,
            capacity: capacity as u64,
            state: AtomicU64::new(0),
            handles: AtomicUsize::new(1),
            pool: UnsafeCell::new(Pool::new()),
            notify: Notify::new(),
            generation: crate::broadcast::generation::next(),
        }
    }

    pub(super) fn capacity(&self) -> usize {
        self.capacity as usize
    }

    pub(super) fn generation(&self) -> u64 {
        self.generation
    }

    fn place(&self, revision: u64) -> &Place<T> {
        &self.places[(revision % (self.capacity + 1)) as usize]
    }

    /// The state word. Acquire pairs with the publishing swap (and `close`):
    /// revisions up to the tail in it are committed in their places.
    fn load_state(&self) -> u64 {
        self.state.load(Ordering::Acquire)
    }

    /// The committed tail (see [`load_state`](Self::load_state)).
    pub(super) fn tail(&self) -> u64 {
        self.load_state() >> SHIFT
    }

    /// Whether the ring is closed; a caller that sees `true` then sees the final
    /// tail (one word holds both).
    pub(super) fn is_closed(&self) -> bool {
        self.load_state() & CLOSED != 0
    }

    /// A reader's announcement, after registering its listener and before its
    /// last look, that it may park: the next publishing swap notifies
    /// (docs/design.md, "Broadcast: the state word (writer lock, tail, close,
    /// parking)"). Release pairs with that swap's Acquire.
    pub(super) fn arm_parking(&self) {
        self.state.fetch_or(PARKING, Ordering::Release);
    }

    /// Takes the writer lock, waiting (spin, then yield) only for another append
    /// or `close` in progress. `Err` once closed, unless `even_closed`.
    fn lock(&self, even_closed: bool) -> Result<Locked<'_, T>, ()> {
        let mut taken = Err(());
        spin_wait(|| {
            // Relaxed: only a hint for the compare-and-swap, which re-reads.
            let cur = self.state.load(Ordering::Relaxed);
            if cur & CLOSED != 0 && !even_closed {
                return true;
            }
            if cur & LOCKED != 0 {
                return false;
            }
            // Acquire pairs with the previous holder's Release (publishing swap,
            // `close`, or an unpublished release): its place writes and pool
            // changes happen before ours.
            match self.state.compare_exchange(
                cur,
                cur | LOCKED,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    taken = Ok(Locked {
                        ring: self,
                        tail: cur >> SHIFT,
                    });
                    true
                }
                // A reader set `PARKING`, or another writer got there first.
                Err(_) => false,
            }
        });
        taken
    }

    /// Appends `value`, or hands it back once closed.
    pub(super) fn append(&self, value: T) -> Result<u64, AppendError<T>> {
        let Ok(mut locked) = self.lock(false) else {
            return Err(AppendError(value));
        };
        let (revision, retired) = self.push_while_locked(&mut locked, value);
        if locked.publish(revision) {
            self.notify.notify(usize::MAX);
        }
        drop(retired);
        Ok(revision)
    }

    /// Like `append`, but answers the current tail without appending when `value`
    /// equals the latest value.
    pub(super) fn append_if_changed(&self, value: T) -> Result<u64, AppendError<T>>
    where
        T: PartialEq,
    {
        let Ok(mut locked) = self.lock(false) else {
            return Err(AppendError(value));
        };
        let latest = locked.tail;
        // User code (PartialEq) runs before anything changes, so a panic here
        // leaves the ring as it was (dropping `locked` releases the lock).
        if latest > 0
            && self
                .place(latest)
                .with_value_while_locked(|prev| prev == Some(&value))
        {
            return Ok(latest);
        }
        let (revision, retired) = self.push_while_locked(&mut locked, value);
        if locked.publish(revision) {
            self.notify.notify(usize::MAX);
        }
        drop(retired);
        Ok(revision)
    }

    /// Writes `value` into the next revision's place (committed in its stamp; the
    /// caller then publishes the tail). What it returns (the value of a recycled
    /// node, long evicted) is dropped by the caller after the lock is released, so
    /// no user `Drop` runs inside the critical section (and nothing in it can
    /// panic but allocation, before anything changed).
    fn push_while_locked(&self, locked: &mut Locked<'_, T>, value: T) -> (u64, Option<T>) {
        let revision = locked.tail + 1;
        locked.with_pool(|pool| {
            // A claimed evicted node, or a fresh one when every node tried is
            // pinned by a read in progress: never a wait.
            let (node, retired) = pool.take(value);
            if let Some(evicted) = self.place(revision).write_while_locked(revision, node) {
                pool.retire(evicted);
            }
            (revision, retired)
        })
    }

    pub(super) fn acquire_handle(&self) {
        // Relaxed: a handle is cloned from a live one, which keeps the count
        // above zero meanwhile (as `Arc::clone`).
        self.handles.fetch_add(1, Ordering::Relaxed);
    }

    /// Drops a `Buffer` handle; the last one closes the ring. AcqRel: the last
    /// release sees every other handle's appends done before it closes.
    pub(super) fn release_handle(&self) {
        if self.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.close();
        }
    }

    /// Closes the ring: waits for an append in progress, then sets `CLOSED`.
    pub(super) fn close(&self) {
        let Ok(locked) = self.lock(false) else {
            return; // already closed
        };
        // Release pairs with the readers' Acquire loads of the state: one that
        // sees `CLOSED` sees the final tail (the same word). Clears `LOCKED` in
        // the same step; keeps `PARKING` (the notify below wakes everyone).
        self.state.fetch_xor(LOCKED | CLOSED, Ordering::Release);
        std::mem::forget(locked);
        self.notify.notify(usize::MAX);
    }

    /// `Ok`, `Gap` or `Future` for `after` against the tail `tail`.
    fn check(&self, after: u64, tail: u64) -> Result<(), ReadError> {
        if after > tail {
            return Err(ReadError::Future { after, tail });
        }
        let floor = tail.saturating_sub(self.capacity); // a - 1
        if after < floor {
            return Err(ReadError::Gap {
                after,
                oldest: floor + 1,
            });
        }
        Ok(())
    }

    pub(super) fn validate(&self, after: u64) -> Result<(), ReadError> {
        self.check(after, self.tail())
    }

    /// The oldest retained revision minus one (`a - 1`; the tail when nothing
    /// is retained): the cursor that reads everything retained now.
    pub(super) fn floor(&self) -> u64 {
        self.tail().saturating_sub(self.capacity)
    }

    /// The oldest retained revision once a reader found a place overwritten by
    /// revision `by` (committed or being written). Appends are serialized, so
    /// writing `by` began after `by - 1` committed: retention starts at
    /// `by - capacity` or later.
    fn oldest_after_overwrite(&self, by: u64) -> u64 {
        let from_tail = self.tail().saturating_sub(self.capacity) + 1;
        from_tail.max(by.saturating_sub(self.capacity))
    }

    /// One non-blocking read attempt, shared by every read form: `Some(Ok(n))`
    /// after handing `n >= 1` entries to `sink`, `Some(Err)` for a final answer
    /// (Gap, Future, Closed), `None` when nothing is past `after` yet and the
    /// buffer is open.
    ///
    /// A batch that races an eviction ends early, at the first revision it found
    /// overwritten; every entry it returned was read under its own revision, and
    /// the next read from the batch's last revision reports the gap.
    pub(super) fn read_with(
        &self,
        after: u64,
        limit: usize,
        mut sink: impl FnMut(Entry<T>),
    ) -> Option<Result<usize, ReadError>>
    where
        T: Clone,
    {
        // One word holds the flag and the tail: a reader that sees the flag sees
        // the final tail, so it answers `Closed` only when nothing is left; one
        // that misses the flag waits and is woken by `close`.
        let state = self.load_state();
        let (closed, tail) = (state & CLOSED != 0, state >> SHIFT);
        if let Err(e) = self.check(after, tail) {
            return Some(Err(e));
        }
        if after == tail {
            return closed.then_some(Err(ReadError::Closed));
        }
        let end = tail.min(after.saturating_add(limit as u64));
        let mut read = 0;
        for revision in after + 1..=end {
            match self.place(revision).read(revision) {
                PlaceRead::Value(value) => {
                    sink(Entry { revision, value });
                    read += 1;
                }
                PlaceRead::Overwritten { by } if read == 0 => {
                    return Some(Err(ReadError::Gap {
                        after,
                        oldest: self.oldest_after_overwrite(by),
                    }));
                }
                PlaceRead::Overwritten { .. } => break,
                // The tail is published after its place's commit stamp (both
                // Release, read with Acquire), so every revision up to it is
                // committed or overwritten.
                PlaceRead::NotWritten => {
                    unreachable!("revision {revision} <= tail {tail} not committed")
                }
            }
        }
        (read > 0).then_some(Ok(read))
    }

    pub(super) fn latest(&self) -> Option<Entry<T>>
    where
        T: Clone,
    {
        loop {
            let revision = self.tail();
            if revision == 0 {
                return None;
            }
            match self.place(revision).read(revision) {
                PlaceRead::Value(value) => return Some(Entry { revision, value }),
                // The writer lapped this place since the tail load. The stamp that
                // says so was Release-stored after a newer tail, and the reader
                // Acquire-loaded it, so the next tail load is newer: only a writer
                // lapping the whole ring on every turn keeps this loop going
                // (lock-free, not wait-free).
                PlaceRead::Overwritten { .. } => {}
                PlaceRead::NotWritten => unreachable!("revision {revision} = tail not committed"),
            }
        }
    }

    pub(super) fn retained(&self) -> Vec<Entry<T>>
    where
        T: Clone,
    {
        let tail = self.tail();
        let first = tail.saturating_sub(self.capacity) + 1;
        let mut out = Vec::with_capacity((tail + 1 - first) as usize);
        for revision in first..=tail {
            match self.place(revision).read(revision) {
                PlaceRead::Value(value) => out.push(Entry { revision, value }),
                // Evicted while we copied: everything older is evicted too.
                PlaceRead::Overwritten { .. } => out.clear(),
                PlaceRead::NotWritten => unreachable!("revision {revision} <= tail not committed"),
            }
        }
        out
    }
}

impl<T> Ring<T> {
    /// Value nodes allocated so far: `capacity + 2` once full, plus one per node a
    /// stalled read kept from reuse (a high-water mark; see `pool.rs`).
    #[cfg(test)]
    pub(super) fn nodes(&self) -> usize {
        let Ok(mut locked) = self.lock(true) else {
            unreachable!("lock(true) never refuses")
        };
        locked.with_pool(|pool| pool.nodes())
    }
}

impl<T> fmt::Debug for Ring<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer")
            .field("capacity", &self.capacity)
            .field("tail", &self.tail())
            .field("closed", &self.is_closed())
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}
