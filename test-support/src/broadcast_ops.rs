//! The broadcast operation model: one op enum, shared by `tests/differential.rs` and
//! `fuzz/fuzz_targets/broadcast_ops.rs`, and a runner that applies a sequence to two
//! implementations in lockstep and compares every result.
//!
//! Same shape as `conflate_ops.rs`: [`BroadcastImpl`] adapts any module with the
//! `keybus::broadcast` API (`broadcast_impl!` (in `runner.rs`), one line per implementation),
//! results are normalised into [`Outcome`] and compared with `==` after every op,
//! together with a [`snapshot`](World::snapshot) of every non-consuming query.
//!
//! Cursors are generated relative to the buffer's state ([`Cursor`]), so reads land
//! on every interesting boundary: the evicted range, `oldest - 1`, the tail, and the
//! future, whatever the capacity.

use crate::harness::{self, clone_picked, drop_picked, pick, Answer as _, Lockstep, Source, Tally};
use keybus::{Entry, ReadError};
use std::time::Duration;

pub mod model;
mod runner;

pub use runner::{check, run, Baseline, BroadcastImpl, Lockfree, Mismatch, Model, World};

/// Values are drawn from `0..4`, so `append_if_changed` often sees its latest.
pub type T = u8;

const MAX_READERS: usize = 6;
const MAX_BUFFERS: usize = 3;

/// A cursor, resolved against the buffer when the op runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cursor {
    /// This revision.
    Abs(u8),
    /// `tail + d` (clamped at 0): `d > 0` is in the future.
    FromTail(i8),
    /// `oldest - 1 + d` (clamped at 0): `d < 0` is evicted, `0` reads everything.
    FromOldest(i8),
}

impl Cursor {
    /// `oldest - 1` is `tail - min(capacity, tail)`: what a ring that evicts one per
    /// append past capacity retains. Computed from the op model, not from the
    /// implementation's `retained()`, so a wrong `retained()` cannot hide itself.
    pub fn resolve(self, tail: u64, capacity: usize) -> u64 {
        let before_oldest = tail - tail.min(capacity as u64);
        match self {
            Cursor::Abs(r) => u64::from(r),
            Cursor::FromTail(d) => tail.saturating_add_signed(i64::from(d)),
            Cursor::FromOldest(d) => before_oldest.saturating_add_signed(i64::from(d)),
        }
    }
}

/// One step of a broadcast sequence. Handle indices are taken modulo the number of
/// live handles of that kind; an op when there is none is skipped on both sides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Append {
        buf: u8,
        value: T,
    },
    AppendIfChanged {
        buf: u8,
        value: T,
    },
    /// `limit == 0` must panic (documented), in both.
    TryRead {
        buf: u8,
        after: Cursor,
        limit: usize,
    },
    /// `read_timeout(after, limit, Duration::ZERO)`.
    ReadTimeoutZero {
        buf: u8,
        after: Cursor,
        limit: usize,
    },
    /// `read_async(after, limit)` polled once, then dropped.
    ReadAsyncOnce {
        buf: u8,
        after: Cursor,
        limit: usize,
    },
    /// The blocking `read`, called only where it cannot block: the cursor is not
    /// the tail, or the buffer is closed (by its own `tail`/`is_closed`, which the
    /// snapshot already compared).
    ReadIfReady {
        buf: u8,
        after: Cursor,
        limit: usize,
    },
    Validate {
        buf: u8,
        after: Cursor,
    },
    Latest {
        buf: u8,
    },
    Retained {
        buf: u8,
    },
    Tail {
        buf: u8,
    },
    NewReader {
        buf: u8,
    },
    ReaderAt {
        buf: u8,
        after: Cursor,
    },
    TryNext {
        reader: u8,
    },
    /// `next_async()` polled once, then dropped.
    NextAsyncOnce {
        reader: u8,
    },
    /// The blocking `next`, called only where it cannot block (as `ReadIfReady`;
    /// skipped while no buffer handle is left to ask).
    NextIfReady {
        reader: u8,
    },
    DropReader {
        reader: u8,
    },
    Close {
        buf: u8,
    },
    IsClosed {
        buf: u8,
    },
    CloneBuffer {
        buf: u8,
    },
    DropBuffer {
        buf: u8,
    },
    /// A fresh buffer's generation differs from this one's.
    GenerationIsFresh {
        buf: u8,
    },
    /// Drops every handle and reader and starts over with a new buffer and reader.
    Restart {
        capacity: usize,
    },
}

