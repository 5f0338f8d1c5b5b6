//! The counters behind the public stats of both `conflate` implementations
//! (`stats.rs`): how receivers left ([`Departures`]), what a consumer took
//! ([`Consumed`]), and [`bump`], the single-writer add they are all written
//! with.
//!
//! Every counter here is written by one thread at a time (under a lock the
//! writer holds anyway: a plain load and store, no read-modify-write).
//! Readers never take a lock, so a stats read never blocks a sender.
//!
//! The argument: `docs/design.md`, "Accounting".

use super::stats::HubStats;
use crate::sync::{AtomicU64, Ordering};

/// How a registered receiver left its hub, for the counts of [`HubStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Departure {
    /// Drained after the graceful close, then reported closed.
    Drained,
    /// Closed or dropped by its owner before that.
    Dropped,
}

/// The hub-side counts of departed receivers (`HubStats::receivers_*`).
/// Written only under the lock that deregisters receivers (plain load and
/// store, [`bump`]), read without it.
#[derive(Debug, Default)]
pub(crate) struct Departures {
    drained: AtomicU64,
    dropped: AtomicU64,
    hard_closed: AtomicU64,
}

impl Departures {
    /// One receiver left (caller holds the deregistering lock).
    pub(crate) fn count(&self, how: Departure) {
        match how {
            Departure::Drained => bump(&self.drained, 1),
            Departure::Dropped => bump(&self.dropped, 1),
        }
    }

    /// `n` receivers torn down by a hard close (caller holds the lock).
    pub(crate) fn count_hard_closed(&self, n: u64) {
        bump(&self.hard_closed, n);
    }

    /// Fills in the three counts. Acquire pairs with [`bump`]'s Release.
    pub(crate) fn fill(&self, stats: HubStats) -> HubStats {
        HubStats {
            receivers_drained: self.drained.load(Ordering::Acquire),
            receivers_dropped: self.dropped.load(Ordering::Acquire),
            receivers_hard_closed: self.hard_closed.load(Ordering::Acquire),
            ..stats
        }
    }
}

/// What a receiver's consumer took and dropped, written only by the consumer
/// (the `&mut` receive methods and the receiver's own close) with [`bump`],
/// and read by any thread: the receiver's own `stats` and its watches. Kept
/// apart from every counter a send writes, so the consumer's stores never
/// touch a sender's line.
#[derive(Debug, Default)]
pub(crate) struct Consumed {
    delivered: AtomicU64,
    folded: AtomicU64,
    dropped: AtomicU64,
}

impl Consumed {
    /// The consumer took `events` events folding `sends` sends. Stored after
    /// the take, whose locks order it after the sends it counts: a reader that
    /// sees these counts and then loads `received` finds those sends in it.
    ///
    /// `folded` first: a reader loads `delivered` first, so it never sees
    /// more events than the sends they fold.
    #[inline]
    pub(crate) fn took(&self, events: u64, sends: u64) {
        bump(&self.folded, sends);
        bump(&self.delivered, events);
    }

    /// The consumer dropped values that folded `sends` sends.
    pub(crate) fn dropped(&self, sends: u64) {
        bump(&self.dropped, sends);
    }

    /// (delivered, folded, dropped). Acquire pairs with [`bump`]'s Release;
    /// load these before `received`.
    pub(crate) fn load(&self) -> (u64, u64, u64) {
        (
            self.delivered.load(Ordering::Acquire),
            self.folded.load(Ordering::Acquire),
            self.dropped.load(Ordering::Acquire),
        )
    }
}

/// Adds `n` to a counter that only one thread writes at a time (the writer holds
/// the lock that guards what the counter describes). A plain load and store, no
/// read-modify-write. Release: a reader that Acquire-loads this value also sees
/// every store made before it in the same critical section (notably `received`,
/// which writers store first and readers load last).
#[inline]
pub(crate) fn bump(counter: &AtomicU64, n: u64) {
    let now = counter.load(Ordering::Relaxed);
    counter.store(now + n, Ordering::Release);
}
