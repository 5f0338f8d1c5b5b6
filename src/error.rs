//! Error types shared by every bus in the crate.
//!
//! Each error says what state the handle is in, gives any value back, and prints a
//! lowercase message in the style of `std` and crossbeam-channel.

use std::error::Error;
use std::fmt;

/// The send side is closed; the key and value are handed back.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SendError<K, V> {
    /// The key of the rejected send.
    pub key: K,
    /// The value of the rejected send.
    pub value: V,
}

impl<K, V> SendError<K, V> {
    /// Takes the rejected key and value back.
    #[must_use]
    pub fn into_inner(self) -> (K, V) {
        (self.key, self.value)
    }
}

impl<K, V> fmt::Debug for SendError<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError { .. }")
    }
}

impl<K, V> fmt::Display for SendError<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sending on a closed bus")
    }
}

impl<K, V> Error for SendError<K, V> {}

/// The receiver is closed, or the send side closed and everything pending was
/// delivered. Terminal: every later receive answers the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecvError;

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("receiving on a closed bus")
    }
}

impl Error for RecvError {}

/// Why a non-blocking receive returned nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TryRecvError {
    /// Nothing is pending now. Not terminal.
    Empty,
    /// The receiver is closed (see [`RecvError`]). Terminal.
    Closed,
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("receiving on an empty bus"),
            TryRecvError::Closed => f.write_str("receiving on a closed bus"),
        }
    }
}

impl Error for TryRecvError {}

impl From<RecvError> for TryRecvError {
    fn from(_: RecvError) -> Self {
        TryRecvError::Closed
    }
}

/// Why a receive with a deadline returned nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecvTimeoutError {
    /// The deadline passed with nothing pending. Not terminal.
    Timeout,
    /// The receiver is closed (see [`RecvError`]). Terminal.
    Closed,
}

impl fmt::Display for RecvTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvTimeoutError::Timeout => f.write_str("timed out waiting on a bus"),
            RecvTimeoutError::Closed => f.write_str("receiving on a closed bus"),
        }
    }
}

impl Error for RecvTimeoutError {}

impl From<RecvError> for RecvTimeoutError {
    fn from(_: RecvError) -> Self {
        RecvTimeoutError::Closed
    }
}

/// The buffer is closed; the value is handed back.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct AppendError<T>(pub T);

impl<T> AppendError<T> {
    /// Takes the rejected value back.
    #[must_use]
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> fmt::Debug for AppendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AppendError(..)")
    }
}

impl<T> fmt::Display for AppendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("appending to a closed buffer")
    }
}

impl<T> Error for AppendError<T> {}

/// Why a broadcast read returned no entries.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReadError {
    /// The cursor fell behind retention: revisions `after + 1 .. oldest` were
    /// evicted. Resume from `oldest - 1` (everything retained) or from a fresh
    /// snapshot.
    Gap {
        /// The cursor that was asked for.
        after: u64,
        /// The oldest revision still retained at the moment of the read.
        oldest: u64,
    },
    /// The cursor belongs to another buffer: its generation is not this
    /// buffer's. Nothing was read; no revision of this history answers for it.
    /// Checked before everything else.
    Foreign {
        /// This buffer's generation.
        expected: u64,
        /// The cursor's generation.
        found: u64,
    },
    /// The cursor is ahead of the latest revision: it does not belong to this
    /// history (see `generation()`).
    Future {
        /// The cursor that was asked for.
        after: u64,
        /// The latest revision at the moment of the read.
        tail: u64,
    },
    /// Nothing past the cursor yet (non-blocking forms only). Not terminal.
    Empty,
    /// The deadline passed with nothing past the cursor (timeout forms only).
    Timeout,
    /// The buffer is closed and everything past the cursor was read. Terminal.
    Closed,
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ReadError::Gap { after, oldest } => write!(
                f,
                "cursor {after} fell behind retention (oldest retained revision is {oldest})"
            ),
            ReadError::Foreign { expected, found } => write!(
                f,
                "cursor of buffer generation {found:016x} used on generation {expected:016x}"
            ),
            ReadError::Future { after, tail } => {
                write!(f, "cursor {after} is ahead of the latest revision {tail}")
            }
            ReadError::Empty => f.write_str("nothing past the cursor yet"),
            ReadError::Timeout => f.write_str("timed out waiting for a revision"),
            ReadError::Closed => f.write_str("reading from a closed buffer"),
        }
    }
}

impl Error for ReadError {}
