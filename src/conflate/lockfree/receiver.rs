//! The receive side: one consumer per receiver, enforced by `&mut self`.
//!
//! A receiver is one of two kinds, chosen at `build` and invisible in the API:
//! a **cell receiver** (every key, the hub's newer-wins merge, unbounded:
//! `cell_rx.rs`) shares the hub's cells and keeps only its first-touch queue;
//! an **own-value receiver** (a key filter, its own merge, `max_pending`, or
//! a hub with its own merge: `core/`) keeps its pending values itself.
//!
//! The argument: `docs/design.md`, "Two kinds of receiver" and "Parking without
//! lost wake-ups".

use super::cell_local::CellLocal;
use super::cell_rx::CellRx;
use super::close_flags::Closing;
use super::core::{Local, RxCore};
use super::shared::Shared;
use super::watch::{ReceiverWatch, Target};
use crate::appending::Appending;
use crate::conflate::common::counters::Departure;
use crate::conflate::common::event::Event;
use crate::conflate::common::hub_word::HubWord;
use crate::conflate::common::removal::Seen;
use crate::conflate::common::stats::ReceiverStats;
use crate::error::{RecvError, RecvTimeoutError, TryRecvError};
use crate::sync::{Arc, Listener, Notify};
use crate::wait;
use futures_core::Stream;
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// One subscriber of a [`Hub`](super::Hub): its pending keys in first-touch
/// order, consumed by one owner (`&mut self` methods).
///
/// `Send + Sync`. Dropping it is [`close`](Self::close).
pub struct Receiver<K, V> {
    pub(crate) kind: Kind<K, V>,
    /// The keys this consumer saw, on a hub with tombstones (`removal.rs`).
    pub(crate) seen: Option<Box<Seen<K, V>>>,
    pub(crate) shared: Arc<Shared<K, V>>,
    /// Parking state of the `Stream` implementation between polls.
    pub(crate) listener: Option<Listener>,
}

/// Which kind of receiver, with its consumer-side state.
pub(crate) enum Kind<K, V> {
    Own(Arc<RxCore<K, V>>, Local),
    Cells(Arc<CellRx>, CellLocal<K, V>),
}

impl<K, V> Kind<K, V> {
    fn notify(&self) -> &Notify {
        match self {
            Kind::Own(core, _) => &core.notify,
            Kind::Cells(rx, _) => &rx.notify,
        }
    }

    fn is_closed(&self) -> bool {
        match self {
            Kind::Own(core, _) => core.is_closed(),
            Kind::Cells(rx, _) => rx.is_closed(),
        }
    }

    fn tx_closed(&self) -> bool {
        match self {
            Kind::Own(core, _) => core.tx_closed(),
            Kind::Cells(rx, _) => rx.tx_closed(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Kind::Own(core, _) => core.len(),
            Kind::Cells(rx, local) => local.len(rx),
        }
    }

    /// Closes this receiver only (if not closed yet): deregisters it and drops
    /// what is pending. A cell receiver's entries are its consumer's to walk:
    /// they are given up by [`Kind::settle_closed`] (the next receive, or the
    /// drop). `how`: for the hub's count of departed receivers.
    fn close(&self, shared: &Shared<K, V>, how: Departure) {
        match self {
            Kind::Own(core, _) => {
                if core.close() {
                    shared.deregister_own(core, how);
                    core.clear();
                }
            }
            Kind::Cells(rx, local) => {
                if rx.close() {
                    shared.deregister_cell(rx, how);
                    local.give_up_at_close(rx, &shared.cells);
                }
            }
        }
    }

    /// After any close: a cell receiver gives up its entries (once).
    fn settle_closed(&mut self, shared: &Shared<K, V>) {
        if let Kind::Cells(rx, local) = self {
            if !local.released() {
                local.let_go(rx, &shared.cells);
                shared.let_go();
            }
        }
    }
}

impl<K, V> Kind<K, V>
where
    K: Eq + Clone,
    V: Clone,
{
    #[inline(always)]
    fn pop(&mut self, shared: &Shared<K, V>) -> Option<Event<K, V>> {
        match self {
            Kind::Own(core, local) => core.pop(local),
            Kind::Cells(rx, local) => local.pop(rx, &shared.cells),
        }
    }

    /// A cut appended to `out`; how many events it added.
    fn cut_into(&mut self, shared: &Shared<K, V>, out: &mut Vec<Event<K, V>>) -> usize {
        match self {
            Kind::Own(core, local) => core.cut_into(local, out),
            Kind::Cells(rx, local) => local.cut_into(rx, &shared.cells, &shared.clock, out),
        }
    }

    fn peek(&mut self, shared: &Shared<K, V>) -> Option<Event<K, V>> {
        match self {
            Kind::Own(core, local) => core.peek(local),
            Kind::Cells(rx, local) => local.peek(rx, &shared.cells),
        }
    }

    /// The registration step before parking: a cell receiver announces it on
    /// its queue's tail word (the next push wakes it); an own-value receiver
    /// relies on the default fence pairing.
    fn arm(&self) {
        match self {
            Kind::Own(..) => crate::sync::fence(crate::sync::Ordering::SeqCst),
            Kind::Cells(rx, local) => {
                // Pushes wake a parked consumer through the queue's tail word
                // (a `false`: a push got in first, and the look after this
                // finds it). Closes and the last send after a close wake it
                // through the event: for those, the fence pairs with the one
                // `notify` starts with, as for the other kind.
                let _ = local.park(rx);
                crate::sync::fence(crate::sync::Ordering::SeqCst);
            }
        }
    }
}

/// The consumer's borrowed parts, so an attempt closure can hold them while the
/// listener is borrowed separately.
struct Parts<'a, K, V> {
    kind: &'a mut Kind<K, V>,
    seen: &'a mut Option<Box<Seen<K, V>>>,
    shared: &'a Shared<K, V>,
}

