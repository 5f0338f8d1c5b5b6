//! One receiver's pending state: sharded key slabs plus the first-touch queue.
//!
//! ## Layout (docs/design.md, "Own-value receivers: the core")
//!
//! - `shards`: `SHARDS` mutex-guarded [`Keys`] (a slab of entries with stable
//!   indices and a hash table of those indices, `slab.rs`), chosen by the key's
//!   hash. An entry holds the key (its only copy here), the pending value, the
//!   sends folded into it, and where its ticket is. A send that coalesces touches
//!   one shard of one receiver and nothing else.
//! - `queue`: the first-touch order as a list of tickets (see `tickets.rs`), each
//!   naming an entry by shard and slab index, plus the receiver's *cut epoch*.
//!   Only a send for a key that is not pending takes it.
//! - The consumer keeps a private ticket list (`Local`): it refills it by swapping
//!   the whole shared list out in O(1), so popping takes the queue lock once per
//!   batch, not once per event.
//!
//! Lock order is shard → queue.
//!
//! ## Why each race is safe (docs/design.md, "The cut is one instant" and "Own-value receivers: the core")
//!
//! - **Coalesce versus pop.** An entry's value is taken, merged into and
//!   annihilated only under its shard lock, and a ticket matches an entry only by
//!   the (segment, index) the entry recorded for it. A pop that wins takes the
//!   entry out of slab and table, so a later send finds no entry and appends the
//!   key afresh at the back. A send that wins merges first and the pop delivers
//!   the merged value.
//! - **The cut is one instant.** `cut_into` bumps the epoch and detaches the shared
//!   list in one queue-lock critical section (O(1): publishers are not held up
//!   by the size of the backlog). A send reads the epoch under its shard lock and
//!   merges only into an entry of the *current* epoch; an entry of an older epoch
//!   belongs to the cut, so the send detaches it from the table (the cut still
//!   reaches it through its ticket) and starts a fresh entry at the back of the
//!   new queue. Every send is therefore wholly before the cut (its effect is in
//!   the batch: it read the old epoch, and the drain takes the entry under the
//!   same shard lock after it) or wholly after (it read the new epoch, or its
//!   ticket landed in the new list). See `cut_into` for the ordering argument, and for
//!   how a shard whose entries all belong to the cut is handed over whole.
//! - **Annihilation leaves no residue.** The entry is removed from slab and
//!   table and its ticket unlinked from the shared list (O(1)); if the ticket
//!   already moved to the consumer's private list, the consumer skips it as stale
//!   when it gets there.

use super::lock::ShardMutex;
use super::slab::{pack, unpack, Entry, Keys, Slab, SHARDS};
use super::tickets::{Ticket, TicketList};
use crate::event::Event;
use crate::policy::{KeyFilter, Merge};
use crate::removal::Correction;
use crate::stats::{bump, Consumed, ReceiverStats};
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Notify, Ordering};
use crossbeam_utils::CachePadded;
use std::mem;
use std::num::NonZeroU32;
use std::panic::{self, AssertUnwindSafe};

/// A cut claims the tickets of a shard that it could not take over whole in
/// chunks of this many per lock acquisition: a publisher waits for at most one
/// chunk of claims on that shard.
const CLAIM_CHUNK: usize = 64;

