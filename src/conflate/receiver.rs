//! The receive side: one consumer per receiver, enforced by `&mut self`.

use super::core::{Local, RxCore};
use super::shared::Shared;
use crate::error::{RecvError, RecvTimeoutError, TryRecvError};
use crate::event::Event;
use crate::hub_word::HubWord;
use crate::stats::ReceiverStats;
use crate::sync::{Arc, Listener};
use crate::wait::{self, WaitFuture};
use futures_core::Stream;
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// One subscriber of a [`Hub`](super::Hub): a slot per pending key and a
/// first-touch key queue, consumed by one owner (`&mut self` methods).
///
/// `Send + Sync`. Dropping it is [`close`](Self::close).
pub struct Receiver<K, V> {
    pub(crate) core: Arc<RxCore<K, V>>,
    pub(crate) shared: Arc<Shared<K, V>>,
    pub(crate) local: Local,
    /// Parking state of the `Stream` implementation between polls.
    pub(crate) listener: Option<Listener>,
}

/// The consumer's borrowed parts, so an attempt closure can hold them while the
/// listener is borrowed separately.
struct Parts<'a, K, V> {
    core: &'a RxCore<K, V>,
    shared: &'a Shared<K, V>,
    local: &'a mut Local,
}

impl<K, V> Parts<'_, K, V>
where
    K: Hash + Eq + Clone,
{
    /// The receiver is done if it was closed (by itself or by `Hub::close`, which
    /// marks every registered receiver before it returns), or the send side closed,
    /// no send is in flight, and nothing is pending.
    ///
    /// A value found is returned without reading the hub's state word, which every
    /// send writes twice: the consumer's fast path stays off that cache line, and
    /// so does its idle polling until the send side has closed. After that, the
    /// word is read and then the slots are looked at *again*: if the word said
    /// quiescent, nothing can arrive after that second look.
    fn closed_or<T>(
        &mut self,
        mut take: impl FnMut(&RxCore<K, V>, &mut Local) -> Option<T>,
    ) -> Result<Option<T>, RecvError> {
        if self.core.is_closed() {
            return Err(RecvError);
        }
        if let Some(found) = take(self.core, self.local) {
            return Ok(Some(found));
        }
        if !self.core.tx_closed() {
            // The common idle case: nothing pending, send side open. The hub's
            // state word is not read (see `RxCore::tx_closed`).
            return Ok(None);
        }
        let state = self.shared.state.load();
        if state.hub_closed() {
            return Err(RecvError);
        }
        if let Some(found) = take(self.core, self.local) {
            return Ok(Some(found));
        }
        if state.quiescent_closed() {
            // Drained after a graceful close: deregister now (conflate rule 7, docs/design.md).
            if self.core.close() {
                self.shared.deregister(self.core);
            }
            return Err(RecvError);
        }
        Ok(None)
    }

    fn attempt(&mut self) -> Option<Result<Event<K, V>, RecvError>> {
        self.closed_or(RxCore::pop).transpose()
    }
}

impl<K, V> Receiver<K, V> {
    fn parts(&mut self) -> (Parts<'_, K, V>, &mut Option<Listener>) {
        (
            Parts {
                core: &*self.core,
                shared: &self.shared,
                local: &mut self.local,
            },
            &mut self.listener,
        )
    }
}

impl<K, V> Receiver<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
{
    /// One non-blocking take: closed beats empty beats value.
    fn try_take<T>(
        &mut self,
        take: impl FnMut(&RxCore<K, V>, &mut Local) -> Option<T>,
    ) -> Result<T, TryRecvError> {
        let (mut parts, _) = self.parts();
        match parts.closed_or(take) {
            Ok(Some(found)) => Ok(found),
            Ok(None) => Err(TryRecvError::Empty),
            Err(RecvError) => Err(TryRecvError::Closed),
        }
    }

    /// Blocks until a key is pending and takes the oldest: the key touched first,
    /// with its latest merged value.
    ///
    /// # Errors
    /// [`RecvError`] once the receiver or hub is closed, or the send side closed and
    /// everything pending was delivered.
    pub fn recv(&mut self) -> Result<Event<K, V>, RecvError> {
        let (mut parts, _) = self.parts();
        let core = parts.core;
        wait::block(&core.notify, None, || parts.attempt()).expect("no deadline")
    }

