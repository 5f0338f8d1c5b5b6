//! A cell receiver's first-touch queue: a lock-free multi-producer,
//! single-consumer list of entries in blocks, its tail word (position, cut
//! epoch, parked bit) and the consumer's published head (docs/design.md, "The
//! first-touch queue").

mod push;
mod read;

use crate::padding::Apart;
use crate::sync::{lock, snooze, AtomicPtr, AtomicU32, AtomicU64, Mutex, Ordering};
use crossbeam_utils::Backoff;
use std::ptr;

/// Positions per lap; the last one of each lap is the "next block" marker.
/// Small under loom and shuttle, so that small models cross block boundaries.
const LAP: u64 = if cfg!(any(loom, shuttle)) { 4 } else { 128 };
/// Places per block.
const BLOCK_CAP: u64 = LAP - 1;

const PARKED: u64 = 1;
const POS_SHIFT: u32 = 1;
const POS_ONE: u64 = 1 << POS_SHIFT;
const EPOCH_SHIFT: u32 = 56;
const POS_MASK: u64 = ((1 << EPOCH_SHIFT) - 1) & !PARKED;

/// A cell's name: shard and slab index in one word (see `conflate/lockfree/cells/`).
pub(crate) type CellId = u32;

/// One block of entries. `cells[i]` is the entry's cell id plus one (0: not
/// written yet), stored last with Release; `starts[i]` is written before it.
struct Block {
    next: AtomicPtr<Block>,
    starts: [AtomicU64; BLOCK_CAP as usize],
    cells: [AtomicU32; BLOCK_CAP as usize],
}

impl Block {
    fn new() -> Box<Block> {
        Box::new(Block {
            next: AtomicPtr::new(ptr::null_mut()),
            starts: std::array::from_fn(|_| AtomicU64::new(0)),
            cells: std::array::from_fn(|_| AtomicU32::new(0)),
        })
    }

    /// Waits until the producer of this block's last place has linked the next
    /// block (it does so before it writes that place, so this returns at once
    /// for a consumer that read the last place).
    fn wait_next(&self) -> *mut Block {
        let backoff = Backoff::new();
        loop {
            // Acquire pairs with the Release store of the producer that linked
            // it: the block's initialization is visible.
            let next = self.next.load(Ordering::Acquire);
            if !next.is_null() {
                return next;
            }
            snooze(&backoff);
        }
    }

    /// Appends entries `range` to `out`, waiting for any its producer has
    /// not written yet. The written ones are copied in one loop with no
    /// capacity check or length store per entry (a cut's drain: most places
    /// were written long before).
    #[inline]
    fn copy_entries(&self, range: std::ops::Range<usize>, out: &mut Vec<(CellId, u64)>) {
        out.reserve(range.len());
        let len = out.len();
        let places = self.cells[range.clone()]
            .iter()
            .zip(&self.starts[range.clone()]);
        let mut copied = 0;
        for ((cell, start), slot) in places.zip(out.spare_capacity_mut()) {
            // Acquire pairs with the producer's Release store of the id.
            let c = cell.load(Ordering::Acquire);
            if c == 0 {
                break;
            }
            slot.write((c - 1, start.load(Ordering::Relaxed)));
            copied += 1;
        }
        // SAFETY: the first `copied` spare places were written just now.
        unsafe { out.set_len(len + copied) };
        // From a place claimed but not written yet on: one by one, waiting.
        out.extend((range.start + copied..range.end).map(|i| self.wait_entry(i)));
    }

    /// Entry `i`, once its producer (which claimed it) has written it:
    /// `(cell, start)`.
    #[inline]
    fn wait_entry(&self, i: usize) -> (CellId, u64) {
        let backoff = Backoff::new();
        loop {
            // Acquire pairs with the producer's Release store of the id.
            let c = self.cells[i].load(Ordering::Acquire);
            if c != 0 {
                return (c - 1, self.starts[i].load(Ordering::Relaxed));
            }
            snooze(&backoff);
        }
    }
}

/// A decoded tail word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tail(u64);

