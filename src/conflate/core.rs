//! One receiver's pending state: sharded key slots plus the first-touch queue.
//!
//! ## Layout
//!
//! - `shards`: `SHARDS` mutex-guarded hash tables, chosen by the key's hash. A slot
//!   holds the key's pending value (`live`) and, only during a cut, the value that
//!   the cut owns (`cut`). A send that coalesces touches one shard of one receiver
//!   and nothing else.
//! - `queue`: the first-touch order as a list of tickets (see `tickets.rs`), plus the
//!   receiver's *cut epoch*. Only a send for a key that is not pending takes it.
//! - The consumer keeps a private ticket list (`Local`): it refills it by swapping
//!   the whole shared list out in O(1), so popping takes the queue lock once per
//!   batch, not once per event.
//!
//! Lock order is shard → queue; the consumer never holds both.
//!
//! ## Why each race is safe (docs/design.md, "The cut is one instant" and "Coalescing versus pop")
//!
//! - **Coalesce versus pop.** A slot's `live` value is taken, merged into and
//!   annihilated only under its shard lock, and a ticket matches a slot only by its
//!   unique `id`. A pop that wins takes the value and removes the slot, so a later
//!   send finds no slot and appends the key afresh at the back. A send that wins
//!   merges first and the pop delivers the merged value.
//! - **The cut is one instant.** `cut` bumps the epoch and detaches the shared list
//!   in one queue-lock critical section (O(1): publishers are not held up by the
//!   size of the backlog). A send reads the epoch under its shard lock and merges
//!   only into a slot of the *current* epoch; a slot of an older epoch belongs to the
//!   cut, so the send parks that value in `cut` for the drain and starts a fresh
//!   pending value at the back of the new queue. Every send is therefore wholly
//!   before the cut (its effect is in the batch: it read the old epoch, and the drain
//!   takes the slot under the same shard lock after it) or wholly after (it read the
//!   new epoch, or its ticket landed in the new list). See `cut` for the ordering
//!   argument.
//! - **Annihilation leaves no residue.** The slot is removed and its ticket unlinked
//!   from the shared list (O(1)); if the ticket already moved to the consumer's
//!   private list, the consumer skips it as stale when it gets there.

use super::tickets::{Ticket, TicketList};
use crate::event::Event;
use crate::policy::{KeyFilter, Merge};
use crate::stats::{bump, ReceiverStats};
use crate::sync::{lock, AtomicBool, AtomicU64, AtomicUsize, Mutex, Notify, Ordering};
use crossbeam_utils::CachePadded;
use hashbrown::hash_table::{AbsentEntry, HashTable, OccupiedEntry};
use std::mem;
use std::panic::{self, AssertUnwindSafe};

/// A cut of at least this many tickets claims them grouped by shard (see
/// `claim_grouped`); a smaller one claims ticket by ticket, which costs less than
/// the grouping's bookkeeping.
const GROUPED_CLAIM_MIN: usize = 512;

/// Shards per receiver. Enough that a few senders coalescing into different keys
/// rarely meet; small enough that their array costs an idle receiver 512 B (the
/// whole idle receiver stays under 1 KiB; docs/design.md, "The receiver core").
pub(crate) const SHARDS: usize = 8;

/// The shard of a key hash. The table inside a shard uses the low bits (bucket)
/// and the top 7 (tag): the shard comes from bits in between so they stay
/// independent.
pub(crate) fn shard_index(hash: u64) -> usize {
    (hash >> 40) as usize % SHARDS
}

/// Takes the value `ticket` names out of its (locked) shard, if still pending.
fn take_from<K: Eq, V>(
    table: &mut HashTable<Slot<K, V>>,
    ticket: Ticket<K>,
) -> Option<Event<K, V>> {
    let Ok(mut occupied) = table.find_entry(ticket.hash, |s| s.key == ticket.key) else {
        return None;
    };
    let slot = occupied.get_mut();
    let p = slot.take(ticket.id)?;
    if slot.is_vacant() {
        occupied.remove();
    }
    Some(Event::new(ticket.key, p.value, p.sends))
}

