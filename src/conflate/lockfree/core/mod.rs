//! One own-value receiver's pending state, `RxCore`: its sharded key slabs
//! ([`Keys`]) plus its first-touch ticket queue, and the consumer's private
//! ticket list, `Local` (docs/design.md, "Own-value receivers: the core"; its
//! cut: "The cut is one instant").

mod send;
mod take;

use super::close_flags::{CloseFlags, Closing};
use super::lock::{ShardMutex, ShardMutexGuard};
use super::slab::{pack, unpack, Keys, Pending, Slab, SHARDS};
use super::stripes::ThreadCounts;
use super::tickets::{Ticket, TicketList};
use crate::conflate::common::counters::{bump, Consumed};
use crate::conflate::common::event::Event;
use crate::conflate::common::policy::{KeyFilter, Merge};
use crate::conflate::common::removal::Correction;
use crate::conflate::common::stats::ReceiverStats;
use crate::sync::{AtomicU64, AtomicUsize, Notify, Ordering};
use crossbeam_utils::CachePadded;
use std::any::Any;
use std::mem;
use std::num::NonZeroU32;
use std::panic::{self, AssertUnwindSafe};
use std::ptr;

/// A cut claims the tickets of a shard that it could not take over whole in
/// chunks of this many per lock acquisition: a publisher waits for at most one
/// chunk of claims on that shard.
const CLAIM_CHUNK: usize = 64;

/// The shard of a key hash. The table inside a shard uses 32 low bits (see
/// `slab::table_hash`): the shard comes from bits above them so they stay
/// independent.
///
/// Eight shards: enough that a few senders coalescing into different keys rarely
/// meet; few enough that their array costs an idle receiver 1 KiB (see
/// [`Shard`]).
pub(crate) fn shard_index(hash: u64) -> usize {
    (hash >> 40) as usize % SHARDS
}

/// What delivering one send did, for the work left once the shard lock is
/// released.
enum Delivered<K, V> {
    /// Nothing left to do.
    Done,
    /// A key became pending while the shared list was empty: wake the consumer.
    Wake,
    /// A full bounded receiver refused the send: the copy of the key made for it
    /// and the value, dropped outside the lock.
    Refused(K, V),
}

impl<K, V> Delivered<K, V> {
    fn queued(first: bool) -> Self {
        if first {
            Delivered::Wake
        } else {
            Delivered::Done
        }
    }
}

/// Where a new entry's ticket went, as `enqueue` reports it.
struct Queued {
    epoch: u32,
    seg: u32,
    ticket: NonZeroU32,
    /// The shared list was empty before.
    first: bool,
}

/// One shard of a receiver's keys, with the accounting of the sends that
/// landed in it.
///
/// Its counter is written only under `lock`, which the send
/// (or close) that changes it holds anyway, with a plain load and store
/// ([`bump`]): no read-modify-write, and the line is the one the lock already
/// brought into the writer's cache. A send stores `received` before any other
/// counter of the same critical section; `RxCore::stats` loads `received` after
/// the others, so what it subtracts never exceeds what it subtracts from.
///
/// `repr(C)`, lock first and `received` next: the one counter every send writes
/// shares the cache line the lock already brought in. Aligned to 64-byte
/// lines, not crossbeam's 128 (a pair of lines, against the adjacent-line
/// prefetcher). The fields take 64 B (the lock 12 and 4 of padding, table header
/// 32, slab pointer 8, the counter 8): one line, and 8 shards 512 B per
/// receiver. The rare counters live in [`Rare`], once per receiver, and
/// `filtered` in [`RxCore`]'s per-thread count.
#[repr(C, align(64))]
struct Shard<K, V> {
    lock: ShardMutex<Keys<K, V>>,
    /// Sends that reached the receiver past its filter and landed here.
    received: AtomicU64,
}

/// A receiver's rare counters, once per receiver rather than per shard: written
/// under different shard locks, so with a Release `fetch_add` (an RMW, but only
/// on annihilation, overflow and close). A send's store of `received` precedes
/// them in its critical section, and `RxCore::stats` loads them (Acquire)
/// before any `received`, so what it subtracts never exceeds what it subtracts
/// from.
struct Rare {
    annihilated: AtomicU64,
    overflowed: AtomicU64,
    dropped: AtomicU64,
}

