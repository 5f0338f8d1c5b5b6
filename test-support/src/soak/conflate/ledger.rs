//! The conflate soak's ledger: a value type ([`W`]) that accounts for every unit
//! of count it carries, created, cloned, merged, delivered or dropped, and the
//! merges that book annihilations and panics.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A unit of count created, moved or destroyed. Every counter is in units of
/// sends: a value's `count` is the number of sends folded into it.
pub struct Mass {
    /// One per send attempt.
    pub created: AtomicU64,
    /// The count of every clone the bus made (fan-out, peek, ...).
    pub cloned: AtomicU64,
    pub delivered: AtomicU64,
    pub annihilated: AtomicU64,
    /// Both inputs of a merge that panicked.
    pub panicked: AtomicU64,
    /// Handed back in a `SendError`.
    pub refused: AtomicU64,
    /// Copies returned by `peek`.
    pub peeked: AtomicU64,
    /// Dropped by the bus with a count still in it: abandoned by a close or a
    /// receiver's drop, or a transient copy of the bus's own.
    pub dropped: AtomicU64,
}

impl Mass {
    const fn new() -> Self {
        Mass {
            created: AtomicU64::new(0),
            cloned: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            annihilated: AtomicU64::new(0),
            panicked: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            peeked: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    fn counters(&self) -> [&AtomicU64; 8] {
        [
            &self.created,
            &self.cloned,
            &self.delivered,
            &self.annihilated,
            &self.panicked,
            &self.refused,
            &self.peeked,
            &self.dropped,
        ]
    }

    pub fn reset(&self) {
        for c in self.counters() {
            c.store(0, Relaxed);
        }
    }

    fn get(c: &AtomicU64) -> u64 {
        c.load(Relaxed)
    }

    /// Everything created went somewhere, exactly once.
    pub fn assert_conserved(&self, epoch: usize) {
        let g = Mass::get;
        let made = g(&self.created) + g(&self.cloned);
        let gone = g(&self.delivered)
            + g(&self.annihilated)
            + g(&self.panicked)
            + g(&self.refused)
            + g(&self.peeked)
            + g(&self.dropped);
        assert_eq!(
            made,
            gone,
            "epoch {epoch}: mass not conserved: created {} + cloned {} != delivered {} + \
             annihilated {} + panicked {} + refused {} + peeked {} + dropped {}",
            g(&self.created),
            g(&self.cloned),
            g(&self.delivered),
            g(&self.annihilated),
            g(&self.panicked),
            g(&self.refused),
            g(&self.peeked),
            g(&self.dropped)
        );
    }
}

/// The process-wide ledger of the conflate epoch in progress (runs take turns).
pub static MASS: Mass = Mass::new();

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Plain,
    /// Merging it into a pending slot annihilates the key.
    Annihilate,
    /// Merging it into a pending slot panics, at receivers whose merge is armed.
    Poison,
}

/// The value sent: `count` sends folded into it (1 when sent).
#[derive(Debug)]
pub struct W {
    pub count: u64,
    pub kind: Kind,
}

impl W {
    pub fn sent(kind: Kind) -> W {
        MASS.created.fetch_add(1, Relaxed);
        W { count: 1, kind }
    }

    /// Takes the count out (so dropping the husk records nothing) and books it.
    pub fn settle(mut self, into: &AtomicU64) -> u64 {
        let count = std::mem::take(&mut self.count);
        into.fetch_add(count, Relaxed);
        count
    }

    /// Takes the count out without booking it: it moves into a merged value.
    pub fn take(mut self) -> u64 {
        std::mem::take(&mut self.count)
    }
}

impl Clone for W {
    fn clone(&self) -> W {
        MASS.cloned.fetch_add(self.count, Relaxed);
        W {
            count: self.count,
            kind: self.kind,
        }
    }
}

impl Drop for W {
    fn drop(&mut self) {
        if self.count > 0 {
            MASS.dropped.fetch_add(self.count, Relaxed);
        }
    }
}

/// Per stable receiver: what its consumer and its merge saw.
#[derive(Default)]
pub struct RxLedger {
    pub delivered: AtomicU64,
    pub annihilated: AtomicU64,
    pub panicked: AtomicU64,
}

/// Where a merge panicked, for the producer that caught it: a stable receiver's
/// index, or [`CHURN`]. Merges run on the sending thread.
pub mod panicked_at {
    use std::cell::Cell;

    thread_local! {
        static AT: Cell<Option<usize>> = const { Cell::new(None) };
    }

    pub fn set(at: usize) {
        AT.with(|c| c.set(Some(at)));
    }

    pub fn take() -> Option<usize> {
        AT.with(Cell::take)
    }
}

/// Receivers made by the churn thread (all registered after the stable ones).
pub const CHURN: usize = usize::MAX;

/// The payload of a merge's panic (`resume_unwind`: no panic-hook output).
pub struct Refused;

/// A summing merge that books annihilations and panics, in `MASS` and in
/// `ledger`; `at` names the receiver for [`panicked_at`].
pub fn merge_fn(
    at: usize,
    ledger: Option<std::sync::Arc<RxLedger>>,
    armed: bool,
) -> impl Fn(W, W) -> Option<W> + Send + Sync + 'static {
    move |pending: W, incoming: W| match incoming.kind {
        Kind::Poison if armed => {
            let lost = pending.take() + incoming.take();
            MASS.panicked.fetch_add(lost, Relaxed);
            if let Some(l) = &ledger {
                l.panicked.fetch_add(lost, Relaxed);
            }
            panicked_at::set(at);
            std::panic::resume_unwind(Box::new(Refused));
        }
        Kind::Annihilate => {
            let gone = pending.take() + incoming.take();
            MASS.annihilated.fetch_add(gone, Relaxed);
            if let Some(l) = &ledger {
                l.annihilated.fetch_add(gone, Relaxed);
            }
            None
        }
        _ => Some(W {
            count: pending.take() + incoming.take(),
            kind: Kind::Plain,
        }),
    }
}
