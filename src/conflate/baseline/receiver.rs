//! [`Receiver`] and its iterators. Every receive is one non-blocking attempt
//! under the hub mutex (`Shared::take`); `crate::wait` turns it into the
//! blocking, deadline, async and `Stream` forms.

use super::queue::KeyQueue;
use super::shared::{Registration, RxCounters, Shared};
use super::watch::ReceiverWatch;
use crate::conflate::common::event::Event;
use crate::conflate::common::removal::Seen;
use crate::conflate::common::stats::ReceiverStats;
use crate::error::{RecvError, RecvTimeoutError, TryRecvError};
use crate::sync::{Arc, Listener, Notify};
use crate::wait::{block, poll_attempt, WaitFuture};
use futures_core::Stream;
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// One consumer's view of the bus: a slot per pending key, delivered in
/// first-touch order.
///
/// `Send + Sync`; the consuming methods take `&mut self`, so there is exactly one
/// consumer. Dropping it is [`Receiver::close`]. A receiver does not keep the
/// send side open.
pub struct Receiver<K, V> {
    shared: Arc<Shared<K, V>>,
    id: u64,
    notify: Arc<Notify>,
    counters: Arc<RxCounters>,
    /// The keys this consumer saw, on a hub with tombstones.
    seen: Option<Box<Seen<K, V>>>,
    /// The `Stream` impl's parking state, kept between polls.
    listener: Option<Listener>,
}

impl<K, V> fmt::Debug for Receiver<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver").field("id", &self.id).finish()
    }
}

impl<K, V> Drop for Receiver<K, V> {
    fn drop(&mut self) {
        if crate::conflate::common::reentrancy::inside_send(&*self.shared) {
            // Dropped by user code inside this hub's own send: the hub mutex is
            // this thread's, so deregistering would deadlock. It stays registered
            // until the hub is freed. Panic unless already unwinding (a second
            // panic would abort).
            if !std::thread::panicking() {
                crate::conflate::common::reentrancy::forbid_inside_send(
                    &*self.shared,
                    "dropping a Receiver",
                );
            }
            return;
        }
        self.shared.close_receiver(self.id);
    }
}

/// The tally of one delivered event.
fn one<K, V>(event: &Event<K, V>) -> (u64, u64) {
    (1, event.sends)
}

/// One take of the head, less the tombstones of lives this receiver never saw.
fn pop<K, V>(
    shared: &Shared<K, V>,
    id: u64,
    seen: &mut Option<Box<Seen<K, V>>>,
) -> Result<Event<K, V>, TryRecvError>
where
    K: Hash + Eq + Clone,
    V: Clone,
{
    let take = || shared.take(id, KeyQueue::pop_front, one);
    match seen {
        None => take(),
        Some(seen) => seen.pop(&shared.tombstones, take),
    }
}

/// The blocking forms' attempt: `None` means "nothing yet, wait".
fn attempt<K, V>(
    shared: &Shared<K, V>,
    id: u64,
    seen: &mut Option<Box<Seen<K, V>>>,
) -> Option<Result<Event<K, V>, RecvError>>
where
    K: Hash + Eq + Clone,
    V: Clone,
{
    match pop(shared, id, seen) {
        Ok(event) => Some(Ok(event)),
        Err(TryRecvError::Closed) => Some(Err(RecvError)),
        Err(TryRecvError::Empty) => None,
    }
}

impl<K, V> Receiver<K, V> {
    pub(super) fn new(shared: Arc<Shared<K, V>>, registration: Registration) -> Self {
        Receiver {
            seen: (registration.counters.correction.clone()).map(|c| Box::new(Seen::new(c))),
            shared,
            id: registration.id,
            notify: registration.notify,
            counters: registration.counters,
            listener: None,
        }
    }

    /// Closes this receiver only: its pending values are dropped and it is
    /// deregistered at once, so sends stop visiting it. Other receivers and the
    /// send side are unaffected. Idempotent; also what `Drop` does.
    ///
    /// Takes the hub mutex once; O(receivers) to deregister. The pending
    /// values are dropped after the mutex is released.
    pub fn close(&self) {
        self.shared.close_receiver(self.id);
    }

