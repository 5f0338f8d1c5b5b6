//! What a user would build instead of `keybus::conflate`, each wrapped in the same
//! small surface (`Hub::new`, `sender`, `receiver`, `send`, `recv`, `try_recv`,
//! `try_recv_all`, close on drop) so that `conflate_scenarios!` expands over them
//! unchanged. Each peer says which scenarios it cannot express in its `CAPS`.
//!
//! - [`mutex_map`]: the hand-rolled design, one `Mutex<HashMap + VecDeque>` and a
//!   `Condvar` per receiver, a `RwLock<Vec<_>>` of receivers, std's default
//!   (SipHash) `HashMap`: the way users write it.
//! - [`tokio_watch`]: one `tokio::sync::watch` channel per key, every receiver
//!   subscribed to every key.
//! - [`tokio_broadcast`]: one `tokio::sync::broadcast` channel of `(key, value)`
//!   with a subscription per receiver; a receiver that falls behind loses the
//!   oldest messages (`Lagged`). What telemetry users do today to get "keep the
//!   latest".
//!
//! None of them is keybus's contract; the differences that matter for reading the
//! numbers are on each module.

#![allow(dead_code)]

use std::hash::Hash;

/// What a peer can take part in; the drivers skip the rest and say why.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    /// Largest key set the peer runs with (`fan_out`, `drain_cost`).
    pub max_keys: u64,
    /// Largest backlog it can hold for `drain_cost` and `cut_latency`.
    pub max_backlog: u64,
    /// Whether it runs `cut_latency` at all.
    pub cut_latency: bool,
}

impl Caps {
    pub const ALL: Caps = Caps {
        max_keys: u64::MAX,
        max_backlog: u64::MAX,
        cut_latency: true,
    };
}

/// A delivery, with the fields the scenarios read (`keybus::Event` is
/// `#[non_exhaustive]`, so peers cannot build one).
#[derive(Debug, Clone)]
pub struct Event<K, V> {
    pub key: K,
    pub value: V,
    /// Sends this delivery stands for; peers that cannot tell say 1.
    pub sends: u64,
}

/// The hub and sender handles of a peer (`mutex_map`, `tokio_watch`), written
/// once: the last of them to go closes the send side (and runs
/// `OnClose::on_close`, once), as dropping every `keybus` hub and sender does.
/// Receivers hold the [`Shared`](handles::Shared) state without counting.
mod handles {
    use std::ops::Deref;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    /// What a peer does when its send side closes, besides setting the flag.
    pub trait OnClose {
        fn on_close(&self) {}
    }

    /// A peer's state `S`, the count of its hub and sender handles, and
    /// whether its send side is closed.
    pub struct Shared<S> {
        state: S,
        handles: AtomicUsize,
        closed: AtomicBool,
    }

    impl<S> Shared<S> {
        /// Acquire: pairs with the close's Release, so a receiver that sees the
        /// send side closed then sees every send.
        pub fn is_closed(&self) -> bool {
            self.closed.load(Ordering::Acquire)
        }
    }

    impl<S> Deref for Shared<S> {
        type Target = S;
        fn deref(&self) -> &S {
            &self.state
        }
    }

    /// One counted hold on the shared state.
    struct Handle<S: OnClose>(Arc<Shared<S>>);

    impl<S: OnClose> Handle<S> {
        fn acquire(shared: &Arc<Shared<S>>) -> Self {
            shared.handles.fetch_add(1, Ordering::Relaxed);
            Handle(shared.clone())
        }
    }