/// What a take hands the consumer: the kind's events, less the tombstones of
/// lives this receiver never saw (`removal.rs`; nothing to do on a hub
/// without tombstones).
struct Take<'a, K, V> {
    kind: &'a mut Kind<K, V>,
    seen: &'a mut Option<Box<Seen<K, V>>>,
    shared: &'a Shared<K, V>,
}

impl<K, V> Take<'_, K, V>
where
    K: Hash + Eq + Clone,
    V: Clone,
{
    #[inline(always)]
    fn pop(&mut self) -> Option<Event<K, V>> {
        let Some(seen) = self.seen.as_mut() else {
            return self.kind.pop(self.shared);
        };
        let (kind, shared) = (&mut *self.kind, self.shared);
        seen.pop(&shared.tombstones, || kind.pop(shared).ok_or(()))
            .ok()
    }

    /// A cut appended to `out`; how many events it added.
    fn cut_into(&mut self, out: &mut Vec<Event<K, V>>) -> usize {
        let start = out.len();
        let added = self.kind.cut_into(self.shared, out);
        match self.seen.as_mut() {
            Some(seen) => seen.cut_into(&self.shared.tombstones, out, start),
            None => added,
        }
    }

    fn peek(&mut self) -> Option<Event<K, V>> {
        let Some(seen) = self.seen.as_mut() else {
            return self.kind.peek(self.shared);
        };
        let kind = std::cell::RefCell::new(&mut *self.kind);
        let shared = self.shared;
        seen.peek(
            &shared.tombstones,
            || kind.borrow_mut().peek(shared).ok_or(()),
            || kind.borrow_mut().pop(shared).ok_or(()),
        )
        .ok()
    }
}

