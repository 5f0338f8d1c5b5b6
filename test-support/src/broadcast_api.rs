//! The broadcast API as traits, so a test is written once and run against both
//! implementations, `keybus::broadcast` ([`Lockfree`]) and
//! `keybus::baseline::broadcast` ([`Baseline`]).
//!
//! The methods are spelled as in the real API, so a generic test body reads like
//! user code; only the types are named through the implementation:
//!
//! ```
//! use keybus_test_support::broadcast_api::{Broadcast, BufferApi, Lockfree, ReaderApi};
//!
//! fn appends_then_reads<B: Broadcast>() {
//!     let buf = B::Buffer::<u64>::new(4);
//!     let mut r = buf.reader();
//!     assert_eq!(buf.append(7).unwrap(), 1);
//!     assert_eq!(r.try_next().unwrap().value, 7);
//! }
//!
//! appends_then_reads::<Lockfree>();
//! ```
//!
//! `broadcast_ops::BroadcastImpl` is a different adapter: one value type (`u8`),
//! with polled-once async forms, for the lockstep runners and the fuzz targets.

use futures::Stream;
use std::fmt;
use std::future::Future;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::time::Duration;

pub use keybus::broadcast::{Cursor, Position};
pub use keybus::{AppendError, Entry, ReadError};

/// What a buffer can hold (the bounds of both implementations' methods).
pub trait Value: Clone + Send + Sync + 'static {}

impl<T: Clone + Send + Sync + 'static> Value for T {}

/// One implementation of the broadcast API: its `Buffer` and `Reader` for any
/// value type.
pub trait Broadcast: 'static {
    /// The module path, for messages.
    const NAME: &'static str;
    /// `Buffer<T>` of this implementation.
    type Buffer<T: Value>: BufferApi<T, Reader = Self::Reader<T>>;
    /// `Reader<T>` of this implementation.
    type Reader<T: Value>: ReaderApi<T>;
}

