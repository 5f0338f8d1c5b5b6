//! The scenario table: what one scenario is (its implementations' entries, its
//! size, its plot) and every scenario of the report, in report order. The
//! scenario bodies are `benches/support/*_scenarios.rs`, shared with
//! `cargo bench`; the files here size them and pick the implementations.

mod broadcast;
mod conflate;
#[cfg(feature = "metrics")]
mod metrics;
pub mod send_paths;

use crate::common::Role;
use std::time::Duration;

/// Where a scenario's result goes in the plots.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Plot {
    None,
    /// Conflate, one sender, this many receivers (hot keys).
    ConflateReceivers(u64),
    /// Conflate, this many threads in all (hot keys).
    ConflateThreads(u64),
    /// Broadcast, this many reading threads.
    BroadcastReaders(u64),
    /// Broadcast, writer cost with this many attached idle readers.
    WriterCost(u64),
}

/// One measurement: the timed duration and an optional extra number (the share
/// delivered, for broadcast readers).
pub type Measure = Box<dyn Fn() -> (Duration, Option<f64>)>;

pub struct Entry {
    pub name: &'static str,
    pub role: Role,
    /// Set where the peer does not do the same work (then it is left out of "best
    /// peer" and the note says why).
    pub not_comparable: Option<&'static str>,
    /// `Err(reason)` when the implementation cannot express the scenario.
    pub run: Result<Measure, &'static str>,
}

pub struct Scenario {
    pub name: String,
    /// Operations per measurement (ns/op = duration / ops).
    pub ops: u64,
    /// What the extra number means, e.g. "delivered".
    pub extra: Option<&'static str>,
    pub plot: Plot,
    /// Caps the rounds of a long scenario (the million-key one).
    pub max_rounds: usize,
    pub entries: Vec<Entry>,
}

impl Entry {
    /// `run` measured as `name`, on `role`'s side of the comparison.
    pub fn new(name: &'static str, role: Role, run: Result<Measure, &'static str>) -> Entry {
        Entry {
            name,
            role,
            not_comparable: None,
            run,
        }
    }

    /// Left out of "best peer" where `why` says so.
    pub fn not_comparable(self, why: Option<&'static str>) -> Entry {
        Entry {
            not_comparable: why,
            ..self
        }
    }
}

/// A measurement that only times `f` (no extra number).
pub fn timed(f: impl Fn() -> Duration + 'static) -> Result<Measure, &'static str> {
    Ok(Box::new(move || (f(), None)))
}

impl Scenario {
    /// `ops` operations per measurement of each entry; no extra number, no plot,
    /// no cap on the rounds.
    pub fn new(name: impl Into<String>, ops: u64, entries: Vec<Entry>) -> Scenario {
        Scenario {
            name: name.into(),
            ops,
            extra: None,
            plot: Plot::None,
            max_rounds: usize::MAX,
            entries,
        }
    }

    /// The entries' extra number is `what` (a percentage).
    pub fn extra(self, what: &'static str) -> Scenario {
        Scenario {
            extra: Some(what),
            ..self
        }
    }

    pub fn plot(self, plot: Plot) -> Scenario {
        Scenario { plot, ..self }
    }
}

/// Every broadcast and conflate scenario, sized by `scale` (1 = quick), then
/// the `keybus::metrics` ones with `--features metrics`. Broadcast first; the
/// last broadcast scenario checks that no implementation's append slows down
/// after many threads read through it (keybus's did while its slots used
/// arc-swap, whose global debt list grows with the peak thread count).
pub fn all(scale: u64) -> Vec<Scenario> {
    let mut out = broadcast::scenarios(scale);
    out.extend(conflate::scenarios(scale));
    // The coalescing send (1 to 1,000 receivers, four kinds), the new-key
    // cycle, the counted no-receiver send, `try_recv_all` fan-outs.
    out.extend(send_paths::scenarios(scale));
    // Last, as it was while keybus kept process-wide state (see the scenario).
    out.push(broadcast::append_after_threads(scale));
    #[cfg(feature = "metrics")]
    out.extend(metrics::scenarios(scale));
    out
}