/// What delivering one send did, for the work left once the shard lock is
/// released.
enum Delivered<K, V> {
    /// Nothing left to do.
    Done,
    /// A key became pending while the shared list was empty: wake the consumer.
    Wake,
    /// A full bounded receiver refused the send: the copies of the key made for
    /// it and the value, dropped outside the lock.
    Refused((Option<K>, (K, V))),
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

/// Where a pending value's ticket is: its unique id, the shared-list segment it was
/// pushed into, and its index there.
#[derive(Clone, Copy, Debug)]
struct TicketRef {
    id: u64,
    seg: u64,
    idx: u32,
}

struct Pending<V> {
    value: V,
    sends: u64,
    epoch: u64,
    ticket: TicketRef,
}

struct Slot<K, V> {
    key: K,
    hash: u64,
    /// The key's pending value in the current epoch (or in an older one, until a
    /// send or the drain notices the cut).
    live: Option<Pending<V>>,
    /// A value that a cut owns and has not drained yet. Boxed: it exists only while
    /// a cut races a send for the same key.
    cut: Option<Box<Pending<V>>>,
}

impl<K, V> Slot<K, V> {
    fn is_vacant(&self) -> bool {
        self.live.is_none() && self.cut.is_none()
    }

    /// Takes the value `id` names, if it is still here.
    fn take(&mut self, id: u64) -> Option<Pending<V>> {
        if self.live.as_ref().is_some_and(|p| p.ticket.id == id) {
            return self.live.take();
        }
        if self.cut.as_ref().is_some_and(|p| p.ticket.id == id) {
            return self.cut.take().map(|b| *b);
        }
        None
    }
}

/// One shard of a receiver's key slots, with the accounting of the sends that
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
/// prefetcher): the hot fields fit one line, and 8 shards then take 512 B, not
/// 1 KiB, per receiver. The rare counters live in [`Rare`], once per receiver.
#[repr(C, align(64))]
struct Shard<K, V> {
    lock: Mutex<HashTable<Slot<K, V>>>,
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
    fn new() -> Self {
        Shard {
            lock: Mutex::new(HashTable::new()),
            received: AtomicU64::new(0),
            filtered: AtomicU64::new(0),
        }
    }
}

struct Queue<K> {
    shared: TicketList<K>,
    /// Bumped whenever `shared` is swapped out: a `TicketRef` with an older segment
    /// is no longer in `shared`.
    seg: u64,
    /// The cut epoch; mirrored in `RxCore::epoch` for senders holding only a shard.
    epoch: u64,
    next_id: u64,
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
struct QueueCell<K> {
    lock: Mutex<Queue<K>>,
    /// Tickets in the shared list.
    queued: AtomicUsize,
    /// Values that became pending (one per ticket ever pushed), less those that
    /// stopped pending without being taken (annihilated, or dropped by a
    /// panicking merge). One word rather than two counters: read as two loads,
    /// a key pushed and annihilated between them made `len()` wrap.
    live: AtomicU64,
}

/// The consumer's private state: tickets taken from the shared list in one swap,
/// an empty list to swap in at the next cut (kept to reuse its capacity), and how
/// many values the consumer took. Pending = live - taken.
pub(crate) struct Local<K> {
    private: TicketList<K>,
    spare: TicketList<K>,
    taken: u64,
    /// The sum of `sends` over the events taken (`ReceiverStats::folded`).
    folded: u64,
    /// Sends folded into values a cut claimed and then discarded because a hard
    /// close raced it (counted in `ReceiverStats::dropped`).
    dropped: u64,
}

impl<K> Default for Local<K> {
    fn default() -> Self {
        Local {
            private: TicketList::default(),
            spare: TicketList::default(),
            taken: 0,
            folded: 0,
            dropped: 0,
        }
    }
}

pub(crate) struct RxCore<K, V> {
    filter: KeyFilter<K>,
    merge: Merge<V>,
    /// `max_pending`, if bounded.
    max_pending: Option<u64>,
    shards: Box<[Shard<K, V>]>,
    rare: Rare,
    queue: CachePadded<QueueCell<K>>,
    /// Read by every send; written only by a cut or a close.
    epoch: AtomicU64,
    closed: AtomicBool,
    /// Set (after the hub's state word) when the send side closes, so an idle
    /// consumer polls this read-mostly line instead of the state word every send
    /// writes.
    tx_closed: AtomicBool,
    pub(crate) notify: Notify,
}

impl<K, V> RxCore<K, V> {
    pub(crate) fn new(filter: KeyFilter<K>, merge: Merge<V>, max_pending: Option<usize>) -> Self {
        RxCore {
            filter,
            merge,
            max_pending: max_pending.map(|n| n as u64),
            shards: (0..SHARDS).map(|_| Shard::new()).collect(),
            rare: Rare {
                annihilated: AtomicU64::new(0),
                overflowed: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
            },
            queue: CachePadded::new(QueueCell {
                lock: Mutex::new(Queue {
                    shared: TicketList::default(),
                    seg: 0,
                    epoch: 0,
                    next_id: 0,
                    taken: 0,
                }),
                queued: AtomicUsize::new(0),
                live: AtomicU64::new(0),
            }),
            epoch: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            tx_closed: AtomicBool::new(false),
            notify: Notify::new(),
        }
    }

