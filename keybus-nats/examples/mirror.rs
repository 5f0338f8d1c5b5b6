//! A hub mirrored to a KV bucket, and a second hub fed back from it.
//!
//! Start a server first (JetStream on, loopback only):
//!
//! ```sh
//! NATS_SERVER=$(bash .ci/provision-nats | tail -n 1)   # installs nats-server if missing
//! $NATS_SERVER -js -a 127.0.0.1 -p 4222 -sd /tmp/keybus-nats-demo &
//! ```
//!
//! Then both sides in one process (two tasks; exits 0 once the dashboard's
//! hub equals the producer's latest values):
//!
//! ```sh
//! cargo run -p keybus-nats --example mirror
//! ```
//!
//! or in two processes, the dashboard first or last (it starts from the
//! bucket's last value per key either way):
//!
//! ```sh
//! cargo run -p keybus-nats --example mirror -- --role producer
//! cargo run -p keybus-nats --example mirror -- --role dashboard
//! ```
//!
//! Flags: `--url URL` (default `$NATS_URL` or `nats://127.0.0.1:4222`),
//! `--updates N` (20000), `--keys N` (500), `--role both|producer|dashboard`.

use keybus::conflate::Hub;
use keybus_nats::codec::{DisplayValues, StrKeys};
use keybus_nats::{ensure_bucket, KvFeed, KvMirror, Remote};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use std::time::{Duration, Instant};

type Error = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (mut url, mut role, mut updates, mut keys) = (
        std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into()),
        "both".to_string(),
        20_000u64,
        500u64,
    );
    let mut args = lexopt::Parser::from_env();
    while let Some(arg) = args.next()? {
        use lexopt::prelude::*;
        match arg {
            Long("url") => url = args.value()?.string()?,
            Long("role") => role = args.value()?.string()?,
            Long("updates") => updates = args.value()?.parse()?,
            Long("keys") => keys = args.value()?.parse()?,
            _ => return Err(arg.unexpected().into()),
        }
    }
    let client = async_nats::connect(&url)
        .await
        .map_err(|e| format!("connecting to {url}: {e} (is nats-server -js running? see the top of examples/mirror.rs)"))?;
    let js = async_nats::jetstream::new(client);
    let bucket = ensure_bucket(&js, "telemetry").await?;

    // The producer's side: a hub keeping its state table, mirrored from it.
    let hub: Hub<String, f64> = Hub::builder().retain_latest().build();
    if role != "dashboard" {
        let mirror = KvMirror::new(&hub, bucket.clone(), StrKeys, DisplayValues)
            .from_table()
            .spawn();
        let tx = hub.sender();
        let zipf = Zipf::new(keys as f64, 1.1).map_err(|e| format!("--keys: {e:?}"))?;
        let mut rng = SmallRng::seed_from_u64(1);
        let start = Instant::now();
        for _ in 0..updates {
            let k = zipf.sample(&mut rng) as u64;
            let name = if k.is_multiple_of(2) {
                format!("disk.sd{k}")
            } else {
                format!("cpu.{k}")
            };
            tx.send(name, rng.random_range(0.0..100.0))?;
        }
        let sent = start.elapsed();
        let s = tokio::time::timeout(Duration::from_secs(60), mirror.settled()).await?;
        println!(
            "producer: {updates} sends over {} keys in {sent:.2?}, all acked after {:.2?}: \
             {} puts, {} retries, {} rejected",
            hub.snapshot().len(),
            start.elapsed(),
            s.puts,
            s.retries,
            s.rejected
        );
    }

    if role != "producer" {
        // The dashboard's side: a local hub fed from the bucket.
        let remote: Hub<String, Remote<f64>> = Hub::new();
        let mut table = std::collections::HashMap::new();
        let mut rx = remote.receiver();
        let feed = KvFeed::new(bucket.clone(), remote.sender(), StrKeys, DisplayValues).spawn();
        tokio::time::timeout(Duration::from_secs(30), feed.caught_up()).await?;
        let mut folded = 0;
        for e in rx.try_recv_all()? {
            folded += e.sends;
            table.insert(e.key, e.value);
        }
        let disks = table.keys().filter(|k| k.starts_with("disk.")).count();
        println!(
            "dashboard: {} keys from the bucket ({disks} disk.*), {folded} entries, \
             last revision {}",
            table.len(),
            feed.stats().last_revision
        );
        if role == "both" {
            let same = hub
                .snapshot()
                .iter()
                .all(|(k, v)| table.get(k).and_then(|r| r.value()) == Some(v));
            if !same || table.len() != hub.snapshot().len() {
                return Err("the dashboard's hub differs from the producer's table".into());
            }
            println!(
                "dashboard matches the producer's table: {} keys",
                table.len()
            );
        }
    }
    Ok(())
}
