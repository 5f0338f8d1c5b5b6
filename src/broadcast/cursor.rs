//! Cursors that carry their buffer's generation, and the positions a read accepts.
//!
//! Shared by `broadcast` and `baseline::broadcast`: generations are unique across
//! both kinds of buffer in one process, so a cursor of one kind is foreign to
//! every buffer but the one it came from.
//!
//! The argument: `docs/design.md`, "Broadcast: cursors and generations".

use crate::ReadError;
use std::error::Error;
use std::fmt;
use std::str::FromStr;

/// A position in one buffer's history: the buffer's
/// [`generation`](super::Buffer::generation) and a revision ("everything up to
/// `revision` has been seen").
///
/// Every use of a cursor checks its generation first: a cursor from another
/// buffer (another instance, or the same code in an earlier run of the process)
/// answers [`ReadError::Foreign`] instead of being read as a revision of this
/// one. Made by [`Reader::cursor`](super::Reader::cursor),
/// [`Buffer::cursor`](super::Buffer::cursor) or
/// [`Buffer::cursor_at`](super::Buffer::cursor_at); saved and restored as a
/// `(generation, revision)` pair or as text (`Display` / `FromStr`, the
/// generation in 16 hex digits, a colon, the revision in decimal).
///
/// Cursors of different generations have no order, so `Cursor` is not
/// `PartialOrd`: compare [`revision`](Self::revision)s of one generation.
///
/// ```
/// use keybus::broadcast::{Buffer, Cursor, ReadError};
///
/// let buf = Buffer::new(8);
/// buf.append("a").unwrap();
/// let mut reader = buf.reader_at(buf.cursor_at(0));
/// reader.try_next().unwrap();
/// let saved: Cursor = reader.cursor();
/// assert_eq!((saved.generation(), saved.revision()), (buf.generation(), 1));
///
/// // Round trips through text and through a pair.
/// let text = saved.to_string();
/// assert_eq!(text.parse::<Cursor>().unwrap(), saved);
/// let (generation, revision): (u64, u64) = saved.into();
/// assert_eq!(Cursor::new(generation, revision), saved);
///
/// // Another buffer refuses it, whatever its revisions.
/// let other = Buffer::new(8);
/// other.append("x").unwrap();
/// other.append("y").unwrap();
/// assert_eq!(
///     other.validate(saved),
///     Err(ReadError::Foreign { expected: other.generation(), found: buf.generation() })
/// );
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Cursor {
    generation: u64,
    revision: u64,
}

impl Cursor {
    /// The cursor at `revision` of the buffer whose generation is `generation`
    /// (for restoring a saved pair; nothing is checked until it is used).
    pub const fn new(generation: u64, revision: u64) -> Self {
        Cursor {
            generation,
            revision,
        }
    }

    /// The generation of the buffer this cursor belongs to.
    pub const fn generation(self) -> u64 {
        self.generation
    }

    /// The last revision seen (0: nothing yet).
    pub const fn revision(self) -> u64 {
        self.revision
    }
}

impl From<(u64, u64)> for Cursor {
    /// From `(generation, revision)`.
    fn from((generation, revision): (u64, u64)) -> Self {
        Cursor::new(generation, revision)
    }
}

impl From<Cursor> for (u64, u64) {
    /// To `(generation, revision)`.
    fn from(cursor: Cursor) -> Self {
        (cursor.generation, cursor.revision)
    }
}

/// `0123456789abcdef:42`: the generation in 16 lowercase hex digits, a colon,
/// the revision in decimal. [`FromStr`] reads it back.
impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}:{}", self.generation, self.revision)
    }
}

impl FromStr for Cursor {
    type Err = ParseCursorError;

    /// Parses what [`Display`](fmt::Display) writes: 1 to 16 hex digits (either
    /// case), `:`, a decimal revision. Nothing else (no sign, no spaces).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (generation, revision) = s.split_once(':').ok_or(ParseCursorError(()))?;
        let digits = |s: &str, hex: bool| {
            !s.is_empty()
                && s.bytes().all(|b| {
                    if hex {
                        b.is_ascii_hexdigit()
                    } else {
                        b.is_ascii_digit()
                    }
                })
        };
        if !digits(generation, true) || !digits(revision, false) {
            return Err(ParseCursorError(()));
        }
        let generation = u64::from_str_radix(generation, 16).map_err(|_| ParseCursorError(()))?;
        let revision = revision.parse().map_err(|_| ParseCursorError(()))?;
        Ok(Cursor::new(generation, revision))
    }
}

