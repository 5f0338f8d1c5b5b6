//! The lockstep runner: [`ConflateImpl`], the adapter it drives, with its three
//! implementations (lock-free, baseline, reference model), and [`World`], one
//! implementation's handles driven by ops.

use super::*;

/// An adapter over one implementation of the `keybus::conflate` API.
pub trait ConflateImpl {
    const NAME: &'static str;
    /// Receivers may share one stored value per key (the lock-free hub's
    /// cells), so a value pending at several receivers and in the table is
    /// held once: the leak check then bounds the values alive instead of
    /// counting one per pending slot.
    const SHARES_VALUES: bool;
    type Hub;
    type Sender;
    type Receiver;

    fn hub(merge: Option<MergeFn>, retain: bool, tombstones: bool) -> Self::Hub;
    fn latest(hub: &Self::Hub, key: K) -> Option<N>;
    fn table(hub: &Self::Hub) -> Vec<(K, N)>;
    fn hub_stats(hub: &Self::Hub) -> HubSt;
    fn stats(rx: &Self::Receiver) -> St;
    fn clone_hub(hub: &Self::Hub) -> Self::Hub;
    fn sender(hub: &Self::Hub) -> Self::Sender;
    fn clone_sender(tx: &Self::Sender) -> Self::Sender;
    /// `retain`: the hub keeps a table, so `spec.snapshot` applies.
    fn receiver(hub: &Self::Hub, spec: &RxSpec, retain: bool) -> Self::Receiver;
    fn hub_close(hub: &Self::Hub);
    fn hub_is_closed(hub: &Self::Hub) -> bool;

    fn send(tx: &Self::Sender, key: K, value: V) -> Result<(), (K, N)>;
    fn sender_close(tx: &Self::Sender);
    fn sender_is_closed(tx: &Self::Sender) -> bool;

    fn try_recv(rx: &mut Self::Receiver) -> Result<Ev, TryRecvError>;
    fn try_recv_all(rx: &mut Self::Receiver) -> Result<Vec<Ev>, TryRecvError>;
    fn peek(rx: &mut Self::Receiver) -> Result<Ev, TryRecvError>;
    fn recv_timeout(rx: &mut Self::Receiver, timeout: Duration) -> Result<Ev, RecvTimeoutError>;
    fn try_iter(rx: &mut Self::Receiver) -> Vec<Ev>;
    /// `recv_async()` polled once, then dropped.
    fn recv_async_once(rx: &mut Self::Receiver) -> Option<Result<Ev, RecvError>>;
    /// `Stream::poll_next` once.
    fn poll_next_once(rx: &mut Self::Receiver) -> Option<Option<Ev>>;
    fn recv(rx: &mut Self::Receiver) -> Result<Ev, RecvError>;
    fn recv_deadline(rx: &mut Self::Receiver, deadline: Instant) -> Result<Ev, RecvTimeoutError>;
    fn iter_next(rx: &mut Self::Receiver) -> Option<Ev>;
    fn close(rx: &Self::Receiver);
    fn is_closed(rx: &Self::Receiver) -> bool;
    fn len(rx: &Self::Receiver) -> usize;
    fn is_empty(rx: &Self::Receiver) -> bool;
}