impl<K, V> Shard<K, V> {
    /// `park`: the receiver's merge is user code, which runs under this lock.
    fn new(park: bool) -> Self {
        Shard {
            lock: ShardMutex::new(park, Keys::default()),
            received: AtomicU64::new(0),
        }
    }
}

struct Queue {
    shared: TicketList,
    /// The segment of `shared`: bumped (wrapping) whenever `shared` is swapped
    /// out, so an entry whose ticket was pushed in an older segment knows its
    /// ticket is no longer in `shared`. An entry that exists has its ticket in
    /// `shared` or in the consumer's lists, so live segments are at most two
    /// apart (three during a cut) and wrapping never confuses them.
    seg: u32,
    /// The cut epoch (wrapping); mirrored in `RxCore::epoch` for senders holding
    /// only a shard. Live entries are of this epoch or, during a cut, the one
    /// before (a cut drains every older entry before the consumer can start the
    /// next one), so comparing for equality is exact.
    epoch: u32,
    /// Bounded receivers only: the values the consumer has taken, as senders
    /// must see it (pending = `live - taken`, both read under this lock). A pop
    /// adds here before it releases the taken key's shard; a cut sets it to
    /// `live` in its own critical section (every value then pending belongs to
    /// the cut). See `enqueue`.
    taken: u64,
}

/// The queue plus what the consumer may read of it without taking the lock.
///
/// Every field is written only under `lock`, with plain stores; the atomics exist
/// so the consumer can read them lock-free. That keeps the consumer from taking
/// the lock every send needs just to learn the queue is empty, and keeps every
/// read-modify-write of the pending count off the cross-core path.
struct QueueCell {
    lock: ShardMutex<Queue>,
    /// Tickets in the shared list.
    queued: AtomicUsize,
    /// Values that became pending (one per ticket ever pushed), less those that
    /// stopped pending without being taken (annihilated, or dropped by a
    /// panicking merge). One word rather than two counters: read as two loads,
    /// a key pushed and annihilated between them made `len()` wrap.
    live: AtomicU64,
}

/// The consumer's private state: tickets taken from the shared list in one swap
/// (and the segment they were pushed in), and an empty list to swap in at the
/// next cut (kept to reuse its capacity). What it took is counted in
/// `RxCore::consumed`, where watches read it.
#[derive(Default)]
pub(crate) struct Local {
    private: TicketList,
    private_seg: u32,
    spare: TicketList,
}

pub(crate) struct RxCore<K, V> {
    filter: KeyFilter<K>,
    merge: Merge<V>,
    /// `max_pending`, if bounded.
    max_pending: Option<u64>,
    /// An array, not a slice: `shard_index` is below `SHARDS`, so indexing
    /// it needs no bounds check.
    shards: Box<[Shard<K, V>; SHARDS]>,
    rare: Rare,
    /// Sends its filter rejected: counted before any lock is taken, by each
    /// sending thread in a slot of its own (no shared read-modify-write;
    /// conflate rule 13). Slots only with a key filter: no other receiver
    /// rejects anything.
    filtered: ThreadCounts,
    queue: CachePadded<QueueCell>,
    /// The cut epoch (a `u32`, see `Queue::epoch`). Read by every send; written
    /// only by a cut.
    epoch: AtomicU64,
    flags: CloseFlags,
    pub(crate) notify: Notify,
    /// Values taken (`delivered`, so pending = live - delivered), the sends
    /// folded into them, and the sends of values a cut claimed and then
    /// discarded because a hard close raced it: written by the consumer only.
    consumed: CachePadded<Consumed>,
    /// The receiver's number and name (`Hub::receivers`, watches).
    pub(crate) id: u64,
    pub(crate) name: Option<std::sync::Arc<str>>,
    /// With tombstones: what the consumer's record took without handing on.
    correction: Option<std::sync::Arc<Correction>>,
}

fn event<K, V>(entry: Pending<K, V>) -> Event<K, V> {
    Event::new(entry.key, entry.value, entry.sends)
}

