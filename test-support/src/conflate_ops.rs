//! The conflate operation model: one op enum, shared by `tests/differential.rs` and
//! `fuzz/fuzz_targets/conflate_ops.rs`, and a runner that applies a sequence to two
//! implementations in lockstep and compares every result.
//!
//! The two implementations share no trait, so [`ConflateImpl`] is a small adapter
//! trait and [`conflate_impl!`] implements it for any module that exposes the
//! `keybus::conflate` API (one line per implementation). Results are normalised into
//! [`Outcome`] (events become plain [`Ev`] values, because `keybus::Event` is
//! `#[non_exhaustive]` and a reference model cannot build one), then compared with
//! `==` after every op, together with a [`snapshot`](harness::Lockstep::snapshot) of every
//! handle's non-consuming queries (`len`, `is_empty`, `is_closed`).
//!
//! Values carry a per-sequence `Arc` token, so each side is also checked on its own
//! after every op: the values it keeps alive are exactly its pending slots (a closed
//! or dropped receiver's values are gone at once), and nothing outlives the handles.

use crate::harness::{self, clone_picked, drop_picked, pick, Lockstep, Source, Tally, UserPanic};
use keybus::{RecvError, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub mod model;

/// Keys are drawn from `0..KEYS`: small enough that sends coalesce often.
pub type K = u8;
/// The number a value carries; drawn from `-2..=8`, so the sentinels below come up
/// often.
pub type N = i64;

/// The value type sent through the bus: a number plus a token that counts how many
/// values an implementation keeps alive.
#[derive(Debug, Clone)]
pub struct V {
    pub n: N,
    // Never read: held for the count it adds to the sequence's token.
    #[allow(dead_code)]
    life: Arc<()>,
}

pub const KEYS: u8 = 6;
/// An annihilating merge returns `None` when the incoming value is this.
pub const ANNIHILATE: N = 0;
/// A panicking merge panics when the incoming value is this.
pub const BOOM: N = 7;
/// A panicking key filter panics for this key.
pub const BOOM_KEY: K = 5;

/// At most this many live receivers at a time.
const MAX_RECEIVERS: usize = 8;
const MAX_SENDERS: usize = 4;
const MAX_HUBS: usize = 3;

/// A merge function, by name, so that ops stay `Debug + Clone + PartialEq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeFn {
    /// `Some(next)`, as a user closure (the default merge is `Hub::new`).
    NewerWins,
    /// `Some(prev + next)`.
    Sum,
    /// `Some(prev)`: the first value since the key became pending sticks.
    KeepOlder,
    /// `None` (annihilate) when `next == ANNIHILATE`, else `Some(next)`.
    Annihilate,
    /// `Some(prev + next)`, or `None` when the sum is zero (deltas that cancel).
    SumOrAnnihilate,
    /// Panics with [`UserPanic`] when `next == BOOM`, else `Some(prev + next)`.
    Panicky,
}

impl MergeFn {
    const ALL: [MergeFn; 6] = [
        MergeFn::NewerWins,
        MergeFn::Sum,
        MergeFn::KeepOlder,
        MergeFn::Annihilate,
        MergeFn::Panicky,
        MergeFn::SumOrAnnihilate,
    ];

    pub fn apply(self, prev: V, next: V) -> Option<V> {
        match self {
            MergeFn::NewerWins => Some(next),
            MergeFn::Sum => Some(V {
                n: prev.n.saturating_add(next.n),
                ..next
            }),
            MergeFn::KeepOlder => Some(prev),
            MergeFn::Annihilate => (next.n != ANNIHILATE).then_some(next),
            MergeFn::SumOrAnnihilate => Some(V {
                n: prev.n.saturating_add(next.n),
                ..next
            })
            .filter(|v| v.n != 0),
            MergeFn::Panicky => {
                if next.n == BOOM {
                    std::panic::panic_any(UserPanic("merge"));
                }
                Some(V {
                    n: prev.n.saturating_add(next.n),
                    ..next
                })
            }
        }
    }

    /// The closure handed to `with_merge` / `ReceiverBuilder::merge`.
    pub fn closure(self) -> impl Fn(V, V) -> Option<V> + Send + Sync + 'static {
        move |prev, next| self.apply(prev, next)
    }
}

