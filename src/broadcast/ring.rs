//! The shared state behind every `Buffer` handle and `Reader`: the slots, the
//! committed tail, the close flag, the writer lock and the wake-up notifier.

use super::pool::Pool;
use super::slot::{Slot, SlotRead};
use crate::sync::{lock, AtomicBool, AtomicU64, AtomicUsize, Mutex, Notify, Ordering};
use crate::{AppendError, Entry, ReadError};
use std::fmt;

/// What only appenders touch. Readers never take this lock.
struct Writer<T> {
    /// The last committed revision (the writer's own copy of `tail`).
    revision: u64,
    /// Evicted nodes, recycled once no read has them pinned (no allocation per
    /// append once the ring is full).
    pool: Pool<T>,
}

pub(super) struct Ring<T> {
    /// `capacity + 1` slots; revision `r` lives in `slots[r % (capacity + 1)]`.
    ///
    /// The extra slot means an append in progress only ever rewrites a slot whose
    /// revision is already outside retention (`r - capacity - 1` when writing `r`).
    /// The logical eviction of `r - capacity` therefore happens exactly at the
    /// commit of `r` (the tail store), so the tail alone decides `Gap` at the
    /// `a - 1` boundary, just as the one-mutex baseline does.
    slots: Box<[Slot<T>]>,
    capacity: u64,
    /// The last committed revision. Release-stored by the append that committed it
    /// after its slot's commit stamp; Acquire-loaded by readers, so every revision
    /// up to the loaded tail is committed in its slot (or already overwritten by a
    /// later one, which the slot's stamp reveals).
    tail: AtomicU64,
    /// Set once, under the writer lock, after the last append that will ever
    /// commit. Readers Acquire-load it *before* the tail: a reader that sees it set
    /// then sees the final tail, so `Closed` is only answered once nothing is left.
    closed: AtomicBool,
    /// `Buffer` handles alive (readers do not count): the last one to drop closes
    /// the ring, since nothing can ever be appended again.
    handles: AtomicUsize,
    writer: Mutex<Writer<T>>,
    pub(super) notify: Notify,
    generation: u64,
}

impl<T> Ring<T> {
    pub(super) fn new(capacity: usize) -> Self {
        assert!(
            capacity > 0,
            "broadcast::Buffer capacity must be at least 1"
        );
        let slots = (0..=capacity).map(|_| Slot::new()).collect();
        Ring {
            slots,
            capacity: capacity as u64,
            tail: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            handles: AtomicUsize::new(1),
            writer: Mutex::new(Writer {
                revision: 0,
                pool: Pool::new(),
            }),
            notify: Notify::new(),
            generation: super::generation::next(),
        }
    }

    pub(super) fn capacity(&self) -> usize {
        self.capacity as usize
    }

    pub(super) fn generation(&self) -> u64 {
        self.generation
    }

    fn slot(&self, revision: u64) -> &Slot<T> {
        &self.slots[(revision % (self.capacity + 1)) as usize]
    }

    /// Acquire pairs with the Release store in `push_while_locked`: revisions up to the
    /// returned value are committed in their slots.
    pub(super) fn tail(&self) -> u64 {
        self.tail.load(Ordering::Acquire)
    }

    /// Acquire pairs with `close`'s Release store, so a caller that sees `true`
    /// also sees the final tail.
    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Appends `value`, or hands it back once closed.
    pub(super) fn append(&self, value: T) -> Result<u64, AppendError<T>> {
        let mut w = lock(&self.writer);
        // Relaxed: `close` stores under the same lock, which orders the two.
        if self.closed.load(Ordering::Relaxed) {
            return Err(AppendError(value));
        }
        let (revision, retired) = self.push_while_locked(&mut w, value);
        drop(w);
        self.notify.notify(usize::MAX);
        drop(retired);
        Ok(revision)
    }