impl Tail {
    /// The position (in laps of `LAP`: docs/design.md, "The first-touch
    /// queue").
    fn pos(self) -> u64 {
        (self.0 & POS_MASK) >> POS_SHIFT
    }

    /// The cut epoch pushes land in now.
    pub(crate) fn epoch(self) -> u8 {
        (self.0 >> EPOCH_SHIFT) as u8
    }

    fn parked(self) -> bool {
        self.0 & PARKED != 0
    }

    /// A new queue's tail: position 0, epoch 0, not parked.
    #[cfg(test)]
    pub(crate) fn is_new(self) -> bool {
        self.0 == 0
    }
}

/// A tail word whose position holds `count` entries from `head`'s lap
/// structure (for `drain_into`'s slow step).
fn end_word(_head: &Head, count_end: u64) -> u64 {
    // The position with `count_end` entries before it, in laps of `LAP`.
    let pos = count_end / BLOCK_CAP * LAP + count_end % BLOCK_CAP;
    pos << POS_SHIFT
}

/// Entries (places, not markers) before position `pos`.
fn count(pos: u64) -> u64 {
    pos / LAP * BLOCK_CAP + pos % LAP
}

/// What a push tells its producer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pushed {
    /// The cut epoch the entry landed in.
    pub(crate) epoch: u8,
    /// The consumer had announced it would park: wake it.
    pub(crate) wake: bool,
}

/// The producers' side of the queue, shared with the consumer.
pub(crate) struct Queue {
    tail: AtomicU64,
    /// The block the tail position is in (null before the first push).
    tail_block: AtomicPtr<Block>,
    /// The first block, for the consumer's first read (set by the first push).
    first: AtomicPtr<Block>,
    /// Blocks the consumer finished with, reset, for the producers that need
    /// one: a warm queue allocates nothing. Taken once per `BLOCK_CAP`
    /// entries on each side, so the lock costs a fraction of an RMW per entry.
    #[allow(clippy::vec_box)] // blocks are handed out as `Box`es
    spares: Mutex<Vec<Box<Block>>>,
    /// The consumer's head as other threads read it (a watch's stats).
    seen: Apart<Seen>,
}

/// The consumer's head, published for readers on other threads: the position
/// is stored after every move of the head (a plain Release store, on a line
/// only the consumer writes); the block it is in changes, under `block`'s
/// lock, only when the head leaves a block, which is the only time the
/// consumer frees one. A reader holding the lock therefore walks blocks that
/// stay live until it lets go (`Queue::for_each_seen`).
struct Seen {
    pos: AtomicU64,
    block: Mutex<SeenBlock>,
}

/// The head's block as of its last block change.
struct SeenBlock {
    /// Null while the head is in the first block (then it is `first`).
    block: *mut Block,
    /// The first position of `block`'s lap.
    lap_start: u64,
    /// The end of the consumer's last cut (a position): the entries before
    /// it are the cut's, whatever the published position says yet.
    cut_end: u64,
    /// The consumer let go of the queue (a close): its head is no longer
    /// published, and the clean-up frees blocks without telling readers.
    gone: bool,
}

// SAFETY: `block` is only an address, dereferenced by a reader under the lock
// that keeps the consumer from freeing it (see `Seen`); the lock makes the
// struct's moves between threads ordered.
unsafe impl Send for SeenBlock {}

impl SeenBlock {
    /// A new queue's: the head in the first block, no cut, not let go.
    fn new() -> Self {
        SeenBlock {
            block: ptr::null_mut(),
            lap_start: 0,
            cut_end: 0,
            gone: false,
        }
    }
}

/// Spare blocks kept per queue (about 3 KiB): enough for bursts of a few
/// hundred new keys between two reads without allocating (docs/design.md,
/// "The first-touch queue", says why blocks hold 127 entries).
const SPARES: usize = 2;

/// The consumer's side: where it reads next. Owned by the one consumer.
pub(crate) struct Head {
    pos: u64,
    block: *mut Block,
}

