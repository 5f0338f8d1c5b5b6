//! Bad input, per bus, written once over each bus's API traits: every case must
//! give a clear error, a documented panic, or degrade without UB, deadlock or
//! unbounded memory. Here: the traps both buses' suites set in user trait impls.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::Arc;

pub mod broadcast;
pub mod conflate;
pub mod conflate_state;

/// Which trait method of a trapped value panics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    Hash,
    Eq,
    Clone,
}

/// Countdowns shared by every trapped value of a test: the call of `which` that
/// brings its countdown from 1 to 0 panics; 0 means disarmed.
#[derive(Default, Debug)]
pub struct Trap {
    hash: AtomicU32,
    eq: AtomicU32,
    clone: AtomicU32,
}

/// The payload of a [`Trap`]'s panic (`resume_unwind`: no panic-hook noise).
pub struct Sprung(pub Which);

impl Trap {
    fn counter(&self, which: Which) -> &AtomicU32 {
        match which {
            Which::Hash => &self.hash,
            Which::Eq => &self.eq,
            Which::Clone => &self.clone,
        }
    }

    /// Arms `which`: its `nth` call from now panics.
    pub fn arm(&self, which: Which, nth: u32) {
        self.counter(which).store(nth, SeqCst);
    }

    /// Disarms every method.
    pub fn disarm(&self) {
        for w in [Which::Hash, Which::Eq, Which::Clone] {
            self.counter(w).store(0, SeqCst);
        }
    }

    /// Called by each trapped method: panics with [`Sprung`] if this call is the
    /// armed one.
    pub fn touch(&self, which: Which) {
        let c = self.counter(which);
        let hit = c
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
            .is_ok_and(|before| before == 1);
        if hit {
            std::panic::resume_unwind(Box::new(Sprung(which)));
        }
    }
}

/// A key or value whose `Hash`, `Eq` and `Clone` panic when its trap says so.
/// All `Touchy` hash alike, so `Eq` runs whenever two meet in a table; two are
/// equal when their ids are.
pub struct Touchy {
    pub id: u32,
    trap: Arc<Trap>,
}

impl Touchy {
    /// A value with this `id` on `trap`.
    pub fn new(id: u32, trap: &Arc<Trap>) -> Self {
        Touchy {
            id,
            trap: trap.clone(),
        }
    }
}

impl Hash for Touchy {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.trap.touch(Which::Hash);
        state.write_u8(1);
    }
}

impl PartialEq for Touchy {
    fn eq(&self, other: &Self) -> bool {
        self.trap.touch(Which::Eq);
        self.id == other.id
    }
}

impl Eq for Touchy {}

impl Clone for Touchy {
    fn clone(&self) -> Self {
        self.trap.touch(Which::Clone);
        Touchy {
            id: self.id,
            trap: self.trap.clone(),
        }
    }
}

impl fmt::Debug for Touchy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Touchy({})", self.id)
    }
}
