//! The state every handle points at: the state word, the one hub mutex and,
//! under it, every receiver's pending set.

use super::queue::{KeyQueue, Merged};
use super::state::HubState;
use crate::conflate::common::counters::{bump, Departure, Departures};
use crate::conflate::common::hash::KeyHasher;
use crate::conflate::common::hub_word::HubWord;
use crate::conflate::common::policy::{KeyFilter, Merge, ReceiverConfig};
use crate::conflate::common::reentrancy::{forbid_inside_send, SendScope};
use crate::conflate::common::removal::Tombstones;
use crate::conflate::common::stats::{HubStats, ReceiverInfo, ReceiverStats};
use crate::conflate::lockfree::stripes::Stripes;
use crate::error::{SendError, TryRecvError};
use crate::sync::{lock, Arc, AtomicBool, AtomicU64, Mutex, MutexGuard, Notify, Ordering};
use std::borrow::Cow;
use std::hash::Hash;
use std::mem;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

pub(super) struct Shared<K, V> {
    pub(super) state: HubState,
    inner: Mutex<Inner<K, V>>,
    /// The hub's merge; a receiver built without its own copies this one.
    merge: Merge<V>,
    /// The state table's merge: the hub's, except that a tombstone (or a
    /// merge that makes one) removes the key.
    table_merge: Merge<V>,
    /// Which values remove their key (`HubBuilder::tombstones`).
    pub(super) tombstones: Tombstones<V>,
    /// One hash per send serves every receiver's index.
    hasher: KeyHasher,
    /// Whether `Inner::table` exists (fixed at build), readable without the mutex.
    retain: bool,
    /// Accepted sends (striped: the no-receiver path takes no lock).
    sent: Stripes,
    /// Refused sends (rare: a plain shared counter).
    refused: AtomicU64,
    /// How registered receivers left (`HubStats::receivers_*`), written under
    /// the hub mutex.
    departures: Departures,
    /// Acquisitions of `inner`, so a test can prove a path never takes it.
    #[cfg(test)]
    pub(super) locks: AtomicU64,
}

struct Inner<K, V> {
    /// Registered receivers, in registration order (= fan-out order), which is
    /// also ascending `id` order, so a receiver finds itself by binary search.
    receivers: Vec<RxState<K, V>>,
    next_id: u64,
    /// The state table (`retain_latest`): per key, the hub's merge of every
    /// accepted send, in first-touch order. Its entries' `sends` mean nothing.
    table: Option<KeyQueue<K, V>>,
}

/// One registered receiver, as the send path sees it.
struct RxState<K, V> {
    id: u64,
    filter: KeyFilter<K>,
    merge: Merge<V>,
    queue: KeyQueue<K, V>,
    notify: Arc<Notify>,
    max_pending: Option<usize>,
    counters: Arc<RxCounters>,
}

/// What registration hands to a new `Receiver`.
pub(super) struct Registration {
    pub(super) id: u64,
    pub(super) notify: Arc<Notify>,
    pub(super) counters: Arc<RxCounters>,
}

/// One receiver's accounting. Every field is written under the hub mutex with
/// [`bump`] (plain load and store) and read without it, so reading stats never
/// blocks a sender. `pending_sends` is not stored: it is what `received` has not
/// yet accounted for.
#[derive(Default)]
pub(super) struct RxCounters {
    /// The receiver's number (its registration id) and name: fixed at build.
    pub(super) id: u64,
    pub(super) name: Option<std::sync::Arc<str>>,
    /// Deregistered (closed, drained, torn down) or born closed; set under
    /// the hub mutex (Release), read by watches (Acquire).
    pub(super) closed: AtomicBool,
    /// The send side closed while the receiver was registered (as `closed`).
    pub(super) tx_closed: AtomicBool,
    /// With tombstones: what the consumer's record took without handing on
    /// (the receiver's `Seen` writes it; every stats read applies it).
    pub(super) correction: Option<std::sync::Arc<crate::conflate::common::removal::Correction>>,
    received: AtomicU64,
    filtered: AtomicU64,
    delivered: AtomicU64,
    folded: AtomicU64,
    annihilated: AtomicU64,
    overflowed: AtomicU64,
    dropped: AtomicU64,
    pending: AtomicU64,
}