/// The shard of a key hash. The table inside a shard uses 32 low bits (see
/// `slab::table_hash`): the shard comes from bits above them so they stay
/// independent.
///
/// Eight shards: enough that a few senders coalescing into different keys rarely
/// meet; few enough that their array costs an idle receiver 512 B (the whole idle
/// receiver stays under 1 KiB).
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
    /// The merge annihilated the key's pending value: the entry's key, dropped
    /// outside the lock.
    Annihilated(K),
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
/// Every counter but `filtered` is written only under `lock`, which the send
/// (or close) that changes it holds anyway, with a plain load and store
/// ([`bump`]): no read-modify-write, and the line is the one the lock already
/// brought into the writer's cache. A send stores `received` before any other
/// counter of the same critical section; `RxCore::stats` loads `received` after
/// the others, so what it subtracts never exceeds what it subtracts from.
///
/// `repr(C)`, lock first and `received` next: the one counter every send writes
/// shares the cache line the lock already brought in. Aligned to one 64-byte
/// line, not crossbeam's 128 (a pair of lines, against the adjacent-line
/// prefetcher): lock (8 B), table header (32 B), slab pointer (8 B) and the two
/// counters fit one line, and 8 shards then take 512 B per receiver. The rare
/// counters live in [`Rare`], once per receiver.
#[repr(C, align(64))]
struct Shard<K, V> {
    lock: ShardMutex<Keys<K, V>>,
    /// Sends that reached the receiver past its filter and landed here.
    received: AtomicU64,
    /// Sends its filter rejected. Counted before any lock is taken, so this one
    /// is a Relaxed `fetch_add` (of the shard the key hashes to, so concurrent
    /// rejections of different keys rarely share a line).
    filtered: AtomicU64,
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
            filtered: AtomicU64::new(0),
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
    shards: Box<[Shard<K, V>]>,
    rare: Rare,
    queue: CachePadded<QueueCell>,
    /// The cut epoch (a `u32`, see `Queue::epoch`). Read by every send; written
    /// only by a cut.
    epoch: AtomicU64,
    closed: AtomicBool,
    /// Set (after the hub's state word) when the send side closes, so an idle
    /// consumer polls this read-mostly line instead of the state word every send
    /// writes.
    tx_closed: AtomicBool,
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

fn event<K, V>(entry: Entry<K, V>) -> Event<K, V> {
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
        RxCore {
            filter,
            merge,
            max_pending: max_pending.map(|n| n as u64),
            shards: (0..SHARDS).map(|_| Shard::new(park)).collect(),
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
            closed: AtomicBool::new(false),
            tx_closed: AtomicBool::new(false),
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
        let filtered = sum(|s| &s.filtered);
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

    pub(crate) fn is_closed(&self) -> bool {
        // Acquire pairs with the Release in `close`: whoever sees the flag also sees
        // the hub-side state that led to it.
        self.closed.load(Ordering::Acquire)
    }

    /// Whether the send side closed. Acquire pairs with the Release in
    /// `mark_tx_closed`.
    pub(crate) fn tx_closed(&self) -> bool {
        self.tx_closed.load(Ordering::Acquire)
    }

    /// Tells the consumer the send side closed, and wakes it.
    pub(crate) fn mark_tx_closed(&self) {
        self.tx_closed.store(true, Ordering::Release);
        self.notify.notify(usize::MAX);
    }

    /// Marks the receiver closed; `true` the first time.
    pub(crate) fn close(&self) -> bool {
        !self.closed.swap(true, Ordering::AcqRel)
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

    /// Appends a ticket naming slab index `index` of shard `shard`; called with
    /// that shard locked, before the entry is stored there. Reports where the
    /// ticket went and whether the shared list was empty before.
    ///
    /// A bounded receiver with `max_pending` keys pending refuses (drop-new)
    /// and nothing changes. The count it compares is exact at this critical
    /// section: `live` changes only under this lock, and so does `taken` for a
    /// bounded receiver (a pop adds to it before it releases the taken key's
    /// shard, so no send can see that key gone while the count still holds it;
    /// a cut zeroes the pending count in the same section that makes it one
    /// instant).
    fn enqueue(&self, shard: usize, index: u32) -> Option<Queued> {
        let cell = &*self.queue;
        let mut q = cell.lock.lock();
        if let Some(max) = self.max_pending {
            // Relaxed: written only under this lock.
            // `taken <= live` here: a pop counts a value it took (which was
            // live), a cut sets `taken = live`, and a value a cut counted but
            // that is then annihilated is taken back out in `retire`.
            let pending = cell
                .live
                .load(Ordering::Relaxed)
                .checked_sub(q.taken)
                .expect("keybus: a bounded receiver counted more values taken than live");
            if pending >= max {
                return None;
            }
        }
        let ticket = q.shared.push_back(pack(shard, index));
        let queued = q.shared.len();
        // Plain stores under the lock (no read-modify-write). Release pairs with
        // the consumer's lock-free Acquire loads in `refill` and `len`.
        cell.queued.store(queued, Ordering::Release);
        let live = cell.live.load(Ordering::Relaxed);
        cell.live.store(live + 1, Ordering::Release);
        // The epoch is read under the queue lock, so it names the list the ticket
        // is really in, even if a cut ran since this send read `self.epoch`.
        Some(Queued {
            epoch: q.epoch,
            seg: q.seg,
            ticket: NonZeroU32::new(ticket + 1).expect("a ticket index is below u32::MAX"),
            first: queued == 1,
        })
    }

    /// Forgets an annihilated (or merge-panicked) pending value's ticket; called
    /// with its shard locked. `epoch` is the cut epoch the value became pending
    /// in.
    fn retire(&self, seg: u32, ticket: NonZeroU32, epoch: u32) {
        let cell = &*self.queue;
        let mut q = cell.lock.lock();
        if seg == q.seg {
            q.shared.remove(ticket.get() - 1);
            cell.queued.store(q.shared.len(), Ordering::Release);
        }
        // Otherwise the ticket is in the consumer's private list, which skips it.
        if self.max_pending.is_some() && epoch != q.epoch {
            // A cut started after this value became pending (a send read the
            // old epoch, then its merge ran while the cut's queue section
            // ran): that cut counted the value in `taken`, but it will find
            // the ticket stale and deliver nothing. Take it back out, or
            // `live - taken` would wrap once `live` drops below.
            q.taken = q
                .taken
                .checked_sub(1)
                .expect("keybus: a cut counted this value in `taken`");
        }
        let live = cell.live.load(Ordering::Relaxed);
        cell.live.store(
            live.checked_sub(1)
                .expect("keybus: a retired value was counted live"),
            Ordering::Release,
        );
    }

    /// Moves the shared list into the consumer's (empty) private list. O(1).
    fn refill(&self, local: &mut Local) -> bool {
        debug_assert!(local.private.is_empty());
        let cell = &*self.queue;
        // An empty queue costs the consumer one load, not the senders' lock. A
        // ticket pushed after this load is found by the waiter's next look (see
        // `wait.rs` for why the wake-up cannot be lost).
        if cell.queued.load(Ordering::Acquire) == 0 {
            return false;
        }
        let mut q = cell.lock.lock();
        if q.shared.is_empty() {
            return false;
        }
        mem::swap(&mut q.shared, &mut local.private);
        local.private_seg = q.seg;
        cell.queued.store(0, Ordering::Release);
        q.seg = q.seg.wrapping_add(1);
        true
    }

    /// Takes the entry `ticket` (of the list of segment `seg`) names, if it is
    /// still pending (consumer only, outside a cut). A bounded receiver also
    /// counts the take where senders check the bound, before the key's shard is
    /// released (see `enqueue`).
    fn claim(&self, ticket: Ticket, seg: u32) -> Option<Event<K, V>> {
        let (shard, index) = unpack(ticket.slot);
        let mut keys = self.shards[shard].lock.lock();
        let found = keys.take_ticket(index, ticket.index, seg);
        if found.is_some() && self.max_pending.is_some() {
            self.queue.lock.lock().taken += 1;
        }
        drop(keys);
        found.map(event)
    }

    /// Pops the oldest pending key (consumer only).
    pub(crate) fn pop(&self, local: &mut Local) -> Option<Event<K, V>> {
        loop {
            let ticket = match local.private.pop_front() {
                Some(t) => t,
                None if self.refill(local) => continue,
                None => return None,
            };
            if let Some(event) = self.claim(ticket, local.private_seg) {
                self.consumed.took(1, event.sends);
                return Some(event);
            }
            // A stale ticket: its value was annihilated after the ticket left the
            // shared list, or a hard close cleared it. In the second case stop
            // here: the next ticket's shard may not be cleared yet, and
            // delivering it would skip this one.
            if self.is_closed() {
                return None;
            }
        }
    }

    /// Takes everything pending as of one instant, in queue order (consumer only).
    ///
    /// The instant is the queue-lock critical section below, which bumps the epoch
    /// and detaches the shared list together. Ordering argument:
    /// - A send that pushed its ticket before it is in the detached list; one that
    ///   pushes after lands in the new list and stamps its entry with the new epoch
    ///   (it reads the epoch under the queue lock).
    /// - A send that merges into a detached key's entry holds that shard's lock
    ///   while it reads `self.epoch` and merges. If it locked the shard before the
    ///   drain visits the shard, the drain sees its merge; if after, it
    ///   happens-after the drain's lock, hence after the epoch store, so it reads
    ///   the new epoch and does not merge into the cut's value. A merge included
    ///   in the batch read the old epoch, so no send that happened-before it can
    ///   have read the new one (coherence): the batch is closed under
    ///   happens-before, i.e. one cut.
    ///
    /// The drain visits each shard once, under its lock. A shard whose newest
    /// entry is older than the cut's epoch holds only entries the cut owns (every
    /// entry made since the bump carries the new epoch; older cuts drained
    /// theirs): the cut takes its slab whole and clears its table (O(1) plus a
    /// memset of the control bytes) and then reads the entries its tickets name
    /// with no lock held and no probe. A shard where a send already made an entry
    /// of the new epoch is claimed ticket by ticket, `CLAIM_CHUNK` per lock.
    ///
    /// The batch is appended to `out`; returns how many events it holds. No
    /// allocation once `out` has room for the batch, unless sends race the cut
    /// into a shard it cannot take whole (`claim_mixed` then allocates its
    /// scratch lists).
    pub(crate) fn cut_into(&self, local: &mut Local, out: &mut Vec<Event<K, V>>) -> usize {
        // Nothing queued anywhere: the empty batch is the instant of this load (a
        // pending value always has its ticket in one of the two lists).
        if local.private.is_empty() && self.queue.queued.load(Ordering::Acquire) == 0 {
            return 0;
        }
        let (epoch, spare_seg) = {
            let mut q = self.queue.lock.lock();
            q.epoch = q.epoch.wrapping_add(1);
            // Release pairs with the Acquire in `deliver` (the lock order already
            // gives the ordering the argument above needs; this keeps the atomic's
            // own contract readable in isolation).
            self.epoch.store(u64::from(q.epoch), Ordering::Release);
            let spare_seg = q.seg;
            q.seg = q.seg.wrapping_add(1);
            mem::swap(&mut q.shared, &mut local.spare);
            self.queue.queued.store(0, Ordering::Release);
            if self.max_pending.is_some() {
                // Everything pending now belongs to this cut: to senders checking
                // the bound, nothing is pending any more (see `enqueue`). Relaxed:
                // `live` is written only under this lock.
                q.taken = self.queue.live.load(Ordering::Relaxed);
            }
            (q.epoch, spare_seg)
        };
        // Each shard once: take its slab whole if every entry in it is the cut's.
        let mut whole: [Option<Box<Slab<K, V>>>; SHARDS] = Default::default();
        let mut mixed = [false; SHARDS];
        for (s, shard) in self.shards.iter().enumerate() {
            let mut keys = shard.lock.lock();
            match keys.slab.as_deref() {
                Some(slab) if slab.newest == epoch => mixed[s] = true,
                Some(_) => {
                    keys.table.clear();
                    whole[s] = keys.slab.take();
                }
                None => {} // no entry: its tickets, if any, are stale
            }
        }
        let Local {
            private,
            private_seg,
            spare,
            ..
        } = &mut *local;
        let lists = [(private, *private_seg), (spare, spare_seg)];
        let total = lists.iter().map(|(l, _)| l.len()).sum();
        let start = out.len();
        if mixed.contains(&true) {
            out.extend(self.claim_mixed(lists, total, &mut whole, &mixed));
        } else {
            out.reserve(total);
            for (list, seg) in lists {
                list.drain(|t| {
                    let (s, index) = unpack(t.slot);
                    if let Some(e) = whole[s]
                        .as_deref_mut()
                        .and_then(|slab| slab.take_ticket_whole(index, t.index, seg))
                    {
                        out.push(event(e));
                    }
                });
            }
        }
        self.return_slabs(whole);
        let batch = out.len() - start;
        let sends: u64 = out[start..].iter().map(|e| e.sends).sum();
        if self.is_closed() {
            // A hard close raced the drain and may have cleared part of it: the
            // cut then falls after the close, which abandons everything. What
            // the cut had claimed is dropped, like what the close cleared.
            self.consumed.dropped(sends);
            out.truncate(start);
            0
        } else {
            self.consumed.took(batch as u64, sends);
            batch
        }
    }

    /// A cut's drain when some shards could not be taken whole: tickets of the
    /// shards taken whole are read from their slabs, the others are claimed
    /// under their shard's lock, grouped by shard, `CLAIM_CHUNK` per lock; the
    /// batch keeps queue order.
    fn claim_mixed(
        &self,
        lists: [(&mut TicketList, u32); 2],
        total: usize,
        whole: &mut [Option<Box<Slab<K, V>>>; SHARDS],
        mixed: &[bool; SHARDS],
    ) -> impl Iterator<Item = Event<K, V>> {
        let mut out: Vec<Option<Event<K, V>>> = Vec::with_capacity(total);
        // (position in `out`, ticket, segment) of each ticket of a mixed shard.
        let mut later: Vec<(usize, Ticket, u32)> = Vec::new();
        for (list, seg) in lists {
            list.drain(|t| {
                let (s, index) = unpack(t.slot);
                if mixed[s] {
                    later.push((out.len(), t, seg));
                    out.push(None);
                } else if let Some(e) = whole[s]
                    .as_deref_mut()
                    .and_then(|slab| slab.take_ticket_whole(index, t.index, seg))
                {
                    out.push(Some(event(e)));
                }
            });
        }
        // Stable: queue order within a shard (not needed for the batch's order,
        // which `out` keeps, but it keeps the claims' slab accesses in order).
        later.sort_by_key(|&(_, t, _)| unpack(t.slot).0);
        for chunk in later.chunk_by(|a, b| unpack(a.1.slot).0 == unpack(b.1.slot).0) {
            let shard = &self.shards[unpack(chunk[0].1.slot).0];
            for part in chunk.chunks(CLAIM_CHUNK) {
                let mut keys = shard.lock.lock();
                for &(pos, t, seg) in part {
                    out[pos] = keys.take_ticket(unpack(t.slot).1, t.index, seg).map(event);
                }
            }
        }
        out.into_iter().flatten()
    }

    /// Gives the emptied slabs a cut took whole back to their shards, if no
    /// send has made a new one there meanwhile, so that a receiver drained by
    /// cuts reuses its slabs' capacity instead of regrowing them.
    fn return_slabs(&self, whole: [Option<Box<Slab<K, V>>>; SHARDS]) {
        for (shard, slab) in self.shards.iter().zip(whole) {
            let Some(mut slab) = slab else { continue };
            // Every entry in it had its ticket in the cut's lists and was taken,
            // unless a hard close raced the cut; either way the rest is dropped
            // here, outside any lock.
            debug_assert!(slab.len() == 0 || self.is_closed());
            slab.clear();
            let mut keys = shard.lock.lock();
            if keys.slab.is_none() && !self.is_closed() {
                keys.slab = Some(slab);
            }
        }
    }
}

impl<K, V> RxCore<K, V>
where
    K: Eq + Clone,
{
    /// Makes `entries` (hash, key, value; a snapshot of the hub's table, in its
    /// order) pending with `sends == 0`. Called before the receiver is
    /// registered, so nothing races it.
    pub(crate) fn seed(&self, entries: impl IntoIterator<Item = (u64, K, V)>) {
        for (hash, key, value) in entries {
            let shard = shard_index(hash);
            let mut keys = self.shards[shard].lock.lock();
            let made = self.make_entry(&mut keys, shard, hash, key, value, 0, None);
            assert!(made.is_ok(), "the caller seeds at most max_pending keys");
        }
    }

    /// Fans one send into this receiver. Runs the key filter (no lock held) and the
    /// merge (this key's shard lock held, nothing else). If either panics, the panic
    /// continues after this receiver's state is repaired: a panicking merge drops
    /// the key's pending value here (conflate rule 9, docs/design.md).
    ///
    /// Two steps under the shard lock: [`Self::coalesce`] when the key has an
    /// entry, [`Self::start_pending`] when it has none.
    pub(crate) fn deliver(&self, hash: u64, key: &K, value: V) {
        // Relaxed: a stale `false` only delivers into a receiver that is closing,
        // whose values are dropped with it.
        if self.closed.load(Ordering::Relaxed) {
            return;
        }
        let shard = shard_index(hash);
        let cell = &self.shards[shard];
        if !self.filter.accepts(key) {
            // Relaxed: a count that orders nothing (and is in no conservation
            // sum); the only shard-counter RMW, and only on a rejection.
            cell.filtered.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut keys = cell.lock.lock();
        // Checked again under the shard lock: `clear` marks the receiver closed
        // before it empties each shard under that shard's lock, so once a shard
        // was cleared nothing enters it again (a value landing after a hard close
        // could otherwise be delivered past a hole the close made).
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        // Acquire pairs with the Release in `cut_into`. The argument that a cut is one
        // instant needs only that this load happens under the shard lock: see `cut_into`.
        let epoch = self.epoch.load(Ordering::Acquire) as u32;
        // `find` never reserves room for an insert (which could grow a full
        // table), so coalescing never allocates.
        let outcome = match keys.find(hash, key) {
            None => self.start_pending(cell, &mut keys, shard, hash, key, value, None),
            Some((_, entry)) if entry.epoch == epoch && matches!(self.merge, Merge::NewerWins) => {
                // The common case, inline: the default merge, in place. No user
                // code, nothing to repair if it unwinds (only `V`'s own drop runs
                // here, and an assignment re-initializes its place on unwind).
                bump(&cell.received, 1);
                entry.value = value;
                entry.sends += 1;
                Delivered::Done
            }
            Some((index, _)) => {
                self.coalesce(cell, &mut keys, shard, index, epoch, hash, key, value)
            }
        };
        drop(keys);
        match outcome {
            Delivered::Done => {}
            Delivered::Wake => {
                // A parked consumer last saw the shared list empty, so only the
                // send that makes it non-empty needs to wake it (the consumer
                // registers its listener before its last look; see `wait.rs`).
                // Every listener: a `Stream` poll may have left one registered
                // that nobody waits on.
                self.notify.notify(usize::MAX);
            }
            // Outside the lock: a key's or value's drop is user code.
            Delivered::Refused(key, value) => drop((key, value)),
            Delivered::Annihilated(key) => drop(key),
        }
    }

    /// The start-pending step: a send for a key with no entry in this shard's
    /// table gets an entry and a ticket at the back, unless the receiver is
    /// full. `detach` is the key's entry that a cut owns, if there is one: it
    /// leaves the table (the cut reaches it by its ticket) once the new entry
    /// is certain. Called with the key's shard locked.
    #[allow(clippy::too_many_arguments)]
    fn start_pending(
        &self,
        cell: &Shard<K, V>,
        keys: &mut Keys<K, V>,
        shard: usize,
        hash: u64,
        key: &K,
        value: V,
        detach: Option<u32>,
    ) -> Delivered<K, V> {
        // The one copy of the key is made before anything changes, so a
        // panicking `K::clone` leaves this receiver as it was.
        let key = key.clone();
        bump(&cell.received, 1);
        match self.make_entry(keys, shard, hash, key, value, 1, detach) {
            Ok(first) => Delivered::queued(first),
            Err((key, value)) => {
                self.rare.overflowed.fetch_add(1, Ordering::Release);
                Delivered::Refused(key, value)
            }
        }
    }

    /// Queues a ticket for a new entry and stores the entry in `shard`'s slab
    /// and table (after taking `detach` out of the table), or hands key and
    /// value back if a bounded receiver is full. Returns whether the shared
    /// list was empty before. Called with the shard locked; runs no user code.
    #[allow(clippy::too_many_arguments)]
    fn make_entry(
        &self,
        keys: &mut Keys<K, V>,
        shard: usize,
        hash: u64,
        key: K,
        value: V,
        sends: u64,
        detach: Option<u32>,
    ) -> Result<bool, (K, V)> {
        // May panic (a full shard) before anything changed.
        let index = keys.slab_mut().next_index();
        let Some(queued) = self.enqueue(shard, index) else {
            return Err((key, value));
        };
        let hash32 = hash as u32;
        if let Some(old) = detach {
            let was_indexed = keys.unindex(hash32, old);
            debug_assert!(was_indexed, "the cut's entry was found in the table");
        }
        let slab = keys.slab_mut();
        slab.newest = queued.epoch;
        let stored = slab.insert(Entry {
            key,
            value,
            sends,
            hash: hash32,
            epoch: queued.epoch,
            seg: queued.seg,
            ticket: queued.ticket,
        });
        debug_assert_eq!(stored, index);
        keys.index(hash32, index);
        Ok(queued.first)
    }

    /// The coalesce step: a send for a key that has an entry merges into its
    /// pending value of the current epoch, or, if the entry's value belongs to a
    /// cut, starts a fresh entry at the back. Called with the key's shard locked;
    /// a panicking merge unwinds from here with the shard repaired.
    #[allow(clippy::too_many_arguments)]
    fn coalesce(
        &self,
        cell: &Shard<K, V>,
        keys: &mut Keys<K, V>,
        shard: usize,
        index: u32,
        epoch: u32,
        hash: u64,
        key: &K,
        value: V,
    ) -> Delivered<K, V> {
        let slab = keys
            .slab
            .as_deref_mut()
            .expect("an indexed entry has a slab");
        let entry = slab.get_mut(index).expect("the table names full slots");
        if entry.epoch != epoch {
            // The entry's value belongs to a cut that has not drained it yet:
            // leave it to the cut and start afresh at the back.
            return self.start_pending(cell, keys, shard, hash, key, value, Some(index));
        }
        bump(&cell.received, 1);
        if let Merge::NewerWins = &self.merge {
            // The default merge, in place: no user code, nothing to repair if
            // it unwinds (only `V`'s own drop runs here, and an assignment
            // re-initializes its place on unwind).
            entry.value = value;
            entry.sends += 1;
            return Delivered::Done;
        }
        // The merge consumes the pending value: vacate the slot (its index stays
        // reserved, and table and ticket still name it), and put the entry back
        // only if the merge returns a value.
        let Entry {
            key: own_key,
            value: prev,
            sends,
            hash: hash32,
            epoch,
            seg,
            ticket,
        } = slab.vacate(index);
        let merge = &self.merge;
        match panic::catch_unwind(AssertUnwindSafe(|| merge.apply(prev, value))) {
            Ok(Some(value)) => {
                slab.restore(
                    index,
                    Entry {
                        key: own_key,
                        value,
                        sends: sends + 1,
                        hash: hash32,
                        epoch,
                        seg,
                        ticket,
                    },
                );
                Delivered::Done
            }
            Ok(None) => {
                self.rare
                    .annihilated
                    .fetch_add(sends + 1, Ordering::Release);
                slab.release(index);
                keys.unindex(hash32, index);
                self.retire(seg, ticket, epoch);
                Delivered::Annihilated(own_key)
            }
            Err(payload) => {
                self.rare.dropped.fetch_add(sends + 1, Ordering::Release);
                slab.release(index);
                keys.unindex(hash32, index);
                self.retire(seg, ticket, epoch);
                // The caller's shard guard is released as this unwinds.
                panic::resume_unwind(payload);
            }
        }
    }

    /// A copy of the oldest pending key's event (consumer only).
    pub(crate) fn peek(&self, local: &mut Local) -> Option<Event<K, V>>
    where
        V: Clone,
    {
        loop {
            if local.private.is_empty() && !self.refill(local) {
                return None;
            }
            let ticket = local.private.front().expect("refilled");
            let (shard, index) = unpack(ticket.slot);
            let keys = self.shards[shard].lock.lock();
            let found = keys
                .slab
                .as_deref()
                .and_then(|slab| slab.get(index))
                .filter(|e| e.is_ticket(ticket.index, local.private_seg))
                .map(|e| Event::new(e.key.clone(), e.value.clone(), e.sends));
            drop(keys);
            match found {
                Some(event) => return Some(event),
                None if self.is_closed() => return None,
                None => drop(local.private.pop_front()), // stale ticket
            }
        }
    }
}
