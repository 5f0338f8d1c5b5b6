//! Thin handles on the conflate internals, for the loom models of
//! `loom-tests/` that check one protocol alone (the queue's tail word, the
//! stripes' pairing with a close). Built only under `--cfg loom`; not API.

use super::lock::ParkLock;
use super::queue::{Head, Queue};
use super::state::HubState;
use super::stripes::{Stripes, ThreadCounts};
use crate::conflate::common::hub_word::HubWord;

/// A cell receiver's first-touch queue and its consumer's head.
pub struct QueueModel {
    queue: Queue,
}

/// The consumer's side of a [`QueueModel`].
#[derive(Default)]
pub struct QueueHead(Head);

impl Default for QueueModel {
    fn default() -> Self {
        QueueModel {
            queue: Queue::new(),
        }
    }
}

impl QueueModel {
    /// Pushes an entry; returns (the cut epoch it landed in, whether it must
    /// wake the consumer).
    pub fn push(&self, cell: u32, start: u64) -> (u8, bool) {
        let p = self.queue.push(cell, start);
        (p.epoch, p.wake)
    }

    /// Starts a cut; returns its epoch. `pop_cut` then reads up to it.
    pub fn start_cut(&self) -> CutEnd {
        CutEnd(self.queue.start_cut())
    }

    /// Pops the next entry before `end`.
    pub fn pop_cut(&self, head: &mut QueueHead, end: &CutEnd) -> Option<(u32, u64)> {
        self.queue.pop(&mut head.0, end.0)
    }

    /// Pops the next entry pushed, as a receive does (`Queue::pop_ready`:
    /// the place at the head first, the tail only if it is not written).
    pub fn pop(&self, head: &mut QueueHead) -> Option<(u32, u64)> {
        self.queue.pop_ready(&mut head.0)
    }

    /// Every entry before the tail now, in order, at once.
    pub fn drain(&self, head: &mut QueueHead) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        self.queue
            .drain_into(&mut head.0, self.queue.tail(), &mut out);
        out
    }

    /// The entries from the consumer's published head to the tail, as a
    /// watch on another thread walks them; `None` once the consumer let go.
    pub fn seen(&self) -> Option<Vec<(u32, u64)>> {
        let mut out = Vec::new();
        self.queue
            .for_each_seen(|c, s| out.push((c, s)))
            .then_some(out)
    }

    /// Announces the consumer parks; `false` if a push got in first.
    pub fn park(&self, head: &QueueHead) -> bool {
        self.queue.park(&head.0)
    }

    /// Entries not yet read at `head`.
    pub fn len(&self, head: &QueueHead) -> u64 {
        self.queue.len(&head.0)
    }

    /// Whether no entry is unread at `head`.
    pub fn is_empty(&self, head: &QueueHead) -> bool {
        self.len(head) == 0
    }

    /// Frees the blocks (all threads joined).
    pub fn release(mut self, head: &QueueHead) {
        self.queue.release(&head.0);
    }
}

/// Where a cut ends, and its epoch.
pub struct CutEnd(super::queue::Tail);

impl CutEnd {
    /// The cut's epoch (entries of this epoch belong to it).
    pub fn epoch(&self) -> u8 {
        self.0.epoch()
    }
}

/// A hub's state word and stripes, without the rest of the hub.
pub struct StripesModel {
    state: HubState,
    stripes: Stripes,
}

impl Default for StripesModel {
    fn default() -> Self {
        StripesModel {
            state: HubState::new(false),
            stripes: Stripes::new(),
        }
    }
}

impl StripesModel {
    /// A send's entry: marks this thread in flight, then reads the state
    /// word; runs `publish` if the send side is open. Returns whether it
    /// published.
    pub fn send(&self, publish: impl FnOnce()) -> bool {
        self.send_seeing_close(publish).0
    }

    /// [`StripesModel::send`], also returning whether the send, as it left,
    /// saw the close (and would wake the receivers).
    pub fn send_seeing_close(&self, publish: impl FnOnce()) -> (bool, bool) {
        let stripe = self.stripes.mine();
        stripe.enter(self.stripes.light);
        if self.state.load().tx_closed() {
            let woke =
                super::stripes::leave_and_see_close(stripe, false, &self.state, self.stripes.light);
            return (false, woke);
        }
        publish();
        let woke =
            super::stripes::leave_and_see_close(stripe, true, &self.state, self.stripes.light);
        (true, woke)
    }

    /// `Sender::close`'s half: the closed bit, then the rare side's fence.
    pub fn close(&self) {
        self.state.close_tx();
        super::barrier::heavy();
    }

    /// A receiver's drained check after it was told of the close: no stripe
    /// in flight.
    pub fn quiescent(&self) -> bool {
        !self.stripes.any_in_flight()
    }

    /// A registry writer's grace period: waits for every send that may not
    /// have seen a decision stored before.
    pub fn wait_for_sends_in_flight(&self) {
        self.stripes.wait_for_sends_in_flight();
    }

    /// Sends counted.
    pub fn sent(&self) -> u64 {
        self.stripes.sent()
    }
}

/// A count many threads add to without a shared read-modify-write
/// (`ThreadCounts`, a receiver's `filtered`): per-thread slots in chunks
/// installed on first use, two model threads to a chunk.
pub struct ThreadCountsModel(ThreadCounts);

impl Default for ThreadCountsModel {
    fn default() -> Self {
        ThreadCountsModel(ThreadCounts::new(true))
    }
}

impl ThreadCountsModel {
    /// Adds one for this model thread.
    pub fn add_one(&self) {
        self.0.add_one();
    }

    /// The count (exact once no adder runs).
    pub fn sum(&self) -> u64 {
        self.0.sum()
    }
}

/// The parking shard lock of receivers with their own merge (`lock.rs`).
pub struct ParkLockModel(ParkLock);

impl Default for ParkLockModel {
    fn default() -> Self {
        ParkLockModel(ParkLock::new())
    }
}

impl ParkLockModel {
    /// Runs `f` holding the lock.
    pub fn with<R>(&self, f: impl FnOnce() -> R) -> R {
        let _guard = self.0.lock();
        f()
    }
}