    fn shard(&self, hash: u64) -> &Shard<K, V> {
        &self.shards[shard_index(hash)]
    }

    /// The receiver's accounting, read without a lock (see `Shard` for why the
    /// settled counters are loaded before `received`: Acquire here pairs with
    /// the Release of [`bump`]). `local` is the consumer's, so delivered and
    /// folded are exact for this thread.
    pub(crate) fn stats(&self, local: &Local<K>) -> ReceiverStats {
        let sum = |field: fn(&Shard<K, V>) -> &AtomicU64| -> u64 {
            self.shards
                .iter()
                .map(|s| field(s).load(Ordering::Acquire))
                .sum()
        };
        let annihilated = self.rare.annihilated.load(Ordering::Acquire);
        let overflowed = self.rare.overflowed.load(Ordering::Acquire);
        let dropped = self.rare.dropped.load(Ordering::Acquire) + local.dropped;
        let filtered = sum(|s| &s.filtered);
        let received = sum(|s| &s.received);
        let pending = if self.is_closed() {
            0
        } else {
            self.len(local) as u64
        };
        ReceiverStats::derived(
            received,
            filtered,
            local.taken,
            local.folded,
            annihilated,
            overflowed,
            dropped,
            pending,
        )
    }

    /// Pending keys, as the consumer sees them (exact when no send is in
    /// progress). Acquire pairs with the Release stores under the queue lock.
    pub(crate) fn len(&self, local: &Local<K>) -> usize {
        // One word, so the count cannot tear: values pushed and retired are
        // netted under the queue lock, and `taken` is the consumer's own (no
        // other thread changes it while `&self` is shared). `live >= taken` in
        // every state the load can return: each value taken was pushed and not
        // retired, and its push happened before the consumer took it.
        let live = self.queue.live.load(Ordering::Acquire);
        usize::try_from(live - local.taken).unwrap_or(usize::MAX)
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
            let mut guard = lock(&shard.lock);
            let table = mem::take(&mut *guard);
            // Under the shard lock, like every writer of these counters. No
            // user code runs in the sum.
            let sends: u64 = table
                .iter()
                .map(|s| {
                    s.live.as_ref().map_or(0, |p| p.sends) + s.cut.as_ref().map_or(0, |p| p.sends)
                })
                .sum();
            self.rare.dropped.fetch_add(sends, Ordering::Release);
            drop(guard);
            drop(table); // values drop outside the lock
        }
        let shared = {
            let mut q = lock(&self.queue.lock);
            self.queue.queued.store(0, Ordering::Release);
            mem::take(&mut q.shared)
        };
        drop(shared);
        self.notify.notify(usize::MAX);
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
            let mut shard = lock(&self.shard(hash).lock);
            let ticket_key = key.clone();
            let (mut pending, _) = self
                .enqueue(ticket_key, hash, value)
                .unwrap_or_else(|_| unreachable!("the caller seeds at most max_pending keys"));
            pending.sends = 0;
            shard.insert_unique(
                hash,
                Slot {
                    key,
                    hash,
                    live: Some(pending),
                    cut: None,
                },
                |s| s.hash,
            );
        }
    }

