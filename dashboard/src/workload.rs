//! The telemetry workload: Zipf-distributed metric updates from producer
//! threads into the hub, as in the main job (`examples/telemetry/`).
//!
//! `--keys` metrics, interned to `u32` ids and named round-robin over four
//! families (`cpu.host-0000`, `mem.host-0000`, `disk.host-0000`,
//! `net.host-0000`, `cpu.host-0001`, ...). Which metric a send updates follows
//! a Zipf law over a shuffled rank order, so a few metrics of every family are
//! hot and most are cold. Each value is a random walk within its family's range,
//! kept in hundredths so that a value prints as at most two decimals.

use keybus::conflate::{Hub, Sender};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The hub the dashboard serves: metric id to its latest value.
pub type MetricHub = Hub<u32, f64>;

/// Fixed seed: every run shows the same hot metrics.
const SEED: u64 = 0x6b65_7962_7573;
/// Key ids pre-sampled per producer; the producers cycle through them, so the
/// sampler's cost stays out of the send loop.
const STREAM_LEN: usize = 1 << 16;
/// Sends between two looks at the clock and the stop flag.
const BATCH: usize = 64;

/// A metric family: its name and the range and step of its random walk, in
/// hundredths of its unit.
struct Family {
    name: &'static str,
    max: i64,
    step: i64,
}

const FAMILIES: [Family; 4] = [
    Family {
        name: "cpu",
        max: 100 * 100,
        step: 50,
    }, // percent
    Family {
        name: "mem",
        max: 64 * 100,
        step: 5,
    }, // GiB
    Family {
        name: "disk",
        max: 100 * 100,
        step: 50,
    }, // percent busy
    Family {
        name: "net",
        max: 1000 * 100,
        step: 500,
    }, // Mbit/s
];

/// The display name of metric `id`.
pub fn metric_name(id: u32) -> String {
    let family = &FAMILIES[id as usize % FAMILIES.len()];
    format!("{}.host-{:04}", family.name, id as usize / FAMILIES.len())
}

/// Running producers. Dropping it stops and joins them.
pub struct Workload {
    stop: Arc<AtomicBool>,
    live: Arc<AtomicUsize>,
    threads: Vec<JoinHandle<()>>,
}

/// What the producers send.
#[derive(Debug, Clone)]
pub struct WorkloadConfig {
    /// Distinct metrics.
    pub keys: u32,
    /// Producer threads.
    pub producers: usize,
    /// Zipf exponent (0 = uniform).
    pub zipf: f64,
    /// Sends per second per producer; 0 = no cap.
    pub rate: u64,
    /// Stop after this long; `None` = until stopped.
    pub duration: Option<Duration>,
}

impl Workload {
    /// Starts the producers. The first one sends every metric once before the
    /// Zipf stream, so the state table holds every metric from the start (a cold
    /// metric could otherwise stay absent for a while).
    pub fn start(hub: &MetricHub, cfg: &WorkloadConfig) -> Workload {
        let stop = Arc::new(AtomicBool::new(false));
        let live = Arc::new(AtomicUsize::new(cfg.producers));
        let streams = streams(cfg);
        let deadline = cfg.duration.map(|d| Instant::now() + d);
        let threads = streams
            .into_iter()
            .enumerate()
            .map(|(p, stream)| {
                let producer = Producer {
                    tx: hub.sender(),
                    stream,
                    values: initial_values(cfg.keys, p as u64),
                    rng: SmallRng::seed_from_u64(SEED ^ (p as u64 + 101)),
                    rate: cfg.rate,
                    deadline,
                    stop: stop.clone(),
                    live: live.clone(),
                    seed_every_key: p == 0,
                };
                std::thread::Builder::new()
                    .name(format!("producer-{p}"))
                    .spawn(move || producer.run())
                    .expect("spawn a producer thread")
            })
            .collect();
        Workload {
            stop,
            live,
            threads,
        }
    }

