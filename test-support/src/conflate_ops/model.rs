//! A single-threaded reference model of the `keybus::conflate` API, written straight
//! from the contract (docs/design.md) and the API docs with no concern for speed: one `VecDeque` of
//! pending slots per receiver, in first-touch order.
//!
//! It is a third opinion for the differential runner: until the baseline lands it is
//! the only independent oracle, and afterwards a disagreement of all three points at
//! the one that is wrong. It exposes the same names and signatures as the real
//! modules (minus the blocking and async forms, which single-threaded sequences
//! cannot exercise), so `conflate_impl!` adapts it like any other.

use keybus::{HubStats, ReceiverStats, RecvError, RecvTimeoutError, SendError, TryRecvError};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;
use std::time::Instant;

type MergeBox<V> = Rc<dyn Fn(V, V) -> Option<V>>;
type PredBox<K> = Rc<dyn Fn(&K) -> bool>;
type TombBox<V> = Rc<dyn Fn(&V) -> bool>;

/// `keybus::Event` is `#[non_exhaustive]`, so the model has its own with the same
/// fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event<K, V> {
    pub key: K,
    pub value: V,
    pub sends: u64,
}

enum Filter<K> {
    All,
    Key(K),
    Pred(PredBox<K>),
}

impl<K: Eq> Filter<K> {
    /// May run user code, which may panic; the caller holds no mutable borrow.
    fn accepts(&self, key: &K) -> bool {
        match self {
            Filter::All => true,
            Filter::Key(k) => k == key,
            Filter::Pred(p) => p(key),
        }
    }
}

struct Slot<K, V> {
    key: K,
    value: V,
    sends: u64,
}

struct Rx<K, V> {
    filter: Filter<K>,
    merge: Option<MergeBox<V>>,
    /// Pending keys in first-touch order; at most one slot per key.
    queue: VecDeque<Slot<K, V>>,
    closed: bool,
    max_pending: Option<usize>,
    /// Counters kept by hand; `pending` and `pending_sends` are computed.
    stats: ReceiverStats,
    /// The hub's tombstone test, if any.
    tombstones: Option<TombBox<V>>,
    /// Keys this receiver delivered an event of in their current life.
    seen: Vec<K>,
}

impl<K, V> Rx<K, V> {
    /// Every key, newer wins, no bound: the receivers a send reaches first.
    fn is_plain(&self) -> bool {
        matches!(self.filter, Filter::All) && self.merge.is_none() && self.max_pending.is_none()
    }

    /// Closes this receiver, dropping what is pending (counted as dropped).
    fn close_and_drop(&mut self) {
        if !self.closed {
            self.closed = true;
        }
        self.stats.dropped += self.queue.iter().map(|s| s.sends).sum::<u64>();
        self.queue.clear();
    }

    fn is_tombstone(&self, value: &V) -> bool {
        self.tombstones.as_ref().is_some_and(|t| t(value))
    }

    /// A taken slot, as the consumer sees it: a value (its key now seen), a
    /// tombstone of a seen key (no longer seen), or nothing: a tombstone of a
    /// life this receiver never saw, counted annihilated.
    fn took(&mut self, slot: Slot<K, V>) -> Option<Event<K, V>>
    where
        K: Eq + Clone,
    {
        let seen_at = self.seen.iter().position(|k| *k == slot.key);
        if self.is_tombstone(&slot.value) {
            match seen_at {
                Some(at) => {
                    self.seen.swap_remove(at);
                }
                None => {
                    self.stats.annihilated += slot.sends;
                    return None;
                }
            }
        } else if seen_at.is_none() && self.tombstones.is_some() {
            self.seen.push(slot.key.clone());
        }
        self.stats.delivered += 1;
        self.stats.folded += slot.sends;
        Some(Event {
            key: slot.key,
            value: slot.value,
            sends: slot.sends,
        })
    }

    /// Whether the head would be dropped by [`took`](Self::took).
    fn head_is_dropped(&self) -> bool
    where
        K: Eq,
    {
        self.queue
            .front()
            .is_some_and(|head| self.is_tombstone(&head.value) && !self.seen.contains(&head.key))
    }
}

struct State<K, V> {
    merge: Option<MergeBox<V>>,
    /// Registered receivers in registration (fan-out) order.
    receivers: Vec<Rc<RefCell<Rx<K, V>>>>,
    /// Hub and Sender handles alive; the send side closes when it reaches zero.
    handles: usize,
    tx_closed: bool,
    hub_closed: bool,
    /// The state table (`retain_latest`), in first-touch order.
    table: Option<Vec<(K, V)>>,
    /// The tombstone test (`tombstones`).
    tombstones: Option<TombBox<V>>,
    sent: u64,
    refused: u64,
}