    /// Fans one send into this receiver. Runs the key filter (no lock held) and the
    /// merge (this key's shard lock held, nothing else). If either panics, the panic
    /// continues after this receiver's state is repaired: a panicking merge drops
    /// the key's pending value here (conflate rule 9, docs/design.md).
    ///
    /// Two steps under the shard lock: [`Self::coalesce`] when the key has a slot,
    /// [`Self::start_pending`] when it has none.
    pub(crate) fn deliver(&self, hash: u64, key: &K, value: V) {
        // Relaxed: a stale `false` only delivers into a receiver that is closing,
        // whose values are dropped with it.
        if self.closed.load(Ordering::Relaxed) {
            return;
        }
        let cell = self.shard(hash);
        if !self.filter.accepts(key) {
            // Relaxed: a count that orders nothing (and is in no conservation
            // sum); the only shard-counter RMW, and only on a rejection.
            cell.filtered.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut shard = lock(&cell.lock);
        // Checked again under the shard lock: `clear` marks the receiver closed
        // before it empties each shard under that shard's lock, so once a shard
        // was cleared nothing enters it again (a value landing after a hard close
        // could otherwise be delivered past a hole the close made).
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        // Acquire pairs with the Release in `cut`. The argument that a cut is one
        // instant needs only that this load happens under the shard lock: see `cut`.
        let epoch = self.epoch.load(Ordering::Acquire);
        // `find_entry`, not `entry`: a lookup that hits must not reserve room for
        // an insert (which could grow a full table), so coalescing never allocates.
        let outcome = match shard.find_entry(hash, |s| s.key == *key) {
            Err(absent) => self.start_pending(cell, absent, key, hash, value),
            Ok(occupied) => self.coalesce(cell, occupied, epoch, key, hash, value),
        };
        drop(shard);
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
            Delivered::Refused(leftover) => drop(leftover), // outside the lock
        }
    }

    /// The start-pending step: a send for a key with no slot in this receiver
    /// gets a slot and a ticket at the back, unless the receiver is full.
    /// Called with the key's shard locked.
    fn start_pending(
        &self,
        cell: &Shard<K, V>,
        absent: AbsentEntry<'_, Slot<K, V>>,
        key: &K,
        hash: u64,
        value: V,
    ) -> Delivered<K, V> {
        // Both copies of the key are made before anything changes, so a
        // panicking `K::clone` leaves this receiver as it was.
        let slot_key = key.clone();
        let ticket_key = key.clone();
        bump(&cell.received, 1);
        match self.enqueue(ticket_key, hash, value) {
            Ok((pending, first)) => {
                absent.into_table().insert_unique(
                    hash,
                    Slot {
                        key: slot_key,
                        hash,
                        live: Some(pending),
                        cut: None,
                    },
                    |s| s.hash,
                );
                Delivered::queued(first)
            }
            Err(refused) => {
                self.rare.overflowed.fetch_add(1, Ordering::Release);
                Delivered::Refused((Some(slot_key), refused))
            }
        }
    }