impl<K, V> Parts<'_, K, V>
where
    K: Hash + Eq + Clone,
    V: Clone,
{
    /// The receiver is done if it was closed (by itself or by `Hub::close_now`), or
    /// the send side closed, no send is in flight, and nothing is pending.
    ///
    /// A value found is returned without reading the hub's state: the
    /// consumer's fast path stays off the senders' lines, and so does its idle
    /// polling until the send side has closed. After that, the state and the
    /// stripes are read and then the queue is looked at *again*: if they said
    /// quiescent, nothing can arrive after that second look.
    fn closed_or<T>(
        &mut self,
        mut take: impl FnMut(&mut Take<'_, K, V>) -> Option<T>,
    ) -> Result<Option<T>, RecvError> {
        let mut take = |kind: &mut Kind<K, V>, seen: &mut Option<Box<Seen<K, V>>>, shared| {
            take(&mut Take { kind, seen, shared })
        };
        if self.kind.is_closed() {
            self.kind.settle_closed(self.shared);
            return Err(RecvError);
        }
        if let Some(found) = take(self.kind, self.seen, self.shared) {
            return Ok(Some(found));
        }
        if !self.kind.tx_closed() {
            // The common idle case: nothing pending, send side open.
            return Ok(None);
        }
        let state = self.shared.state.load();
        if state.hub_closed() {
            self.kind.settle_closed(self.shared);
            return Err(RecvError);
        }
        let quiescent = self.shared.quiescent_closed();
        if let Some(found) = take(self.kind, self.seen, self.shared) {
            return Ok(Some(found));
        }
        if quiescent {
            // Drained after a graceful close: deregister now (conflate rule 7).
            self.kind.close(self.shared, Departure::Drained);
            self.kind.settle_closed(self.shared);
            return Err(RecvError);
        }
        Ok(None)
    }

    fn attempt(&mut self) -> Option<Result<Event<K, V>, RecvError>> {
        self.closed_or(|t| t.pop()).transpose()
    }
}

impl<K, V> Receiver<K, V> {
    /// Whether the next receive would report closed: this receiver or the hub was
    /// closed, or the send side closed and nothing is left to deliver.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        if self.kind.is_closed() {
            return true;
        }
        let state = self.shared.state.load();
        state.hub_closed()
            || (self.kind.tx_closed() && self.shared.quiescent_closed() && self.is_empty())
    }

    /// How many keys are pending (0 once closed).
    #[must_use]
    pub fn len(&self) -> usize {
        if self.kind.is_closed() {
            0
        } else {
            let held = self.seen.as_ref().is_some_and(|s| s.holds());
            self.kind.len() + usize::from(held)
        }
    }

    /// Whether no key is pending.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn parts(&mut self) -> (Parts<'_, K, V>, &mut Option<Listener>) {
        (
            Parts {
                kind: &mut self.kind,
                seen: &mut self.seen,
                shared: &self.shared,
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
        take: impl FnMut(&mut Take<'_, K, V>) -> Option<T>,
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
        self.recv_until(None).expect("no deadline")
    }

    fn recv_until(&mut self, deadline: Option<Instant>) -> Option<Result<Event<K, V>, RecvError>> {
        let notify: *const Notify = self.kind.notify();
        let (parts, _) = self.parts();
        let parts = std::cell::RefCell::new(parts);
        // SAFETY: the notify lives in the receiver core, which the `Arc` in
        // `self.kind` keeps alive for this call; the attempt and arm closures
        // never touch the `Arc` itself.
        let notify = unsafe { &*notify };
        wait::block_armed(
            notify,
            deadline,
            || parts.borrow().kind.arm(),
            || parts.borrow_mut().attempt(),
        )
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
        match self.recv_until(Some(deadline)) {
            Some(result) => result.map_err(RecvTimeoutError::from),
            None => Err(RecvTimeoutError::Timeout),
        }
    }

    /// Takes the oldest pending key without blocking.
    ///
    /// # Errors
    /// Closed beats empty beats value: [`TryRecvError::Closed`] as for `recv`,
    /// else [`TryRecvError::Empty`] if nothing is pending.
    #[inline]
    pub fn try_recv(&mut self) -> Result<Event<K, V>, TryRecvError> {
        // A receiver sharing the hub's cells, open, with a key pending, and
        // no record of seen lives: the pop alone (what `closed_or` would do
        // first, without its frame).
        if let (Kind::Cells(rx, local), None) = (&mut self.kind, &self.seen) {
            if !rx.is_closed() {
                if let Some(event) = local.pop(rx, &self.shared.cells) {
                    return Ok(event);
                }
            }
        }
        self.try_recv_slow()
    }

    /// [`try_recv`](Self::try_recv) the whole way (closed beats empty beats
    /// value). Out of line, so that the fast path's frame stays small.
    #[inline(never)]
    fn try_recv_slow(&mut self) -> Result<Event<K, V>, TryRecvError> {
        self.try_take(|t| t.pop())
    }

    /// Takes everything pending as of one instant: in queue (first-touch) order,
    /// one entry per key. Either the whole backlog with `Ok`, or an error and
    /// nothing — never a partial batch.
    ///
    /// Publishers are held up only for one read-modify-write (the cut's
    /// instant) and then for a bounded stretch, never for the size of the
    /// backlog: a receiver that shares the hub's cells (no key filter, own
    /// merge or `max_pending`, in a hub without its own merge) holds a key's
    /// shard for at most 32 takes, any other receiver for at most 64.
    ///
    /// Allocates the returned `Vec`; [`try_recv_all_into`](Self::try_recv_all_into)
    /// reuses one.
    ///
    /// # Errors
    /// As [`try_recv`](Self::try_recv). After a graceful close the last backlog
    /// comes back with `Ok`; only the next call reports closed.
    #[must_use = "the events are taken off the receiver; dropping the result loses them"]
    pub fn try_recv_all(&mut self) -> Result<Vec<Event<K, V>>, TryRecvError> {
        let mut batch = Vec::new();
        self.try_recv_all_into(&mut batch).map(|_| batch)
    }

    /// [`try_recv_all`](Self::try_recv_all) into a `Vec` of the caller's: the
    /// batch (everything pending as of one instant, in queue order) is
    /// appended to `out`, and `Ok` says how many events were appended (at
    /// least one). On an error `out` is left as it was.
    ///
    /// No allocation once `out` has room for the batch (keep one `Vec` and
    /// `clear` it between calls), except in two cases. A receiver with its
    /// own values (a key filter, its own merge or `max_pending`) allocates two
    /// scratch lists when sends race the cut for keys of a shard it cannot
    /// take whole. A receiver that shares the hub's cells allocates a list of
    /// the cells it frees, when keys it takes are pending nowhere else and
    /// the hub already keeps as many idle cells as it may.
    ///
    /// ```
    /// use keybus::conflate::Hub;
    ///
    /// let hub: Hub<&str, u32> = Hub::new();
    /// let tx = hub.sender();
    /// let mut rx = hub.receiver();
    /// let mut batch = Vec::with_capacity(64);
    /// for round in 0..3 {
    ///     tx.send("a", round).unwrap();
    ///     tx.send("b", round).unwrap();
    ///     batch.clear();
    ///     assert_eq!(rx.try_recv_all_into(&mut batch), Ok(2));
    ///     assert_eq!(batch[1].key, "b");
    /// }
    /// assert!(rx.try_recv_all_into(&mut batch).is_err()); // empty: `batch` kept
    /// assert_eq!(batch.len(), 2);
    /// ```
    ///
    /// # Errors
    /// As [`try_recv_all`](Self::try_recv_all).
    pub fn try_recv_all_into(&mut self, out: &mut Vec<Event<K, V>>) -> Result<usize, TryRecvError> {
        let mut appending = Appending::new(out);
        let taken = self.try_take(|t| Some(t.cut_into(appending.out)).filter(|&n| n > 0));
        appending.done = true;
        taken
    }

    /// A copy of the oldest pending event, left in place: what `try_recv` would
    /// return now. Coalescing into the head key changes what a later `peek` sees;
    /// annihilating it moves the head.
    ///
    /// # Errors
    /// As [`try_recv`](Self::try_recv).
    pub fn peek(&mut self) -> Result<Event<K, V>, TryRecvError> {
        self.try_take(|t| t.peek())
    }

    /// An async [`recv`](Self::recv), for any executor. Dropping the future before
    /// it completes consumes nothing.
    #[must_use = "futures do nothing unless polled or `.await`ed"]
    pub fn recv_async(
        &mut self,
    ) -> impl Future<Output = Result<Event<K, V>, RecvError>> + Send + '_ {
        let notify: *const Notify = self.kind.notify();
        // SAFETY: the event lives in the receiver core, which the `Arc` in
        // `self.kind` keeps alive while the future borrows `self` (nothing
        // replaces `kind` meanwhile).
        let notify = unsafe { &*notify };
        let (parts, _) = self.parts();
        RecvFuture {
            parts,
            notify,
            listener: None,
        }
    }

    /// A blocking iterator over events; it ends when the receiver is closed.
    #[must_use = "iterators are lazy: nothing is received until it is consumed"]
    pub fn iter(&mut self) -> Iter<'_, K, V> {
        Iter { rx: self }
    }

    /// A non-blocking iterator over what is pending; it ends at empty or closed.
    #[must_use = "iterators are lazy: nothing is received until it is consumed"]
    pub fn try_iter(&mut self) -> TryIter<'_, K, V> {
        TryIter { rx: self }
    }

    /// Closes this receiver only: its pending values are dropped and it is
    /// deregistered now. Other receivers and the send side are unaffected.
    /// Idempotent.
    pub fn close(&self) {
        // Checked before anything changes, so a re-entrant call leaves the
        // receiver as it was (see `reentrancy.rs`).
        self.shared.forbid_inside_send("Receiver::close");
        self.kind.close(&self.shared, Departure::Dropped);
    }

    /// What became of the sends that reached this receiver; see
    /// [`ReceiverStats`] for the fields and the conservation law they keep.
    /// Still readable after the receiver closed.
    ///
    /// Never blocks a sender: lock-free loads only (per shard counters for a
    /// receiver with its own values; for a receiver of the hub's cells, each
    /// pending key's send sequence, so O(pending keys)). Exact whenever no
    /// send or close is running; while they run, the fields may lag each
    /// other, never with `pending_sends` underflowing.
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
    #[must_use]
    pub fn stats(&self) -> ReceiverStats {
        match &self.kind {
            Kind::Own(core, _) => core.stats(),
            Kind::Cells(rx, local) => {
                rx.current_stats(local.counted_solo().map(|s| &**s), &self.shared.cells)
            }
        }
    }

    /// A read-only view of this receiver for another task or thread: its
    /// [`stats`](ReceiverWatch::stats) (the counters this receiver's own
    /// [`stats`](Self::stats) reads), its name and whether it is closed. An
    /// operator's loop holds it while the consumer owns the receiver.
    ///
    /// Cheap: one allocation here, one reference count per clone; watching
    /// adds nothing to any send. A watch outlives its receiver (it then
    /// reports the final stats and closed) and never keeps the send side
    /// open.
    ///
    /// ```
    /// use keybus::conflate::Hub;
    ///
    /// let hub: Hub<&str, u32> = Hub::new();
    /// let tx = hub.sender();
    /// let mut rx = hub.receiver_builder().name("indexer").build();
    /// let watch = rx.watch();
    /// tx.send("cpu", 1).unwrap();
    /// tx.send("mem", 2).unwrap();
    /// // Another thread sees the backlog without the receiver.
    /// let w = watch.clone();
    /// let seen = std::thread::spawn(move || w.stats().pending).join().unwrap();
    /// assert_eq!(seen, 2);
    /// rx.try_recv_all().unwrap();
    /// assert_eq!(watch.stats().pending, 0);
    /// assert_eq!(watch.name(), Some("indexer"));
    /// ```
    pub fn watch(&self) -> ReceiverWatch<K, V> {
        let target = match &self.kind {
            Kind::Own(core, _) => Target::Own(core.clone()),
            Kind::Cells(rx, local) => Target::Cells(rx.clone(), local.counted_solo().cloned()),
        };
        ReceiverWatch::new(self.shared.clone(), target)
    }
}