    impl<S: OnClose> Drop for Handle<S> {
        fn drop(&mut self) {
            if self.0.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
                self.0.closed.store(true, Ordering::Release);
                self.0.state.on_close();
            }
        }
    }

    /// A peer's hub; the peer adds `new` and `receiver`.
    pub struct Hub<S: OnClose>(Handle<S>);

    /// A peer's sender; the peer adds `send`.
    pub struct Sender<S: OnClose>(Handle<S>);

    impl<S: OnClose> Hub<S> {
        pub fn with_state(state: S) -> Self {
            let shared = Arc::new(Shared {
                state,
                handles: AtomicUsize::new(0),
                closed: AtomicBool::new(false),
            });
            Hub(Handle::acquire(&shared))
        }

        pub fn sender(&self) -> Sender<S> {
            Sender(Handle::acquire(&self.0 .0))
        }

        /// The shared state, uncounted (for a receiver).
        pub fn shared(&self) -> Arc<Shared<S>> {
            self.0 .0.clone()
        }
    }

    impl<S: OnClose> Deref for Hub<S> {
        type Target = Shared<S>;
        fn deref(&self) -> &Shared<S> {
            &self.0 .0
        }
    }

    impl<S: OnClose> Deref for Sender<S> {
        type Target = Shared<S>;
        fn deref(&self) -> &Shared<S> {
            &self.0 .0
        }
    }
}

/// The hand-rolled design: per receiver one `Mutex<{ HashMap<K, (V, sends)>,
/// VecDeque<K> }>` and a `Condvar`; the senders walk a `RwLock<Vec<_>>` of
/// receivers. A send for a pending key overwrites the map entry; a new key is
/// pushed on the queue and wakes the consumer. `try_recv_all` drains the whole
/// queue under the receiver's lock, so a publisher waits for the size of the
/// backlog. std's `HashMap` with its default SipHash hasher, as users write it.
pub mod mutex_map {
    use super::handles::{self, OnClose, Shared};
    pub use super::Event;
    use super::{Caps, Hash};
    use keybus::{RecvError, SendError, TryRecvError};
    use std::collections::{hash_map, HashMap, VecDeque};
    use std::sync::{Arc, Condvar, Mutex, RwLock};

    pub const CAPS: Caps = Caps::ALL;

    struct Pending<K, V> {
        map: HashMap<K, (V, u64)>,
        queue: VecDeque<K>,
        closed: bool,
    }

    struct Rx<K, V> {
        pending: Mutex<Pending<K, V>>,
        ready: Condvar,
    }

    pub struct State<K, V> {
        receivers: RwLock<Vec<Arc<Rx<K, V>>>>,
    }

    impl<K, V> OnClose for State<K, V> {
        fn on_close(&self) {
            for rx in self.receivers.read().unwrap().iter() {
                rx.pending.lock().unwrap().closed = true;
                rx.ready.notify_all();
            }
        }
    }

    pub type Hub<K, V> = handles::Hub<State<K, V>>;
    pub type Sender<K, V> = handles::Sender<State<K, V>>;

    pub struct Receiver<K, V> {
        rx: Arc<Rx<K, V>>,
        shared: Arc<Shared<State<K, V>>>,
    }

    impl<K: Hash + Eq + Clone, V: Clone> Hub<K, V> {
        #[allow(clippy::new_without_default)]
        pub fn new() -> Self {
            Hub::with_state(State {
                receivers: RwLock::new(Vec::new()),
            })
        }

        pub fn receiver(&self) -> Receiver<K, V> {
            let rx = Arc::new(Rx {
                pending: Mutex::new(Pending {
                    map: HashMap::new(),
                    queue: VecDeque::new(),
                    closed: false,
                }),
                ready: Condvar::new(),
            });
            self.receivers.write().unwrap().push(rx.clone());
            Receiver {
                rx,
                shared: self.shared(),
            }
        }
    }

    impl<K: Hash + Eq + Clone, V: Clone> Sender<K, V> {
        pub fn send(&self, key: K, value: V) -> Result<(), SendError<K, V>> {
            let receivers = self.receivers.read().unwrap();
            for rx in receivers.iter() {
                let mut p = rx.pending.lock().unwrap();
                let p = &mut *p;
                match p.map.entry(key.clone()) {
                    hash_map::Entry::Occupied(mut e) => {
                        let slot = e.get_mut();
                        slot.0 = value.clone();
                        slot.1 += 1;
                    }
                    hash_map::Entry::Vacant(e) => {
                        e.insert((value.clone(), 1));
                        p.queue.push_back(key.clone());
                        if p.queue.len() == 1 {
                            rx.ready.notify_one();
                        }
                    }
                }
            }
            Ok(())
        }
    }

