//! Every broadcast implementation the benchmarks run, behind one small surface,
//! the [`Ring`] and [`RingReader`] traits, so that `broadcast_scenarios!` expands
//! over each of them unchanged:
//!
//! ```text
//! Ring::with_capacity(capacity)  ring.attach() -> Reader (starts at the tail)
//! ring.publish(sample)           ring.shut()  (readers drain, then see Closed)
//! reader.next_sample() -> Next   (blocking: Value, Gap, Closed)
//! ```
//!
//! (Names of their own, so that an implementation's inherent methods of the same
//! name never stand in for them.)
//!
//! - `keybus::broadcast::Buffer` / `keybus::baseline::broadcast::Buffer` (one
//!   macro, [`keybus_ring!`]).
//! - [`tokio::sync::broadcast`], same capacity, same value.
//! - [`AsyncBroadcast`]: `async-broadcast` in overflow mode (drop oldest, so the
//!   writer never waits, like keybus).
//! - [`bus::Bus`](::bus::Bus): lossless with back-pressure: a full reader makes
//!   the writer wait. It therefore cannot take part with idle or slow readers.
//! - [`Crossbeam`]: one bounded `crossbeam-channel` per reader, the writer
//!   sending to each; when a reader's channel is full the writer drops that
//!   reader's oldest value (it keeps a receiver clone) so it never waits. A lower
//!   bound on hand-off cost: nothing is shared between readers, and a reader is
//!   not told what it lost (the scenarios count losses from sequence numbers).
//!
//! `Ring::CAPS` says what each takes part in.

#![allow(dead_code)]

/// The value every implementation carries: a 32-byte record; `[0]` is its
/// sequence number (1-based), the rest is payload.
pub type Sample = [u64; 4];

pub fn sample(seq: u64) -> Sample {
    [seq, seq ^ 0x5555, seq.wrapping_mul(31), 7]
}

/// What a blocking read returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Value(Sample),
    /// The reader fell behind and was told so (skipped values are recounted
    /// from sequence numbers).
    Gap,
    Closed,
}

/// What an implementation takes part in; the drivers skip the rest and say why.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    /// Appends with readers attached that do not read (`append` with readers > 0)
    /// and a slow reader: needs a writer that never waits for a reader.
    pub idle_readers: bool,
}

/// The writer side of one implementation.
pub trait Ring: Send + Sized + 'static {
    type Reader: RingReader + Send + 'static;
    /// What it takes part in.
    const CAPS: Caps = Caps { idle_readers: true };
    fn with_capacity(capacity: usize) -> Self;
    /// A reader starting at the tail.
    fn attach(&mut self) -> Self::Reader;
    fn publish(&mut self, v: Sample);
    /// Closes the ring: readers drain, then see `Closed` (by default: dropping
    /// the writer does that).
    fn shut(self) {}
}

/// The reader side of one implementation.
pub trait RingReader {
    /// Blocks until a value, a gap report, or the end.
    fn next_sample(&mut self) -> Next;
}

/// A read that knows no gaps: a value, or closed.
fn lossless<E>(read: Result<Sample, E>) -> Next {
    match read {
        Ok(v) => Next::Value(v),
        Err(_) => Next::Closed,
    }
}

/// `keybus::broadcast` or `keybus::baseline::broadcast` (same API).
macro_rules! keybus_ring {
    ($($m:tt)::+) => {
        impl Ring for $($m)::+::Buffer<Sample> {
            type Reader = $($m)::+::Reader<Sample>;

            fn with_capacity(capacity: usize) -> Self {
                Self::new(capacity)
            }
            fn attach(&mut self) -> Self::Reader {
                self.reader()
            }
            #[inline]
            fn publish(&mut self, v: Sample) {
                self.append(v).unwrap();
            }
            fn shut(self) {
                self.close();
            }
        }

        impl RingReader for $($m)::+::Reader<Sample> {
            #[inline]
            fn next_sample(&mut self) -> Next {
                match self.next() {
                    Ok(e) => Next::Value(e.value),
                    Err($($m)::+::ReadError::Gap { .. }) => Next::Gap,
                    Err($($m)::+::ReadError::Closed) => Next::Closed,
                    Err(e) => panic!("unexpected {e:?}"),
                }
            }
        }
    };
}

keybus_ring!(keybus::broadcast);
keybus_ring!(keybus::baseline::broadcast);

/// `tokio::sync::broadcast`. With no subscriber, `send` stores nothing and
/// answers an error (ignored), so "append, no readers" is tokio's early-out, not
/// a retained append.
impl Ring for tokio::sync::broadcast::Sender<Sample> {
    type Reader = tokio::sync::broadcast::Receiver<Sample>;