impl RxCounters {
    /// A lock-free read. The settled counters are loaded before `received`:
    /// writers store `received` first in each critical section (Release) and
    /// readers Acquire, so the settled sum read never exceeds the `received`
    /// read after it, and `pending_sends` never underflows.
    pub(super) fn read(&self) -> ReceiverStats {
        match &self.correction {
            Some(c) => c.correct(|| self.queue_read()),
            None => self.queue_read(),
        }
    }

    /// [`Self::read`] as the queue counts them (before a tombstone record's
    /// correction).
    fn queue_read(&self) -> ReceiverStats {
        let load = |c: &AtomicU64| c.load(Ordering::Acquire);
        // Fields are evaluated in the order written: `received` last.
        ReceiverStats {
            delivered: load(&self.delivered),
            folded: load(&self.folded),
            annihilated: load(&self.annihilated),
            overflowed: load(&self.overflowed),
            dropped: load(&self.dropped),
            pending: load(&self.pending),
            filtered: load(&self.filtered),
            received: load(&self.received),
            pending_sends: 0,
        }
        .with_pending_sends()
    }

    /// Sends folded into the values pending now. Caller holds the hub mutex, so
    /// the counters are exact.
    fn pending_sends_locked(&self) -> u64 {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        load(&self.received)
            - load(&self.folded)
            - load(&self.annihilated)
            - load(&self.overflowed)
            - load(&self.dropped)
    }

    /// Everything pending was dropped undelivered (a close). Hub mutex held.
    fn drop_pending_locked(&self) {
        bump(&self.dropped, self.pending_sends_locked());
        self.pending.store(0, Ordering::Release);
    }
}

impl<K, V> Inner<K, V> {
    fn position(&self, id: u64) -> Option<usize> {
        self.receivers.binary_search_by_key(&id, |rx| rx.id).ok()
    }

    /// Unregisters the receiver at `pos` and hands it back, so the caller drops
    /// its pending keys and values (user `Drop` code) after unlocking.
    fn deregister(
        &mut self,
        pos: usize,
        state: &HubState,
        departures: &Departures,
        how: Departure,
    ) -> RxState<K, V> {
        state.deregister_locked();
        departures.count(how);
        let gone = self.receivers.remove(pos);
        gone.counters.drop_pending_locked();
        gone.counters.closed.store(true, Ordering::Release);
        gone
    }

    /// Every registered receiver with its accounting, in id order.
    fn infos(&self) -> Vec<ReceiverInfo> {
        self.receivers
            .iter()
            .map(|rx| ReceiverInfo {
                id: rx.id,
                name: rx.counters.name.clone(),
                stats: rx.counters.read(),
            })
            .collect()
    }
}

impl<K, V> Shared<K, V> {
    pub(super) fn new(merge: Merge<V>, retain: bool, tombstones: Tombstones<V>) -> Self
    where
        V: 'static,
    {
        let merge = tombstones.across_lives(merge);
        let table_merge = tombstones.table_merge(merge.clone());
        Shared {
            table_merge,
            tombstones,
            state: HubState::new(),
            inner: Mutex::new(Inner {
                receivers: Vec::new(),
                next_id: 0,
                table: retain.then(KeyQueue::new),
            }),
            merge,
            hasher: KeyHasher::default(),
            retain,
            sent: Stripes::new(),
            refused: AtomicU64::new(0),
            departures: Departures::default(),
            #[cfg(test)]
            locks: AtomicU64::new(0),
        }
    }