type Shared<K, V> = Rc<RefCell<State<K, V>>>;

/// A send handle's share of the state (a `Hub` or a `Sender`): counted while
/// alive, so dropping the last one closes the send side.
struct Handle<K, V>(Shared<K, V>);

impl<K, V> Clone for Handle<K, V> {
    fn clone(&self) -> Self {
        self.0.borrow_mut().handles += 1;
        Handle(self.0.clone())
    }
}

impl<K, V> Drop for Handle<K, V> {
    fn drop(&mut self) {
        let mut s = self.0.borrow_mut();
        s.handles -= 1;
        if s.handles == 0 {
            s.tx_closed = true;
        }
    }
}

impl<K, V> std::ops::Deref for Handle<K, V> {
    type Target = Shared<K, V>;
    fn deref(&self) -> &Shared<K, V> {
        &self.0
    }
}

#[derive(Clone)]
pub struct Hub<K, V> {
    shared: Handle<K, V>,
}

#[derive(Clone)]
pub struct Sender<K, V> {
    shared: Handle<K, V>,
}

pub struct Receiver<K, V> {
    rx: Rc<RefCell<Rx<K, V>>>,
    shared: Shared<K, V>,
}

pub struct ReceiverBuilder<K, V> {
    shared: Shared<K, V>,
    filter: Filter<K>,
    merge: Option<MergeBox<V>>,
    snapshot: bool,
    max_pending: Option<usize>,
}

pub struct HubBuilder<K, V> {
    merge: Option<MergeBox<V>>,
    retain: bool,
    tombstones: Option<TombBox<V>>,
    keys: std::marker::PhantomData<K>,
}

impl<K: Eq + Clone + 'static, V: Clone + 'static> HubBuilder<K, V> {
    pub fn merge(mut self, merge: impl Fn(V, V) -> Option<V> + Send + Sync + 'static) -> Self {
        self.merge = Some(Rc::new(merge));
        self
    }

    pub fn retain_latest(mut self) -> Self {
        self.retain = true;
        self
    }

    pub fn tombstones(mut self, test: impl Fn(&V) -> bool + Send + Sync + 'static) -> Self {
        self.tombstones = Some(Rc::new(test));
        self
    }

    pub fn build(self) -> Hub<K, V> {
        Hub::with(self.merge, self.retain, self.tombstones)
    }
}

fn deregister<K, V>(shared: &Shared<K, V>, rx: &Rc<RefCell<Rx<K, V>>>) {
    shared.borrow_mut().receivers.retain(|r| !Rc::ptr_eq(r, rx));
}

impl<K: Eq + Clone + 'static, V: Clone + 'static> Hub<K, V> {
    fn with(merge: Option<MergeBox<V>>, retain: bool, tombstones: Option<TombBox<V>>) -> Self {
        Hub {
            shared: Handle(Rc::new(RefCell::new(State {
                merge,
                receivers: Vec::new(),
                handles: 1,
                tx_closed: false,
                hub_closed: false,
                table: retain.then(Vec::new),
                tombstones,
                sent: 0,
                refused: 0,
            }))),
        }
    }

    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        Self::with(None, false, None)
    }

    pub fn with_merge<F>(merge: F) -> Self
    where
        F: Fn(V, V) -> Option<V> + Send + Sync + 'static,
    {
        Self::with(Some(Rc::new(merge)), false, None)
    }

    pub fn builder() -> HubBuilder<K, V> {
        HubBuilder {
            merge: None,
            retain: false,
            tombstones: None,
            keys: std::marker::PhantomData,
        }
    }

    pub fn latest(&self, key: &K) -> Option<V> {
        let s = self.shared.borrow();
        s.table
            .as_ref()?
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    }

    pub fn snapshot(&self) -> Vec<(K, V)> {
        self.shared.borrow().table.clone().unwrap_or_default()
    }

    pub fn stats(&self) -> HubStats {
        let s = self.shared.borrow();
        // `#[non_exhaustive]`: built from `Default`, field by field.
        let mut stats = HubStats::default();
        stats.sent = s.sent;
        stats.refused = s.refused;
        stats.receivers = s.receivers.len() as u64;
        stats
    }

    pub fn receiver(&self) -> Receiver<K, V> {
        self.receiver_builder().build()
    }

    pub fn receiver_builder(&self) -> ReceiverBuilder<K, V> {
        ReceiverBuilder {
            shared: Rc::clone(&self.shared),
            filter: Filter::All,
            merge: None,
            snapshot: false,
            max_pending: None,
        }
    }

    /// A send handle (the model counts it like the real ones).
    pub fn sender(&self) -> Sender<K, V> {
        Sender {
            shared: self.shared.clone(),
        }
    }

    /// Hard close: everything closes now and nothing drains (the real hubs'
    /// `close_now`).
    pub fn close_now(&self) {
        let receivers = {
            let mut s = self.shared.borrow_mut();
            s.tx_closed = true;
            s.hub_closed = true;
            std::mem::take(&mut s.receivers)
        };
        for rx in receivers {
            rx.borrow_mut().close_and_drop();
        }
    }

    pub fn is_closed(&self) -> bool {
        self.shared.borrow().hub_closed
    }
}

