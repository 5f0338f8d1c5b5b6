//! The broadcast operation model: one op enum, shared by `tests/differential.rs` and
//! `fuzz/fuzz_targets/broadcast_ops.rs`, and a runner that applies a sequence to two
//! implementations in lockstep and compares every result.
//!
//! Same shape as `conflate_ops.rs`: [`BroadcastImpl`] adapts any module with the
//! `keybus::broadcast` API ([`broadcast_impl!`], one line per implementation),
//! results are normalised into [`Outcome`] and compared with `==` after every op,
//! together with a [`snapshot`](World::snapshot) of every non-consuming query.
//!
//! Cursors are generated relative to the buffer's state ([`Cursor`]), so reads land
//! on every interesting boundary: the evicted range, `oldest - 1`, the tail, and the
//! future, whatever the capacity.

use crate::harness::{self, clone_picked, drop_picked, pick, Lockstep, Source, Tally};
use keybus::{Entry, ReadError};
use std::time::Duration;

pub mod model;

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

/// An adapter over one implementation of the `keybus::broadcast` API.
pub trait BroadcastImpl {
    const NAME: &'static str;
    type Buffer;
    type Reader;

    fn new(capacity: usize) -> Self::Buffer;
    fn clone_buffer(buf: &Self::Buffer) -> Self::Buffer;
    fn capacity(buf: &Self::Buffer) -> usize;
    fn append(buf: &Self::Buffer, value: T) -> Result<u64, T>;
    fn append_if_changed(buf: &Self::Buffer, value: T) -> Result<u64, T>;
    fn tail(buf: &Self::Buffer) -> u64;
    fn validate(buf: &Self::Buffer, after: u64) -> Result<(), ReadError>;
    fn latest(buf: &Self::Buffer) -> Option<Entry<T>>;
    fn retained(buf: &Self::Buffer) -> Vec<Entry<T>>;
    fn try_read(buf: &Self::Buffer, after: u64, limit: usize) -> Result<Vec<Entry<T>>, ReadError>;
    fn read_timeout(
        buf: &Self::Buffer,
        after: u64,
        limit: usize,
        timeout: Duration,
    ) -> Result<Vec<Entry<T>>, ReadError>;
    /// `read_async(after, limit)` polled once, then dropped.
    fn read_async_once(
        buf: &Self::Buffer,
        after: u64,
        limit: usize,
    ) -> Option<Result<Vec<Entry<T>>, ReadError>>;
    fn reader(buf: &Self::Buffer) -> Self::Reader;
    fn reader_at(buf: &Self::Buffer, after: u64) -> Self::Reader;
    fn close(buf: &Self::Buffer);
    fn is_closed(buf: &Self::Buffer) -> bool;
    fn generation(buf: &Self::Buffer) -> u64;

    /// Blocks until an entry, `Closed`, `Gap` or `Future`.
    fn read(buf: &Self::Buffer, after: u64, limit: usize) -> Result<Vec<Entry<T>>, ReadError>;
    fn try_next(reader: &mut Self::Reader) -> Result<Entry<T>, ReadError>;
    /// Blocks like `read`.
    fn next(reader: &mut Self::Reader) -> Result<Entry<T>, ReadError>;
    /// `next_async()` polled once, then dropped.
    fn next_async_once(reader: &mut Self::Reader) -> Option<Result<Entry<T>, ReadError>>;
    fn cursor(reader: &Self::Reader) -> u64;
}

