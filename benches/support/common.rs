//! Helpers shared by the conflate and broadcast scenarios: latency percentiles,
//! splitting work over threads, and one barrier-started timed run.

#![allow(dead_code)]

use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Percentiles of publisher send latency, in nanoseconds.
#[derive(Debug, Clone, Copy)]
pub struct Latency {
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
    pub samples: usize,
}

impl Latency {
    pub fn from_samples(mut ns: Vec<u64>) -> Latency {
        ns.sort_unstable();
        let at = |q: f64| ns[((ns.len() - 1) as f64 * q) as usize];
        Latency {
            p50: at(0.50),
            p99: at(0.99),
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
/// start barrier; returns the time from the barrier to the last consumer's end.
pub fn timed_run<'a>(
    senders: Vec<Box<dyn FnOnce() + Send + 'a>>,
    receivers: Vec<Box<dyn FnOnce() + Send + 'a>>,
    after_senders: impl FnOnce(),
) -> Duration {
    let barrier = Barrier::new(senders.len() + receivers.len() + 1);
    std::thread::scope(|s| {
        let producers: Vec<_> = senders
            .into_iter()
            .map(|f| {
                let b = &barrier;
                s.spawn(move || {
                    b.wait();
                    f()
                })
            })
            .collect();
        let consumers: Vec<_> = receivers
            .into_iter()
            .map(|f| {
                let b = &barrier;
                s.spawn(move || {
                    b.wait();
                    f()
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        for p in producers {
            p.join().unwrap();
        }
        after_senders();
        for c in consumers {
            c.join().unwrap();
        }
        start.elapsed()
    })
}
