//! A single-threaded reference model of the `keybus::broadcast` API, written straight
//! from the contract (docs/design.md) and the API docs: the retained revisions in a `VecDeque`.
//!
//! Like `conflate_model.rs`, a third opinion for the differential runner, adapted by
//! `broadcast_impl!` like any real module. Only the non-blocking forms exist: a
//! single thread cannot make a blocking read return anything a zero timeout would
//! not.

use keybus::broadcast::Cursor;
use keybus::{AppendError, Entry, ReadError};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Generations are unique per buffer across the process, like the real ones.
static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

struct Ring<T> {
    capacity: usize,
    /// The retained revisions, oldest first, contiguous, ending at `tail`.
    entries: VecDeque<Entry<T>>,
    tail: u64,
    closed: bool,
    /// `Buffer` handles alive; readers do not count. The last drop closes.
    handles: usize,
    generation: u64,
}

impl<T: Clone> Ring<T> {
    /// The oldest retained revision; `tail + 1` when nothing is (`a - 1 == 0 == z`
    /// on a fresh buffer).
    fn oldest(&self) -> u64 {
        self.entries.front().map_or(self.tail + 1, |e| e.revision)
    }

    fn validate(&self, after: u64) -> Result<(), ReadError> {
        if after > self.tail {
            return Err(ReadError::Future {
                after,
                tail: self.tail,
            });
        }
        let oldest = self.oldest();
        if after + 1 < oldest {
            return Err(ReadError::Gap { after, oldest });
        }
        Ok(())
    }

    /// The read every form shares: Future / Gap, then entries, then `Closed` if
    /// closed, else `idle` (`Empty` or `Timeout`).
    fn read(&self, after: u64, limit: usize, idle: ReadError) -> Result<Vec<Entry<T>>, ReadError> {
        assert!(limit > 0, "limit must be at least 1");
        self.validate(after)?;
        let found: Vec<Entry<T>> = self
            .entries
            .iter()
            .filter(|e| e.revision > after)
            .take(limit)
            .cloned()
            .collect();
        if !found.is_empty() {
            Ok(found)
        } else if self.closed {
            Err(ReadError::Closed)
        } else {
            Err(idle)
        }
    }
}

pub struct Buffer<T> {
    ring: Rc<RefCell<Ring<T>>>,
    /// A user's handle (counted), or a reader's view of the ring (not counted).
    counted: bool,
}

impl<T> Clone for Buffer<T> {
    fn clone(&self) -> Self {
        if self.counted {
            self.ring.borrow_mut().handles += 1;
        }
        Buffer {
            ring: self.ring.clone(),
            counted: self.counted,
        }
    }
}

impl<T> Drop for Buffer<T> {
    fn drop(&mut self) {
        if self.counted {
            let mut ring = self.ring.borrow_mut();
            ring.handles -= 1;
            if ring.handles == 0 {
                ring.closed = true;
            }
        }
    }
}