    impl<K: Hash + Eq, V> Pending<K, V> {
        fn pop(&mut self) -> Option<Event<K, V>> {
            let key = self.queue.pop_front()?;
            let (value, sends) = self.map.remove(&key).expect("queued key is pending");
            Some(Event { key, value, sends })
        }
    }

    impl<K: Hash + Eq + Clone, V: Clone> Receiver<K, V> {
        pub fn recv(&mut self) -> Result<Event<K, V>, RecvError> {
            let mut p = self.rx.pending.lock().unwrap();
            loop {
                if let Some(e) = p.pop() {
                    return Ok(e);
                }
                if p.closed {
                    return Err(RecvError);
                }
                p = self.rx.ready.wait(p).unwrap();
            }
        }

        pub fn try_recv(&mut self) -> Result<Event<K, V>, TryRecvError> {
            let mut p = self.rx.pending.lock().unwrap();
            match p.pop() {
                Some(e) => Ok(e),
                None if p.closed => Err(TryRecvError::Closed),
                None => Err(TryRecvError::Empty),
            }
        }

        /// The whole backlog, drained under the receiver's lock.
        pub fn try_recv_all(&mut self) -> Result<Vec<Event<K, V>>, TryRecvError> {
            let mut p = self.rx.pending.lock().unwrap();
            if p.queue.is_empty() {
                return Err(if p.closed {
                    TryRecvError::Closed
                } else {
                    TryRecvError::Empty
                });
            }
            let mut batch = Vec::with_capacity(p.queue.len());
            while let Some(e) = p.pop() {
                batch.push(e);
            }
            Ok(batch)
        }
    }

    impl<K, V> Drop for Receiver<K, V> {
        fn drop(&mut self) {
            self.shared
                .receivers
                .write()
                .unwrap()
                .retain(|rx| !Arc::ptr_eq(rx, &self.rx));
        }
    }
}