/// Implements [`BroadcastImpl`] as `$name` for the module at path `$m`, which must
/// expose the `keybus::broadcast` API. The expansion names this module's items, so
/// invoke it here (see the list below).
macro_rules! broadcast_impl {
    ($name:ident => $($m:ident)::+) => {
        #[doc = concat!("`", stringify!($($m)::+), "` behind the `BroadcastImpl` adapter.")]
        pub struct $name;

        impl BroadcastImpl for $name {
            const NAME: &'static str = concat!($(stringify!($m), "::",)+ "*");
            type Buffer = $($m)::+::Buffer<T>;
            type Reader = $($m)::+::Reader<T>;

            fn new(capacity: usize) -> Self::Buffer {
                $($m)::+::Buffer::new(capacity)
            }
            fn clone_buffer(buf: &Self::Buffer) -> Self::Buffer {
                buf.clone()
            }
            fn capacity(buf: &Self::Buffer) -> usize {
                buf.capacity()
            }
            fn append(buf: &Self::Buffer, value: T) -> Result<u64, T> {
                buf.append(value).map_err(|e| e.0)
            }
            fn append_if_changed(buf: &Self::Buffer, value: T) -> Result<u64, T> {
                buf.append_if_changed(value).map_err(|e| e.0)
            }
            fn tail(buf: &Self::Buffer) -> u64 {
                buf.tail()
            }
            fn validate(buf: &Self::Buffer, after: u64) -> Result<(), ReadError> {
                buf.validate(after)
            }
            fn latest(buf: &Self::Buffer) -> Option<Entry<T>> {
                buf.latest()
            }
            fn retained(buf: &Self::Buffer) -> Vec<Entry<T>> {
                buf.retained()
            }
            fn try_read(
                buf: &Self::Buffer,
                after: u64,
                limit: usize,
            ) -> Result<Vec<Entry<T>>, ReadError> {
                buf.try_read(after, limit)
            }
            fn read_timeout(
                buf: &Self::Buffer,
                after: u64,
                limit: usize,
                timeout: Duration,
            ) -> Result<Vec<Entry<T>>, ReadError> {
                buf.read_timeout(after, limit, timeout)
            }
            fn read_async_once(
                buf: &Self::Buffer,
                after: u64,
                limit: usize,
            ) -> Option<Result<Vec<Entry<T>>, ReadError>> {
                harness::poll_once(buf.read_async(after, limit))
            }
            fn reader(buf: &Self::Buffer) -> Self::Reader {
                buf.reader()
            }
            fn reader_at(buf: &Self::Buffer, after: u64) -> Self::Reader {
                buf.reader_at(after)
            }
            fn close(buf: &Self::Buffer) {
                buf.close()
            }
            fn is_closed(buf: &Self::Buffer) -> bool {
                buf.is_closed()
            }
            fn generation(buf: &Self::Buffer) -> u64 {
                buf.generation()
            }
            fn read(
                buf: &Self::Buffer,
                after: u64,
                limit: usize,
            ) -> Result<Vec<Entry<T>>, ReadError> {
                buf.read(after, limit)
            }
            fn try_next(reader: &mut Self::Reader) -> Result<Entry<T>, ReadError> {
                reader.try_next()
            }
            fn next(reader: &mut Self::Reader) -> Result<Entry<T>, ReadError> {
                reader.next()
            }
            fn next_async_once(reader: &mut Self::Reader) -> Option<Result<Entry<T>, ReadError>> {
                harness::poll_once(reader.next_async())
            }
            fn cursor(reader: &Self::Reader) -> u64 {
                reader.cursor()
            }
        }
    };
}

// The implementations under comparison, one line each.
broadcast_impl!(Lockfree => keybus::broadcast);
broadcast_impl!(Baseline => keybus::baseline::broadcast);
broadcast_impl!(Model => model);

/// One implementation's handles, driven by ops.
pub struct World<I: BroadcastImpl> {
    buffers: Vec<I::Buffer>,
    readers: Vec<I::Reader>,
    /// Capacity and generation of the current buffer, for cursors and the
    /// generation-stability check (they outlive every handle being dropped).
    capacity: usize,
    generation: u64,
}

impl<I: BroadcastImpl> World<I> {
    /// A buffer and one reader at its (zero) tail.
    pub fn new(capacity: usize) -> Self {
        let buf = I::new(capacity);
        let generation = I::generation(&buf);
        let reader = I::reader(&buf);
        World {
            buffers: vec![buf],
            readers: vec![reader],
            capacity,
            generation,
        }
    }

    fn buf(&self, index: u8) -> Option<&I::Buffer> {
        pick(self.buffers.len(), index).map(|n| &self.buffers[n])
    }

    fn reader(&mut self, index: u8) -> Option<&mut I::Reader> {
        let n = pick(self.readers.len(), index)?;
        Some(&mut self.readers[n])
    }
}

