//! The public accounting types of both `conflate` implementations:
//! [`ReceiverStats`], [`HubStats`] and [`ReceiverInfo`]. The counters behind
//! them are in `counters.rs`; the hub's `sent` count lives in per-thread
//! stripes (`conflate/lockfree/stripes.rs`). `docs/design.md`, "Accounting",
//! argues the law they keep.

/// What became of the sends that reached one receiver, from
/// [`Receiver::stats`](crate::conflate::Receiver::stats).
///
/// Every send that reached the receiver past its key filter is in exactly one
/// of `folded`, `annihilated`, `overflowed`, `dropped` or `pending_sends`, so
/// whenever no send is in flight:
///
/// ```text
/// received == folded + annihilated + overflowed + dropped + pending_sends
/// ```
///
/// Read while sends run, the fields may lag each other (each is exact for some
/// recent instant, and `received` is read last, so the right-hand side never
/// exceeds it); once the sends have finished (their threads joined, or their
/// effects otherwise observed) the law holds exactly.
///
/// ```
/// use keybus::conflate::Hub;
///
/// let hub = Hub::with_merge(|a: i64, b: i64| Some(a + b).filter(|s| *s != 0));
/// let tx = hub.sender();
/// let mut rx = hub.receiver_builder().key_filter(|k: &&str| *k != "debug").build();
/// tx.send("cpu", 1).unwrap();
/// tx.send("cpu", 2).unwrap(); // folded into the pending "cpu"
/// tx.send("mem", 5).unwrap();
/// tx.send("mem", -5).unwrap(); // sums to zero: annihilated, with the send before it
/// tx.send("debug", 1).unwrap(); // rejected by the filter
/// let cpu = rx.recv().unwrap();
/// assert_eq!(cpu.sends, 2);
///
/// let s = rx.stats();
/// assert_eq!((s.received, s.filtered), (4, 1));
/// assert_eq!((s.delivered, s.folded, s.annihilated), (1, 2, 2));
/// assert_eq!((s.pending, s.pending_sends), (0, 0));
/// assert_eq!(
///     s.received,
///     s.folded + s.annihilated + s.overflowed + s.dropped + s.pending_sends
/// );
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct ReceiverStats {
    /// Sends that reached this receiver past its key filter.
    pub received: u64,
    /// Sends its key filter rejected.
    pub filtered: u64,
    /// Events taken by any receive method.
    pub delivered: u64,
    /// The sum of [`Event::sends`](crate::Event::sends) over the delivered events.
    pub folded: u64,
    /// Sends removed by a merge returning `None`: the annihilating send and every
    /// send folded into the value it removed.
    pub annihilated: u64,
    /// Sends refused because the receiver already had `max_pending` keys pending.
    pub overflowed: u64,
    /// Sends folded into values that were dropped undelivered: by closing this
    /// receiver (or dropping it), by a hard close of the hub, or by a panicking
    /// merge (which also drops the panicking send).
    pub dropped: u64,
    /// Keys pending now.
    pub pending: u64,
    /// Sends folded into the values pending now (a snapshot entry folds none).
    pub pending_sends: u64,
}