/// A key predicate, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pred {
    Even,
    Below3,
    /// Panics with [`UserPanic`] for [`BOOM_KEY`], else accepts every key.
    Panicky,
}

impl Pred {
    pub fn accepts(self, key: &K) -> bool {
        match self {
            Pred::Even => key % 2 == 0,
            Pred::Below3 => *key < 3,
            Pred::Panicky => {
                if *key == BOOM_KEY {
                    std::panic::panic_any(UserPanic("key filter"));
                }
                true
            }
        }
    }

    pub fn closure(self) -> impl Fn(&K) -> bool + Send + Sync + 'static {
        move |key| self.accepts(key)
    }
}

/// One `ReceiverBuilder` step that selects keys. Several in a row exercise "`key`
/// and `key_filter` are one setting: the later call wins".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyStep {
    Key(K),
    Filter(Pred),
}

/// How a receiver is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RxSpec {
    /// Applied in order; empty means `hub.receiver()` if `merge` is `None` too.
    pub keys: Vec<KeyStep>,
    /// `None`: the hub's merge.
    pub merge: Option<MergeFn>,
    /// `.snapshot()`, applied only on a hub with a state table (elsewhere it is a
    /// documented panic, which `tests/bad_input_conflate_state.rs` pins).
    pub snapshot: bool,
    /// `.max_pending(n)`.
    pub max_pending: Option<u8>,
}

/// One step of a conflate sequence. Handle indices are taken modulo the number of
/// live handles of that kind; an op when there is none is skipped on both sides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Send {
        tx: u8,
        key: K,
        value: N,
    },
    TryRecv {
        rx: u8,
    },
    TryRecvAll {
        rx: u8,
    },
    Peek {
        rx: u8,
    },
    /// `recv_timeout(Duration::ZERO)`: a ready value still comes back.
    RecvTimeoutZero {
        rx: u8,
    },
    /// `try_iter().collect()`.
    TryIter {
        rx: u8,
    },
    /// `recv_async()` polled once, then dropped (a pending one must consume nothing).
    RecvAsyncOnce {
        rx: u8,
    },
    /// `Stream::poll_next` once (the receiver keeps its parked listener).
    PollNextOnce {
        rx: u8,
    },
    /// The blocking forms, called only where they cannot block: the receiver has
    /// something pending or is closed (by its own `len`/`is_closed`, which the
    /// snapshot already compared). `how` picks `recv()`, `iter().next()` or
    /// `recv_deadline` with a past deadline.
    RecvIfReady {
        rx: u8,
        how: u8,
    },
    Len {
        rx: u8,
    },
    IsEmpty {
        rx: u8,
    },
    IsClosed {
        rx: u8,
    },
    NewReceiver(RxSpec),
    /// `Hub::latest(&key)` on the first hub.
    Latest {
        key: K,
    },
    /// `Hub::snapshot()` on the first hub.
    HubSnapshot,
    /// `Receiver::stats()` (also compared after every op; this records it in
    /// the outcome tally).
    Stats {
        rx: u8,
    },
    /// `Receiver::close`, keeping the handle for later ops.
    CloseReceiver {
        rx: u8,
    },
    DropReceiver {
        rx: u8,
    },
    NewSender,
    CloneSender {
        tx: u8,
    },
    DropSender {
        tx: u8,
    },
    SenderClose {
        tx: u8,
    },
    SenderIsClosed {
        tx: u8,
    },
    CloneHub,
    DropHub {
        hub: u8,
    },
    HubClose,
    HubIsClosed,
    /// Drops every hub and sender handle: a graceful close.
    DropAllHandles,
    /// Drops every handle and receiver and starts over with a fresh hub (this
    /// merge), one sender and one receiver, so that a close does not leave the rest
    /// of a sequence with nothing to do.
    Restart {
        hub_merge: Option<MergeFn>,
        retain: bool,
        receiver: RxSpec,
    },
}

/// How the hub of a sequence is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HubSetup {
    /// The hub's merge (`None`: `Hub::new()`).
    pub hub_merge: Option<MergeFn>,
    /// Whether it keeps a state table (`Hub::builder().retain_latest()`).
    pub retain: bool,
}

/// A whole sequence: the hub's setup and the ops.
pub type Scenario = harness::Scenario<HubSetup, Op>;