/// A whole sequence: the buffer's capacity (the setup) and the ops.
pub type Scenario = harness::Scenario<usize, Op>;

fn gen_capacity(src: &mut impl Source) -> usize {
    1 + src.below(8) as usize
}

fn gen_value(src: &mut impl Source) -> T {
    src.below(4) as T
}

fn gen_cursor(src: &mut impl Source) -> Cursor {
    match src.below(8) {
        0 | 1 => Cursor::Abs(src.below(40) as u8),
        // Around the tail: a little past it, at it, or up to a ring behind.
        2..=4 => Cursor::FromTail(src.below(14) as i8 - 10),
        // Around the oldest retained revision.
        _ => Cursor::FromOldest(src.below(7) as i8 - 4),
    }
}

fn gen_limit(src: &mut impl Source) -> usize {
    [1, 1, 1, 2, 2, 3, 4, 5, 8, 9, usize::MAX, 1, 2, 3, 1, 0][src.below(16) as usize]
}

impl Op {
    /// Decodes one op; appends and reads dominate, closes are rare.
    pub fn generate(src: &mut impl Source) -> Op {
        const WEIGHTS: [u32; 22] = [
            200, // Append
            60,  // AppendIfChanged
            120, // TryRead
            25,  // ReadTimeoutZero
            25,  // ReadAsyncOnce
            30,  // Validate
            10,  // Latest
            10,  // Retained
            5,   // Tail
            15,  // NewReader
            20,  // ReaderAt
            100, // TryNext
            20,  // NextAsyncOnce
            6,   // DropReader
            2,   // Close
            3,   // IsClosed
            4,   // CloneBuffer
            2,   // DropBuffer
            2,   // GenerationIsFresh
            8,   // Restart
            20,  // ReadIfReady
            20,  // NextIfReady
        ];
        let slot = |src: &mut _| Source::byte(src);
        match src.weighted(&WEIGHTS) {
            0 => Op::Append {
                buf: slot(src),
                value: gen_value(src),
            },
            1 => Op::AppendIfChanged {
                buf: slot(src),
                value: gen_value(src),
            },
            2 => Op::TryRead {
                buf: slot(src),
                after: gen_cursor(src),
                limit: gen_limit(src),
            },
            3 => Op::ReadTimeoutZero {
                buf: slot(src),
                after: gen_cursor(src),
                limit: gen_limit(src),
            },
            4 => Op::ReadAsyncOnce {
                buf: slot(src),
                after: gen_cursor(src),
                limit: gen_limit(src),
            },
            5 => Op::Validate {
                buf: slot(src),
                after: gen_cursor(src),
            },
            6 => Op::Latest { buf: slot(src) },
            7 => Op::Retained { buf: slot(src) },
            8 => Op::Tail { buf: slot(src) },
            9 => Op::NewReader { buf: slot(src) },
            10 => Op::ReaderAt {
                buf: slot(src),
                after: gen_cursor(src),
            },
            11 => Op::TryNext { reader: slot(src) },
            12 => Op::NextAsyncOnce { reader: slot(src) },
            13 => Op::DropReader { reader: slot(src) },
            14 => Op::Close { buf: slot(src) },
            15 => Op::IsClosed { buf: slot(src) },
            16 => Op::CloneBuffer { buf: slot(src) },
            17 => Op::DropBuffer { buf: slot(src) },
            18 => Op::GenerationIsFresh { buf: slot(src) },
            19 => Op::Restart {
                capacity: gen_capacity(src),
            },
            20 => Op::ReadIfReady {
                buf: slot(src),
                after: gen_cursor(src),
                limit: gen_limit(src),
            },
            _ => Op::NextIfReady { reader: slot(src) },
        }
    }
}