    /// Like `append`, but answers the current tail without appending when `value`
    /// equals the latest value.
    pub(super) fn append_if_changed(&self, value: T) -> Result<u64, AppendError<T>>
    where
        T: PartialEq,
    {
        let mut w = lock(&self.writer);
        // Relaxed: as in `append`.
        if self.closed.load(Ordering::Relaxed) {
            return Err(AppendError(value));
        }
        let latest = w.revision;
        // User code (PartialEq) runs before anything changes, so a panic here
        // leaves the ring as it was (and `sync::lock` ignores the poison).
        if latest > 0
            && self
                .slot(latest)
                .with_value_while_locked(|prev| prev == Some(&value))
        {
            return Ok(latest);
        }
        let (revision, retired) = self.push_while_locked(&mut w, value);
        drop(w);
        self.notify.notify(usize::MAX);
        drop(retired);
        Ok(revision)
    }

    /// Commits `value` as the next revision. What it returns (the value of a
    /// recycled node, long evicted) is dropped by the caller after the writer lock
    /// is released, so no user `Drop` runs inside the critical section (and
    /// nothing in it can panic but allocation, before anything changed).
    fn push_while_locked(&self, w: &mut Writer<T>, value: T) -> (u64, Option<T>) {
        let revision = w.revision + 1;
        // A claimed evicted node, or a fresh one when every node tried is
        // pinned by a read in progress: never a wait.
        let (node, retired) = w.pool.take(value);
        if let Some(evicted) = self.slot(revision).write_while_locked(revision, node) {
            w.pool.retire(evicted);
        }
        w.revision = revision;
        // Release pairs with every reader's Acquire load of the tail: the slot's
        // commit stamp (and value) is visible to whoever sees this revision.
        self.tail.store(revision, Ordering::Release);
        (revision, retired)
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

    pub(super) fn close(&self) {
        let w = lock(&self.writer);
        // Release pairs with the readers' Acquire load in `read_with` and
        // `is_closed`; under the writer lock, so no append commits after it.
        self.closed.store(true, Ordering::Release);
        drop(w);
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

    /// The oldest retained revision once a reader found a slot overwritten by
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
        // Closed first, tail second: a reader that sees the flag then sees the
        // final tail (see the `closed` field), so it answers `Closed` only when
        // nothing is left; one that misses the flag waits and is woken by `close`.
        let closed = self.is_closed();
        let tail = self.tail();
        if let Err(e) = self.check(after, tail) {
            return Some(Err(e));
        }
        if after == tail {
            return closed.then_some(Err(ReadError::Closed));
        }
        let end = tail.min(after.saturating_add(limit as u64));
        let mut read = 0;
        for revision in after + 1..=end {
            match self.slot(revision).read(revision) {
                SlotRead::Value(value) => {
                    sink(Entry { revision, value });
                    read += 1;
                }
                SlotRead::Overwritten { by } if read == 0 => {
                    return Some(Err(ReadError::Gap {
                        after,
                        oldest: self.oldest_after_overwrite(by),
                    }));
                }
                SlotRead::Overwritten { .. } => break,
                // The tail is published after its slot's commit stamp (both
                // Release, read with Acquire), so every revision up to it is
                // committed or overwritten.
                SlotRead::NotWritten => {
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
            match self.slot(revision).read(revision) {
                SlotRead::Value(value) => return Some(Entry { revision, value }),
                // The writer lapped this slot since the tail load. The stamp that
                // says so was Release-stored after a newer tail, and the reader
                // Acquire-loaded it, so the next tail load is newer: only a writer
                // lapping the whole ring on every turn keeps this loop going
                // (lock-free, not wait-free).
                SlotRead::Overwritten { .. } => {}
                SlotRead::NotWritten => unreachable!("revision {revision} = tail not committed"),
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
            match self.slot(revision).read(revision) {
                SlotRead::Value(value) => out.push(Entry { revision, value }),
                // Evicted while we copied: everything older is evicted too.
                SlotRead::Overwritten { .. } => out.clear(),
                SlotRead::NotWritten => unreachable!("revision {revision} <= tail not committed"),
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
        lock(&self.writer).pool.nodes()
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