    /// The hub mutex, for `call`. Panics, naming `call`, if this thread holds it
    /// already: it runs user code inside this hub's send (see `reentrancy.rs`).
    #[track_caller]
    fn lock(&self, call: &str) -> MutexGuard<'_, Inner<K, V>> {
        forbid_inside_send(self, call);
        self.lock_raw()
    }

    fn lock_raw(&self) -> MutexGuard<'_, Inner<K, V>> {
        #[cfg(test)]
        self.locks.fetch_add(1, crate::sync::Ordering::Relaxed);
        lock(&self.inner)
    }

    /// Graceful close: sends fail from now on, receivers keep what is pending and
    /// answer `Closed` once it is drained. Idempotent.
    pub(super) fn close_send(&self) {
        let inner = self.lock("Sender::close");
        if self.state.close_send_locked() {
            // A receiver parked on an empty queue must wake to see `Closed`.
            for rx in &inner.receivers {
                rx.counters.tx_closed.store(true, Ordering::Release);
                rx.notify.notify(usize::MAX);
            }
        }
    }

    /// Hard close: sends fail and every receiver is deregistered with its pending
    /// values dropped. Idempotent.
    pub(super) fn close_hub(&self) {
        let mut inner = self.lock("Hub::close_now");
        if !self.state.close_hub_locked() {
            return;
        }
        let gone = mem::take(&mut inner.receivers);
        self.departures.count_hard_closed(gone.len() as u64);
        for rx in &gone {
            rx.counters.drop_pending_locked();
            rx.counters.closed.store(true, Ordering::Release);
        }
        drop(inner);
        for rx in &gone {
            rx.notify.notify(usize::MAX);
        }
    }

    /// Closes one receiver: deregistered now, pending values dropped. Idempotent.
    pub(super) fn close_receiver(&self, id: u64) {
        let mut inner = self.lock("Receiver::close (or dropping a Receiver)");
        if let Some(pos) = inner.position(id) {
            let gone = inner.deregister(pos, &self.state, &self.departures, Departure::Dropped);
            drop(inner);
            gone.notify.notify(usize::MAX);
        }
    }

    /// Runs `op` on the receiver's queue under the hub mutex, with the receive
    /// side's precedence: closed beats empty beats value. `op` returns `None`
    /// exactly when the queue is empty. A receiver that finds its queue empty
    /// after a graceful close deregisters itself here.
    /// `tally` says how many events and how many folded sends `op`'s answer
    /// delivered (zero for a peek).
    pub(super) fn take<R>(
        &self,
        id: u64,
        op: impl FnOnce(&mut KeyQueue<K, V>) -> Option<R>,
        tally: impl FnOnce(&R) -> (u64, u64),
    ) -> Result<R, TryRecvError> {
        let mut inner = self.lock("a receive on a Receiver");
        // Not registered: closed itself, torn down by `Hub::close_now`, born closed,
        // or already drained after a graceful close.
        let Some(pos) = inner.position(id) else {
            return Err(TryRecvError::Closed);
        };
        let rx = &mut inner.receivers[pos];
        if let Some(r) = op(&mut rx.queue) {
            let (events, sends) = tally(&r);
            if events > 0 {
                // `folded` first: readers load `delivered` first, so they
                // never see more events than the sends they fold.
                bump(&rx.counters.folded, sends);
                bump(&rx.counters.delivered, events);
                rx.counters
                    .pending
                    .store(rx.queue.len() as u64, Ordering::Release);
            }
            return Ok(r);
        }
        if !self.state.load_locked().tx_closed() {
            return Err(TryRecvError::Empty);
        }
        let gone = inner.deregister(pos, &self.state, &self.departures, Departure::Drained);
        drop(inner);
        drop(gone);
        Err(TryRecvError::Closed)
    }

    /// Pending keys of a receiver (0 once it is closed).
    pub(super) fn pending(&self, id: u64) -> usize {
        let inner = self.lock("Receiver::len");
        inner
            .position(id)
            .map_or(0, |pos| inner.receivers[pos].queue.len())
    }

    /// Whether the next receive would answer `Closed`.
    pub(super) fn receiver_closed(&self, id: u64) -> bool {
        let inner = self.lock("Receiver::is_closed");
        match inner.position(id) {
            None => true,
            Some(pos) => {
                inner.receivers[pos].queue.len() == 0 && self.state.load_locked().tx_closed()
            }
        }
    }

    /// Whether the hub keeps a state table (`retain_latest`).
    pub(super) fn retains(&self) -> bool {
        self.retain
    }

    /// The hub's accounting: lock-free reads.
    pub(super) fn stats(&self) -> HubStats {
        HubStats {
            sent: self.sent.sent(),
            refused: self.refused.load(Ordering::Relaxed),
            receivers: self.state.load().receivers(),
            ..self.departures.fill(HubStats::default())
        }
    }

    /// Every registered receiver with its accounting: one hold of the hub
    /// mutex (so sends wait for O(receivers) counter reads).
    pub(super) fn receivers(&self) -> Vec<ReceiverInfo> {
        self.lock("Hub::receivers").infos()
    }

    fn refuse(&self, key: K, value: V) -> Result<(), SendError<K, V>> {
        // Relaxed: a count; nothing is published through it.
        self.refused.fetch_add(1, Ordering::Relaxed);
        Err(SendError { key, value })
    }
}