impl<T: Clone + 'static> Buffer<T> {
    pub fn new(capacity: usize) -> Self {
        assert!(capacity >= 1, "capacity must be at least 1");
        Buffer {
            ring: Rc::new(RefCell::new(Ring {
                capacity,
                entries: VecDeque::with_capacity(capacity),
                tail: 0,
                closed: false,
                handles: 1,
                generation: NEXT_GENERATION.fetch_add(1, Ordering::Relaxed),
            })),
            counted: true,
        }
    }

    pub fn capacity(&self) -> usize {
        self.ring.borrow().capacity
    }

    pub fn append(&self, value: T) -> Result<u64, AppendError<T>> {
        let mut ring = self.ring.borrow_mut();
        if ring.closed {
            return Err(AppendError(value));
        }
        ring.tail += 1;
        if ring.entries.len() == ring.capacity {
            ring.entries.pop_front();
        }
        let revision = ring.tail;
        ring.entries.push_back(Entry { revision, value });
        Ok(revision)
    }

    pub fn append_if_changed(&self, value: T) -> Result<u64, AppendError<T>>
    where
        T: PartialEq,
    {
        {
            let ring = self.ring.borrow();
            if ring.closed {
                return Err(AppendError(value));
            }
            if ring.entries.back().is_some_and(|e| e.value == value) {
                return Ok(ring.tail);
            }
        }
        self.append(value)
    }

    pub fn tail(&self) -> u64 {
        self.ring.borrow().tail
    }

    pub fn validate(&self, after: u64) -> Result<(), ReadError> {
        self.ring.borrow().validate(after)
    }

    pub fn latest(&self) -> Option<Entry<T>> {
        self.ring.borrow().entries.back().cloned()
    }

    pub fn retained(&self) -> Vec<Entry<T>> {
        self.ring.borrow().entries.iter().cloned().collect()
    }

    pub fn try_read(&self, after: u64, limit: usize) -> Result<Vec<Entry<T>>, ReadError> {
        self.ring.borrow().read(after, limit, ReadError::Empty)
    }

    /// Only callable where it would not block: a single thread cannot wait for an
    /// append.
    pub fn read(&self, after: u64, limit: usize) -> Result<Vec<Entry<T>>, ReadError> {
        match self.try_read(after, limit) {
            Err(ReadError::Empty) => panic!("model: read would block forever"),
            done => done,
        }
    }

    /// Nothing can arrive while a single thread waits: any timeout answers like a
    /// zero one.
    pub fn read_timeout(
        &self,
        after: u64,
        limit: usize,
        _timeout: Duration,
    ) -> Result<Vec<Entry<T>>, ReadError> {
        self.ring.borrow().read(after, limit, ReadError::Timeout)
    }

    /// Ready at once unless the read would be `Empty`; then pending forever (no
    /// other thread can append while a single-threaded sequence polls).
    pub fn read_async(
        &self,
        after: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Entry<T>>, ReadError>> + '_ {
        let now = self.try_read(after, limit);
        async move {
            match now {
                Err(ReadError::Empty) => std::future::pending().await,
                ready => ready,
            }
        }
    }

    pub fn reader(&self) -> Reader<T> {
        self.reader_at(self.cursor_at(self.tail()))
    }

    pub fn cursor_at(&self, revision: u64) -> Cursor {
        Cursor::new(self.generation(), revision)
    }

    pub fn reader_at(&self, cursor: Cursor) -> Reader<T> {
        Reader {
            buffer: Buffer {
                ring: self.ring.clone(),
                counted: false,
            },
            generation: cursor.generation(),
            cursor: cursor.revision(),
        }
    }

    pub fn close(&self) {
        self.ring.borrow_mut().closed = true;
    }

    pub fn is_closed(&self) -> bool {
        self.ring.borrow().closed
    }

    pub fn generation(&self) -> u64 {
        self.ring.borrow().generation
    }
}

pub struct Reader<T> {
    buffer: Buffer<T>,
    /// The cursor's generation (the buffer's unless made from a foreign one).
    generation: u64,
    cursor: u64,
}

impl<T: Clone + 'static> Reader<T> {
    /// One entry past the cursor. A `Gap` moves the cursor to `oldest - 1` (the next
    /// call resumes at the oldest retained entry); a `Foreign` or `Future`
    /// leaves it.
    pub fn try_next(&mut self) -> Result<Entry<T>, ReadError> {
        let expected = self.buffer.generation();
        if self.generation != expected {
            return Err(ReadError::Foreign {
                expected,
                found: self.generation,
            });
        }
        match self.buffer.try_read(self.cursor, 1) {
            Ok(mut entries) => {
                let entry = entries.remove(0);
                self.cursor = entry.revision;
                Ok(entry)
            }
            Err(ReadError::Gap { after, oldest }) => {
                self.cursor = oldest - 1;
                Err(ReadError::Gap { after, oldest })
            }
            Err(e) => Err(e),
        }
    }

    /// Only callable where it would not block (see [`Buffer::read`]).
    // Named after the API it models (`Reader::next`), not `Iterator::next`.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Entry<T>, ReadError> {
        match self.try_next() {
            Err(ReadError::Empty) => panic!("model: next would block forever"),
            done => done,
        }
    }

    /// As [`try_next`](Self::try_next), pending forever where it would be `Empty`.
    pub fn next_async(&mut self) -> impl Future<Output = Result<Entry<T>, ReadError>> + '_ {
        let now = self.try_next();
        async move {
            match now {
                Err(ReadError::Empty) => std::future::pending().await,
                ready => ready,
            }
        }
    }

    pub fn cursor(&self) -> Cursor {
        Cursor::new(self.generation, self.cursor)
    }
}
