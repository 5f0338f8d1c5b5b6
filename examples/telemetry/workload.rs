//! The workload: which metric each send updates, a Zipf law sampled ahead of
//! time with a fixed seed, one key sequence per producer.

use crate::cli::Config;
use crate::metric::MetricId;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_distr::{Distribution, Zipf};
use std::sync::Arc;

/// Sends per producer sampled ahead of time; the producers cycle through them.
/// Sampling outside the timed loop keeps the sampler's cost out of the bus
/// comparison, and both implementations replay exactly the same sequence.
pub const STREAM_LEN: usize = 1 << 18;

/// Fixed seed: runs are comparable with each other.
pub const SEED: u64 = 0x6b65_7962_7573;

pub struct Workload {
    pub keys: u32,
    /// The hottest metric, followed by the key watcher.
    pub watched: MetricId,
    /// Share of all sends that go to `watched`, for display.
    pub watched_share: f64,
    /// One key sequence per producer.
    pub streams: Vec<Arc<[MetricId]>>,
}

impl Workload {
    pub fn new(cfg: &Config) -> Self {
        let mut rng = SmallRng::seed_from_u64(SEED);
        // Shuffle which id gets which popularity rank, so hot metrics land in every
        // family instead of all being low ids.
        let mut by_rank: Vec<MetricId> = (0..cfg.keys).map(MetricId).collect();
        by_rank.shuffle(&mut rng);
        // `rand_distr`'s Zipf draws ranks 1..=n.
        let zipf = Zipf::new(by_rank.len() as f64, cfg.zipf).expect("n >= 1 and s >= 0");
        let streams = (0..cfg.producers)
            .map(|p| {
                let mut rng = SmallRng::seed_from_u64(SEED + 1 + p as u64);
                (0..STREAM_LEN)
                    .map(|_| by_rank[zipf.sample(&mut rng) as usize - 1])
                    .collect()
            })
            .collect();
        Workload {
            keys: cfg.keys,
            watched: by_rank[0],
            watched_share: top_rank_share(by_rank.len(), cfg.zipf),
            streams,
        }
    }
}

/// Share of draws that go to rank 0 under Zipf(n, s): `1 / H(n, s)`, for display.
pub fn top_rank_share(n: usize, s: f64) -> f64 {
    1.0 / (1..=n).map(|rank| (rank as f64).powf(-s)).sum::<f64>()
}