    /// Whether the next receive would answer `Closed`: this receiver or the hub
    /// was closed, or the send side closed and nothing is pending. Takes the hub
    /// mutex once; never blocks otherwise.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        let held = self.seen.as_ref().is_some_and(|s| s.holds());
        !held && self.shared.receiver_closed(self.id)
    }

    /// Pending keys (not sends: coalesced sends share one slot); 0 once closed.
    /// Takes the hub mutex once.
    #[must_use]
    pub fn len(&self) -> usize {
        let held = self.seen.as_ref().is_some_and(|s| s.holds());
        self.shared.pending(self.id) + usize::from(held)
    }

    /// Whether no key is pending ([`len`](Self::len) is 0). Takes the hub mutex
    /// once.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What became of the sends that reached this receiver; see
    /// [`ReceiverStats`] for the fields and the conservation law they keep.
    /// Still readable after the receiver closed.
    ///
    /// Never blocks a sender: eight lock-free loads of counters the hub mutex's
    /// holders write. Exact whenever no send, receive or close is running;
    /// while they run, the fields may lag each other (never with
    /// `pending_sends` underflowing).
    ///
    /// ```
    /// use keybus::baseline::conflate::Hub;
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
        self.counters.read()
    }

    /// A read-only view of this receiver for another task or thread: its
    /// stats (the counters [`stats`](Self::stats) reads), name and closed
    /// state. One reference count per clone; costs a send nothing.
    ///
    /// ```
    /// use keybus::baseline::conflate::Hub;
    ///
    /// let hub: Hub<&str, u32> = Hub::new();
    /// let mut rx = hub.receiver();
    /// let watch = rx.watch();
    /// hub.sender().send("cpu", 1).unwrap();
    /// let w = watch.clone();
    /// assert_eq!(std::thread::spawn(move || w.stats().pending).join().unwrap(), 1);
    /// rx.try_recv().unwrap();
    /// assert_eq!(watch.stats().pending, 0);
    /// ```
    pub fn watch(&self) -> ReceiverWatch<K, V> {
        ReceiverWatch::new(self.counters.clone())
    }
}

impl<K, V> Receiver<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
{
    /// Takes the head (oldest first touch), blocking while nothing is pending.
    ///
    /// # Errors
    ///
    /// [`RecvError`] once closed: this receiver or the hub was closed, or the
    /// send side closed and everything pending was delivered (the receiver then
    /// deregisters itself). Terminal.
    ///
    /// # Cost
    ///
    /// The hub mutex once per attempt (O(1) pop); parks the thread between
    /// attempts, never spins.
    pub fn recv(&mut self) -> Result<Event<K, V>, RecvError> {
        let (shared, id, seen) = (&*self.shared, self.id, &mut self.seen);
        match block(&self.notify, None, || attempt(shared, id, seen)) {
            Some(answer) => answer,
            None => unreachable!("without a deadline, block returns only with an answer"),
        }
    }

