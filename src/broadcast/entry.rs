//! [`Entry`], what a broadcast reader of either implementation gets, and the
//! reader steps both implementations share: one entry or gap
//! ([`Entry::step`]) and the `Stream` item for it ([`stream_item`]).

use crate::ReadError;

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

/// The stream item for one step's answer (both implementations): `Closed` ends
/// the stream; `Foreign` and `Future` are yielded and then halt it.
pub(crate) fn stream_item<T>(
    answer: Result<Entry<T>, ReadError>,
    halted: &mut bool,
) -> Option<Result<Entry<T>, ReadError>> {
    match answer {
        Err(ReadError::Closed) => None,
        Err(e @ (ReadError::Foreign { .. } | ReadError::Future { .. })) => {
            *halted = true;
            Some(Err(e))
        }
        other => Some(other),
    }
}