impl<K, V> Shared<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
{
    /// Registers a receiver, or makes it born closed if the send side is already
    /// closed (it could only ever answer `Closed`). A snapshot receiver is born
    /// with the table's entries that pass its filter pending (`sends == 0`, table
    /// order, at most `max_pending`), copied in the same hold of the hub mutex
    /// that registers it: one instant against every send.
    pub(super) fn register(&self, config: ReceiverConfig<K, V>) -> Registration {
        let notify = Arc::new(Notify::new());
        let mut inner = self.lock("Hub::receiver (ReceiverBuilder::build)");
        let id = inner.next_id;
        inner.next_id += 1;
        let counters = Arc::new(RxCounters {
            id,
            name: config.name.clone(),
            correction: self.tombstones.enabled().then(Default::default),
            ..RxCounters::default()
        });
        if self.state.load_locked().tx_closed() {
            counters.closed.store(true, Ordering::Release);
        } else {
            let mut queue = KeyQueue::new();
            if config.snapshot {
                // The filter and the clones are user code, run under the mutex:
                // mark the thread so a call back into this hub panics instead of
                // deadlocking. A panic here registers nothing.
                let _scope = SendScope::enter(self);
                let limit = config.max_pending.unwrap_or(usize::MAX);
                if let Some(table) = &inner.table {
                    for (hash, key, value) in table.iter() {
                        if queue.len() == limit {
                            break;
                        }
                        if config.filter.accepts(key) {
                            queue.push_back_with(hash, key.clone(), value.clone(), 0);
                        }
                    }
                }
                counters
                    .pending
                    .store(queue.len() as u64, Ordering::Release);
            }
            inner.receivers.push(RxState {
                id,
                filter: config.filter,
                merge: match config.merge {
                    Some(own) => self.tombstones.across_lives(own),
                    None => self.merge.clone(),
                },
                queue,
                notify: notify.clone(),
                max_pending: config.max_pending,
                counters: counters.clone(),
            });
            self.state.register_locked();
        }
        Registration {
            id,
            notify,
            counters,
        }
    }

    /// The table's value for `key`; `None` without a table.
    pub(super) fn latest(&self, key: &K) -> Option<V> {
        if !self.retain {
            return None;
        }
        let hash = self.hasher.hash(key);
        let inner = self.lock("Hub::latest");
        let table = inner.table.as_ref()?;
        table.get(hash, key).cloned()
    }