    /// The coalesce step: a send for a key that has a slot merges into its
    /// pending value of the current epoch, or, if the slot holds only a value a
    /// cut owns (or nothing), starts a fresh pending value at the back. Called
    /// with the key's shard locked; a panicking merge unwinds from here with the
    /// slot repaired.
    fn coalesce(
        &self,
        cell: &Shard<K, V>,
        mut occupied: OccupiedEntry<'_, Slot<K, V>>,
        epoch: u64,
        key: &K,
        hash: u64,
        value: V,
    ) -> Delivered<K, V> {
        let slot = occupied.get_mut();
        if let (Merge::NewerWins, Some(p)) = (&self.merge, &mut slot.live) {
            if p.epoch == epoch {
                // The default merge, in place: no user code, nothing to
                // repair if it unwinds (only `V`'s own drop runs here, and
                // an assignment re-initializes its place on unwind).
                bump(&cell.received, 1);
                p.value = value;
                p.sends += 1;
                return Delivered::Done;
            }
        }
        match slot.live.take() {
            Some(p) if p.epoch == epoch => {
                let Pending {
                    value: prev,
                    sends,
                    epoch,
                    ticket,
                } = p;
                bump(&cell.received, 1);
                let merge = &self.merge;
                match panic::catch_unwind(AssertUnwindSafe(|| merge.apply(prev, value))) {
                    Ok(Some(value)) => {
                        slot.live = Some(Pending {
                            value,
                            sends: sends + 1,
                            epoch,
                            ticket,
                        });
                    }
                    Ok(None) => {
                        self.rare
                            .annihilated
                            .fetch_add(sends + 1, Ordering::Release);
                        self.retire(ticket);
                        if slot.is_vacant() {
                            occupied.remove();
                        }
                    }
                    Err(payload) => {
                        self.rare.dropped.fetch_add(sends + 1, Ordering::Release);
                        self.retire(ticket);
                        if slot.is_vacant() {
                            occupied.remove();
                        }
                        // The caller's shard guard is released as this unwinds.
                        panic::resume_unwind(payload);
                    }
                }
                Delivered::Done
            }
            Some(older) => {
                // The slot's value belongs to a cut that has not drained it
                // yet: hand it over and start afresh at the back.
                debug_assert!(older.epoch < epoch, "epochs only grow");
                debug_assert!(slot.cut.is_none(), "one cut at a time");
                slot.cut = Some(Box::new(older));
                self.start_fresh(cell, slot, key, hash, value)
            }
            None => self.start_fresh(cell, slot, key, hash, value),
        }
    }

    /// A send for a key whose slot exists but holds no current pending value
    /// (only a cut's): a new pending value at the back, unless the receiver is
    /// full. Called with the slot's shard locked.
    fn start_fresh(
        &self,
        cell: &Shard<K, V>,
        slot: &mut Slot<K, V>,
        key: &K,
        hash: u64,
        value: V,
    ) -> Delivered<K, V> {
        let ticket_key = key.clone();
        bump(&cell.received, 1);
        match self.enqueue(ticket_key, hash, value) {
            Ok((pending, first)) => {
                slot.live = Some(pending);
                Delivered::queued(first)
            }
            Err(refused) => {
                self.rare.overflowed.fetch_add(1, Ordering::Release);
                Delivered::Refused((None, refused))
            }
        }
    }

    /// Appends a ticket for a newly pending key; called with its shard locked.
    /// Also returns whether the shared list was empty before.
    /// `key` is the ticket's own copy, made by the caller before anything changed.
    ///
    /// A bounded receiver with `max_pending` keys pending refuses (drop-new) and
    /// hands the value back; nothing changes. The count it compares is exact at
    /// this critical section: `live` changes only under this lock, and so does
    /// `taken` for a bounded receiver (a pop adds to it before it releases the
    /// taken key's shard, so no send can see that key gone while the count still
    /// holds it; a cut zeroes the pending count in the same section that makes
    /// it one instant).
    fn enqueue(&self, key: K, hash: u64, value: V) -> Result<(Pending<V>, bool), (K, V)> {
        let cell = &*self.queue;
        let mut q = lock(&cell.lock);
        if let Some(max) = self.max_pending {
            // Relaxed: written only under this lock.
            let pending = cell.live.load(Ordering::Relaxed) - q.taken;
            if pending >= max {
                return Err((key, value));
            }
        }
        let id = q.next_id;
        q.next_id += 1;
        let idx = q.shared.push_back(key, hash, id);
        let ticket = TicketRef {
            id,
            seg: q.seg,
            idx,
        };
        // The epoch is read under the queue lock, so it names the list the ticket
        // is really in, even if a cut ran since this send read `self.epoch`.
        let epoch = q.epoch;
        let queued = q.shared.len();
        // Plain stores under the lock (no read-modify-write). Release pairs with
        // the consumer's lock-free Acquire loads in `refill` and `len`.
        cell.queued.store(queued, Ordering::Release);
        let live = cell.live.load(Ordering::Relaxed);
        cell.live.store(live + 1, Ordering::Release);
        drop(q);
        let pending = Pending {
            value,
            sends: 1,
            epoch,
            ticket,
        };
        Ok((pending, queued == 1))
    }

