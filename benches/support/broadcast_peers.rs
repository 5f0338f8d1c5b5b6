//! Every broadcast implementation the benchmarks run, behind one small surface
//! so that `broadcast_scenarios!` expands over each of them unchanged:
//!
//! ```text
//! Writer::new(capacity)    writer.reader() -> Reader (starts at the tail)
//! writer.append(sample)    writer.close()  (readers drain, then see Closed)
//! reader.next() -> Next    (blocking: Value, Gap, Closed)
//! ```
//!
//! - `keybus` / `baseline`: `keybus::broadcast` and `keybus::baseline::broadcast`
//!   (one macro, [`keybus_adapter!`]).
//! - [`tokio_broadcast`]: `tokio::sync::broadcast`, same capacity, same value.
//! - [`async_broadcast`]: `async-broadcast` in overflow mode (drop oldest, so the
//!   writer never waits, like keybus).
//! - [`bus`]: the `bus` crate. Lossless with back-pressure: a full reader makes
//!   the writer wait. It therefore cannot take part with idle or slow readers.
//! - [`crossbeam`]: one bounded `crossbeam-channel` per reader, the writer
//!   sending to each; when a reader's channel is full the writer drops that
//!   reader's oldest value (it keeps a receiver clone) so it never waits. A lower
//!   bound on hand-off cost: nothing is shared between readers, and a reader is
//!   not told what it lost (the scenarios count losses from sequence numbers).
//!
//! `CAPS` on each module says what it takes part in.

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

/// Adapts `keybus::broadcast` or `keybus::baseline::broadcast` (same API).
macro_rules! keybus_adapter {
    ($name:ident, $($m:tt)::+) => {
        pub mod $name {
            use super::{Caps, Next, Sample};
            use $($m)::+ as imp;

            pub const CAPS: Caps = Caps { idle_readers: true };

            pub struct Writer(imp::Buffer<Sample>);
            pub struct Reader(imp::Reader<Sample>);

            impl Writer {
                pub fn new(capacity: usize) -> Self {
                    Writer(imp::Buffer::new(capacity))
                }
                pub fn reader(&mut self) -> Reader {
                    Reader(self.0.reader())
                }
                #[inline]
                pub fn append(&mut self, v: Sample) {
                    self.0.append(v).unwrap();
                }
                pub fn close(self) {
                    self.0.close();
                }
            }

            impl Reader {
                #[inline]
                pub fn next(&mut self) -> Next {
                    match self.0.next() {
                        Ok(e) => Next::Value(e.value),
                        Err(imp::ReadError::Gap { .. }) => Next::Gap,
                        Err(imp::ReadError::Closed) => Next::Closed,
                        Err(e) => panic!("unexpected {e:?}"),
                    }
                }
            }
        }
    };
}

keybus_adapter!(keybus_broadcast, keybus::broadcast);
keybus_adapter!(baseline_broadcast, keybus::baseline::broadcast);

/// `tokio::sync::broadcast`. With no subscriber, `send` stores nothing and
/// answers an error (ignored), so "append, no readers" is tokio's early-out, not
/// a retained append.
pub mod tokio_broadcast {
    use super::{Caps, Next, Sample};
    use tokio::sync::broadcast;

    pub const CAPS: Caps = Caps { idle_readers: true };

    pub struct Writer(broadcast::Sender<Sample>);
    pub struct Reader(broadcast::Receiver<Sample>);

    impl Writer {
        pub fn new(capacity: usize) -> Self {
            Writer(broadcast::Sender::new(capacity))
        }
        pub fn reader(&mut self) -> Reader {
            Reader(self.0.subscribe())
        }
        #[inline]
        pub fn append(&mut self, v: Sample) {
            let _ = self.0.send(v);
        }
        pub fn close(self) {}
    }

    impl Reader {
        #[inline]
        pub fn next(&mut self) -> Next {
            match self.0.blocking_recv() {
                Ok(v) => Next::Value(v),
                Err(broadcast::error::RecvError::Lagged(_)) => Next::Gap,
                Err(broadcast::error::RecvError::Closed) => Next::Closed,
            }
        }
    }
}