/// Implements [`ConflateImpl`] as `$name` for the module at path `$m`, which must
/// expose the `keybus::conflate` API. The expansion names this module's items, so
/// invoke it here (see the list at the end of the file).
macro_rules! conflate_impl {
    ($name:ident => $($m:ident)::+, shares = $shares:expr) => {
        #[doc = concat!("`", stringify!($($m)::+), "` behind the `ConflateImpl` adapter.")]
        pub struct $name;

        impl ConflateImpl for $name {
            const NAME: &'static str = concat!($(stringify!($m), "::",)+ "*");
            const SHARES_VALUES: bool = $shares;
            type Hub = $($m)::+::Hub<K, V>;
            type Sender = $($m)::+::Sender<K, V>;
            type Receiver = $($m)::+::Receiver<K, V>;

            fn hub(merge: Option<MergeFn>, retain: bool, tombstones: bool) -> Self::Hub {
                match (merge, retain, tombstones) {
                    (None, false, false) => $($m)::+::Hub::new(),
                    (Some(m), false, false) => $($m)::+::Hub::with_merge(m.closure()),
                    (merge, retain, tombstones) => {
                        let mut b = $($m)::+::Hub::builder();
                        if let Some(m) = merge {
                            b = b.merge(m.closure());
                        }
                        if retain {
                            b = b.retain_latest();
                        }
                        if tombstones {
                            b = b.tombstones(is_tombstone);
                        }
                        b.build()
                    }
                }
            }
            fn latest(hub: &Self::Hub, key: K) -> Option<N> {
                hub.latest(&key).map(|v| v.n)
            }
            fn table(hub: &Self::Hub) -> Vec<(K, N)> {
                hub.snapshot().into_iter().map(|(k, v)| (k, v.n)).collect()
            }
            fn hub_stats(hub: &Self::Hub) -> HubSt {
                let s = hub.stats();
                [s.sent, s.refused, s.receivers]
            }
            fn stats(rx: &Self::Receiver) -> St {
                let s = rx.stats();
                [
                    s.received,
                    s.filtered,
                    s.delivered,
                    s.folded,
                    s.annihilated,
                    s.overflowed,
                    s.dropped,
                    s.pending,
                    s.pending_sends,
                ]
            }
            fn clone_hub(hub: &Self::Hub) -> Self::Hub {
                hub.clone()
            }
            fn sender(hub: &Self::Hub) -> Self::Sender {
                hub.sender()
            }
            fn clone_sender(tx: &Self::Sender) -> Self::Sender {
                tx.clone()
            }
            fn receiver(hub: &Self::Hub, spec: &RxSpec, retain: bool) -> Self::Receiver {
                let snapshot = spec.snapshot && retain;
                if spec.keys.is_empty()
                    && spec.merge.is_none()
                    && !snapshot
                    && spec.max_pending.is_none()
                {
                    return hub.receiver();
                }
                let mut builder = hub.receiver_builder();
                for step in &spec.keys {
                    builder = match *step {
                        KeyStep::Key(k) => builder.key(k),
                        KeyStep::Filter(p) => builder.key_filter(p.closure()),
                    };
                }
                if let Some(m) = spec.merge {
                    builder = builder.merge(m.closure());
                }
                if let Some(n) = spec.max_pending {
                    builder = builder.max_pending(usize::from(n));
                }
                if snapshot {
                    builder = builder.snapshot();
                }
                builder.build()
            }
            fn hub_close(hub: &Self::Hub) {
                hub.close_now()
            }
            fn hub_is_closed(hub: &Self::Hub) -> bool {
                hub.is_closed()
            }
            fn send(tx: &Self::Sender, key: K, value: V) -> Result<(), (K, N)> {
                tx.send(key, value).map_err(|e| (e.key, e.value.n))
            }
            fn sender_close(tx: &Self::Sender) {
                tx.close()
            }
            fn sender_is_closed(tx: &Self::Sender) -> bool {
                tx.is_closed()
            }
            fn try_recv(rx: &mut Self::Receiver) -> Result<Ev, TryRecvError> {
                rx.try_recv().map(IntoEv::ev)
            }
            fn try_recv_all(rx: &mut Self::Receiver) -> Result<Vec<Ev>, TryRecvError> {
                rx.try_recv_all().map(|all| all.into_iter().map(IntoEv::ev).collect())
            }
            fn peek(rx: &mut Self::Receiver) -> Result<Ev, TryRecvError> {
                rx.peek().map(IntoEv::ev)
            }
            fn recv_timeout(rx: &mut Self::Receiver, timeout: Duration) -> Result<Ev, RecvTimeoutError> {
                rx.recv_timeout(timeout).map(IntoEv::ev)
            }
            fn try_iter(rx: &mut Self::Receiver) -> Vec<Ev> {
                rx.try_iter().map(IntoEv::ev).collect()
            }
            fn poll_next_once(rx: &mut Self::Receiver) -> Option<Option<Ev>> {
                use futures_core::Stream;
                let next = std::future::poll_fn(|cx| std::pin::Pin::new(&mut *rx).poll_next(cx));
                harness::poll_once(next)
                    .map(|r| r.map(IntoEv::ev))
            }
            fn recv(rx: &mut Self::Receiver) -> Result<Ev, RecvError> {
                rx.recv().map(IntoEv::ev)
            }
            fn recv_deadline(rx: &mut Self::Receiver, deadline: Instant) -> Result<Ev, RecvTimeoutError> {
                rx.recv_deadline(deadline).map(IntoEv::ev)
            }
            fn iter_next(rx: &mut Self::Receiver) -> Option<Ev> {
                rx.iter().next().map(IntoEv::ev)
            }
            fn recv_async_once(rx: &mut Self::Receiver) -> Option<Result<Ev, RecvError>> {
                harness::poll_once(rx.recv_async())
                    .map(|r| r.map(IntoEv::ev))
            }
            fn close(rx: &Self::Receiver) {
                rx.close()
            }
            fn is_closed(rx: &Self::Receiver) -> bool {
                rx.is_closed()
            }
            fn len(rx: &Self::Receiver) -> usize {
                rx.len()
            }
            fn is_empty(rx: &Self::Receiver) -> bool {
                rx.is_empty()
            }
        }
    };
}