fn gen_key(src: &mut impl Source) -> K {
    src.below(u32::from(KEYS)) as K
}

fn gen_value(src: &mut impl Source) -> N {
    N::from(src.below(11)) - 2
}

fn gen_merge(src: &mut impl Source) -> Option<MergeFn> {
    let i = src.below(MergeFn::ALL.len() as u32 + 1) as usize;
    MergeFn::ALL.get(i).copied()
}

fn gen_rx_spec(src: &mut impl Source) -> RxSpec {
    // Mostly zero or one key step; sometimes two, to pin "the later call wins".
    let steps = [0, 0, 1, 1, 1, 2][src.below(6) as usize];
    let keys = (0..steps)
        .map(|_| match src.below(5) {
            0 | 1 => KeyStep::Key(gen_key(src)),
            2 => KeyStep::Filter(Pred::Even),
            3 => KeyStep::Filter(Pred::Below3),
            _ => KeyStep::Filter(Pred::Panicky),
        })
        .collect();
    let merge = if src.below(2) == 0 {
        None
    } else {
        gen_merge(src)
    };
    let snapshot = src.below(3) == 0;
    let max_pending = (src.below(4) == 0).then(|| 1 + src.below(3) as u8);
    RxSpec {
        keys,
        merge,
        snapshot,
        max_pending,
    }
}

impl Op {
    /// Decodes one op. The weights keep most sequences alive (closes are rare) and
    /// busy (sends dominate, receives close behind).
    pub fn generate(src: &mut impl Source) -> Op {
        const WEIGHTS: [u32; 29] = [
            300, // Send
            70,  // TryRecv
            35,  // TryRecvAll
            35,  // Peek
            25,  // RecvTimeoutZero
            10,  // TryIter
            10,  // Len
            5,   // IsEmpty
            10,  // IsClosed
            30,  // NewReceiver
            6,   // CloseReceiver
            6,   // DropReceiver
            6,   // NewSender
            6,   // CloneSender
            3,   // DropSender
            2,   // SenderClose
            3,   // SenderIsClosed
            4,   // CloneHub
            2,   // DropHub
            2,   // HubClose
            3,   // HubIsClosed
            2,   // DropAllHandles
            12,  // Restart
            20,  // RecvAsyncOnce
            10,  // PollNextOnce
            20,  // RecvIfReady
            8,   // Latest
            6,   // HubSnapshot
            8,   // Stats
        ];
        let slot = |src: &mut _| Source::byte(src);
        match src.weighted(&WEIGHTS) {
            0 => Op::Send {
                tx: slot(src),
                key: gen_key(src),
                value: gen_value(src),
            },
            1 => Op::TryRecv { rx: slot(src) },
            2 => Op::TryRecvAll { rx: slot(src) },
            3 => Op::Peek { rx: slot(src) },
            4 => Op::RecvTimeoutZero { rx: slot(src) },
            5 => Op::TryIter { rx: slot(src) },
            6 => Op::Len { rx: slot(src) },
            7 => Op::IsEmpty { rx: slot(src) },
            8 => Op::IsClosed { rx: slot(src) },
            9 => Op::NewReceiver(gen_rx_spec(src)),
            10 => Op::CloseReceiver { rx: slot(src) },
            11 => Op::DropReceiver { rx: slot(src) },
            12 => Op::NewSender,
            13 => Op::CloneSender { tx: slot(src) },
            14 => Op::DropSender { tx: slot(src) },
            15 => Op::SenderClose { tx: slot(src) },
            16 => Op::SenderIsClosed { tx: slot(src) },
            17 => Op::CloneHub,
            18 => Op::DropHub { hub: slot(src) },
            19 => Op::HubClose,
            20 => Op::HubIsClosed,
            21 => Op::DropAllHandles,
            22 => Op::Restart {
                hub_merge: gen_merge(src),
                retain: src.below(2) == 0,
                receiver: gen_rx_spec(src),
            },
            23 => Op::RecvAsyncOnce { rx: slot(src) },
            24 => Op::PollNextOnce { rx: slot(src) },
            25 => Op::RecvIfReady {
                rx: slot(src),
                how: src.below(3) as u8,
            },
            26 => Op::Latest { key: gen_key(src) },
            27 => Op::HubSnapshot,
            _ => Op::Stats { rx: slot(src) },
        }
    }
}