    /// The whole table as of one hold of the hub mutex, in table order.
    pub(super) fn snapshot(&self) -> Vec<(K, V)> {
        if !self.retain {
            return Vec::new();
        }
        let inner = self.lock("Hub::snapshot");
        let Some(table) = inner.table.as_ref() else {
            return Vec::new();
        };
        table
            .iter()
            .map(|(_, k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The whole send: one atomic load, then, only if someone listens (or the
    /// hub keeps a table), the fan-out under the hub mutex.
    pub(super) fn send(&self, key: K, value: V) -> Result<(), SendError<K, V>> {
        let now = self.state.load();
        if now.tx_closed() {
            return self.refuse(key, value);
        }
        if now.receivers() == 0 && !self.retain {
            self.sent.mine().count();
            return Ok(());
        }
        // `K: Hash` and the tombstone test are user code: run them before
        // anything is locked or changed.
        let hash = self.hasher.hash(&key);
        let tombstone = self.tombstones.is(&value);
        // Marks this thread as inside the send until the mutex is released: user
        // code that calls back into the hub then panics instead of deadlocking.
        let scope = SendScope::enter(self);
        let mut inner = self.lock_raw();
        // Re-decided under the mutex, which `Sender::close` also holds: this is
        // what makes a send racing a close either fully published or refused.
        if self.state.load_locked().tx_closed() {
            drop(inner);
            drop(scope);
            return self.refuse(key, value);
        }
        self.sent.mine().count();
        // The state is consistent at every point a user call can unwind from
        // (see `RxState::deliver`), so catch the panic, release the mutex
        // unpoisoned, and only then hand the panic to the caller.
        let merge = &self.table_merge;
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            inner.update_table(hash, &key, &value, merge, tombstone);
            inner.fan_out(hash, key, value)
        }));
        drop(inner);
        drop(scope);
        if let Err(panic) = outcome {
            resume_unwind(panic);
        }
        Ok(())
    }
}

impl<K, V> Inner<K, V>
where
    K: Hash + Eq + Clone,
    V: Clone,
{
    /// Folds one accepted send into the state table (if any) with the hub's
    /// merge, before any receiver sees it. `None` (or a tombstone) removes the
    /// key; a re-sent key re-enters at the back. A panicking merge drops the key's entry, and the
    /// panic then reaches no receiver.
    fn update_table(&mut self, hash: u64, key: &K, value: &V, merge: &Merge<V>, tombstone: bool) {
        let Some(table) = &mut self.table else {
            return;
        };
        match table.find(hash, key) {
            Some(at) => match table.merge_into(at, value.clone(), merge) {
                Merged::Kept | Merged::Annihilated { .. } => {}
                Merged::Panicked { payload, .. } => resume_unwind(payload),
            },
            None if tombstone => {}
            None => table.push_back(hash, key.clone(), value.clone()),
        }
    }

    /// Offers one send to every receiver: the plain ones (every key, newer
    /// wins, unbounded) first, then the others, each group in registration
    /// order (the order the lock-free hub's cells impose, documented in the
    /// module docs). The last one takes the key and value by move; the others
    /// get clones, made only when needed. A panic at a receiver leaves the
    /// earlier ones delivered and the later ones untouched.
    fn fan_out(&mut self, hash: u64, key: K, value: V) {
        let rxs = &self.receivers;
        let last_of = |want: bool| rxs.iter().rposition(|rx| rx.is_plain() == want);
        let Some(last) = last_of(false).or_else(|| last_of(true)) else {
            return;
        };
        for pass in [true, false] {
            for (i, rx) in self.receivers.iter_mut().enumerate() {
                if rx.is_plain() == pass && i != last {
                    rx.deliver(hash, Cow::Borrowed(&key), Cow::Borrowed(&value));
                }
            }
        }
        self.receivers[last].deliver(hash, Cow::Owned(key), Cow::Owned(value));
    }
}

impl<K, V> RxState<K, V> {
    /// Every key, newer wins, no bound.
    fn is_plain(&self) -> bool {
        matches!(self.filter, KeyFilter::All)
            && matches!(self.merge, Merge::NewerWins)
            && self.max_pending.is_none()
    }
}

impl<K, V> RxState<K, V>
where
    K: Hash + Eq + Clone,
    V: Clone,
{
    /// Applies one send to this receiver. User code runs in this order, each
    /// step before anything here changes unless noted: the key filter, `K: Eq`
    /// (lookup), `V: Clone` / `K: Clone` (copies for this receiver), then the
    /// merge, whose panic drops the slot (see `KeyQueue::merge_into`).
    ///
    /// Accounting (hub mutex held, so exact): a filter rejection counts in
    /// `filtered`; past the lookup the send counts in `received` (stored first),
    /// then in `annihilated`, `overflowed` or `dropped` where it ends there. A
    /// panic in the filter, `K: Eq` or a clone counts nowhere.
    fn deliver(&mut self, hash: u64, key: Cow<'_, K>, value: Cow<'_, V>) {
        let counters = &*self.counters;
        if !self.filter.accepts(&key) {
            bump(&counters.filtered, 1);
            return;
        }
        match self.queue.find(hash, &key) {
            Some(at) => {
                // Coalesce: the key keeps its place; no allocation.
                let value = value.into_owned();
                bump(&counters.received, 1);
                match self.queue.merge_into(at, value, &self.merge) {
                    Merged::Kept => {}
                    Merged::Annihilated { sends } => {
                        bump(&counters.annihilated, sends + 1);
                        counters
                            .pending
                            .store(self.queue.len() as u64, Ordering::Release);
                    }
                    Merged::Panicked { sends, payload } => {
                        bump(&counters.dropped, sends + 1);
                        counters
                            .pending
                            .store(self.queue.len() as u64, Ordering::Release);
                        resume_unwind(payload);
                    }
                }
            }
            None if self.max_pending.is_some_and(|n| self.queue.len() >= n) => {
                // Drop-new: the pending keys keep their slots and order.
                bump(&counters.received, 1);
                bump(&counters.overflowed, 1);
            }
            None => {
                let (key, value) = (key.into_owned(), value.into_owned());
                bump(&counters.received, 1);
                self.queue.push_back(hash, key, value);
                counters
                    .pending
                    .store(self.queue.len() as u64, Ordering::Release);
                // Only an empty queue can have a parked consumer, so only the
                // empty -> non-empty edge needs a wake-up. Wake every listener:
                // a `Stream` may have left a stale one registered ahead of a
                // blocking `recv`'s, and a single notification could land there.
                if self.queue.len() == 1 {
                    self.notify.notify(usize::MAX);
                }
            }
        }
    }
}