impl<I: BroadcastImpl> Lockstep for World<I> {
    type Op = Op;
    type Outcome = Outcome;
    type Snapshot = Snapshot;
    /// Applies one op. Reads run under [`harness::catch`] because `limit == 0` must
    /// panic; any other panic reaches the caller.
    fn apply(&mut self, op: &Op) -> Outcome {
        use Outcome::{Bool, Done, Skipped};
        let capacity = self.capacity;
        let at = |buf: &I::Buffer, after: Cursor| after.resolve(I::tail(buf), capacity);
        let read = |f: &dyn Fn() -> Outcome| harness::catch(f).unwrap_or_else(Outcome::Panicked);
        match *op {
            Op::Append { buf, value } => self
                .buf(buf)
                .map_or(Skipped, |b| Outcome::Append(I::append(b, value))),
            Op::AppendIfChanged { buf, value } => self
                .buf(buf)
                .map_or(Skipped, |b| Outcome::Append(I::append_if_changed(b, value))),
            Op::TryRead { buf, after, limit } => self.buf(buf).map_or(Skipped, |b| {
                let after = at(b, after);
                read(&|| Outcome::Read(I::try_read(b, after, limit)))
            }),
            Op::ReadTimeoutZero { buf, after, limit } => self.buf(buf).map_or(Skipped, |b| {
                let after = at(b, after);
                read(&|| Outcome::Read(I::read_timeout(b, after, limit, Duration::ZERO)))
            }),
            Op::ReadAsyncOnce { buf, after, limit } => self.buf(buf).map_or(Skipped, |b| {
                let after = at(b, after);
                read(&|| Outcome::ReadAsync(I::read_async_once(b, after, limit)))
            }),
            Op::ReadIfReady { buf, after, limit } => match self.buf(buf) {
                Some(b) => {
                    let after = at(b, after);
                    if after != I::tail(b) || I::is_closed(b) {
                        let inner = read(&|| Outcome::Read(I::read(b, after, limit)));
                        Outcome::Blocking(Box::new(inner))
                    } else {
                        Skipped
                    }
                }
                None => Skipped,
            },
            Op::Validate { buf, after } => self
                .buf(buf)
                .map_or(Skipped, |b| Outcome::Validate(I::validate(b, at(b, after)))),
            Op::Latest { buf } => self
                .buf(buf)
                .map_or(Skipped, |b| Outcome::Latest(I::latest(b))),
            Op::Retained { buf } => self
                .buf(buf)
                .map_or(Skipped, |b| Outcome::Entries(I::retained(b))),
            Op::Tail { buf } => self.buf(buf).map_or(Skipped, |b| Outcome::U64(I::tail(b))),
            Op::NewReader { buf } => match self.buf(buf) {
                Some(b) if self.readers.len() < MAX_READERS => {
                    let reader = I::reader(b);
                    self.readers.push(reader);
                    Done
                }
                _ => Skipped,
            },
            Op::ReaderAt { buf, after } => match self.buf(buf) {
                Some(b) if self.readers.len() < MAX_READERS => {
                    let reader = I::reader_at(b, at(b, after));
                    self.readers.push(reader);
                    Done
                }
                _ => Skipped,
            },
            Op::TryNext { reader } => self
                .reader(reader)
                .map_or(Skipped, |r| Outcome::Next(I::try_next(r))),
            Op::NextIfReady { reader } => {
                let Some((tail, closed)) =
                    self.buffers.first().map(|b| (I::tail(b), I::is_closed(b)))
                else {
                    return Skipped;
                };
                match self.reader(reader) {
                    Some(r) if I::cursor(r) != tail || closed => {
                        Outcome::Blocking(Box::new(Outcome::Next(I::next(r))))
                    }
                    _ => Skipped,
                }
            }
            Op::NextAsyncOnce { reader } => self
                .reader(reader)
                .map_or(Skipped, |r| Outcome::NextAsync(I::next_async_once(r))),
            Op::DropReader { reader } => Outcome::done(drop_picked(&mut self.readers, reader)),
            Op::Close { buf } => self.buf(buf).map_or(Skipped, |b| {
                I::close(b);
                Done
            }),
            Op::IsClosed { buf } => self.buf(buf).map_or(Skipped, |b| Bool(I::is_closed(b))),
            Op::CloneBuffer { buf } => Outcome::done(clone_picked(
                &mut self.buffers,
                buf,
                MAX_BUFFERS,
                I::clone_buffer,
            )),
            Op::DropBuffer { buf } => Outcome::done(drop_picked(&mut self.buffers, buf)),
            Op::GenerationIsFresh { buf } => self.buf(buf).map_or(Skipped, |b| {
                Bool(I::generation(&I::new(1)) != I::generation(b))
            }),
            Op::Restart { capacity } => {
                *self = World::new(capacity);
                Done
            }
        }
    }
    fn label(outcome: &Outcome) -> &'static str {
        outcome.label()
    }
    /// Every non-consuming query on every handle.
    fn snapshot(&self) -> Snapshot {
        Snapshot {
            buffers: self
                .buffers
                .iter()
                .map(|b| {
                    (
                        I::tail(b),
                        I::is_closed(b),
                        I::capacity(b),
                        I::latest(b),
                        I::retained(b),
                        I::generation(b) == self.generation,
                    )
                })
                .collect(),
            cursors: self.readers.iter().map(I::cursor).collect(),
        }
    }
    /// What the runner does after the sequence: read everything from every cursor,
    /// close, and read to the end.
    fn epilogue(&self) -> Vec<Op> {
        let readers = 0..self.readers.len() as u8;
        let everything = Cursor::FromOldest(0);
        let mut ops = vec![Op::TryRead {
            buf: 0,
            after: everything,
            limit: usize::MAX,
        }];
        ops.extend(readers.clone().map(|reader| Op::TryNext { reader }));
        ops.push(Op::Close { buf: 0 });
        for _ in 0..=self.capacity {
            ops.extend(readers.clone().map(|reader| Op::TryNext { reader }));
        }
        ops.push(Op::ReadTimeoutZero {
            buf: 0,
            after: Cursor::FromTail(0),
            limit: 1,
        });
        ops
    }
}

/// The first difference between two implementations on one sequence.
pub type Mismatch = harness::Mismatch<Op>;

/// Applies `scenario` to `A` and `B` in lockstep (see [`harness::lockstep`]).
/// Returns a tally of outcome kinds (see [`Outcome::label`]).
pub fn run<A: BroadcastImpl, B: BroadcastImpl>(scenario: &Scenario) -> Result<Tally, Mismatch> {
    let mut a = World::<A>::new(scenario.setup);
    let mut b = World::<B>::new(scenario.setup);
    harness::lockstep(&mut a, &mut b, &scenario.ops)
}

/// [`run`] with the implementations' names in the report.
pub fn check<A: BroadcastImpl, B: BroadcastImpl>(scenario: &Scenario) -> Result<Tally, String> {
    run::<A, B>(scenario).map_err(|m| format!("a = {}, b = {}\n{m}", A::NAME, B::NAME))
}
