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

/// Counts the hub and sender handles of a peer: the last one to go closes the
/// send side (`Shared::close` runs once), as dropping every `keybus` hub and
/// sender does.
mod handles {
    use std::ops::Deref;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[derive(Debug, Default)]
    pub struct Handles(AtomicUsize);

    /// A peer's shared state, with its handle count.
    pub trait Shared {
        fn handles(&self) -> &Handles;
        /// Closes the send side; called when the last handle goes.
        fn close(&self);
    }

    /// A hub's or a sender's hold on the shared state: counted from creation
    /// (or clone) to drop.
    pub struct Handle<S: Shared>(Arc<S>);

    impl<S: Shared> Handle<S> {
        pub fn new(shared: S) -> Self {
            shared.handles().0.fetch_add(1, Ordering::Relaxed);
            Handle(Arc::new(shared))
        }

        /// The shared state, without a hold on the send side (for receivers).
        pub fn arc(&self) -> Arc<S> {
            self.0.clone()
        }
    }

    impl<S: Shared> Clone for Handle<S> {
        fn clone(&self) -> Self {
            self.0.handles().0.fetch_add(1, Ordering::Relaxed);
            Handle(self.0.clone())
        }
    }

    impl<S: Shared> Drop for Handle<S> {
        fn drop(&mut self) {
            if self.0.handles().0.fetch_sub(1, Ordering::AcqRel) == 1 {
                self.0.close();
            }
        }
    }

    impl<S: Shared> Deref for Handle<S> {
        type Target = S;
        fn deref(&self) -> &S {
            &self.0
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
    use super::handles::{self, Handle, Handles};
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

    struct Shared<K, V> {
        receivers: RwLock<Vec<Arc<Rx<K, V>>>>,
        handles: Handles,
        closed: std::sync::atomic::AtomicBool,
    }

    impl<K, V> handles::Shared for Shared<K, V> {
        fn handles(&self) -> &Handles {
            &self.handles
        }
        fn close(&self) {
            self.closed
                .store(true, std::sync::atomic::Ordering::Release);
            for rx in self.receivers.read().unwrap().iter() {
                rx.pending.lock().unwrap().closed = true;
                rx.ready.notify_all();
            }
        }
    }

    pub struct Hub<K, V> {
        shared: Handle<Shared<K, V>>,
    }

    pub struct Sender<K, V> {
        shared: Handle<Shared<K, V>>,
    }

    pub struct Receiver<K, V> {
        rx: Arc<Rx<K, V>>,
        shared: Arc<Shared<K, V>>,
    }

    impl<K: Hash + Eq + Clone, V: Clone> Hub<K, V> {
        #[allow(clippy::new_without_default)]
        pub fn new() -> Self {
            Hub {
                shared: Handle::new(Shared {
                    receivers: RwLock::new(Vec::new()),
                    handles: Handles::default(),
                    closed: Default::default(),
                }),
            }
        }

        pub fn sender(&self) -> Sender<K, V> {
            Sender {
                shared: self.shared.clone(),
            }
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
            self.shared.receivers.write().unwrap().push(rx.clone());
            Receiver {
                rx,
                shared: self.shared.arc(),
            }
        }
    }

    impl<K: Hash + Eq + Clone, V: Clone> Sender<K, V> {
        pub fn send(&self, key: K, value: V) -> Result<(), SendError<K, V>> {
            let receivers = self.shared.receivers.read().unwrap();
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
    use super::handles::{self, Handle, Handles};
    pub use super::Event;
    use super::{Caps, Hash};
    use keybus::{RecvError, SendError, TryRecvError};
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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

    struct Shared<K, V> {
        registry: RwLock<Registry<K, V>>,
        /// `registry.channels.len()`, for receivers to notice new keys cheaply.
        channels: AtomicUsize,
        handles: Handles,
        closed: AtomicBool,
    }

    impl<K, V> handles::Shared for Shared<K, V> {
        fn handles(&self) -> &Handles {
            &self.handles
        }
        fn close(&self) {
            // Release: a receiver that sees it then sees every send.
            self.closed.store(true, Ordering::Release);
        }
    }

    pub struct Hub<K, V> {
        shared: Handle<Shared<K, V>>,
    }

    pub struct Sender<K, V> {
        shared: Handle<Shared<K, V>>,
    }

    pub struct Receiver<K, V> {
        shared: Arc<Shared<K, V>>,
        subs: Vec<(K, watch::Receiver<Option<V>>)>,
        next: usize,
    }

    impl<K: Hash + Eq + Clone, V: Clone> Hub<K, V> {
        #[allow(clippy::new_without_default)]
        pub fn new() -> Self {
            Hub {
                shared: Handle::new(Shared {
                    registry: RwLock::new(Registry {
                        index: HashMap::new(),
                        channels: Vec::new(),
                    }),
                    channels: AtomicUsize::new(0),
                    handles: Handles::default(),
                    closed: AtomicBool::new(false),
                }),
            }
        }

        pub fn sender(&self) -> Sender<K, V> {
            Sender {
                shared: self.shared.clone(),
            }
        }

        pub fn receiver(&self) -> Receiver<K, V> {
            let mut rx = Receiver {
                shared: self.shared.arc(),
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
                let reg = self.shared.registry.read().unwrap();
                if let Some(&i) = reg.index.get(&key) {
                    reg.channels[i].1.send_replace(Some(value));
                    return Ok(());
                }
            }
            let mut reg = self.shared.registry.write().unwrap();
            match reg.index.get(&key) {
                Some(&i) => {
                    reg.channels[i].1.send_replace(Some(value));
                }
                None => {
                    let i = reg.channels.len();
                    reg.channels
                        .push((key.clone(), watch::Sender::new(Some(value))));
                    reg.index.insert(key, i);
                    self.shared.channels.store(i + 1, Ordering::Release);
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
                let closed = self.shared.closed.load(Ordering::Acquire);
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
            let closed = self.shared.closed.load(Ordering::Acquire);
            match self.scan_one() {
                Some(e) => Ok(e),
                None if closed => Err(TryRecvError::Closed),
                None => Err(TryRecvError::Empty),
            }
        }

        /// Every changed key, in one scan (not one instant).
        pub fn try_recv_all(&mut self) -> Result<Vec<Event<K, V>>, TryRecvError> {
            let closed = self.shared.closed.load(Ordering::Acquire);
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
