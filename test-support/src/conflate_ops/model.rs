//! A single-threaded reference model of the `keybus::conflate` API, written straight
//! from the contract (docs/design.md) and the API docs with no concern for speed: one `VecDeque` of
//! pending slots per receiver, in first-touch order.
//!
//! It is a third opinion for the differential runner: until the baseline lands it is
//! the only independent oracle, and afterwards a disagreement of all three points at
//! the one that is wrong. It exposes the same names and signatures as the real
//! modules (minus the blocking and async forms, which single-threaded sequences
//! cannot exercise), so `conflate_impl!` adapts it like any other.
//!
//! This file holds the state and the handles' construction; `model/send.rs` what a
//! send does (merges, filters, bounds, tombstones, the table), `model/receive.rs`
//! what the receive side returns and counts.

use keybus::{HubStats, ReceiverStats, RecvError, RecvTimeoutError, SendError, TryRecvError};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;
use std::time::Instant;

mod receive;
mod send;

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