impl Scenario {
    /// Decodes a sequence: the capacity, then ops until `max_ops` or until the
    /// source runs dry.
    pub fn generate(src: &mut impl Source, max_ops: usize) -> Scenario {
        let capacity = gen_capacity(src);
        Scenario::fill(capacity, Vec::new(), src, max_ops, Op::generate)
    }
}

/// What one op returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Skipped,
    Done,
    /// `Err` carries the value handed back.
    Append(Result<u64, T>),
    /// The op panicked (only a read with `limit == 0` may); compared by whose panic
    /// it was (see [`harness::Panic`]).
    Panicked(harness::Panic),
    Read(Result<Vec<Entry<T>>, ReadError>),
    /// `None`: the future was pending when polled once.
    ReadAsync(Option<Result<Vec<Entry<T>>, ReadError>>),
    Next(Result<Entry<T>, ReadError>),
    NextAsync(Option<Result<Entry<T>, ReadError>>),
    /// A blocking form's result (`Read` or `Next`), told apart for the tally.
    Blocking(Box<Outcome>),
    Validate(Result<(), ReadError>),
    Latest(Option<Entry<T>>),
    Entries(Vec<Entry<T>>),
    U64(u64),
    Bool(bool),
}

fn error_label(e: &ReadError) -> &'static str {
    match e {
        ReadError::Gap { .. } => "gap",
        ReadError::Future { .. } => "future",
        ReadError::Empty => "empty",
        ReadError::Timeout => "timeout",
        ReadError::Closed => "closed",
        _ => "other error",
    }
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
            Outcome::Append(Ok(_)) => "append ok",
            Outcome::Append(Err(_)) => "append closed",
            Outcome::Panicked(_) => "read panicked (limit 0)",
            Outcome::Read(Ok(v)) if v.len() > 1 => "read entries>1",
            Outcome::Read(Ok(_)) => "read entries=1",
            Outcome::Read(Err(e)) => match error_label(e) {
                "gap" => "read gap",
                "future" => "read future",
                "empty" => "read empty",
                "timeout" => "read timeout",
                "closed" => "read closed",
                _ => "read other error",
            },
            Outcome::Blocking(inner) => match **inner {
                Outcome::Read(Ok(_)) => "blocking read entries",
                Outcome::Read(Err(_)) => "blocking read error",
                Outcome::Next(Ok(_)) => "blocking next entry",
                Outcome::Next(Err(_)) => "blocking next error",
                _ => "blocking panicked (limit 0)",
            },
            Outcome::ReadAsync(None) => "read_async pending",
            Outcome::ReadAsync(Some(_)) => "read_async ready",
            Outcome::Next(Ok(_)) => "next entry",
            Outcome::Next(Err(e)) => match error_label(e) {
                "gap" => "next gap",
                "future" => "next future",
                "empty" => "next empty",
                "closed" => "next closed",
                _ => "next other error",
            },
            Outcome::NextAsync(None) => "next_async pending",
            Outcome::NextAsync(Some(_)) => "next_async ready",
            Outcome::Validate(Ok(())) => "validate ok",
            Outcome::Validate(Err(_)) => "validate err",
            Outcome::Latest(_) => "latest",
            Outcome::Entries(_) => "retained",
            Outcome::U64(_) => "tail",
            Outcome::Bool(_) => "bool query",
        }
    }
}

/// The non-consuming view of every handle, compared after every op.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Per buffer handle: `(tail, is_closed, capacity, latest, retained,
    /// generation unchanged since the buffer was made)`.
    #[allow(clippy::type_complexity)]
    pub buffers: Vec<(u64, bool, usize, Option<Entry<T>>, Vec<Entry<T>>, bool)>,
    /// Per reader: its cursor.
    pub cursors: Vec<u64>,
}