/// `async-broadcast` in overflow mode (drop oldest) with `await_active` off; an
/// inactive receiver keeps the channel open. With no active receiver,
/// `try_broadcast` stores nothing and answers `Inactive` (ignored), like tokio.
pub mod async_broadcast {
    use super::{Caps, Next, Sample};
    use ::async_broadcast as ab;

    pub const CAPS: Caps = Caps { idle_readers: true };

    pub struct Writer {
        tx: ab::Sender<Sample>,
        keep_open: ab::InactiveReceiver<Sample>,
    }
    pub struct Reader(ab::Receiver<Sample>);

    impl Writer {
        pub fn new(capacity: usize) -> Self {
            let (mut tx, rx) = ab::broadcast(capacity);
            tx.set_overflow(true);
            tx.set_await_active(false);
            Writer {
                tx,
                keep_open: rx.deactivate(),
            }
        }
        pub fn reader(&mut self) -> Reader {
            Reader(self.keep_open.activate_cloned())
        }
        #[inline]
        pub fn append(&mut self, v: Sample) {
            let _ = self.tx.try_broadcast(v);
        }
        pub fn close(self) {
            self.tx.close();
        }
    }

    impl Reader {
        #[inline]
        pub fn next(&mut self) -> Next {
            match self.0.recv_blocking() {
                Ok(v) => Next::Value(v),
                Err(ab::RecvError::Overflowed(_)) => Next::Gap,
                Err(ab::RecvError::Closed) => Next::Closed,
            }
        }
    }
}

/// The `bus` crate: lossless, the writer waits for the slowest reader.
/// `CAPS.idle_readers` is false: with a reader that does not read, the writer
/// blocks once the ring is full (there is no drop-oldest mode), so it runs only
/// "append, no readers" and the reader-throughput scenarios.
pub mod bus {
    use super::{Caps, Next, Sample};

    pub const CAPS: Caps = Caps {
        idle_readers: false,
    };

    pub struct Writer(::bus::Bus<Sample>);
    pub struct Reader(::bus::BusReader<Sample>);

    impl Writer {
        pub fn new(capacity: usize) -> Self {
            Writer(::bus::Bus::new(capacity))
        }
        pub fn reader(&mut self) -> Reader {
            Reader(self.0.add_rx())
        }
        #[inline]
        pub fn append(&mut self, v: Sample) {
            self.0.broadcast(v);
        }
        pub fn close(self) {}
    }

    impl Reader {
        #[inline]
        pub fn next(&mut self) -> Next {
            match self.0.recv() {
                Ok(v) => Next::Value(v),
                Err(_) => Next::Closed,
            }
        }
    }
}

/// One bounded `crossbeam-channel` per reader; on a full channel the writer
/// drops that reader's oldest value and retries, so it never waits. The reader
/// is not told about the loss (no `Gap`); the scenarios recount it.
pub mod crossbeam {
    use super::{Caps, Next, Sample};
    use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};

    pub const CAPS: Caps = Caps { idle_readers: true };

    pub struct Writer {
        capacity: usize,
        /// Each reader's sender, and a receiver clone to drop its oldest value.
        outs: Vec<(Sender<Sample>, Receiver<Sample>)>,
    }
    pub struct Reader(Receiver<Sample>);

    impl Writer {
        pub fn new(capacity: usize) -> Self {
            Writer {
                capacity,
                outs: Vec::new(),
            }
        }
        pub fn reader(&mut self) -> Reader {
            let (tx, rx) = bounded(self.capacity);
            self.outs.push((tx, rx.clone()));
            Reader(rx)
        }
        #[inline]
        pub fn append(&mut self, v: Sample) {
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
        pub fn close(self) {}
    }

    impl Reader {
        #[inline]
        pub fn next(&mut self) -> Next {
            match self.0.recv() {
                Ok(v) => Next::Value(v),
                Err(_) => Next::Closed,
            }
        }
    }
}