impl<K: Eq + Clone + 'static, V: Clone + 'static> ReceiverBuilder<K, V> {
    pub fn key(mut self, key: K) -> Self {
        self.filter = Filter::Key(key);
        self
    }

    pub fn key_filter<F>(mut self, keep: F) -> Self
    where
        F: Fn(&K) -> bool + Send + Sync + 'static,
    {
        self.filter = Filter::Pred(Rc::new(keep));
        self
    }

    pub fn merge(mut self, merge: impl Fn(V, V) -> Option<V> + Send + Sync + 'static) -> Self {
        self.merge = Some(Rc::new(merge));
        self
    }

    pub fn snapshot(mut self) -> Self {
        assert!(
            self.shared.borrow().table.is_some(),
            "model: snapshot() on a hub without retain_latest"
        );
        self.snapshot = true;
        self
    }

    pub fn max_pending(mut self, n: usize) -> Self {
        assert!(n >= 1, "model: max_pending(0)");
        self.max_pending = Some(n);
        self
    }

    pub fn build(self) -> Receiver<K, V> {
        // Born closed once the send side is closed (both implementations do
        // so for either close kind: nothing could ever reach it).
        let born_closed = self.shared.borrow().tx_closed;
        let mut queue = VecDeque::new();
        if self.snapshot && !born_closed {
            // The filter is user code and may panic: then nothing registers.
            // It runs on table entries in order until `max_pending` passed.
            let table = self.shared.borrow().table.clone().unwrap_or_default();
            let limit = self.max_pending.unwrap_or(usize::MAX);
            for (key, value) in table {
                if queue.len() == limit {
                    break;
                }
                if self.filter.accepts(&key) {
                    queue.push_back(Slot {
                        key,
                        value,
                        sends: 0,
                    });
                }
            }
        }
        let mut s = self.shared.borrow_mut();
        let rx = Rc::new(RefCell::new(Rx {
            filter: self.filter,
            merge: self.merge.or_else(|| s.merge.clone()),
            queue,
            closed: born_closed,
            max_pending: self.max_pending,
            stats: ReceiverStats::default(),
            tombstones: s.tombstones.clone(),
            seen: Vec::new(),
        }));
        if !born_closed {
            s.receivers.push(rx.clone());
        }
        drop(s);
        Receiver {
            rx,
            shared: self.shared,
        }
    }
}