// The implementations under comparison, one line each.
conflate_impl!(Lockfree => keybus::conflate, shares = true);
conflate_impl!(Baseline => keybus::baseline::conflate, shares = false);
conflate_impl!(Model => model, shares = false);

/// One implementation's handles, driven by ops.
pub struct World<I: ConflateImpl> {
    /// Whether the hub keeps a state table.
    retain: bool,
    /// Whether negative values are tombstones.
    tombstones: bool,
    /// Values the table held when a hub handle last told (for when none is
    /// left to ask; see `stray_values`).
    table_len: Option<usize>,
    hubs: Vec<I::Hub>,
    senders: Vec<I::Sender>,
    receivers: Vec<I::Receiver>,
    /// Cloned into every value sent: its count is the number of values alive.
    life: Arc<()>,
    /// Values that outlived the handles of hubs this world restarted away from.
    leaked: usize,
}

impl<I: ConflateImpl> World<I> {
    /// A hub and one sender; receivers come from the sequence's first ops.
    pub fn new(hub_merge: Option<MergeFn>, retain: bool, tombstones: bool) -> Self {
        let hub = I::hub(hub_merge, retain, tombstones);
        let tx = I::sender(&hub);
        World {
            retain,
            tombstones,
            table_len: retain.then_some(0),
            hubs: vec![hub],
            senders: vec![tx],
            receivers: Vec::new(),
            life: Arc::new(()),
            leaked: 0,
        }
    }

    /// Whether a blocking receive on `r` returns at once (it has an event).
    fn ready_now(tombstones: bool, r: &mut I::Receiver) -> bool {
        if tombstones {
            I::peek(r).is_ok()
        } else {
            I::len(r) > 0
        }
    }

    /// Values alive minus pending slots: 0 when every value the implementation
    /// holds is one a receiver will deliver (conflate rules 3 and 7), and none
    /// outlived an earlier hub's handles.
    ///
    /// With a state table, its values count as held too, as long as any handle
    /// or receiver keeps the hub's shared state alive. Without a hub handle to
    /// ask, the table's size is unknown while a sender can still change it: the
    /// check then waits for the teardown (which must free everything).
    pub fn stray_values(&self) -> isize {
        let table = match (self.retain, self.hubs.first()) {
            (false, _) => 0,
            (true, Some(hub)) => I::table(hub).len(),
            (true, None) if !self.senders.is_empty() => return 0,
            (true, None) if self.receivers.is_empty() => 0,
            (true, None) => match self.table_len {
                Some(len) => len,
                None => return 0,
            },
        };
        let alive = (Arc::strong_count(&self.life) - 1 + self.leaked) as isize;
        let pending: usize = self.receivers.iter().map(I::len).sum();
        let held = (pending + table) as isize;
        if !I::SHARES_VALUES {
            return alive - held;
        }
        // Shared: at most one value per pending slot and table entry, and at
        // least as many as the fullest receiver (or the table) needs.
        let needed = self
            .receivers
            .iter()
            .map(I::len)
            .max()
            .unwrap_or(0)
            .max(table) as isize;
        if alive > held {
            alive - held
        } else if alive < needed {
            alive - needed
        } else {
            0
        }
    }

    /// Drops every handle and receiver; returns how many values survived that,
    /// here and in earlier restarts.
    pub fn teardown(self) -> usize {
        let World {
            hubs,
            senders,
            receivers,
            life,
            leaked,
            ..
        } = self;
        drop(hubs);
        drop(senders);
        drop(receivers);
        Arc::strong_count(&life) - 1 + leaked
    }

    fn rx(&mut self, index: u8) -> Option<&mut I::Receiver> {
        let n = pick(self.receivers.len(), index)?;
        Some(&mut self.receivers[n])
    }

    /// `f` on the receiver `index` picks; `Skipped` when there is none.
    fn with_rx(&mut self, index: u8, f: impl FnOnce(&mut I::Receiver) -> Outcome) -> Outcome {
        self.rx(index).map_or(Outcome::Skipped, f)
    }

    fn tx(&self, index: u8) -> Option<&I::Sender> {
        pick(self.senders.len(), index).map(|n| &self.senders[n])
    }