    /// [`recv`](Self::recv), waiting at most `timeout`. A zero timeout still
    /// returns a value that is ready, like `std`'s `recv_timeout`. A timeout too
    /// large to represent waits forever. Blocks at most until the deadline;
    /// costs as `recv`.
    ///
    /// # Errors
    ///
    /// [`RecvTimeoutError::Closed`] as for `recv` (closed beats timeout);
    /// [`RecvTimeoutError::Timeout`] when the time ran out with nothing pending.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Event<K, V>, RecvTimeoutError> {
        match Instant::now().checked_add(timeout) {
            Some(deadline) => self.recv_deadline(deadline),
            None => self.recv().map_err(RecvTimeoutError::from),
        }
    }

    /// [`recv`](Self::recv), waiting until `deadline` at the latest. A deadline
    /// already past still returns a value that is ready. Blocks at most until
    /// `deadline`; costs as `recv`.
    ///
    /// # Errors
    ///
    /// As [`recv_timeout`](Self::recv_timeout).
    pub fn recv_deadline(&mut self, deadline: Instant) -> Result<Event<K, V>, RecvTimeoutError> {
        let (shared, id, seen) = (&*self.shared, self.id, &mut self.seen);
        match block(&self.notify, Some(deadline), || attempt(shared, id, seen)) {
            Some(Ok(event)) => Ok(event),
            Some(Err(RecvError)) => Err(RecvTimeoutError::Closed),
            None => Err(RecvTimeoutError::Timeout),
        }
    }

    /// Takes the head without blocking.
    ///
    /// # Errors
    ///
    /// Closed beats empty beats value: [`TryRecvError::Closed`] as for
    /// [`recv`](Self::recv), else [`TryRecvError::Empty`] when nothing is
    /// pending. Takes the hub mutex once; O(1).
    pub fn try_recv(&mut self) -> Result<Event<K, V>, TryRecvError> {
        pop(&self.shared, self.id, &mut self.seen)
    }

    /// Takes everything pending as of one instant (one hold of the hub mutex),
    /// in queue order, one event per key. Never a partial batch with an error.
    /// After a graceful close the whole remaining queue comes back with `Ok`,
    /// and the next call answers `Closed`.
    ///
    /// # Errors
    ///
    /// As [`try_recv`](Self::try_recv). Holds the hub mutex for O(pending
    /// keys) moves, running no user code; allocates the returned `Vec`
    /// ([`try_recv_all_into`](Self::try_recv_all_into) reuses one).
    #[must_use = "the events are taken off the receiver; dropping the result loses them"]
    pub fn try_recv_all(&mut self) -> Result<Vec<Event<K, V>>, TryRecvError> {
        let mut batch = Vec::new();
        self.try_recv_all_into(&mut batch).map(|_| batch)
    }

    /// [`try_recv_all`](Self::try_recv_all) into a `Vec` of the caller's: the
    /// batch is appended to `out`, and `Ok` says how many events were appended
    /// (at least one). On an error `out` is left as it was. No allocation once
    /// `out` has room for the batch.
    ///
    /// ```
    /// use keybus::baseline::conflate::Hub;
    ///
    /// let hub: Hub<&str, u32> = Hub::new();
    /// let tx = hub.sender();
    /// let mut rx = hub.receiver();
    /// let mut batch = Vec::with_capacity(64);
    /// tx.send("a", 1).unwrap();
    /// tx.send("b", 2).unwrap();
    /// assert_eq!(rx.try_recv_all_into(&mut batch), Ok(2));
    /// assert!(rx.try_recv_all_into(&mut batch).is_err()); // empty: `batch` kept
    /// assert_eq!(batch.len(), 2);
    /// ```
    ///
    /// # Errors
    ///
    /// As [`try_recv_all`](Self::try_recv_all).
    pub fn try_recv_all_into(&mut self, out: &mut Vec<Event<K, V>>) -> Result<usize, TryRecvError> {
        let (shared, id) = (&*self.shared, self.id);
        let drain = |out: &mut Vec<Event<K, V>>| {
            shared
                .take(
                    id,
                    |queue| queue.drain_into(out),
                    |&(events, sends)| (events as u64, sends),
                )
                .map(|(events, _)| events)
        };
        let Some(seen) = &mut self.seen else {
            return drain(out);
        };
        loop {
            let start = out.len();
            match drain(out) {
                Ok(_) => {}
                Err(e) if !seen.holds() => return Err(e),
                // The held head is the batch.
                Err(_) => {}
            }
            // A batch of dropped tombstones only: look again (empty or
            // closed now, or what arrived since).
            let appended = seen.cut_into(&shared.tombstones, out, start);
            if appended > 0 {
                return Ok(appended);
            }
        }
    }

    /// A clone of the head, which stays pending (same `sends`). Two peeks can
    /// differ in value and `sends` when a send coalesced in between, but the
    /// key only changes if the head was taken or annihilated.
    ///
    /// # Errors
    ///
    /// As [`try_recv`](Self::try_recv): a closed receiver answers `Closed` even
    /// with a value pending. Never blocks; takes the hub mutex once and clones
    /// the key and value under it (a panicking `Clone` leaves the receiver
    /// unchanged).
    pub fn peek(&mut self) -> Result<Event<K, V>, TryRecvError> {
        let (shared, id) = (&*self.shared, self.id);
        let peek = || {
            shared.take(
                id,
                |queue| {
                    queue
                        .head()
                        .map(|(key, value, sends)| Event::new(key.clone(), value.clone(), sends))
                },
                |_| (0, 0),
            )
        };
        match &mut self.seen {
            None => peek(),
            Some(seen) => seen.peek(&shared.tombstones, peek, || {
                shared.take(id, KeyQueue::pop_front, one)
            }),
        }
    }

    /// [`recv`](Self::recv) as a future, for any executor (no runtime
    /// dependency). Dropping it before it completes consumes nothing. The
    /// future is `Send`. Each poll costs one `try_recv`; a pending future
    /// holds one registration on this receiver's notifier.
    ///
    /// # Errors
    ///
    /// [`RecvError`] as for `recv`.
    #[must_use = "futures do nothing unless polled or `.await`ed"]
    pub fn recv_async(
        &mut self,
    ) -> impl Future<Output = Result<Event<K, V>, RecvError>> + Send + '_ {
        let (shared, id, seen) = (&*self.shared, self.id, &mut self.seen);
        WaitFuture::new(&self.notify, move || attempt(shared, id, seen))
    }

    /// A blocking iterator over events; ends when the receiver is closed
    /// (after draining, for a graceful close). Each step is a `recv`.
    #[must_use = "iterators are lazy: nothing is received until it is consumed"]
    pub fn iter(&mut self) -> Iter<'_, K, V> {
        Iter { rx: self }
    }

    /// A non-blocking iterator over what is pending; ends at the first `Empty`
    /// or `Closed`. Each step takes the hub mutex once.
    #[must_use = "iterators are lazy: nothing is received until it is consumed"]
    pub fn try_iter(&mut self) -> TryIter<'_, K, V> {
        TryIter { rx: self }
    }
}

impl<K, V> Stream for Receiver<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
{
    type Item = Event<K, V>;

    /// The next event; `None` once closed (after draining, for a graceful
    /// close), and on every poll after that.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event<K, V>>> {
        let this = self.get_mut();
        let (shared, id, seen) = (&*this.shared, this.id, &mut this.seen);
        poll_attempt(&this.notify, &mut this.listener, cx, || {
            attempt(shared, id, seen)
        })
        .map(Result::ok)
    }
}

crate::conflate::common::receiver_iter::receiver_iterators!();