    /// Forgets an annihilated (or merge-panicked) pending value; called with its
    /// shard locked.
    fn retire(&self, ticket: TicketRef) {
        let cell = &*self.queue;
        let mut q = lock(&cell.lock);
        if ticket.seg == q.seg {
            let removed = q.shared.remove(ticket.idx, ticket.id);
            debug_assert!(removed, "a current-segment ticket is linked");
            cell.queued.store(q.shared.len(), Ordering::Release);
        }
        // Otherwise the ticket is in the consumer's private list, which skips it.
        let live = cell.live.load(Ordering::Relaxed);
        cell.live.store(live - 1, Ordering::Release);
    }

    /// Moves the shared list into the consumer's (empty) private list. O(1).
    fn refill(&self, local: &mut Local<K>) -> bool {
        debug_assert!(local.private.is_empty());
        let cell = &*self.queue;
        // An empty queue costs the consumer one load, not the senders' lock. A
        // ticket pushed after this load is found by the waiter's next look (see
        // `wait.rs` for why the wake-up cannot be lost).
        if cell.queued.load(Ordering::Acquire) == 0 {
            return false;
        }
        let mut q = lock(&cell.lock);
        if q.shared.is_empty() {
            return false;
        }
        mem::swap(&mut q.shared, &mut local.private);
        cell.queued.store(0, Ordering::Release);
        q.seg += 1;
        true
    }

    /// Takes the value `ticket` names, if it is still pending (consumer only,
    /// outside a cut). A bounded receiver also counts the take where senders
    /// check the bound, before the key's shard is released (see `enqueue`).
    fn claim(&self, ticket: Ticket<K>) -> Option<Event<K, V>> {
        let mut shard = lock(&self.shard(ticket.hash).lock);
        let found = take_from(&mut shard, ticket);
        if found.is_some() && self.max_pending.is_some() {
            lock(&self.queue.lock).taken += 1;
        }
        drop(shard);
        found
    }

    /// Takes the value `ticket` names for a cut (which already counted it as
    /// taken for a bounded receiver).
    fn claim_for_cut(&self, ticket: Ticket<K>) -> Option<Event<K, V>> {
        let mut shard = lock(&self.shard(ticket.hash).lock);
        take_from(&mut shard, ticket)
    }