    /// Applies one op. A send, and building a snapshot receiver (its key filter
    /// runs over the table), run under [`harness::catch`] because user code may
    /// panic out of them on purpose; any other panic reaches the caller.
    fn apply_op(&mut self, op: &Op) -> Outcome {
        use Outcome::{Bool, Done, Skipped, Usize};
        match *op {
            Op::Send { tx, key, value } => match self.tx(tx) {
                None => Skipped,
                Some(tx) => {
                    let value = V {
                        n: value,
                        life: self.life.clone(),
                    };
                    match harness::catch(|| I::send(tx, key, value)) {
                        Ok(result) => Outcome::Send(result),
                        Err(panic) => Outcome::Panicked(panic),
                    }
                }
            },
            Op::TryRecv { rx } => self.with_rx(rx, |r| Outcome::Recv(I::try_recv(r))),
            Op::TryRecvAll { rx } => self.with_rx(rx, |r| Outcome::All(I::try_recv_all(r))),
            Op::Peek { rx } => self.with_rx(rx, |r| Outcome::Recv(I::peek(r))),
            Op::RecvTimeoutZero { rx } => self.with_rx(rx, |r| {
                Outcome::RecvTimeout(I::recv_timeout(r, Duration::ZERO))
            }),
            Op::TryIter { rx } => self.with_rx(rx, |r| Outcome::Events(I::try_iter(r))),
            Op::PollNextOnce { rx } => self.with_rx(rx, |r| Outcome::Stream(I::poll_next_once(r))),
            Op::RecvIfReady { rx, how } => {
                let tombstones = self.tombstones;
                match self.rx(rx) {
                    Some(r) => {
                        if !(I::is_closed(r) || Self::ready_now(tombstones, r)) {
                            return Skipped;
                        }
                        match how {
                            0 => Outcome::Blocking(I::recv(r)),
                            1 => Outcome::IterNext(I::iter_next(r)),
                            _ => {
                                let now = Instant::now();
                                let past = now.checked_sub(Duration::from_secs(1)).unwrap_or(now);
                                Outcome::BlockingDeadline(I::recv_deadline(r, past))
                            }
                        }
                    }
                    None => Skipped,
                }
            }
            Op::RecvAsyncOnce { rx } => self.with_rx(rx, |r| Outcome::Async(I::recv_async_once(r))),
            Op::Len { rx } => self.with_rx(rx, |r| Usize(I::len(r))),
            Op::IsEmpty { rx } => self.with_rx(rx, |r| Bool(I::is_empty(r))),
            Op::IsClosed { rx } => self.with_rx(rx, |r| Bool(I::is_closed(r))),
            Op::NewReceiver(ref spec) => match self.hubs.first() {
                Some(hub) if self.receivers.len() < MAX_RECEIVERS => {
                    let retain = self.retain;
                    match harness::catch(|| I::receiver(hub, spec, retain)) {
                        Ok(rx) => {
                            self.receivers.push(rx);
                            Done
                        }
                        Err(panic) => Outcome::Panicked(panic),
                    }
                }
                _ => Skipped,
            },
            Op::Latest { key } => self
                .hubs
                .first()
                .map_or(Skipped, |h| Outcome::Latest(I::latest(h, key))),
            Op::HubSnapshot => self
                .hubs
                .first()
                .map_or(Skipped, |h| Outcome::Table(I::table(h))),
            Op::Stats { rx } => self.with_rx(rx, |r| Outcome::Stats(I::stats(r))),
            Op::CloseReceiver { rx } => self.with_rx(rx, |r| {
                I::close(r);
                Done
            }),
            Op::DropReceiver { rx } => Outcome::done(drop_picked(&mut self.receivers, rx)),
            Op::NewSender => match self.hubs.first() {
                Some(hub) if self.senders.len() < MAX_SENDERS => {
                    self.senders.push(I::sender(hub));
                    Done
                }
                _ => Skipped,
            },
            Op::CloneSender { tx } => Outcome::done(clone_picked(
                &mut self.senders,
                tx,
                MAX_SENDERS,
                I::clone_sender,
            )),
            Op::DropSender { tx } => Outcome::done(drop_picked(&mut self.senders, tx)),
            Op::SenderClose { tx } => self.tx(tx).map_or(Skipped, |s| {
                I::sender_close(s);
                Done
            }),
            Op::SenderIsClosed { tx } => self
                .tx(tx)
                .map_or(Skipped, |s| Bool(I::sender_is_closed(s))),
            Op::CloneHub => Outcome::done(clone_picked(&mut self.hubs, 0, MAX_HUBS, I::clone_hub)),
            Op::DropHub { hub } => Outcome::done(drop_picked(&mut self.hubs, hub)),
            Op::HubClose => self.hubs.first().map_or(Skipped, |h| {
                I::hub_close(h);
                Done
            }),
            Op::HubIsClosed => self
                .hubs
                .first()
                .map_or(Skipped, |h| Bool(I::hub_is_closed(h))),
            Op::DropAllHandles => {
                if self.hubs.is_empty() && self.senders.is_empty() {
                    Skipped
                } else {
                    self.hubs.clear();
                    self.senders.clear();
                    Done
                }
            }
            Op::Restart {
                hub_merge,
                retain,
                tombstones,
                ref receiver,
            } => {
                let old = std::mem::replace(self, World::new(hub_merge, retain, tombstones));
                self.leaked = old.teardown();
                // A fresh table is empty: a snapshot filter has nothing to run on.
                let rx = I::receiver(&self.hubs[0], receiver, retain);
                self.receivers.push(rx);
                Done
            }
        }
    }
}

