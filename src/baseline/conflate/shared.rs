//! The state every handle points at: the state word, the one hub mutex and,
//! under it, every receiver's pending set.

use super::queue::KeyQueue;
use super::state::State;
use crate::error::{SendError, TryRecvError};
use crate::policy::{KeyFilter, Merge, ReceiverConfig};
use crate::reentrancy::{forbid_inside_send, SendScope};
#[cfg(test)]
use crate::sync::AtomicU64;
use crate::sync::{lock, Arc, Mutex, MutexGuard, Notify};
use std::borrow::Cow;
use std::hash::{BuildHasher, Hash};
use std::mem;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

pub(super) struct Shared<K, V> {
    pub(super) state: State,
    inner: Mutex<Inner<K, V>>,
    /// The hub's merge; a receiver built without its own copies this one.
    merge: Merge<V>,
    /// One hash per send serves every receiver's index.
    hasher: foldhash::fast::RandomState,
    /// Acquisitions of `inner`, so a test can prove a path never takes it.
    #[cfg(test)]
    pub(super) locks: AtomicU64,
}

struct Inner<K, V> {
    /// Registered receivers, in registration order (= fan-out order), which is
    /// also ascending `id` order, so a receiver finds itself by binary search.
    receivers: Vec<RxState<K, V>>,
    next_id: u64,
}

/// One registered receiver, as the send path sees it.
struct RxState<K, V> {
    id: u64,
    filter: KeyFilter<K>,
    merge: Merge<V>,
    queue: KeyQueue<K, V>,
    notify: Arc<Notify>,
}

/// What registration hands to a new `Receiver`.
pub(super) struct Registration {
    pub(super) id: u64,
    pub(super) notify: Arc<Notify>,
}

impl<K, V> Inner<K, V> {
    fn position(&self, id: u64) -> Option<usize> {
        self.receivers.binary_search_by_key(&id, |rx| rx.id).ok()
    }

    /// Unregisters the receiver at `pos` and hands it back, so the caller drops
    /// its pending keys and values (user `Drop` code) after unlocking.
    fn deregister(&mut self, pos: usize, state: &State) -> RxState<K, V> {
        state.deregister_locked();
        self.receivers.remove(pos)
    }
}

impl<K, V> Shared<K, V> {
    pub(super) fn new(merge: Merge<V>) -> Self {
        Shared {
            state: State::new(),
            inner: Mutex::new(Inner {
                receivers: Vec::new(),
                next_id: 0,
            }),
            merge,
            hasher: foldhash::fast::RandomState::default(),
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
                rx.notify.notify(usize::MAX);
            }
        }
    }

    /// Hard close: sends fail and every receiver is deregistered with its pending
    /// values dropped. Idempotent.
    pub(super) fn close_hub(&self) {
        let mut inner = self.lock("Hub::close");
        if !self.state.close_hub_locked() {
            return;
        }
        let gone = mem::take(&mut inner.receivers);
        drop(inner);
        for rx in &gone {
            rx.notify.notify(usize::MAX);
        }
    }

    /// Closes one receiver: deregistered now, pending values dropped. Idempotent.
    pub(super) fn close_receiver(&self, id: u64) {
        let mut inner = self.lock("Receiver::close (or dropping a Receiver)");
        if let Some(pos) = inner.position(id) {
            let gone = inner.deregister(pos, &self.state);
            drop(inner);
            gone.notify.notify(usize::MAX);
        }
    }

    /// Runs `op` on the receiver's queue under the hub mutex, with the receive
    /// side's precedence: closed beats empty beats value. `op` returns `None`
    /// exactly when the queue is empty. A receiver that finds its queue empty
    /// after a graceful close deregisters itself here.
    pub(super) fn take<R>(
        &self,
        id: u64,
        op: impl FnOnce(&mut KeyQueue<K, V>) -> Option<R>,
    ) -> Result<R, TryRecvError> {
        let mut inner = self.lock("a receive on a Receiver");
        // Not registered: closed itself, torn down by `Hub::close`, born closed,
        // or already drained after a graceful close.
        let Some(pos) = inner.position(id) else {
            return Err(TryRecvError::Closed);
        };
        if let Some(r) = op(&mut inner.receivers[pos].queue) {
            return Ok(r);
        }
        if !self.state.load_locked().send_closed() {
            return Err(TryRecvError::Empty);
        }
        let gone = inner.deregister(pos, &self.state);
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
                inner.receivers[pos].queue.len() == 0 && self.state.load_locked().send_closed()
            }
        }
    }
}

impl<K, V> Shared<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
{
    /// Registers a receiver, or makes it born closed if the send side is already
    /// closed (it could only ever answer `Closed`).
    pub(super) fn register(&self, config: ReceiverConfig<K, V>) -> Registration {
        let notify = Arc::new(Notify::new());
        let mut inner = self.lock("Hub::receiver (ReceiverBuilder::build)");
        let id = inner.next_id;
        inner.next_id += 1;
        if !self.state.load_locked().send_closed() {
            inner.receivers.push(RxState {
                id,
                filter: config.filter,
                merge: config.merge.unwrap_or_else(|| self.merge.clone()),
                queue: KeyQueue::new(),
                notify: notify.clone(),
            });
            self.state.register_locked();
        }
        Registration { id, notify }
    }

    /// The whole send: one atomic load, then, only if someone listens, the fan-out
    /// under the hub mutex.
    pub(super) fn send(&self, key: K, value: V) -> Result<(), SendError<K, V>> {
        let word = self.state.load();
        if word.send_closed() {
            return Err(SendError { key, value });
        }
        if word.live() == 0 {
            return Ok(());
        }
        // `K: Hash` is user code: run it before anything is locked or changed.
        let hash = self.hasher.hash_one(&key);
        // Marks this thread as inside the send until the mutex is released: user
        // code that calls back into the hub then panics instead of deadlocking.
        let scope = SendScope::enter(self);
        let mut inner = self.lock_raw();
        // Re-decided under the mutex, which `Sender::close` also holds: this is
        // what makes a send racing a close either fully published or refused.
        if self.state.load_locked().send_closed() {
            return Err(SendError { key, value });
        }
        // The state is consistent at every point a user call can unwind from
        // (see `RxState::deliver`), so catch the panic, release the mutex
        // unpoisoned, and only then hand the panic to the caller.
        let outcome = catch_unwind(AssertUnwindSafe(|| inner.fan_out(hash, key, value)));
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
    /// Offers one send to every receiver in registration order. The last one
    /// takes the key and value by move; the others get clones, made only when
    /// needed. A panic at a receiver leaves the earlier ones delivered and the
    /// later ones untouched.
    fn fan_out(&mut self, hash: u64, key: K, value: V) {
        let Some((last, rest)) = self.receivers.split_last_mut() else {
            return;
        };
        for rx in rest {
            rx.deliver(hash, Cow::Borrowed(&key), Cow::Borrowed(&value));
        }
        last.deliver(hash, Cow::Owned(key), Cow::Owned(value));
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
    fn deliver(&mut self, hash: u64, key: Cow<'_, K>, value: Cow<'_, V>) {
        if !self.filter.accepts(&key) {
            return;
        }
        match self.queue.find(hash, &key) {
            Some(at) => {
                // Coalesce: the key keeps its place; no allocation.
                self.queue.merge_into(at, value.into_owned(), &self.merge);
            }
            None => {
                self.queue
                    .push_back(hash, key.into_owned(), value.into_owned());
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