impl<K: Eq + Clone + 'static, V: Clone + 'static> Sender<K, V> {
    pub fn send(&self, key: K, value: V) -> Result<(), SendError<K, V>> {
        let (receivers, merge, tombstones) = {
            let mut s = self.shared.borrow_mut();
            if s.tx_closed {
                s.refused += 1;
                return Err(SendError { key, value });
            }
            s.sent += 1;
            (s.receivers.clone(), s.merge.clone(), s.tombstones.clone())
        };
        let is_tomb = |v: &V| tombstones.as_ref().is_some_and(|t| t(v));
        let tomb = is_tomb(&value);
        // The table first, with the hub's merge; a panic there reaches no
        // receiver and drops the key's entry.
        let entry = {
            let mut s = self.shared.borrow_mut();
            match s.table.as_mut() {
                None => None,
                Some(table) => match table.iter().position(|(k, _)| *k == key) {
                    // A tombstone removes; the table holds none.
                    None if tomb => None,
                    None => {
                        table.push((key.clone(), value.clone()));
                        None
                    }
                    Some(pos) if tomb => {
                        table.remove(pos);
                        None
                    }
                    Some(pos) => Some((pos, table.remove(pos))),
                },
            }
        };
        if let Some((pos, (k, prev))) = entry {
            let merged = match &merge {
                None => Some(value.clone()),
                Some(m) => m(prev, value.clone()),
            };
            if let Some(v) = merged.filter(|v| !is_tomb(v)) {
                let mut s = self.shared.borrow_mut();
                s.table.as_mut().expect("retained").insert(pos, (k, v));
            }
        }
        // Fan out to the plain receivers (every key, newer wins, unbounded)
        // first, then to the others, each group in registration order. User
        // code runs with no borrow held, so a panic leaves every receiver
        // consistent: the ones before have the send, the panicking one and
        // the ones after do not.
        let plain = |rx: &Rc<RefCell<Rx<K, V>>>| rx.borrow().is_plain();
        let ordered: Vec<_> = receivers
            .iter()
            .filter(|rx| plain(rx))
            .chain(receivers.iter().filter(|rx| !plain(rx)))
            .collect();
        for rx in ordered {
            let accepted = rx.borrow().filter.accepts(&key);
            if !accepted {
                rx.borrow_mut().stats.filtered += 1;
                continue;
            }
            let mut r = rx.borrow_mut();
            let Some(pos) = r.queue.iter().position(|slot| slot.key == key) else {
                r.stats.received += 1;
                if r.max_pending.is_some_and(|n| r.queue.len() >= n) {
                    r.stats.overflowed += 1;
                    continue;
                }
                r.queue.push_back(Slot {
                    key: key.clone(),
                    value: value.clone(),
                    sends: 1,
                });
                continue;
            };
            r.stats.received += 1;
            // Take the slot out before the merge: if the merge panics, the pending
            // value is gone (conflate rule 9), exactly as here.
            let prev = r.queue.remove(pos).expect("position is in range");
            let merge = r.merge.clone();
            drop(r);
            let prev_sends = prev.sends;
            // No merge folds across a removal: a tombstone replaces what is
            // pending, and a value replaces a pending tombstone.
            let across = tomb || is_tomb(&prev.value);
            let merged = match merge {
                None => Some(value.clone()),
                Some(_) if across => Some(value.clone()),
                Some(m) => {
                    let next = value.clone();
                    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        m(prev.value, next)
                    })) {
                        Ok(merged) => merged,
                        Err(payload) => {
                            rx.borrow_mut().stats.dropped += prev_sends + 1;
                            std::panic::resume_unwind(payload);
                        }
                    }
                }
            };
            match merged {
                Some(merged) => rx.borrow_mut().queue.insert(
                    pos,
                    Slot {
                        key: prev.key,
                        value: merged,
                        sends: prev_sends + 1,
                    },
                ),
                None => rx.borrow_mut().stats.annihilated += prev_sends + 1,
            }
        }
        Ok(())
    }

    pub fn close(&self) {
        self.shared.borrow_mut().tx_closed = true;
    }

    pub fn is_closed(&self) -> bool {
        self.shared.borrow().tx_closed
    }
}

/// What a receive finds, by the precedence of conflate rule 6: closed beats empty beats value.
enum Ready {
    Closed,
    Empty,
    Value,
}

impl<K: Eq + Clone + 'static, V: Clone + 'static> Receiver<K, V> {
    fn ready(&self) -> Ready {
        let (hub_closed, tx_closed) = {
            let s = self.shared.borrow();
            (s.hub_closed, s.tx_closed)
        };
        let (closed, pending) = {
            let r = self.rx.borrow();
            (r.closed, !r.queue.is_empty())
        };
        if closed || hub_closed {
            Ready::Closed
        } else if pending {
            Ready::Value
        } else if tx_closed {
            // Drained after a graceful close: the receiver deregisters itself.
            self.close();
            Ready::Closed
        } else {
            Ready::Empty
        }
    }

    /// Takes the head; `None` if the consumer drops it (see `Rx::took`).
    fn pop(&self) -> Option<Event<K, V>> {
        let mut r = self.rx.borrow_mut();
        let slot = r.queue.pop_front().expect("ready");
        r.took(slot)
    }

    pub fn try_recv(&mut self) -> Result<Event<K, V>, TryRecvError> {
        loop {
            match self.ready() {
                Ready::Closed => return Err(TryRecvError::Closed),
                Ready::Empty => return Err(TryRecvError::Empty),
                Ready::Value => {
                    if let Some(event) = self.pop() {
                        return Ok(event);
                    }
                }
            }
        }
    }