/// One `tokio::sync::watch` channel per key (created by the first send of the
/// key, under a registry write lock), every receiver subscribed to every key.
///
/// - A receiver learns which keys changed only by looking at each of its
///   subscriptions: `recv` scans them round-robin from where it last found one,
///   `try_recv_all` scans all of them. That is O(keys) per pass, the price of
///   having no change queue.
/// - In synchronous code there is no way to wait on "any of N watch channels"
///   without a notifier of one's own; this adapter polls (spin, then
///   `yield_now`), which on an oversubscribed machine favours it (it never
///   parks).
/// - No send count: `sends` is always 1. Delivery order is the scan order, not
///   first-touch order.
/// - `CAPS`: at most 100,000 keys (each key is a channel plus a subscription per
///   receiver, several hundred bytes each: the 1,000,000-key runs would measure
///   the allocator), and no `cut_latency` (its publisher sends a fresh key every
///   time, so it would time channel creation under the registry write lock, not
///   a cut; watch has no cut).
pub mod tokio_watch {
    use super::handles::{self, OnClose, Shared};
    pub use super::Event;
    use super::{Caps, Hash};
    use keybus::{RecvError, SendError, TryRecvError};
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, RwLock};
    use tokio::sync::watch;

    pub const CAPS: Caps = Caps {
        max_keys: 100_000,
        max_backlog: 100_000,
        cut_latency: false,
    };

    struct Registry<K, V> {
        index: HashMap<K, usize>,
        channels: Vec<(K, watch::Sender<Option<V>>)>,
    }

    pub struct State<K, V> {
        registry: RwLock<Registry<K, V>>,
        /// `registry.channels.len()`, for receivers to notice new keys cheaply.
        channels: AtomicUsize,
    }

    /// Closing only sets the flag; receivers poll it.
    impl<K, V> OnClose for State<K, V> {}

    pub type Hub<K, V> = handles::Hub<State<K, V>>;
    pub type Sender<K, V> = handles::Sender<State<K, V>>;

    pub struct Receiver<K, V> {
        shared: Arc<Shared<State<K, V>>>,
        subs: Vec<(K, watch::Receiver<Option<V>>)>,
        next: usize,
    }

    impl<K: Hash + Eq + Clone, V: Clone> Hub<K, V> {
        #[allow(clippy::new_without_default)]
        pub fn new() -> Self {
            Hub::with_state(State {
                registry: RwLock::new(Registry {
                    index: HashMap::new(),
                    channels: Vec::new(),
                }),
                channels: AtomicUsize::new(0),
            })
        }

        pub fn receiver(&self) -> Receiver<K, V> {
            let mut rx = Receiver {
                shared: self.shared(),
                subs: Vec::new(),
                next: 0,
            };
            rx.subscribe_new();
            rx
        }
    }

    impl<K: Hash + Eq + Clone, V: Clone> Sender<K, V> {
        pub fn send(&self, key: K, value: V) -> Result<(), SendError<K, V>> {
            {
                let reg = self.registry.read().unwrap();
                if let Some(&i) = reg.index.get(&key) {
                    reg.channels[i].1.send_replace(Some(value));
                    return Ok(());
                }
            }
            let mut reg = self.registry.write().unwrap();
            match reg.index.get(&key) {
                Some(&i) => {
                    reg.channels[i].1.send_replace(Some(value));
                }
                None => {
                    let i = reg.channels.len();
                    reg.channels
                        .push((key.clone(), watch::Sender::new(Some(value))));
                    reg.index.insert(key, i);
                    self.channels.store(i + 1, Ordering::Release);
                }
            }
            Ok(())
        }
    }

    impl<K: Hash + Eq + Clone, V: Clone> Receiver<K, V> {
        /// Subscribes to keys created since the last call. A new channel's
        /// current value counts as unseen.
        fn subscribe_new(&mut self) {
            if self.shared.channels.load(Ordering::Acquire) == self.subs.len() {
                return;
            }
            let reg = self.shared.registry.read().unwrap();
            for (key, tx) in &reg.channels[self.subs.len()..] {
                let mut rx = tx.subscribe();
                rx.mark_changed();
                self.subs.push((key.clone(), rx));
            }
        }

        /// One round-robin pass over the subscriptions.
        fn scan_one(&mut self) -> Option<Event<K, V>> {
            self.subscribe_new();
            let n = self.subs.len();
            for step in 0..n {
                let i = (self.next + step) % n;
                let (key, rx) = &mut self.subs[i];
                if rx.has_changed().unwrap_or(false) {
                    let value = rx.borrow_and_update().clone();
                    self.next = (i + 1) % n;
                    if let Some(value) = value {
                        return Some(Event {
                            key: key.clone(),
                            value,
                            sends: 1,
                        });
                    }
                }
            }
            None
        }

        pub fn recv(&mut self) -> Result<Event<K, V>, RecvError> {
            let mut idle = 0u32;
            loop {
                let closed = self.shared.is_closed();
                if let Some(e) = self.scan_one() {
                    return Ok(e);
                }
                if closed {
                    return Err(RecvError);
                }
                idle += 1;
                if idle < 16 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }

        pub fn try_recv(&mut self) -> Result<Event<K, V>, TryRecvError> {
            let closed = self.shared.is_closed();
            match self.scan_one() {
                Some(e) => Ok(e),
                None if closed => Err(TryRecvError::Closed),
                None => Err(TryRecvError::Empty),
            }
        }

        /// Every changed key, in one scan (not one instant).
        pub fn try_recv_all(&mut self) -> Result<Vec<Event<K, V>>, TryRecvError> {
            let closed = self.shared.is_closed();
            self.subscribe_new();
            let mut batch = Vec::new();
            for (key, rx) in &mut self.subs {
                if rx.has_changed().unwrap_or(false) {
                    if let Some(value) = rx.borrow_and_update().clone() {
                        batch.push(Event {
                            key: key.clone(),
                            value,
                            sends: 1,
                        });
                    }
                }
            }
            match (batch.is_empty(), closed) {
                (false, _) => Ok(batch),
                (true, true) => Err(TryRecvError::Closed),
                (true, false) => Err(TryRecvError::Empty),
            }
        }
    }
}