impl<I: ConflateImpl> Lockstep for World<I> {
    type Op = Op;
    type Outcome = Outcome;
    type Snapshot = Snapshot;
    /// Applies one op (see `apply_op`), then notes the table's size
    /// while a hub handle can tell it.
    fn apply(&mut self, op: &Op) -> Outcome {
        let outcome = self.apply_op(op);
        if self.retain {
            match self.hubs.first() {
                Some(hub) => self.table_len = Some(I::table(hub).len()),
                // A send no hub handle can see: the table's size is unknown.
                None if matches!(op, Op::Send { .. }) => self.table_len = None,
                None => {}
            }
        }
        outcome
    }
    fn label(outcome: &Outcome) -> &'static str {
        outcome.label()
    }
    /// Every non-consuming query on every handle.
    fn snapshot(&self) -> Snapshot {
        Snapshot {
            receivers: self
                .receivers
                .iter()
                .map(|r| (I::len(r), I::is_empty(r), I::is_closed(r)))
                .collect(),
            stats: self.receivers.iter().map(I::stats).collect(),
            hub_stats: self.hubs.first().map(I::hub_stats),
            senders_closed: self.senders.iter().map(I::sender_is_closed).collect(),
            hubs_closed: self.hubs.iter().map(I::hub_is_closed).collect(),
        }
    }
    /// What the runner does after the sequence: drain every receiver, close
    /// gracefully by dropping every handle, then drain again and check closure.
    fn epilogue(&self) -> Vec<Op> {
        let slots = 0..self.receivers.len() as u8;
        let mut ops: Vec<Op> = slots.clone().map(|rx| Op::TryRecvAll { rx }).collect();
        ops.push(Op::DropAllHandles);
        ops.extend(slots.clone().map(|rx| Op::TryRecv { rx }));
        ops.extend(slots.map(|rx| Op::IsClosed { rx }));
        ops
    }
    fn check_alone(&self) -> Option<String> {
        // The conservation law, after every step (nothing is in flight between
        // steps of one thread).
        for (i, r) in self.receivers.iter().enumerate() {
            let s = I::stats(r);
            if !conserved(&s) {
                return Some(format!("receiver {i}: conservation law broken: {s:?}"));
            }
        }
        let stray = self.stray_values();
        (stray != 0).then(|| format!("{stray} values alive beyond pending slots and the table"))
    }
}

/// The first difference between two implementations on one sequence.
pub type Mismatch = harness::Mismatch<Op>;

/// Applies `scenario` to `A` and `B` in lockstep (see [`harness::lockstep`]), then
/// drops every handle and checks each side freed every value.
///
/// Returns a tally of outcome kinds (see [`Outcome::label`]) for coverage reports.
pub fn run<A: ConflateImpl, B: ConflateImpl>(scenario: &Scenario) -> Result<Tally, Mismatch> {
    let mut a = World::<A>::new(
        scenario.setup.hub_merge,
        scenario.setup.retain,
        scenario.setup.tombstones,
    );
    let mut b = World::<B>::new(
        scenario.setup.hub_merge,
        scenario.setup.retain,
        scenario.setup.tombstones,
    );
    let tally = harness::lockstep(&mut a, &mut b, &scenario.ops)?;
    let (la, lb) = (a.teardown(), b.teardown());
    if la != 0 || lb != 0 {
        return Err(Mismatch {
            step: 0,
            epilogue: true,
            op: Op::DropAllHandles,
            what: "values alive after every handle was dropped",
            a: format!("{la}"),
            b: format!("{lb}"),
        });
    }
    Ok(tally)
}

/// [`run`] with the implementations' names in the report.
pub fn check<A: ConflateImpl, B: ConflateImpl>(scenario: &Scenario) -> Result<Tally, String> {
    run::<A, B>(scenario).map_err(|m| format!("a = {}, b = {}\n{m}", A::NAME, B::NAME))
}