    /// Asks the producers to stop (they finish their current batch of 64).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Whether any producer is still sending.
    pub fn producing(&self) -> bool {
        self.live.load(Ordering::Acquire) > 0
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        self.stop();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One key sequence per producer, Zipf over a shuffled rank order (hot
/// metrics land in every family instead of all being low ids).
fn streams(cfg: &WorkloadConfig) -> Vec<Vec<u32>> {
    let mut rng = SmallRng::seed_from_u64(SEED);
    let mut by_rank: Vec<u32> = (0..cfg.keys).collect();
    by_rank.shuffle(&mut rng);
    let zipf = Zipf::new(cfg.keys as f64, cfg.zipf).expect("keys >= 1 and zipf >= 0");
    (0..cfg.producers)
        .map(|p| {
            let mut rng = SmallRng::seed_from_u64(SEED + 1 + p as u64);
            (0..STREAM_LEN)
                .map(|_| by_rank[zipf.sample(&mut rng) as usize - 1])
                .collect()
        })
        .collect()
}

fn initial_values(keys: u32, producer: u64) -> Vec<i64> {
    let mut rng = SmallRng::seed_from_u64(SEED ^ producer);
    (0..keys)
        .map(|id| rng.random_range(0..=FAMILIES[id as usize % FAMILIES.len()].max))
        .collect()
}

struct Producer {
    tx: Sender<u32, f64>,
    stream: Vec<u32>,
    /// Each metric's walk, in hundredths.
    values: Vec<i64>,
    rng: SmallRng,
    rate: u64,
    deadline: Option<Instant>,
    stop: Arc<AtomicBool>,
    live: Arc<AtomicUsize>,
    seed_every_key: bool,
}

impl Producer {
    fn run(mut self) {
        if self.seed_every_key {
            for id in 0..self.values.len() as u32 {
                if !self.send(id) {
                    return self.finish();
                }
            }
        }
        let start = Instant::now();
        let mut sent: u64 = 0;
        let mut at = 0;
        'run: loop {
            if self.stop.load(Ordering::Relaxed)
                || self.deadline.is_some_and(|d| d <= Instant::now())
            {
                break;
            }
            for _ in 0..BATCH {
                let id = self.stream[at];
                at = (at + 1) % self.stream.len();
                if !self.send(id) {
                    break 'run;
                }
            }
            sent += BATCH as u64;
            if self.rate > 0 {
                // Sleep until this batch is due: a steady rate, not bursts.
                let due = start + Duration::from_secs_f64(sent as f64 / self.rate as f64);
                if let Some(ahead) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(ahead);
                }
            }
        }
        self.finish();
    }

    /// One step of metric `id`'s walk, sent. `false` once the send side is closed.
    fn send(&mut self, id: u32) -> bool {
        let family = &FAMILIES[id as usize % FAMILIES.len()];
        let v = &mut self.values[id as usize];
        *v = (*v + self.rng.random_range(-family.step..=family.step)).clamp(0, family.max);
        self.tx.send(id, *v as f64 / 100.0).is_ok()
    }

    fn finish(&self) {
        self.live.fetch_sub(1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cycle_over_the_families() {
        assert_eq!(metric_name(0), "cpu.host-0000");
        assert_eq!(metric_name(3), "net.host-0000");
        assert_eq!(metric_name(4), "cpu.host-0001");
        assert_eq!(metric_name(4 * 1234 + 2), "disk.host-1234");
    }

    #[test]
    fn producers_fill_the_table_and_stop() {
        let hub: MetricHub = Hub::builder().retain_latest().build();
        let cfg = WorkloadConfig {
            keys: 40,
            producers: 2,
            zipf: 1.1,
            rate: 20_000,
            duration: None,
        };
        let workload = Workload::start(&hub, &cfg);
        // The seeding pass sends every key; wait for it (bounded), then stop.
        let until = Instant::now() + Duration::from_secs(20);
        while hub.snapshot().len() < 40 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        workload.stop();
        drop(workload);
        let table = hub.snapshot();
        assert_eq!(table.len(), 40, "every metric is in the table");
        for (id, value) in table {
            let family = &FAMILIES[id as usize % FAMILIES.len()];
            assert!(
                (0.0..=family.max as f64 / 100.0).contains(&value),
                "{id}: {value}"
            );
            // Hundredths only: the value prints with at most two decimals.
            assert_eq!((value * 100.0).round() / 100.0, value);
        }
        assert!(hub.stats().sent >= 40);
    }

    #[test]
    fn a_duration_ends_the_producers() {
        let hub: MetricHub = Hub::new();
        let cfg = WorkloadConfig {
            keys: 8,
            producers: 1,
            zipf: 0.0,
            rate: 10_000,
            duration: Some(Duration::from_millis(50)),
        };
        let workload = Workload::start(&hub, &cfg);
        let until = Instant::now() + Duration::from_secs(20);
        while workload.producing() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!workload.producing(), "the producer stopped by itself");
    }
}
