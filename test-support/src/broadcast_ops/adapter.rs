//! [`BroadcastImpl`]: the adapter the lockstep runner drives, and its three
//! implementations (lock-free, baseline, reference model).

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