// SAFETY: `block` points into the queue's blocks, which only the consumer
// frees; the `Head` is the consumer's, moved between threads with it.
unsafe impl Send for Head {}
// SAFETY: shared references to a `Head` give no access to the block.
unsafe impl Sync for Head {}

impl Default for Head {
    fn default() -> Self {
        Head {
            pos: 0,
            block: ptr::null_mut(),
        }
    }
}

impl Queue {
    pub(crate) fn new() -> Self {
        Queue {
            tail: AtomicU64::new(0),
            tail_block: AtomicPtr::new(ptr::null_mut()),
            first: AtomicPtr::new(ptr::null_mut()),
            spares: Mutex::new(Vec::new()),
            seen: Apart::new(Seen {
                pos: AtomicU64::new(0),
                block: Mutex::new(SeenBlock::new()),
            }),
        }
    }

    /// Publishes the consumer's position. Release: a reader that loads it
    /// (Acquire) after the consumer's later counts (see `Consumed::took`)
    /// sees the head past what those counts hold.
    #[inline]
    fn publish(&self, head: &Head) {
        self.seen.pos.store(head.pos, Ordering::Release);
    }

    /// The consumer let go of the queue: readers stop walking it (before the
    /// clean-up may free blocks behind their back).
    pub(crate) fn let_go(&self) {
        lock(&self.seen.block).gone = true;
    }

    /// Visits the entries from the consumer's published head to the tail
    /// without consuming them: any thread (a watch's stats). `false`, with
    /// nothing visited, once the consumer let go. Holds the lock the consumer
    /// takes to leave a block or start a cut while it walks, so the consumer
    /// waits for it only if it does either meanwhile; producers never wait.
    pub(crate) fn for_each_seen(&self, f: impl FnMut(CellId, u64)) -> bool {
        let seen = lock(&self.seen.block);
        if seen.gone {
            return false;
        }
        // The tail first, then the position: a key the consumer took and a
        // send pushed again before that tail was taken after the consumer
        // published its position past the old entry (it publishes before it
        // takes), so the old entry is skipped and only the new one walked.
        let end = self.tail();
        let skip = self.seen.pos.load(Ordering::Acquire).max(seen.cut_end);
        // From the start of the consumer's block (which it cannot leave, so
        // not free, while this lock is held), skipping what it has read and
        // what its last cut owns: both may lie laps ahead of the block.
        let head = Head {
            pos: seen.lap_start,
            block: seen.block,
        };
        self.walk(&head, end, count(skip), f);
        true
    }

    /// A block for a producer: a spare if there is one, else a new one.
    fn fresh_block(&self) -> Box<Block> {
        lock(&self.spares).pop().unwrap_or_else(Block::new)
    }

    /// Keeps a block the consumer has read through as a spare (reset), or
    /// frees it if there are enough. Consumer only.
    fn recycle(&self, block: Box<Block>) {
        for c in &block.cells {
            c.store(0, Ordering::Relaxed);
        }
        block.next.store(ptr::null_mut(), Ordering::Relaxed);
        self.keep_spare(block);
    }

    /// Keeps a clean block as a spare, or frees it if there are enough. The
    /// mutex orders the reset before the next producer's use.
    fn keep_spare(&self, block: Box<Block>) {
        let mut spares = lock(&self.spares);
        if spares.len() < SPARES {
            spares.push(block);
        }
    }

    /// Frees every block from `head` on (the consumer's last position; the
    /// blocks before it were freed as it read them). `&mut self`: no producer
    /// and no consumer remain. Afterwards the queue holds nothing.
    pub(crate) fn release(&mut self, head: &Head) {
        let mut b = if head.block.is_null() {
            self.first.load(Ordering::Relaxed)
        } else {
            head.block
        };
        while !b.is_null() {
            // SAFETY: blocks from `head` on are owned by the queue and never
            // freed elsewhere; `&mut self` means nobody else uses them.
            let boxed = unsafe { Box::from_raw(b) };
            b = boxed.next.load(Ordering::Relaxed);
        }
        self.first.store(ptr::null_mut(), Ordering::Relaxed);
        self.tail_block.store(ptr::null_mut(), Ordering::Relaxed);
        lock(&self.spares).clear();
    }
}