/// One `tokio::sync::broadcast` channel of `(key, value)` (capacity
/// [`CAPACITY`](tokio_broadcast::CAPACITY)), one subscription per receiver. A
/// receiver that falls more than the capacity behind loses the oldest messages
/// (`Lagged(n)`, skipped here): drop-oldest instead of keep-latest-per-key.
///
/// - Nothing coalesces at send: a receiver that keeps up handles every send
///   (`sends` is 1), and one that does not loses whichever keys were oldest,
///   hot or cold.
/// - `try_recv_all` drains up to the capacity and keeps the latest value per key
///   (receiver-side conflation, one `HashMap` per call, first-seen order), which
///   is what a user wanting one entry per key writes.
/// - A send with no subscriber stores nothing (tokio answers an error, mapped to
///   `Ok` here, as keybus answers `Ok`).
/// - `CAPS`: backlogs above the capacity are not held (the older part is
///   dropped), so `drain_cost` runs only up to 1,024 keys; `cut_latency` runs,
///   but the cut it races is never more than 1,024 messages.
pub mod tokio_broadcast {
    pub use super::Event;
    use super::{Caps, Hash};
    use keybus::{RecvError, SendError, TryRecvError};
    use std::collections::HashMap;
    use tokio::sync::broadcast;

    /// A typical telemetry choice; a power of two, as tokio rounds up to one.
    pub const CAPACITY: usize = 1024;

    pub const CAPS: Caps = Caps {
        max_keys: u64::MAX,
        max_backlog: CAPACITY as u64,
        cut_latency: true,
    };

    pub struct Hub<K, V> {
        tx: broadcast::Sender<(K, V)>,
    }

    pub struct Sender<K, V> {
        tx: broadcast::Sender<(K, V)>,
    }

    pub struct Receiver<K, V> {
        rx: broadcast::Receiver<(K, V)>,
    }

    impl<K: Hash + Eq + Clone, V: Clone> Hub<K, V> {
        #[allow(clippy::new_without_default)]
        pub fn new() -> Self {
            Hub {
                tx: broadcast::Sender::new(CAPACITY),
            }
        }

        pub fn sender(&self) -> Sender<K, V> {
            Sender {
                tx: self.tx.clone(),
            }
        }

        pub fn receiver(&self) -> Receiver<K, V> {
            Receiver {
                rx: self.tx.subscribe(),
            }
        }
    }

    impl<K: Hash + Eq + Clone, V: Clone> Sender<K, V> {
        pub fn send(&self, key: K, value: V) -> Result<(), SendError<K, V>> {
            // Err only means "no subscriber": nothing stored, as keybus.
            let _ = self.tx.send((key, value));
            Ok(())
        }
    }

    fn event<K, V>((key, value): (K, V)) -> Event<K, V> {
        Event {
            key,
            value,
            sends: 1,
        }
    }

    impl<K: Hash + Eq + Clone, V: Clone> Receiver<K, V> {
        pub fn recv(&mut self) -> Result<Event<K, V>, RecvError> {
            loop {
                match self.rx.blocking_recv() {
                    Ok(m) => return Ok(event(m)),
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return Err(RecvError),
                }
            }
        }

        pub fn try_recv(&mut self) -> Result<Event<K, V>, TryRecvError> {
            loop {
                match self.rx.try_recv() {
                    Ok(m) => return Ok(event(m)),
                    Err(broadcast::error::TryRecvError::Lagged(_)) => continue,
                    Err(broadcast::error::TryRecvError::Empty) => return Err(TryRecvError::Empty),
                    Err(broadcast::error::TryRecvError::Closed) => {
                        return Err(TryRecvError::Closed)
                    }
                }
            }
        }

        /// Drains what is there and keeps the latest value per key.
        pub fn try_recv_all(&mut self) -> Result<Vec<Event<K, V>>, TryRecvError> {
            let first = self.try_recv()?;
            let mut at: HashMap<K, usize> = HashMap::new();
            let mut batch = Vec::new();
            let mut add = |e: Event<K, V>| match at.get(&e.key) {
                Some(&i) => {
                    let slot: &mut Event<K, V> = &mut batch[i];
                    slot.value = e.value;
                    slot.sends += 1;
                }
                None => {
                    at.insert(e.key.clone(), batch.len());
                    batch.push(e);
                }
            };
            add(first);
            while let Ok(e) = self.try_recv() {
                add(e);
            }
            Ok(batch)
        }
    }
}
