//! The producers: each replays its key sequence until the deadline, in scrape
//! batches, and counts what the bus accepted.

use crate::metric::{MetricId, Sample};
use keybus::SendError;
use std::time::Instant;

/// Sends per timestamp: a scraper reads a batch of metrics at one instant, and
/// reading the clock once per batch keeps it out of the per-send cost.
pub const SCRAPE_BATCH: usize = 64;

/// What the producers sent, counted so every receiver's deliveries can be checked.
#[derive(Clone, Copy, Debug, Default)]
pub struct SentTally {
    pub per_family: [u64; 4],
    pub watched: u64,
    /// Sends refused because the send side was closed; 0 in this scenario, since
    /// the close comes after the producers stop.
    pub rejected: u64,
}

impl SentTally {
    pub fn record(&mut self, key: MetricId, watched: MetricId) {
        self.per_family[key.family() as usize] += 1;
        self.watched += u64::from(key == watched);
    }

    pub fn total(&self) -> u64 {
        self.per_family.iter().sum()
    }

    pub fn plus(mut self, other: SentTally) -> SentTally {
        for (mine, theirs) in self.per_family.iter_mut().zip(other.per_family) {
            *mine += theirs;
        }
        self.watched += other.watched;
        self.rejected += other.rejected;
        self
    }
}

/// Replays `stream` until `deadline`, counting every accepted send.
pub fn produce<S>(
    send: &S,
    stream: &[MetricId],
    watched: MetricId,
    start: Instant,
    deadline: Instant,
) -> SentTally
where
    S: Fn(MetricId, Sample) -> Result<(), SendError<MetricId, Sample>>,
{
    let mut tally = SentTally::default();
    let mut reading = 0u64;
    for scrape in stream.chunks(SCRAPE_BATCH).cycle() {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        let ts_ns = u64::try_from(now.duration_since(start).as_nanos()).unwrap_or(u64::MAX);
        for &key in scrape {
            reading += 1;
            // A percentage that sweeps 0..100; its exact values do not matter.
            let sample = Sample {
                value: (reading % 1000) as f64 / 10.0,
                ts_ns,
            };
            match send(key, sample) {
                Ok(()) => tally.record(key, watched),
                Err(_) => tally.rejected += 1,
            }
        }
    }
    tally
}