/// The send side's accounting, from
/// [`Hub::stats`](crate::conflate::Hub::stats).
///
/// ```
/// use keybus::conflate::Hub;
///
/// let hub: Hub<u32, u32> = Hub::new();
/// let tx = hub.sender();
/// tx.send(1, 1).unwrap(); // no receiver: accepted all the same
/// let _rx = hub.receiver();
/// tx.send(2, 2).unwrap();
/// tx.close();
/// assert!(tx.send(3, 3).is_err());
///
/// let s = hub.stats();
/// assert_eq!((s.sent, s.refused, s.receivers), (2, 1, 1));
/// ```
///
/// # Where the receivers went
///
/// `receivers` counts the receivers registered now, so it falls to 0 as the
/// receivers of a closing hub drain: that is the end of a shutdown, not a
/// leak. The other three receiver counts say how each registered receiver
/// left, so that every receiver ever registered (born closed ones are never
/// registered) is in exactly one of the four:
///
/// ```text
/// registered == receivers + receivers_drained + receivers_dropped + receivers_hard_closed
/// ```
///
/// ```
/// use keybus::conflate::Hub;
///
/// let hub: Hub<&str, u32> = Hub::new();
/// let tx = hub.sender();
/// let mut done = hub.receiver();
/// let gone = hub.receiver();
/// tx.send("cpu", 1).unwrap();
/// drop(gone); // left with "cpu" pending: its stats count that send as dropped
/// hub.close_graceful();
/// assert_eq!(done.recv().unwrap().key, "cpu");
/// assert!(done.recv().is_err()); // drained: deregistered now
///
/// let s = hub.stats();
/// assert_eq!(s.receivers, 0);
/// assert_eq!((s.receivers_drained, s.receivers_dropped, s.receivers_hard_closed), (1, 1, 0));
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct HubStats {
    /// Sends accepted (not refused), with or without a receiver. A send whose
    /// user code panicked counts here too: it was accepted before it ran.
    pub sent: u64,
    /// Sends that returned `Err` because the send side was closed.
    pub refused: u64,
    /// Receivers live now: registered, not closed, not yet deregistered. A
    /// receiver leaves this count when it is closed or dropped, when a hard
    /// close tears it down, and after a graceful close once it has delivered
    /// everything and reported closed: 0 after a clean shutdown.
    pub receivers: u64,
    /// Receivers that ended the graceful way: the send side closed, they
    /// delivered everything pending, and a receive reported closed (which
    /// deregisters them).
    pub receivers_drained: u64,
    /// Receivers closed ([`Receiver::close`](crate::conflate::Receiver::close))
    /// or dropped by their owner before they drained to the end. Whatever was
    /// pending at them then is in their
    /// [`ReceiverStats::dropped`].
    pub receivers_dropped: u64,
    /// Receivers torn down by the hub's hard close
    /// ([`Hub::close_now`](crate::conflate::Hub::close_now)); what was pending at
    /// them is in their [`ReceiverStats::dropped`].
    pub receivers_hard_closed: u64,
}

/// One live receiver of a hub, as [`Hub::receivers`](crate::conflate::Hub::receivers)
/// lists it: its number, its name, and its accounting (`stats.pending` keys
/// and `stats.pending_sends` sends are its backlog).
///
/// ```
/// use keybus::conflate::Hub;
///
/// let hub: Hub<&str, u32> = Hub::new();
/// let _fast = hub.receiver_builder().name("fast").build();
/// let _slow = hub.receiver_builder().name("slow").build();
/// hub.sender().send("cpu", 1).unwrap();
/// for rx in hub.receivers() {
///     println!("{} {:?}: {} keys behind", rx.id, rx.name, rx.stats.pending);
/// }
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReceiverInfo {
    /// The receiver's number on its hub: receivers are numbered 0, 1, 2, … in
    /// the order they are built (born closed ones take a number too). Never
    /// reused on one hub.
    pub id: u64,
    /// The name given with `ReceiverBuilder::name`, if any.
    pub name: Option<std::sync::Arc<str>>,
    /// Its accounting as `Receiver::stats` would return it now.
    pub stats: ReceiverStats,
}

impl ReceiverStats {
    /// Builds the public value from counters read `received` last (the order
    /// `RxCore::queue_stats` in the lock-free hub and `RxCounters::read` in the
    /// baseline keep): `pending_sends` is what `received` has not yet
    /// accounted for.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn derived(
        received: u64,
        filtered: u64,
        delivered: u64,
        folded: u64,
        annihilated: u64,
        overflowed: u64,
        dropped: u64,
        pending: u64,
    ) -> Self {
        ReceiverStats {
            received,
            filtered,
            delivered,
            folded,
            annihilated,
            overflowed,
            dropped,
            pending,
            pending_sends: 0,
        }
        .with_pending_sends()
    }

    /// Fills in `pending_sends`: what `received` has not yet accounted for.
    pub(crate) fn with_pending_sends(self) -> Self {
        let settled = self.folded + self.annihilated + self.overflowed + self.dropped;
        ReceiverStats {
            // `received` is read after the counters it bounds, so this does not
            // underflow (see the readers); saturate rather than wrap if a future
            // change broke that.
            pending_sends: self.received.saturating_sub(settled),
            ..self
        }
    }
}