/// A string that is not a [`Cursor`] as its `Display` writes it.
///
/// ```
/// use keybus::broadcast::Cursor;
///
/// assert!("0123:abc".parse::<Cursor>().is_err()); // the revision is decimal
/// assert_eq!("0123:45".parse::<Cursor>(), Ok(Cursor::new(0x123, 45)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseCursorError(());

impl fmt::Display for ParseCursorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid cursor syntax (expected `<hex generation>:<revision>`)")
    }
}

impl Error for ParseCursorError {}

/// Where a read starts: a [`Cursor`] (its generation is checked) or a bare
/// revision `u64` (taken as a revision of the buffer it is passed to).
///
/// The paging reads (`try_read`, `read`, `read_timeout`, `read_async`) and
/// `validate` accept either. A bare revision carries no generation, so nothing
/// can tell that it came from another buffer: use it only for a revision just
/// taken from the same buffer (`tail()`, an entry's `revision`), and a `Cursor`
/// for anything saved, sent or handed between components. Sealed: implemented
/// for exactly these two types.
///
/// ```
/// use keybus::broadcast::{Buffer, ReadError};
///
/// let a = Buffer::new(4);
/// let b = Buffer::new(4);
/// for v in 1..=3 {
///     a.append(v).unwrap();
///     b.append(v).unwrap();
/// }
/// // A revision just taken from the same buffer: fine as a bare u64.
/// let tail = a.tail();
/// a.append(4).unwrap();
/// assert_eq!(a.try_read(tail, 8).unwrap()[0].value, 4);
/// // The same revision as a cursor is checked; as a bare u64 it cannot be.
/// assert!(matches!(b.try_read(a.cursor_at(tail), 8), Err(ReadError::Foreign { .. })));
/// assert_eq!(b.try_read(tail, 8), Err(ReadError::Empty)); // read as b's own revision 3
/// ```
pub trait Position: Copy + sealed::Sealed {}

impl Position for Cursor {}
impl Position for u64 {}

pub(crate) mod sealed {
    /// The revision a position names, after checking its generation (if it has
    /// one) against the buffer's.
    pub trait Sealed {
        /// `Ok(revision)`, or `Foreign` when the generations differ.
        fn revision_in(self, generation: u64) -> Result<u64, crate::ReadError>;
    }
}

impl sealed::Sealed for Cursor {
    fn revision_in(self, generation: u64) -> Result<u64, ReadError> {
        check_generation(self, generation)
    }
}

impl sealed::Sealed for u64 {
    fn revision_in(self, _generation: u64) -> Result<u64, ReadError> {
        Ok(self)
    }
}

/// The revision of `cursor` if it belongs to the buffer of `generation`, else
/// `Foreign`.
pub(crate) fn check_generation(cursor: Cursor, generation: u64) -> Result<u64, ReadError> {
    if cursor.generation == generation {
        Ok(cursor.revision)
    } else {
        Err(ReadError::Foreign {
            expected: generation,
            found: cursor.generation,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{Cursor, ParseCursorError};

    #[test]
    fn cursor_text_round_trips_and_rejects_malformed_input() {
        for c in [
            Cursor::new(0, 0),
            Cursor::new(u64::MAX, u64::MAX),
            Cursor::new(0xabc, 7),
        ] {
            assert_eq!(c.to_string().parse::<Cursor>(), Ok(c));
        }
        assert_eq!(Cursor::new(0xabc, 7).to_string(), "0000000000000abc:7");
        assert_eq!("ABC:7".parse::<Cursor>(), Ok(Cursor::new(0xabc, 7)));
        for bad in [
            "",
            ":",
            "1",
            "1:",
            ":1",
            "x:1",
            "1:x",
            "+1:1",
            "1:+1",
            "1:-1",
            " 1:1",
            "1:1 ",
            "1:1:1",
            "10000000000000000:1",
            "1:18446744073709551616",
        ] {
            assert_eq!(bad.parse::<Cursor>(), Err(ParseCursorError(())), "{bad:?}");
        }
    }
}