    pub fn try_recv_all(&mut self) -> Result<Vec<Event<K, V>>, TryRecvError> {
        loop {
            match self.ready() {
                Ready::Closed => return Err(TryRecvError::Closed),
                Ready::Empty => return Err(TryRecvError::Empty),
                Ready::Value => {
                    let mut r = self.rx.borrow_mut();
                    let all = std::mem::take(&mut r.queue);
                    let batch: Vec<_> = all.into_iter().filter_map(|slot| r.took(slot)).collect();
                    if !batch.is_empty() {
                        return Ok(batch);
                    }
                }
            }
        }
    }

    pub fn peek(&mut self) -> Result<Event<K, V>, TryRecvError> {
        loop {
            match self.ready() {
                Ready::Closed => return Err(TryRecvError::Closed),
                Ready::Empty => return Err(TryRecvError::Empty),
                Ready::Value if self.rx.borrow().head_is_dropped() => {
                    let dropped = self.pop();
                    assert!(dropped.is_none());
                }
                Ready::Value => {
                    let r = self.rx.borrow();
                    let head = r.queue.front().expect("ready");
                    return Ok(Event {
                        key: head.key.clone(),
                        value: head.value.clone(),
                        sends: head.sends,
                    });
                }
            }
        }
    }

    /// Only what a single thread can observe: nothing arrives while it "waits", so
    /// any timeout answers like a zero one.
    pub fn recv_timeout(&mut self, _timeout: Duration) -> Result<Event<K, V>, RecvTimeoutError> {
        match self.try_recv() {
            Ok(event) => Ok(event),
            Err(TryRecvError::Closed) => Err(RecvTimeoutError::Closed),
            Err(TryRecvError::Empty) => Err(RecvTimeoutError::Timeout),
        }
    }

    /// Ready at once unless nothing is pending; then pending forever (no other
    /// thread can send while a single-threaded sequence polls).
    pub fn recv_async(&mut self) -> impl Future<Output = Result<Event<K, V>, RecvError>> + '_ {
        let now = self.try_recv();
        async move {
            match now {
                Err(TryRecvError::Empty) => std::future::pending().await,
                Err(TryRecvError::Closed) => Err(RecvError),
                Ok(event) => Ok(event),
            }
        }
    }

    /// Only callable where it would not block: a single thread cannot wait for a
    /// send.
    pub fn recv(&mut self) -> Result<Event<K, V>, RecvError> {
        match self.try_recv() {
            Ok(event) => Ok(event),
            Err(TryRecvError::Closed) => Err(RecvError),
            Err(TryRecvError::Empty) => panic!("model: recv would block forever"),
        }
    }

    pub fn recv_deadline(&mut self, _deadline: Instant) -> Result<Event<K, V>, RecvTimeoutError> {
        self.recv_timeout(Duration::ZERO)
    }

    /// A blocking iterator; only advanced where `recv` would not block.
    pub fn iter(&mut self) -> impl Iterator<Item = Event<K, V>> + '_ {
        std::iter::from_fn(move || self.recv().ok())
    }

    pub fn try_iter(&mut self) -> impl Iterator<Item = Event<K, V>> + '_ {
        std::iter::from_fn(move || self.try_recv().ok())
    }

    pub fn close(&self) {
        let mut r = self.rx.borrow_mut();
        if !r.closed {
            r.close_and_drop();
            drop(r);
            deregister(&self.shared, &self.rx);
        }
    }

    pub fn stats(&self) -> ReceiverStats {
        let r = self.rx.borrow();
        let mut s = r.stats;
        s.pending = r.queue.len() as u64;
        s.pending_sends = r.queue.iter().map(|slot| slot.sends).sum();
        s
    }

    pub fn is_closed(&self) -> bool {
        let s = self.shared.borrow();
        let r = self.rx.borrow();
        r.closed || s.hub_closed || (s.tx_closed && r.queue.is_empty())
    }

    pub fn len(&self) -> usize {
        let r = self.rx.borrow();
        if r.closed {
            0
        } else {
            r.queue.len()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K, V> Drop for Receiver<K, V> {
    fn drop(&mut self) {
        let mut r = self.rx.borrow_mut();
        r.close_and_drop();
        drop(r);
        deregister(&self.shared, &self.rx);
    }
}

impl<K: Eq + Clone + 'static, V: Clone + 'static> futures_core::Stream for Receiver<K, V> {
    type Item = Event<K, V>;

    /// Pending while empty (no other thread can send meanwhile); ends at closed.
    fn poll_next(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Event<K, V>>> {
        match self.get_mut().try_recv() {
            Ok(event) => Poll::Ready(Some(event)),
            Err(TryRecvError::Closed) => Poll::Ready(None),
            Err(TryRecvError::Empty) => Poll::Pending,
        }
    }
}