impl Scenario {
    /// Decodes a sequence: the hub's merge, one to three receivers to start with,
    /// then ops until `max_ops` or until the source runs dry.
    pub fn generate(src: &mut impl Source, max_ops: usize) -> Scenario {
        let setup = HubSetup {
            hub_merge: gen_merge(src),
            retain: src.below(2) == 0,
        };
        let first = (0..=src.below(3))
            .map(|_| Op::NewReceiver(gen_rx_spec(src)))
            .collect();
        Scenario::fill(setup, first, src, max_ops, Op::generate)
    }
}

/// A receiver's or hub's accounting, normalised: `ReceiverStats` field by field
/// (`received, filtered, delivered, folded, annihilated, overflowed, dropped,
/// pending, pending_sends`).
pub type St = [u64; 9];

/// `HubStats`: `sent, refused, receivers`.
pub type HubSt = [u64; 3];

/// `received == folded + annihilated + overflowed + dropped + pending_sends`.
pub fn conserved(s: &St) -> bool {
    s[0] == s[3] + s[4] + s[5] + s[6] + s[8]
}

/// A delivered event, normalised so that any implementation's `Event` compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ev {
    pub key: K,
    pub value: N,
    pub sends: u64,
}

/// What one op returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The op had no handle to act on.
    Skipped,
    Done,
    /// `Err` carries the key and value handed back.
    Send(Result<(), (K, N)>),
    /// The op panicked (only a send may: user code); compared by whose panic
    /// it was (see [`harness::Panic`]).
    Panicked(harness::Panic),
    Recv(Result<Ev, TryRecvError>),
    RecvTimeout(Result<Ev, RecvTimeoutError>),
    All(Result<Vec<Ev>, TryRecvError>),
    Events(Vec<Ev>),
    /// `None`: the future was pending when polled once.
    Async(Option<Result<Ev, RecvError>>),
    /// `None`: pending; `Some(None)`: the stream ended.
    Stream(Option<Option<Ev>>),
    /// A blocking receive's result.
    Blocking(Result<Ev, RecvError>),
    BlockingDeadline(Result<Ev, RecvTimeoutError>),
    /// `iter().next()`: `None` once closed.
    IterNext(Option<Ev>),
    Usize(usize),
    Bool(bool),
    Latest(Option<N>),
    Table(Vec<(K, N)>),
    Stats(St),
}

impl Outcome {
    /// `Done` if the op did something, else `Skipped`.
    fn done(did: bool) -> Outcome {
        if did {
            Outcome::Done
        } else {
            Outcome::Skipped
        }
    }

    /// A coarse kind, for the coverage tally the tests print.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Skipped => "skipped",
            Outcome::Done => "done",
            Outcome::Send(Ok(())) => "send ok",
            Outcome::Send(Err(_)) => "send closed",
            Outcome::Panicked(_) => "send panicked",
            Outcome::Recv(Ok(_)) => "recv/peek value",
            Outcome::Recv(Err(TryRecvError::Empty)) => "recv/peek empty",
            Outcome::Recv(Err(TryRecvError::Closed)) => "recv/peek closed",
            Outcome::RecvTimeout(Ok(_)) => "recv_timeout value",
            Outcome::RecvTimeout(Err(RecvTimeoutError::Timeout)) => "recv_timeout timeout",
            Outcome::RecvTimeout(Err(RecvTimeoutError::Closed)) => "recv_timeout closed",
            Outcome::All(Ok(v)) if v.len() > 1 => "recv_all batch>1",
            Outcome::All(Ok(_)) => "recv_all batch=1",
            Outcome::All(Err(TryRecvError::Empty)) => "recv_all empty",
            Outcome::All(Err(TryRecvError::Closed)) => "recv_all closed",
            Outcome::Events(v) if v.is_empty() => "try_iter none",
            Outcome::Events(_) => "try_iter some",
            Outcome::Async(None) => "recv_async pending",
            Outcome::Async(Some(Ok(_))) => "recv_async value",
            Outcome::Async(Some(Err(_))) => "recv_async closed",
            Outcome::Stream(None) => "poll_next pending",
            Outcome::Stream(Some(Some(_))) => "poll_next value",
            Outcome::Stream(Some(None)) => "poll_next end",
            Outcome::Blocking(Ok(_)) => "recv value",
            Outcome::Blocking(Err(_)) => "recv closed",
            Outcome::BlockingDeadline(Ok(_)) => "recv_deadline value",
            Outcome::BlockingDeadline(Err(_)) => "recv_deadline closed",
            Outcome::IterNext(Some(_)) => "iter value",
            Outcome::IterNext(None) => "iter end",
            Outcome::Usize(_) => "len",
            Outcome::Bool(_) => "bool query",
            Outcome::Latest(Some(_)) => "latest some",
            Outcome::Latest(None) => "latest none",
            Outcome::Table(t) if t.is_empty() => "snapshot empty",
            Outcome::Table(_) => "snapshot some",
            Outcome::Stats(_) => "stats",
        }
    }
}