impl<K, V> RxCore<K, V> {
    pub(crate) fn new(
        filter: KeyFilter<K>,
        merge: Merge<V>,
        max_pending: Option<usize>,
        id: u64,
        name: Option<std::sync::Arc<str>>,
        correction: Option<std::sync::Arc<Correction>>,
    ) -> Self {
        let park = !matches!(merge, Merge::NewerWins);
        let filtered = ThreadCounts::new(!matches!(filter, KeyFilter::All));
        RxCore {
            filter,
            filtered,
            merge,
            max_pending: max_pending.map(|n| n as u64),
            shards: Box::new(std::array::from_fn(|_| Shard::new(park))),
            rare: Rare {
                annihilated: AtomicU64::new(0),
                overflowed: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
            },
            queue: CachePadded::new(QueueCell {
                // No user code runs under the queue's lock: it spins.
                lock: ShardMutex::new(
                    false,
                    Queue {
                        shared: TicketList::default(),
                        seg: 0,
                        epoch: 0,
                        taken: 0,
                    },
                ),
                queued: AtomicUsize::new(0),
                live: AtomicU64::new(0),
            }),
            epoch: AtomicU64::new(0),
            flags: CloseFlags::new(),
            notify: Notify::new(),
            consumed: CachePadded::new(Consumed::default()),
            id,
            name,
            correction,
        }
    }

    /// The receiver's accounting, read without a lock (see `Shard` for why the
    /// settled counters are loaded before `received`: Acquire here pairs with
    /// the Release of [`bump`]). The consumer's counts are loaded first too:
    /// its takes come after the sends they count. Any thread may call it (the
    /// receiver's watches do).
    pub(crate) fn stats(&self) -> ReceiverStats {
        match &self.correction {
            Some(c) => c.correct(|| self.queue_stats()),
            None => self.queue_stats(),
        }
    }

    /// [`Self::stats`] as the queue counts them (before a tombstone record's
    /// correction).
    fn queue_stats(&self) -> ReceiverStats {
        let sum = |field: fn(&Shard<K, V>) -> &AtomicU64| -> u64 {
            self.shards
                .iter()
                .map(|s| field(s).load(Ordering::Acquire))
                .sum()
        };
        let (delivered, folded, cut_dropped) = self.consumed.load();
        let annihilated = self.rare.annihilated.load(Ordering::Acquire);
        let overflowed = self.rare.overflowed.load(Ordering::Acquire);
        let dropped = self.rare.dropped.load(Ordering::Acquire) + cut_dropped;
        let filtered = self.filtered.sum();
        let received = sum(|s| &s.received);
        let pending = if self.is_closed() {
            0
        } else {
            self.len() as u64
        };
        ReceiverStats::derived(
            received,
            filtered,
            delivered,
            folded,
            annihilated,
            overflowed,
            dropped,
            pending,
        )
    }

    /// Pending keys (exact when no send or receive is in progress; any
    /// thread may ask). Acquire pairs with the Release stores under the queue
    /// lock and with the consumer's store of its count.
    pub(crate) fn len(&self) -> usize {
        // `live` is one word, so it cannot tear: values pushed and retired
        // are netted under the queue lock. The consumer's count is loaded
        // first: each value it counts was pushed (under the queue lock, before
        // the take) and is never retired, so the `live` loaded after it holds
        // it. Saturating all the same: a reader must never panic.
        let (taken, _, _) = self.consumed.load();
        let live = self.queue.live.load(Ordering::Acquire);
        usize::try_from(live.saturating_sub(taken)).unwrap_or(usize::MAX)
    }

    /// Drops every pending value and wakes the consumer. Sends still in flight may
    /// land afterwards; their values are dropped with the core.
    pub(crate) fn clear(&self) {
        for shard in self.shards.iter() {
            let mut guard = shard.lock.lock();
            let keys = mem::take(&mut *guard);
            // Under the shard lock, like every writer of these counters. No
            // user code runs in the sum.
            let sends = keys.slab.as_deref().map_or(0, Slab::sends);
            self.rare.dropped.fetch_add(sends, Ordering::Release);
            drop(guard);
            drop(keys); // values drop outside the lock
        }
        let shared = {
            let mut q = self.queue.lock.lock();
            self.queue.queued.store(0, Ordering::Release);
            mem::take(&mut q.shared)
        };
        drop(shared);
        self.notify.notify(usize::MAX);
    }
}

impl<K, V> Closing for RxCore<K, V> {
    fn close_flags(&self) -> &CloseFlags {
        &self.flags
    }
    fn close_notify(&self) -> &Notify {
        &self.notify
    }
}