impl Queue {
    /// After [`Queue::release`]: the queue as [`Queue::new`] makes it, in
    /// place (a released receiver's queue, reused). Every field is named, so
    /// a new field cannot be left out.
    pub(crate) fn renew(&mut self) {
        let Queue {
            tail,
            tail_block,
            first,
            spares,
            seen,
        } = self;
        tail.store(0, Ordering::Relaxed);
        // `release` left both null and the spares empty.
        debug_assert!(tail_block.load(Ordering::Relaxed).is_null());
        debug_assert!(first.load(Ordering::Relaxed).is_null());
        debug_assert!(lock(spares).is_empty());
        let Seen { pos, block } = &mut **seen;
        pos.store(0, Ordering::Relaxed);
        *lock(block) = SeenBlock::new();
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        // Without a consumer's head (`release` was not called): nothing was
        // ever consumed, so every block is still linked from `first`.
        self.release(&Head::default());
    }
}

#[cfg(all(test, not(any(loom, shuttle))))]
mod tests {
    use super::*;

    #[test]
    fn entries_come_out_in_push_order_across_blocks() {
        let q = Queue::new();
        let mut head = Head::default();
        for i in 0..200u32 {
            let p = q.push(i, u64::from(i) * 10);
            assert_eq!(p.epoch, 0);
            assert!(!p.wake);
        }
        assert_eq!(q.len(&head), 200);
        let mut seen = Vec::new();
        q.for_each_pending(&head, |c, s| seen.push((c, s)));
        assert_eq!(seen.len(), 200);
        for i in 0..200u32 {
            assert_eq!(q.pop(&mut head, q.tail()), Some((i, u64::from(i) * 10)));
        }
        assert_eq!(q.pop(&mut head, q.tail()), None);
        assert_eq!(q.len(&head), 0);
        let mut q = q;
        q.release(&head);
    }

    #[test]
    fn a_cut_splits_the_queue_by_epoch() {
        let q = Queue::new();
        let mut head = Head::default();
        // More than a block's worth: the cut's end lies past a boundary.
        for i in 0..200u32 {
            q.push(i, 0);
        }
        let cut = q.start_cut();
        assert_eq!(cut.epoch(), 0);
        let p = q.push(99, 7);
        assert_eq!(p.epoch, 1, "a push after the cut lands in the next epoch");
        let mut batch = Vec::new();
        while let Some((c, _)) = q.pop(&mut head, cut) {
            batch.push(c);
        }
        assert_eq!(batch, (0..200).collect::<Vec<_>>());
        assert_eq!(q.pop(&mut head, q.tail()), Some((99, 7)));
        let mut q = q;
        q.release(&head);
    }

    #[test]
    fn a_parked_consumer_is_woken_by_the_next_push_only() {
        let q = Queue::new();
        let head = Head::default();
        assert!(q.park(&head));
        assert!(q.push(1, 0).wake);
        assert!(!q.push(2, 0).wake);
        assert!(!q.park(&head), "not empty: look again instead of parking");
    }

    #[test]
    fn concurrent_producers_lose_nothing() {
        let q = Queue::new();
        let mut head = Head::default();
        let per = if cfg!(miri) { 50 } else { 10_000 };
        std::thread::scope(|s| {
            for t in 0..3u32 {
                let q = &q;
                s.spawn(move || {
                    for i in 0..per {
                        q.push(t * 1_000_000 + i, u64::from(i));
                    }
                });
            }
            let mut next = [0u32; 3];
            let mut got = 0;
            while got < 3 * per {
                if let Some((c, s)) = q.pop(&mut head, q.tail()) {
                    let t = (c / 1_000_000) as usize;
                    assert_eq!(
                        c % 1_000_000,
                        next[t],
                        "one producer's entries stay in order"
                    );
                    assert_eq!(s, u64::from(next[t]));
                    next[t] += 1;
                    got += 1;
                } else {
                    std::thread::yield_now();
                }
            }
        });
        let mut q = q;
        q.release(&head);
    }
}
