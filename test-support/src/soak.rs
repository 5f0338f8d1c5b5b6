//! Soak: a bounded stress run of each bus, written once over its API traits and
//! run against both implementations (`tests/soak.rs`). What each checks is in [`conflate`] and
//! [`broadcast`]; here is what they share: the time budget, the seed, the
//! memory meter and the run loop.
//!
//! A run is a sequence of *epochs*, each on a new hub / buffer, until its share
//! of the time budget is spent. The budget is `KEYBUS_SOAK_SECS` seconds for the
//! whole soak, both buses (default 20 in release builds, 2 in debug builds, so a
//! plain `cargo test` stays fast), split evenly between the four runs (two buses
//! × two implementations). The runs take turns (one lock) because
//! they share the process-wide counts of the counting allocator, which the test
//! binary installs. The time budget only bounds how many epochs run: nothing
//! asserts on time.
//!
//! Memory, in every epoch: peak live heap bytes stay under a bound proportional
//! to the epoch's size (keys × receivers, capacity × readers), and once every
//! hub, handle and receiver of an epoch is dropped, live bytes are back at the
//! starting level (within a small tolerance).
//!
//! Run the full soak with
//! `cargo test --release --test soak -- --nocapture`;
//! `KEYBUS_SOAK_SEED` repeats a run's epoch shapes (its seed is printed).

use crate::counting;
use std::fmt;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub mod broadcast;
pub mod conflate;

/// Whether this is a debug build: epochs are made smaller there.
pub const DEBUG: bool = cfg!(debug_assertions);

/// Bytes allowed in every epoch's peak for what is not the bus (threads,
/// tallies).
pub const BYTES_FIXED: usize = 512 << 10;

/// What live bytes may differ by after everything of a run is dropped: the test
/// harness itself allocates a little while a test runs (another test's thread
/// being spawned, its result being sent).
const LEAK_TOLERANCE: usize = 64 << 10;

/// The whole soak's budget; see the module docs.
fn soak_budget() -> Duration {
    let default = if DEBUG { 2.0 } else { 20.0 };
    let secs = std::env::var("KEYBUS_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .unwrap_or(default);
    Duration::from_secs_f64(secs)
}

/// `KEYBUS_SOAK_SEED`, or a random one. The seed fixes every epoch's shape
/// (keys, receivers, filters, endings, close moments); thread interleavings
/// still differ from run to run.
fn soak_seed() -> u64 {
    std::env::var("KEYBUS_SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..))
}

static TURN: Mutex<()> = Mutex::new(());

/// Runs take turns: the allocator's live and peak counts are process-wide.
fn take_turn() -> MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Live heap bytes relative to the start of a run.
pub struct Meter {
    start: usize,
}

impl Meter {
    fn start() -> Self {
        Meter {
            start: counting::live_bytes(),
        }
    }

    /// Live bytes now, and restarts the peak from here.
    pub fn reset_peak(&self) -> usize {
        counting::reset_peak()
    }

    /// Peak live bytes since the last `reset_peak`, above `from`.
    pub fn peak_above(&self, from: usize) -> usize {
        counting::peak_bytes().saturating_sub(from)
    }

    /// Fails if live bytes are above the run's starting level by more than the
    /// tolerance. (Below is fine: the harness frees what it allocated earlier.)
    pub fn assert_back_to_start(&self, what: &str) {
        let now = counting::live_bytes();
        assert!(
            now <= self.start + LEAK_TOLERANCE,
            "{what}: {} bytes still live above the starting level ({} bytes), tolerance {}",
            now - self.start,
            self.start,
            LEAK_TOLERANCE
        );
    }
}

/// A run's epoch peaks: the highest, and the one closest to its bound.
#[derive(Default, Debug)]
pub struct Peaks {
    max: usize,
    peak: usize,
    bound: usize,
}

impl Peaks {
    /// Fails if epoch `index`'s `peak` (bytes above its start) is over `bound`
    /// (`shape` says why the bound is what it is); then keeps it.
    pub fn check(&mut self, index: usize, peak: usize, bound: usize, shape: &str) {
        assert!(
            peak <= bound,
            "epoch {index}: peak {peak} bytes above the epoch's start, bound {bound} ({shape})"
        );
        self.max = self.max.max(peak);
        if self.bound == 0 || peak * self.bound > self.peak * bound {
            self.peak = peak;
            self.bound = bound;
        }
    }
}

impl fmt::Display for Peaks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kib = |bytes: usize| bytes as f64 / 1024.0;
        write!(
            f,
            "peak heap {:.0} KiB above start (closest to its bound: {:.0} KiB of {:.0} KiB)",
            kib(self.max),
            kib(self.peak),
            kib(self.bound)
        )
    }
}

/// What a run did, for its report.
pub struct Run<T> {
    pub totals: T,
    pub epochs: usize,
    pub took: Duration,
    pub seed: u64,
}

impl<T> fmt::Display for Run<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:.1?}, seed {}, {} epochs",
            self.took, self.seed, self.epochs
        )
    }
}

/// One run of `name`: takes its turn, runs a warm-up epoch (lazily made
/// per-thread state, such as thread-locals and the allocator's caches, is then
/// part of the start), then `epoch(index, rng, totals, meter)` until the run's
/// share of the budget is spent (at least once), and checks that the heap is
/// back at its start.
pub fn run<T: Default>(
    name: &str,
    mut epoch: impl FnMut(usize, &mut fastrand::Rng, &mut T, &Meter),
) -> Run<T> {
    let _turn = take_turn();
    let budget = soak_budget() / 4;
    let seed = soak_seed();
    // Shown if the run fails (the harness prints captured output).
    println!("soak {name}: seed {seed} (KEYBUS_SOAK_SEED)");
    let mut rng = fastrand::Rng::with_seed(seed);
    epoch(usize::MAX, &mut rng, &mut T::default(), &Meter::start());
    let meter = Meter::start();
    let started = Instant::now();
    let mut totals = T::default();
    let mut epochs = 0;
    while epochs == 0 || started.elapsed() < budget {
        epoch(epochs, &mut rng, &mut totals, &meter);
        epochs += 1;
    }
    let took = started.elapsed();
    meter.assert_back_to_start("after the run");
    Run {
        totals,
        epochs,
        took,
        seed,
    }
}
