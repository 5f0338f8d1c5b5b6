//! The values a bus hands to its consumers.

use crate::error::ReadError;

/// One delivery from a [`conflate`](crate::conflate) receiver: the latest merged
/// value of `key`, and how many sends were merged into it.
///
/// `sends` is 1 when nothing was coalesced. A value skipped by coalescing is thus
/// visible as a count, never hidden: `sends - 1` sends were folded into this one.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Event<K, V> {
    /// The key the value was sent under.
    pub key: K,
    /// The slot's merged value at the moment it was taken.
    pub value: V,
    /// How many sends were merged into this delivery since the key became pending.
    pub sends: u64,
}

impl<K, V> Event<K, V> {
    pub(crate) fn new(key: K, value: V, sends: u64) -> Self {
        Event { key, value, sends }
    }
}

/// One retained revision of a [`broadcast`](crate::broadcast) buffer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Entry<T> {
    /// The revision: 1 for the first append, rising by one per append.
    pub revision: u64,
    /// The reader's own copy of the value.
    pub value: T,
}

impl<T> Entry<T> {
    /// One step of a broadcast reader at `cursor` (both implementations): a
    /// one-entry read through `read_one`, which leaves the entry in its second
    /// argument (`None`: nothing yet, buffer open),
    /// moving the cursor on an entry and on a gap (to just before the oldest
    /// retained revision, so the next step reads it).
    pub(crate) fn step(
        cursor: &mut u64,
        read_one: impl FnOnce(u64, &mut Option<Entry<T>>) -> Option<Result<usize, ReadError>>,
    ) -> Option<Result<Entry<T>, ReadError>> {
        let mut got = None;
        let answer = read_one(*cursor, &mut got)?;
        Some(match (answer, got) {
            (Ok(_), Some(entry)) => {
                *cursor = entry.revision;
                Ok(entry)
            }
            (Err(ReadError::Gap { after, oldest }), _) => {
                *cursor = oldest - 1;
                Err(ReadError::Gap { after, oldest })
            }
            (Err(e), _) => Err(e),
            (Ok(_), None) => unreachable!("a successful read hands over one entry"),
        })
    }
}

/// The caller's `Vec` while a batch read appends to it (`try_recv_all_into`,
/// `try_read_into`). A batch can unwind half-way (a user `Clone` of a value the
/// bus still holds); then what it had appended is dropped here, so the caller
/// never finds part of a batch in `out`. `done` rather than
/// `thread::panicking()`: a batch that returns normally while some outer panic
/// unwinds keeps its entries.
pub(crate) struct Appending<'a, T> {
    pub(crate) out: &'a mut Vec<T>,
    start: usize,
    pub(crate) done: bool,
}

impl<'a, T> Appending<'a, T> {
    pub(crate) fn new(out: &'a mut Vec<T>) -> Self {
        Appending {
            start: out.len(),
            out,
            done: false,
        }
    }
}

impl<T> Drop for Appending<'_, T> {
    fn drop(&mut self) {
        if !self.done {
            self.out.truncate(self.start);
        }
    }
}