    /// Pops the oldest pending key (consumer only).
    pub(crate) fn pop(&self, local: &mut Local<K>) -> Option<Event<K, V>> {
        loop {
            let ticket = match local.private.pop_front() {
                Some(t) => t,
                None if self.refill(local) => continue,
                None => return None,
            };
            if let Some(event) = self.claim(ticket) {
                local.taken += 1;
                local.folded += event.sends;
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

    /// A copy of the oldest pending key's event (consumer only).
    pub(crate) fn peek(&self, local: &mut Local<K>) -> Option<Event<K, V>>
    where
        V: Clone,
    {
        loop {
            if local.private.is_empty() && !self.refill(local) {
                return None;
            }
            let (key, hash, id) = local.private.front().expect("refilled");
            let shard = lock(&self.shard(hash).lock);
            let found = shard
                .find(hash, |s| s.key == *key)
                .and_then(|s| s.live.as_ref().filter(|p| p.ticket.id == id))
                .map(|p| Event::new(key.clone(), p.value.clone(), p.sends));
            drop(shard);
            match found {
                Some(event) => return Some(event),
                None if self.is_closed() => return None,
                None => drop(local.private.pop_front()), // stale ticket
            }
        }
    }

    /// Takes everything pending as of one instant, in queue order (consumer only).
    ///
    /// The instant is the queue-lock critical section below, which bumps the epoch
    /// and detaches the shared list together. Ordering argument:
    /// - A send that pushed its ticket before it is in the detached list; one that
    ///   pushes after lands in the new list and stamps its value with the new epoch
    ///   (it reads the epoch under the queue lock).
    /// - A send that merges into a detached key's slot holds that shard's lock while
    ///   it reads `self.epoch` and merges. If it locked the shard before the drain
    ///   visits the slot, the drain sees its merge; if after, it happens-after the
    ///   drain's lock, hence after the epoch store, so it reads the new epoch and
    ///   does not merge into the cut's value. A merge included in the batch read
    ///   the old epoch, so no send that happened-before it can have read the new one
    ///   (coherence): the batch is closed under happens-before, i.e. one cut.
    pub(crate) fn cut(&self, local: &mut Local<K>) -> Vec<Event<K, V>> {
        // Nothing queued anywhere: the empty batch is the instant of this load (a
        // pending value always has its ticket in one of the two lists).
        if local.private.is_empty() && self.queue.queued.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        {
            let mut q = lock(&self.queue.lock);
            q.epoch += 1;
            // Release pairs with the Acquire in `deliver` (the lock order already
            // gives the ordering the argument above needs; this keeps the atomic's
            // own contract readable in isolation).
            self.epoch.store(q.epoch, Ordering::Release);
            q.seg += 1;
            mem::swap(&mut q.shared, &mut local.spare);
            self.queue.queued.store(0, Ordering::Release);
            if self.max_pending.is_some() {
                // Everything pending now belongs to this cut: to senders checking
                // the bound, nothing is pending any more (see `enqueue`). Relaxed:
                // `live` is written only under this lock.
                q.taken = self.queue.live.load(Ordering::Relaxed);
            }
        }
        let Local { private, spare, .. } = &mut *local;
        let mut tickets = Vec::new();
        private.drain_into(&mut tickets);
        spare.drain_into(&mut tickets);
        let mut batch = if tickets.len() < GROUPED_CLAIM_MIN {
            let claimed: Vec<_> = tickets
                .into_iter()
                .filter_map(|t| self.claim_for_cut(t))
                .collect();
            claimed
        } else {
            self.claim_grouped(tickets)
        };
        let sends: u64 = batch.iter().map(|e| e.sends).sum();
        if self.is_closed() {
            // A hard close raced the drain and may have cleared part of it: the
            // cut then falls after the close, which abandons everything. What
            // the cut had claimed is dropped, like what the close cleared.
            local.dropped += sends;
            batch.clear();
        } else {
            local.taken += batch.len() as u64;
            local.folded += sends;
        }
        batch
    }

    /// Claims a cut's tickets, in queue order, taking each shard's lock once per
    /// `CLAIM_CHUNK` tickets of that shard rather than once per ticket: a cut of a
    /// large backlog costs about `n / CLAIM_CHUNK` lock acquisitions, while a
    /// publisher waits at most one chunk's worth of claims for a shard.
    fn claim_grouped(&self, tickets: Vec<Ticket<K>>) -> Vec<Event<K, V>> {
        const CLAIM_CHUNK: usize = 64;
        // Counting sort of ticket positions by shard, keeping queue order within
        // each shard.
        let mut start = [0usize; SHARDS + 1];
        for t in &tickets {
            start[shard_index(t.hash) + 1] += 1;
        }
        for s in 0..SHARDS {
            start[s + 1] += start[s];
        }
        let mut next = start;
        let mut order = vec![0u32; tickets.len()];
        for (pos, t) in tickets.iter().enumerate() {
            let s = shard_index(t.hash);
            order[next[s]] = pos as u32;
            next[s] += 1;
        }
        let mut tickets: Vec<Option<Ticket<K>>> = tickets.into_iter().map(Some).collect();
        let mut out: Vec<Option<Event<K, V>>> = (0..tickets.len()).map(|_| None).collect();
        for s in 0..SHARDS {
            for chunk in order[start[s]..start[s + 1]].chunks(CLAIM_CHUNK) {
                let mut shard = lock(&self.shards[s].lock);
                for &pos in chunk {
                    let ticket = tickets[pos as usize].take().expect("each position once");
                    out[pos as usize] = take_from(&mut shard, ticket);
                }
            }
        }
        out.into_iter().flatten().collect()
    }
}
