//! The conflate operation model: one op enum, shared by `tests/differential.rs` and
//! `fuzz/fuzz_targets/conflate_ops.rs`, and a runner that applies a sequence to two
//! implementations in lockstep and compares every result.
//!
//! The two implementations share no trait, so [`ConflateImpl`] is a small adapter
//! trait and `conflate_impl!` (in `runner.rs`) implements it for any module that exposes the
//! `keybus::conflate` API (one line per implementation). Results are normalised into
//! [`Outcome`] (events become plain [`Ev`] values, because `keybus::Event` is
//! `#[non_exhaustive]` and a reference model cannot build one), then compared with
//! `==` after every op, together with a [`snapshot`](harness::Lockstep::snapshot) of every
//! handle's non-consuming queries (`len`, `is_empty`, `is_closed`).
//!
//! Values carry a per-sequence `Arc` token, so each side is also checked on its own
//! after every op: the values it keeps alive are exactly its pending slots (a closed
//! or dropped receiver's values are gone at once), and nothing outlives the handles.

use crate::harness::{
    self, clone_picked, drop_picked, pick, Answer as _, Lockstep, Source, Tally, UserPanic,
};
use keybus::{RecvError, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub mod model;
mod runner;

pub use runner::{check, run, Baseline, ConflateImpl, Lockfree, Mismatch, Model, World};

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
    /// documented panic, which `test-support/src/bad_input/conflate_state.rs` pins).
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
        tombstones: bool,
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
    /// Whether negative values remove their key
    /// (`Hub::builder().tombstones(is_tombstone)`, see [`is_tombstone`]).
    pub tombstones: bool,
}

/// The tombstone test of a hub built with `tombstones`: a negative number.
/// Values are drawn from `-2..=8`, so removals come up often.
pub fn is_tombstone(v: &V) -> bool {
    v.n < 0
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
                tombstones: src.below(2) == 0,
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
            tombstones: src.below(2) == 0,
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

/// An implementation's event, normalised (each implementation has its own type).
pub trait IntoEv {
    fn ev(self) -> Ev;
}

impl IntoEv for keybus::Event<K, V> {
    fn ev(self) -> Ev {
        Ev {
            key: self.key,
            value: self.value.n,
            sends: self.sends,
        }
    }
}

impl IntoEv for model::Event<K, V> {
    fn ev(self) -> Ev {
        Ev {
            key: self.key,
            value: self.value.n,
            sends: self.sends,
        }
    }
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

impl harness::Answer for Outcome {
    const DONE: Self = Outcome::Done;
    const SKIPPED: Self = Outcome::Skipped;
}

impl Outcome {
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
