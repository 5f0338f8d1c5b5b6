//! The lockstep runner: [`BroadcastImpl`], the adapter it drives, with its three
//! implementations (lock-free, baseline, reference model), and [`World`], one
//! implementation's handles driven by ops.

use super::*;

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
            fn try_read(buf: &Self::Buffer, after: u64, limit: usize) -> Result<Vec<Entry<T>>, ReadError> {
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
            fn read_async_once(buf: &Self::Buffer, after: u64, limit: usize) -> Option<Result<Vec<Entry<T>>, ReadError>> {
                harness::poll_once(buf.read_async(after, limit))
            }
            fn reader(buf: &Self::Buffer) -> Self::Reader {
                buf.reader()
            }
            fn reader_at(buf: &Self::Buffer, after: u64) -> Self::Reader {
                buf.reader_at(buf.cursor_at(after))
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
            fn read(buf: &Self::Buffer, after: u64, limit: usize) -> Result<Vec<Entry<T>>, ReadError> {
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
                reader.cursor().revision()
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
