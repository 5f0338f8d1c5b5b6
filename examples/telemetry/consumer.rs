//! The five consumers (dashboard, indexer, disk.* filter, key watcher, late
//! dashboard) and what each one counts of what it handled.

use crate::metric::Sample;
use crate::scenario::{Ev, Port};
use keybus::{ReceiverStats, TryRecvError};
use std::thread;
use std::time::{Duration, Instant};

/// How often the indexer takes its backlog, and how long writing a batch takes.
pub const INDEX_EVERY: Duration = Duration::from_millis(5);

/// A reading at or above this (a percentage) counts as an alert. Coalescing keeps
/// the latest reading, so an alert that was overwritten before the receiver looked
/// is not seen; a rule that must see every peak would give its receiver a
/// `merge` that keeps the maximum.
pub const ALERT_LEVEL: f64 = 99.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Dashboard,
    Indexer,
    Filtered,
    Watcher,
    Late,
}

impl Role {
    pub const ALL: [Role; 5] = [
        Role::Dashboard,
        Role::Indexer,
        Role::Filtered,
        Role::Watcher,
        Role::Late,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Role::Dashboard => "dashboard",
            Role::Indexer => "indexer",
            Role::Filtered => "disk.* filter",
            Role::Watcher => "key watcher",
            Role::Late => "late dashboard",
        }
    }
}

/// What one receiver handled.
#[derive(Clone, Copy, Debug, Default)]
pub struct RxTally {
    pub events: u64,
    /// Σ `Event::sends`.
    pub sends: u64,
    /// `try_recv_all` cuts that returned something (indexer only).
    pub batches: u64,
    /// Distinct metrics with a value on screen at the end (dashboard only).
    pub keys_shown: u64,
    /// Readings at or above [`ALERT_LEVEL`] (filter only).
    pub alerts: u64,
    /// The oldest sample delivered: how stale coalescing let this receiver get.
    pub max_age: Duration,
    /// From the scenario's start to this receiver's `Closed`.
    pub active: Duration,
    /// Snapshot entries delivered (`sends == 0`; late dashboard only).
    pub from_snapshot: u64,
    /// The receiver's own accounting (`Receiver::stats`) after its `Closed`.
    pub received: u64,
    pub filtered: u64,
    pub folded: u64,
    /// folded + annihilated + overflowed + dropped + pending_sends.
    pub settled: u64,
    /// Rounds in which the receiver's stats kept the conservation law, agreed
    /// with the sends its events stand for, and (with `filtered`) account for
    /// every send the hub accepted while it was registered.
    pub good_rounds: u32,
}

impl RxTally {
    /// `now_ns` is on the producers' clock (nanoseconds since the start).
    pub fn count(&mut self, event: &Ev, now_ns: u64) {
        self.events += 1;
        self.sends += event.sends;
        let age = Duration::from_nanos(now_ns.saturating_sub(event.value.ts_ns));
        self.max_age = self.max_age.max(age);
    }

    pub fn finish(mut self, start: Instant, stats: ReceiverStats) -> Self {
        self.active = start.elapsed();
        self.received = stats.received;
        self.filtered = stats.filtered;
        self.folded = stats.folded;
        self.settled = stats.folded
            + stats.annihilated
            + stats.overflowed
            + stats.dropped
            + stats.pending_sends;
        self
    }

    /// This round's verdict, given what the hub accepted while the receiver was
    /// registered (`None` for one that joined late: that count is not kept).
    pub fn judge(&mut self, accepted: Option<u64>) {
        let law = self.received == self.settled;
        let events = self.sends == self.folded;
        let everything = accepted.map_or(true, |sent| self.received + self.filtered == sent);
        self.good_rounds = u32::from(law && events && everything);
    }

    /// Adds a later round's tally: counts and times add up, extremes take the max.
    pub fn absorb(&mut self, later: &RxTally) {
        self.events += later.events;
        self.sends += later.sends;
        self.batches += later.batches;
        self.keys_shown = self.keys_shown.max(later.keys_shown);
        self.alerts += later.alerts;
        self.max_age = self.max_age.max(later.max_age);
        self.active += later.active;
        self.from_snapshot += later.from_snapshot;
        self.received += later.received;
        self.filtered += later.filtered;
        self.folded += later.folded;
        self.settled += later.settled;
        self.good_rounds += later.good_rounds;
    }
}

/// Keeps the latest sample of every metric, as a dashboard's screen would.
pub fn dashboard(mut rx: Port, keys: u32, start: Instant) -> RxTally {
    let mut screen: Vec<Option<Sample>> = vec![None; keys as usize];
    let mut tally = RxTally::default();
    while let Ok(event) = rx.recv() {
        // A snapshot entry (late dashboard) stands for no send: `sends == 0`.
        tally.from_snapshot += u64::from(event.sends == 0);
        tally.count(&event, nanos_since(start));
        screen[event.key.0 as usize] = Some(event.value);
    }
    tally.keys_shown = screen.iter().flatten().count() as u64;
    tally.finish(start, rx.stats())
}

/// Takes the whole backlog every [`INDEX_EVERY`]; the sleep stands in for writing
/// the batch. An empty cut just waits for the next tick.
pub fn indexer(mut rx: Port, start: Instant) -> RxTally {
    let mut tally = RxTally::default();
    loop {
        match rx.try_recv_all() {
            Ok(batch) => {
                tally.batches += 1;
                let now_ns = nanos_since(start);
                batch.iter().for_each(|event| tally.count(event, now_ns));
            }
            Err(TryRecvError::Empty) => {}
            Err(TryRecvError::Closed) => break,
        }
        thread::sleep(INDEX_EVERY);
    }
    tally.finish(start, rx.stats())
}

/// Handles each event as it comes, counting readings at alert level; which keys
/// arrive is the receiver's filter's business.
pub fn follow(mut rx: Port, start: Instant) -> RxTally {
    let mut tally = RxTally::default();
    while let Ok(event) = rx.recv() {
        tally.count(&event, nanos_since(start));
        tally.alerts += u64::from(event.value.value >= ALERT_LEVEL);
    }
    tally.finish(start, rx.stats())
}

/// Nanoseconds since `start`: the clock of [`Sample::ts_ns`].
pub fn nanos_since(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}
