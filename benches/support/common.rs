//! Helpers shared by the conflate and broadcast scenarios: latency percentiles,
//! splitting work over threads, and one barrier-started timed run.

#![allow(dead_code)]

use std::sync::Barrier;
use std::time::{Duration, Instant};

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