    fn with_capacity(capacity: usize) -> Self {
        Self::new(capacity)
    }
    fn attach(&mut self) -> Self::Reader {
        self.subscribe()
    }
    #[inline]
    fn publish(&mut self, v: Sample) {
        let _ = self.send(v);
    }
}

impl RingReader for tokio::sync::broadcast::Receiver<Sample> {
    #[inline]
    fn next_sample(&mut self) -> Next {
        use tokio::sync::broadcast::error::RecvError;
        match self.blocking_recv() {
            Ok(v) => Next::Value(v),
            Err(RecvError::Lagged(_)) => Next::Gap,
            Err(RecvError::Closed) => Next::Closed,
        }
    }
}

/// `async-broadcast` in overflow mode (drop oldest) with `await_active` off; an
/// inactive receiver keeps the channel open. With no active receiver,
/// `try_broadcast` stores nothing and answers `Inactive` (ignored), like tokio.
pub struct AsyncBroadcast {
    tx: async_broadcast::Sender<Sample>,
    keep_open: async_broadcast::InactiveReceiver<Sample>,
}

impl Ring for AsyncBroadcast {
    type Reader = async_broadcast::Receiver<Sample>;

    fn with_capacity(capacity: usize) -> Self {
        let (mut tx, rx) = async_broadcast::broadcast(capacity);
        tx.set_overflow(true);
        tx.set_await_active(false);
        AsyncBroadcast {
            tx,
            keep_open: rx.deactivate(),
        }
    }
    fn attach(&mut self) -> Self::Reader {
        self.keep_open.activate_cloned()
    }
    #[inline]
    fn publish(&mut self, v: Sample) {
        let _ = self.tx.try_broadcast(v);
    }
    fn shut(self) {
        self.tx.close();
    }
}

impl RingReader for async_broadcast::Receiver<Sample> {
    #[inline]
    fn next_sample(&mut self) -> Next {
        match self.recv_blocking() {
            Ok(v) => Next::Value(v),
            Err(async_broadcast::RecvError::Overflowed(_)) => Next::Gap,
            Err(async_broadcast::RecvError::Closed) => Next::Closed,
        }
    }
}

/// The `bus` crate: lossless, the writer waits for the slowest reader.
/// `CAPS.idle_readers` is false: with a reader that does not read, the writer
/// blocks once the ring is full (there is no drop-oldest mode), so it runs only
/// "append, no readers" and the reader-throughput scenarios.
impl Ring for ::bus::Bus<Sample> {
    type Reader = ::bus::BusReader<Sample>;
    const CAPS: Caps = Caps {
        idle_readers: false,
    };

    fn with_capacity(capacity: usize) -> Self {
        Self::new(capacity)
    }
    fn attach(&mut self) -> Self::Reader {
        self.add_rx()
    }
    #[inline]
    fn publish(&mut self, v: Sample) {
        self.broadcast(v);
    }
}

impl RingReader for ::bus::BusReader<Sample> {
    #[inline]
    fn next_sample(&mut self) -> Next {
        lossless(self.recv())
    }
}

/// One bounded `crossbeam-channel` per reader; on a full channel the writer
/// drops that reader's oldest value and retries, so it never waits. The reader
/// is not told about the loss (no `Gap`); the scenarios recount it.
pub struct Crossbeam {
    capacity: usize,
    /// Each reader's sender, and a receiver clone to drop its oldest value.
    outs: Vec<(
        crossbeam_channel::Sender<Sample>,
        crossbeam_channel::Receiver<Sample>,
    )>,
}

impl Ring for Crossbeam {
    type Reader = crossbeam_channel::Receiver<Sample>;

    fn with_capacity(capacity: usize) -> Self {
        Crossbeam {
            capacity,
            outs: Vec::new(),
        }
    }
    fn attach(&mut self) -> Self::Reader {
        let (tx, rx) = crossbeam_channel::bounded(self.capacity);
        self.outs.push((tx, rx.clone()));
        rx
    }
    #[inline]
    fn publish(&mut self, v: Sample) {
        use crossbeam_channel::TrySendError;
        for (tx, oldest) in &self.outs {
            let mut v = v;
            loop {
                match tx.try_send(v) {
                    Ok(()) => break,
                    Err(TrySendError::Full(back)) => {
                        let _ = oldest.try_recv();
                        v = back;
                    }
                    Err(TrySendError::Disconnected(_)) => break,
                }
            }
        }
    }
}

impl RingReader for crossbeam_channel::Receiver<Sample> {
    #[inline]
    fn next_sample(&mut self) -> Next {
        lossless(self.recv())
    }
}