/// The non-consuming view of every handle, compared after every op.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Per receiver: `(len, is_empty, is_closed)`.
    pub receivers: Vec<(usize, bool, bool)>,
    /// Per receiver: its stats.
    pub stats: Vec<St>,
    /// The first hub's stats, while there is one.
    pub hub_stats: Option<HubSt>,
    pub senders_closed: Vec<bool>,
    pub hubs_closed: Vec<bool>,
}

/// An adapter over one implementation of the `keybus::conflate` API.
pub trait ConflateImpl {
    const NAME: &'static str;
    type Hub;
    type Sender;
    type Receiver;

    fn hub(merge: Option<MergeFn>, retain: bool) -> Self::Hub;
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
    ($name:ident => $($m:ident)::+) => {
        #[doc = concat!("`", stringify!($($m)::+), "` behind the `ConflateImpl` adapter.")]
        pub struct $name;

        impl ConflateImpl for $name {
            const NAME: &'static str = concat!($(stringify!($m), "::",)+ "*");
            type Hub = $($m)::+::Hub<K, V>;
            type Sender = $($m)::+::Sender<K, V>;
            type Receiver = $($m)::+::Receiver<K, V>;

            fn hub(merge: Option<MergeFn>, retain: bool) -> Self::Hub {
                match (merge, retain) {
                    (None, false) => $($m)::+::Hub::new(),
                    (Some(m), false) => $($m)::+::Hub::with_merge(m.closure()),
                    (None, true) => $($m)::+::Hub::builder().retain_latest().build(),
                    (Some(m), true) => $($m)::+::Hub::builder()
                        .merge(m.closure())
                        .retain_latest()
                        .build(),
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
                hub.close()
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
                rx.try_recv()
                    .map(|e| Ev { key: e.key, value: e.value.n, sends: e.sends })
            }
            fn try_recv_all(rx: &mut Self::Receiver) -> Result<Vec<Ev>, TryRecvError> {
                rx.try_recv_all().map(|all| {
                    all.into_iter()
                        .map(|e| Ev { key: e.key, value: e.value.n, sends: e.sends })
                        .collect()
                })
            }
            fn peek(rx: &mut Self::Receiver) -> Result<Ev, TryRecvError> {
                rx.peek()
                    .map(|e| Ev { key: e.key, value: e.value.n, sends: e.sends })
            }
            fn recv_timeout(
                rx: &mut Self::Receiver,
                timeout: Duration,
            ) -> Result<Ev, RecvTimeoutError> {
                rx.recv_timeout(timeout)
                    .map(|e| Ev { key: e.key, value: e.value.n, sends: e.sends })
            }
            fn try_iter(rx: &mut Self::Receiver) -> Vec<Ev> {
                rx.try_iter()
                    .map(|e| Ev { key: e.key, value: e.value.n, sends: e.sends })
                    .collect()
            }
            fn poll_next_once(rx: &mut Self::Receiver) -> Option<Option<Ev>> {
                use futures_core::Stream;
                let next = std::future::poll_fn(|cx| std::pin::Pin::new(&mut *rx).poll_next(cx));
                harness::poll_once(next)
                    .map(|r| r.map(|e| Ev { key: e.key, value: e.value.n, sends: e.sends }))
            }
            fn recv(rx: &mut Self::Receiver) -> Result<Ev, RecvError> {
                rx.recv()
                    .map(|e| Ev { key: e.key, value: e.value.n, sends: e.sends })
            }
            fn recv_deadline(
                rx: &mut Self::Receiver,
                deadline: Instant,
            ) -> Result<Ev, RecvTimeoutError> {
                rx.recv_deadline(deadline)
                    .map(|e| Ev { key: e.key, value: e.value.n, sends: e.sends })
            }
            fn iter_next(rx: &mut Self::Receiver) -> Option<Ev> {
                rx.iter()
                    .next()
                    .map(|e| Ev { key: e.key, value: e.value.n, sends: e.sends })
            }
            fn recv_async_once(rx: &mut Self::Receiver) -> Option<Result<Ev, RecvError>> {
                harness::poll_once(rx.recv_async())
                    .map(|r| r.map(|e| Ev { key: e.key, value: e.value.n, sends: e.sends }))
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
conflate_impl!(Lockfree => keybus::conflate);
conflate_impl!(Baseline => keybus::baseline::conflate);
conflate_impl!(Model => model);

/// One implementation's handles, driven by ops.
pub struct World<I: ConflateImpl> {
    /// Whether the hub keeps a state table.
    retain: bool,
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
    pub fn new(hub_merge: Option<MergeFn>, retain: bool) -> Self {
        let hub = I::hub(hub_merge, retain);
        let tx = I::sender(&hub);
        World {
            retain,
            table_len: retain.then_some(0),
            hubs: vec![hub],
            senders: vec![tx],
            receivers: Vec::new(),
            life: Arc::new(()),
            leaked: 0,
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
        let alive = Arc::strong_count(&self.life) - 1 + self.leaked;
        let pending: usize = self.receivers.iter().map(I::len).sum();
        alive as isize - pending as isize - table as isize
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
            Op::TryRecv { rx } => self
                .rx(rx)
                .map_or(Skipped, |r| Outcome::Recv(I::try_recv(r))),
            Op::TryRecvAll { rx } => self
                .rx(rx)
                .map_or(Skipped, |r| Outcome::All(I::try_recv_all(r))),
            Op::Peek { rx } => self.rx(rx).map_or(Skipped, |r| Outcome::Recv(I::peek(r))),
            Op::RecvTimeoutZero { rx } => self.rx(rx).map_or(Skipped, |r| {
                Outcome::RecvTimeout(I::recv_timeout(r, Duration::ZERO))
            }),
            Op::TryIter { rx } => self
                .rx(rx)
                .map_or(Skipped, |r| Outcome::Events(I::try_iter(r))),
            Op::PollNextOnce { rx } => self
                .rx(rx)
                .map_or(Skipped, |r| Outcome::Stream(I::poll_next_once(r))),
            Op::RecvIfReady { rx, how } => match self.rx(rx) {
                Some(r) if I::len(r) > 0 || I::is_closed(r) => match how {
                    0 => Outcome::Blocking(I::recv(r)),
                    1 => Outcome::IterNext(I::iter_next(r)),
                    _ => {
                        let now = Instant::now();
                        let past = now.checked_sub(Duration::from_secs(1)).unwrap_or(now);
                        Outcome::BlockingDeadline(I::recv_deadline(r, past))
                    }
                },
                _ => Skipped,
            },
            Op::RecvAsyncOnce { rx } => self
                .rx(rx)
                .map_or(Skipped, |r| Outcome::Async(I::recv_async_once(r))),
            Op::Len { rx } => self.rx(rx).map_or(Skipped, |r| Usize(I::len(r))),
            Op::IsEmpty { rx } => self.rx(rx).map_or(Skipped, |r| Bool(I::is_empty(r))),
            Op::IsClosed { rx } => self.rx(rx).map_or(Skipped, |r| Bool(I::is_closed(r))),
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
            Op::Stats { rx } => self.rx(rx).map_or(Skipped, |r| Outcome::Stats(I::stats(r))),
            Op::CloseReceiver { rx } => self.rx(rx).map_or(Skipped, |r| {
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
                ref receiver,
            } => {
                let old = std::mem::replace(self, World::new(hub_merge, retain));
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
    /// Applies one op (see [`Self::apply_op`]), then notes the table's size
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
    let mut a = World::<A>::new(scenario.setup.hub_merge, scenario.setup.retain);
    let mut b = World::<B>::new(scenario.setup.hub_merge, scenario.setup.retain);
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