/// `Buffer<T>`: the methods of `keybus::broadcast::Buffer`, same names, same
/// signatures.
pub trait BufferApi<T: Value>:
    Clone + fmt::Debug + Send + Sync + UnwindSafe + RefUnwindSafe + 'static
{
    /// The reader this buffer hands out.
    type Reader: ReaderApi<T>;

    /// `Buffer::new`.
    fn new(capacity: usize) -> Self;
    /// `Buffer::capacity`.
    fn capacity(&self) -> usize;
    /// `Buffer::append`.
    fn append(&self, value: T) -> Result<u64, AppendError<T>>;
    /// `Buffer::append_if_changed`.
    fn append_if_changed(&self, value: T) -> Result<u64, AppendError<T>>
    where
        T: PartialEq;
    /// `Buffer::tail`.
    fn tail(&self) -> u64;
    /// `Buffer::validate`.
    fn validate(&self, after: impl Position) -> Result<(), ReadError>;
    /// `Buffer::cursor`.
    fn cursor(&self) -> Cursor;
    /// `Buffer::cursor_at`.
    fn cursor_at(&self, revision: u64) -> Cursor;
    /// `Buffer::latest`.
    fn latest(&self) -> Option<Entry<T>>;
    /// `Buffer::retained`.
    fn retained(&self) -> Vec<Entry<T>>;
    /// `Buffer::try_read`.
    fn try_read(&self, after: impl Position, limit: usize) -> Result<Vec<Entry<T>>, ReadError>;
    /// `Buffer::try_read_into`.
    fn try_read_into(
        &self,
        after: impl Position,
        limit: usize,
        out: &mut Vec<Entry<T>>,
    ) -> Result<usize, ReadError>;
    /// `Buffer::read`.
    fn read(&self, after: impl Position, limit: usize) -> Result<Vec<Entry<T>>, ReadError>;
    /// `Buffer::read_timeout`.
    fn read_timeout(
        &self,
        after: impl Position,
        limit: usize,
        timeout: Duration,
    ) -> Result<Vec<Entry<T>>, ReadError>;
    /// `Buffer::read_async`.
    fn read_async(
        &self,
        after: impl Position,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Entry<T>>, ReadError>> + Send + '_;
    /// `Buffer::reader`.
    fn reader(&self) -> Self::Reader;
    /// `Buffer::reader_at`.
    fn reader_at(&self, cursor: Cursor) -> Self::Reader;
    /// `Buffer::close`.
    fn close(&self);
    /// `Buffer::is_closed`.
    fn is_closed(&self) -> bool;
    /// `Buffer::generation`.
    fn generation(&self) -> u64;
}

/// `Reader<T>`: the methods of `keybus::broadcast::Reader`, and its `Stream`.
pub trait ReaderApi<T: Value>:
    Stream<Item = Result<Entry<T>, ReadError>>
    + Unpin
    + fmt::Debug
    + Send
    + UnwindSafe
    + RefUnwindSafe
    + 'static
{
    /// `Reader::cursor`.
    fn cursor(&self) -> Cursor;
    /// `Reader::seek`.
    fn seek(&mut self, cursor: Cursor) -> Result<(), ReadError>;
    /// `Reader::seek_to_tail`.
    fn seek_to_tail(&mut self);
    /// `Reader::seek_to_oldest`.
    fn seek_to_oldest(&mut self);
    /// `Reader::next`.
    fn next(&mut self) -> Result<Entry<T>, ReadError>;
    /// `Reader::try_next`.
    fn try_next(&mut self) -> Result<Entry<T>, ReadError>;
    /// `Reader::next_async`.
    fn next_async(&mut self) -> impl Future<Output = Result<Entry<T>, ReadError>> + Send + '_;
}

/// Implements the traits for the module at `$m` as `$family`. Every method
/// forwards to the inherent one of the same name.
macro_rules! broadcast_api {
    ($family:ident => $first:ident $(:: $rest:ident)*) => {
        broadcast_api!(@ $family, $first $(::$rest)*, concat!(stringify!($first) $(, "::", stringify!($rest))*));
    };
    (@ $family:ident, $($m:ident)::+, $name:expr) => {
        #[doc = concat!("`", $name, "` behind the broadcast API traits.")]
        #[derive(Debug)]
        pub struct $family;

        impl Broadcast for $family {
            const NAME: &'static str = $name;
            type Buffer<T: Value> = $($m)::+::Buffer<T>;
            type Reader<T: Value> = $($m)::+::Reader<T>;
        }

        impl<T: Value> BufferApi<T> for $($m)::+::Buffer<T> {
            type Reader = $($m)::+::Reader<T>;

            fn new(capacity: usize) -> Self {
                Self::new(capacity)
            }
            fn capacity(&self) -> usize {
                Self::capacity(self)
            }
            fn append(&self, value: T) -> Result<u64, AppendError<T>> {
                Self::append(self, value)
            }
            fn append_if_changed(&self, value: T) -> Result<u64, AppendError<T>>
            where
                T: PartialEq,
            {
                Self::append_if_changed(self, value)
            }
            fn tail(&self) -> u64 {
                Self::tail(self)
            }
            fn validate(&self, after: impl Position) -> Result<(), ReadError> {
                Self::validate(self, after)
            }
            fn cursor(&self) -> Cursor {
                Self::cursor(self)
            }
            fn cursor_at(&self, revision: u64) -> Cursor {
                Self::cursor_at(self, revision)
            }
            fn latest(&self) -> Option<Entry<T>> {
                Self::latest(self)
            }
            fn retained(&self) -> Vec<Entry<T>> {
                Self::retained(self)
            }
            fn try_read(&self, after: impl Position, limit: usize) -> Result<Vec<Entry<T>>, ReadError> {
                Self::try_read(self, after, limit)
            }
            fn try_read_into(
                &self,
                after: impl Position,
                limit: usize,
                out: &mut Vec<Entry<T>>,
            ) -> Result<usize, ReadError> {
                Self::try_read_into(self, after, limit, out)
            }
            fn read(&self, after: impl Position, limit: usize) -> Result<Vec<Entry<T>>, ReadError> {
                Self::read(self, after, limit)
            }
            fn read_timeout(
                &self,
                after: impl Position,
                limit: usize,
                timeout: Duration,
            ) -> Result<Vec<Entry<T>>, ReadError> {
                Self::read_timeout(self, after, limit, timeout)
            }
            fn read_async(
                &self,
                after: impl Position,
                limit: usize,
            ) -> impl Future<Output = Result<Vec<Entry<T>>, ReadError>> + Send + '_ {
                Self::read_async(self, after, limit)
            }
            fn reader(&self) -> Self::Reader {
                Self::reader(self)
            }
            fn reader_at(&self, cursor: Cursor) -> Self::Reader {
                Self::reader_at(self, cursor)
            }
            fn close(&self) {
                Self::close(self)
            }
            fn is_closed(&self) -> bool {
                Self::is_closed(self)
            }
            fn generation(&self) -> u64 {
                Self::generation(self)
            }
        }

        impl<T: Value> ReaderApi<T> for $($m)::+::Reader<T> {
            fn cursor(&self) -> Cursor {
                Self::cursor(self)
            }
            fn seek(&mut self, cursor: Cursor) -> Result<(), ReadError> {
                Self::seek(self, cursor)
            }
            fn seek_to_tail(&mut self) {
                Self::seek_to_tail(self)
            }
            fn seek_to_oldest(&mut self) {
                Self::seek_to_oldest(self)
            }
            fn next(&mut self) -> Result<Entry<T>, ReadError> {
                Self::next(self)
            }
            fn try_next(&mut self) -> Result<Entry<T>, ReadError> {
                Self::try_next(self)
            }
            fn next_async(
                &mut self,
            ) -> impl Future<Output = Result<Entry<T>, ReadError>> + Send + '_ {
                Self::next_async(self)
            }
        }
    };
}

broadcast_api!(Lockfree => keybus::broadcast);
broadcast_api!(Baseline => keybus::baseline::broadcast);

/// The revisions of `entries`, in order.
pub fn revisions<T>(entries: &[Entry<T>]) -> Vec<u64> {
    entries.iter().map(|e| e.revision).collect()
}

/// A buffer of `capacity` with revisions `1..=n` appended, revision `r` holding
/// `value(r)`.
pub fn filled<B: Broadcast>(capacity: usize, n: u64, value: fn(u64) -> u64) -> B::Buffer<u64> {
    let buf = B::Buffer::<u64>::new(capacity);
    for revision in 1..=n {
        assert_eq!(buf.append(value(revision)).unwrap(), revision);
    }
    buf
}