    /// [`recv`](Self::recv) with a timeout. A zero timeout still returns a value
    /// that is ready, like `std::sync::mpsc::Receiver::recv_timeout`.
    ///
    /// # Errors
    /// [`RecvTimeoutError::Closed`] as for `recv` (closed beats timeout);
    /// [`RecvTimeoutError::Timeout`] if nothing arrived in time.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Event<K, V>, RecvTimeoutError> {
        match Instant::now().checked_add(timeout) {
            Some(deadline) => self.recv_deadline(deadline),
            None => self.recv().map_err(RecvTimeoutError::from),
        }
    }

    /// [`recv`](Self::recv) with a deadline. A past deadline still returns a value
    /// that is ready.
    ///
    /// # Errors
    /// As [`recv_timeout`](Self::recv_timeout).
    pub fn recv_deadline(&mut self, deadline: Instant) -> Result<Event<K, V>, RecvTimeoutError> {
        let (mut parts, _) = self.parts();
        let core = parts.core;
        match wait::block(&core.notify, Some(deadline), || parts.attempt()) {
            Some(result) => result.map_err(RecvTimeoutError::from),
            None => Err(RecvTimeoutError::Timeout),
        }
    }

    /// Takes the oldest pending key without blocking.
    ///
    /// # Errors
    /// Closed beats empty beats value: [`TryRecvError::Closed`] as for `recv`,
    /// else [`TryRecvError::Empty`] if nothing is pending.
    pub fn try_recv(&mut self) -> Result<Event<K, V>, TryRecvError> {
        self.try_take(RxCore::pop)
    }

    /// Takes everything pending as of one instant: in queue (first-touch) order,
    /// one entry per key. Either the whole backlog with `Ok`, or an error and
    /// nothing — never a partial batch.
    ///
    /// Publishers are held up only for an O(1) swap, not for the size of the
    /// backlog.
    ///
    /// # Errors
    /// As [`try_recv`](Self::try_recv). After a graceful close the last backlog
    /// comes back with `Ok`; only the next call reports closed.
    pub fn try_recv_all(&mut self) -> Result<Vec<Event<K, V>>, TryRecvError> {
        self.try_take(|core, local| Some(core.cut(local)).filter(|b| !b.is_empty()))
    }

    /// A copy of the oldest pending event, left in place: what `try_recv` would
    /// return now. Coalescing into the head key changes what a later `peek` sees;
    /// annihilating it moves the head.
    ///
    /// # Errors
    /// As [`try_recv`](Self::try_recv).
    pub fn peek(&mut self) -> Result<Event<K, V>, TryRecvError> {
        self.try_take(RxCore::peek)
    }

    /// An async [`recv`](Self::recv), for any executor. Dropping the future before
    /// it completes consumes nothing.
    pub fn recv_async(
        &mut self,
    ) -> impl Future<Output = Result<Event<K, V>, RecvError>> + Send + '_ {
        let (mut parts, _) = self.parts();
        let core = parts.core;
        WaitFuture::new(&core.notify, move || parts.attempt())
    }

    /// A blocking iterator over events; it ends when the receiver is closed.
    pub fn iter(&mut self) -> Iter<'_, K, V> {
        Iter { rx: self }
    }

    /// A non-blocking iterator over what is pending; it ends at empty or closed.
    pub fn try_iter(&mut self) -> TryIter<'_, K, V> {
        TryIter { rx: self }
    }

    /// Closes this receiver only: its pending values are dropped and it is
    /// deregistered now. Other receivers and the send side are unaffected.
    /// Idempotent.
    pub fn close(&self) {
        // Checked before anything changes, so a re-entrant call leaves the
        // receiver as it was (see `reentrancy.rs`).
        crate::reentrancy::forbid_inside_send(&*self.shared, "Receiver::close");
        if self.core.close() {
            self.shared.deregister(&self.core);
            self.core.clear();
        }
    }

    /// Whether the next receive would report closed: this receiver or the hub was
    /// closed, or the send side closed and nothing is left to deliver.
    pub fn is_closed(&self) -> bool {
        if self.core.is_closed() {
            return true;
        }
        let state = self.shared.state.load();
        state.hub_closed() || (state.quiescent_closed() && self.core.len(&self.local) == 0)
    }

    /// How many keys are pending (0 once closed).
    pub fn len(&self) -> usize {
        if self.core.is_closed() {
            0
        } else {
            self.core.len(&self.local)
        }
    }

    /// Whether no key is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What became of the sends that reached this receiver; see
    /// [`ReceiverStats`] for the fields and the conservation law they keep.
    /// Still readable after the receiver closed.
    ///
    /// Never blocks a sender: lock-free loads of the per-shard counters
    /// (5 × 16) and the consumer's own. Exact whenever no send or close is
    /// running; while they run, the fields may lag each other, never with
    /// `pending_sends` underflowing.
    ///
    /// ```
    /// use keybus::conflate::Hub;
    ///
    /// let hub: Hub<&str, u32> = Hub::new();
    /// let tx = hub.sender();
    /// let mut rx = hub.receiver_builder().max_pending(1).build();
    /// tx.send("a", 1).unwrap();
    /// tx.send("b", 2).unwrap(); // refused: "a" holds the only slot
    /// tx.send("a", 3).unwrap(); // merges into "a"
    /// assert_eq!(rx.recv().unwrap().sends, 2);
    /// let s = rx.stats();
    /// assert_eq!((s.received, s.folded, s.overflowed), (3, 2, 1));
    /// ```
    pub fn stats(&self) -> ReceiverStats {
        self.core.stats(&self.local)
    }
}

// No field is ever pinned: `poll_next` only needs `&mut Receiver`.
impl<K, V> Unpin for Receiver<K, V> {}

impl<K, V> Stream for Receiver<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
{
    type Item = Event<K, V>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let (mut parts, listener) = self.get_mut().parts();
        let core = parts.core;
        wait::poll_attempt(&core.notify, listener, cx, || parts.attempt()).map(Result::ok)
    }
}

impl<K, V> Drop for Receiver<K, V> {
    fn drop(&mut self) {
        if crate::reentrancy::inside_send(&*self.shared) {
            // Dropped by user code inside this hub's own send: deregistering would
            // wait for that send. Closed, it takes no more values; it stays listed
            // until the hub is freed. Panic unless already unwinding (a second
            // panic would abort).
            self.core.close();
            if !std::thread::panicking() {
                crate::reentrancy::forbid_inside_send(&*self.shared, "dropping a Receiver");
            }
            return;
        }
        if self.core.close() {
            self.shared.deregister(&self.core);
            self.core.clear();
        }
    }
}

impl<K, V> fmt::Debug for Receiver<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver")
            .field("pending", &self.core.len(&self.local))
            .field("closed", &self.core.is_closed())
            .finish()
    }
}

crate::receiver_iter::receiver_iterators!();
