//! Helpers shared by the conflate and broadcast scenarios: which side of the
//! comparison an implementation is on and the table of them, latency
//! percentiles, splitting work over threads, one barrier-started timed run, and
//! the criterion drivers' common steps.

#![allow(dead_code)]

use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Which side of the comparison an implementation is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Keybus,
    Baseline,
    Peer,
}

/// The table of implementations of one bus: `impl_table!(Impl { f, g, .. }:
/// "name" => Role, module; ..)` is `[Impl { name, role, caps: module::CAPS,
/// f: module::f, g: module::g, .. }, ..]`, where each `module` is one expansion
/// of the bus's scenarios.
macro_rules! impl_table {
    ($impl:ident $fields:tt: $($label:literal => $role:ident, $m:ident;)+) => {
        [$(impl_table!(@one $impl $fields $label, $role, $m)),+]
    };
    (@one $impl:ident { $($f:ident),+ $(,)? } $label:literal, $role:ident, $m:ident) => {
        $impl {
            name: $label,
            role: Role::$role,
            caps: $m::CAPS,
            $($f: $m::$f),+
        }
    };
}

/// Percentiles of publisher send latency, in nanoseconds.
#[derive(Debug, Clone, Copy)]
pub struct Latency {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    pub samples: usize,
}

impl Latency {
    pub fn from_samples(mut ns: Vec<u64>) -> Latency {
        ns.sort_unstable();
        let at = |q: f64| ns[((ns.len() - 1) as f64 * q) as usize];
        Latency {
            p50: at(0.50),
            p90: at(0.90),
            p99: at(0.99),
            p999: at(0.999),
            max: *ns.last().unwrap(),
            samples: ns.len(),
        }
    }
}

/// Splits `total` sends over `senders` as evenly as possible.
pub fn share(total: u64, senders: u64, i: u64) -> u64 {
    total / senders + u64::from(i < total % senders)
}

/// Runs `senders` producer threads and `receivers` consumer threads around one
/// start barrier; returns the time from the first thread's start to the last
/// thread's end.
///
/// Every thread reads the clock itself, right after the barrier and right after
/// its work: with more threads than cores, the thread that would otherwise read
/// the start time can be descheduled past the barrier while a producer does all
/// its work, which made whole runs look nearly free.
pub fn timed_run<'a>(
    senders: Vec<Box<dyn FnOnce() + Send + 'a>>,
    receivers: Vec<Box<dyn FnOnce() + Send + 'a>>,
    after_senders: impl FnOnce(),
) -> Duration {
    let barrier = Barrier::new(senders.len() + receivers.len() + 1);
    std::thread::scope(|s| {
        let spawn = |f: Box<dyn FnOnce() + Send + 'a>| {
            let b = &barrier;
            s.spawn(move || {
                b.wait();
                let start = Instant::now();
                f();
                (start, Instant::now())
            })
        };
        let producers: Vec<_> = senders.into_iter().map(spawn).collect();
        let consumers: Vec<_> = receivers.into_iter().map(spawn).collect();
        barrier.wait();
        let mut spans: Vec<(Instant, Instant)> =
            producers.into_iter().map(|p| p.join().unwrap()).collect();
        after_senders();
        spans.extend(consumers.into_iter().map(|c| c.join().unwrap()));
        let start = spans
            .iter()
            .map(|s| s.0)
            .min()
            .expect("at least one thread");
        let end = spans
            .iter()
            .map(|s| s.1)
            .max()
            .expect("at least one thread");
        end - start
    })
}

/// The total of `iters` runs of `run`, each timing itself (criterion's
/// `iter_custom` for scenarios that measure one whole run at a time).
pub fn sum_of_runs(iters: u64, mut run: impl FnMut() -> Duration) -> Duration {
    (0..iters).map(|_| run()).sum()
}

/// Runs a criterion group and its summary; `false` when criterion only lists or
/// smoke-tests the benchmarks (`--list`, `--test`), so a driver prints nothing
/// more.
pub fn run_criterion(group: fn()) -> bool {
    group();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
    !std::env::args().any(|a| a == "--list" || a == "--test")
}