/// `recv_async`'s future: one attempt per poll, parked on the receiver's
/// event with its kind's registration step in between.
struct RecvFuture<'a, K, V> {
    parts: Parts<'a, K, V>,
    notify: &'a Notify,
    listener: Option<Listener>,
}

impl<K, V> Future for RecvFuture<'_, K, V>
where
    K: Hash + Eq + Clone,
    V: Clone,
{
    type Output = Result<Event<K, V>, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let parts = std::cell::RefCell::new(&mut this.parts);
        wait::poll_attempt_armed(
            this.notify,
            &mut this.listener,
            cx,
            || parts.borrow().kind.arm(),
            || parts.borrow_mut().attempt(),
        )
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
        let this = self.get_mut();
        let notify: *const Notify = this.kind.notify();
        // SAFETY: as in `recv_until`.
        let notify = unsafe { &*notify };
        let (parts, listener) = this.parts();
        let parts = std::cell::RefCell::new(parts);
        wait::poll_attempt_armed(
            notify,
            listener,
            cx,
            || parts.borrow().kind.arm(),
            || parts.borrow_mut().attempt(),
        )
        .map(Result::ok)
    }
}

impl<K, V> Drop for Receiver<K, V> {
    fn drop(&mut self) {
        if self.shared.inside_send() {
            // Dropped by user code inside this hub's own send: deregistering
            // would take the writer lock the send may need. Closed, it takes no
            // more values; it stays listed until the hub is freed. Panic unless
            // already unwinding (a second panic would abort).
            match &self.kind {
                Kind::Own(core, _) => {
                    core.close();
                }
                Kind::Cells(rx, _) => {
                    rx.close();
                }
            }
            if !std::thread::panicking() {
                self.shared.forbid_inside_send("dropping a Receiver");
            }
            return;
        }
        self.kind.close(&self.shared, Departure::Dropped);
        self.kind.settle_closed(&self.shared);
    }
}

impl<K, V> fmt::Debug for Receiver<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver")
            .field("pending", &self.len())
            .field("closed", &self.kind.is_closed())
            .finish()
    }
}

crate::conflate::common::receiver_iter::receiver_iterators!();
