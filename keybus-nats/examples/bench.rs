//! The bridge's benchmark: what a send costs with a KV mirror attached
//! (connected, or with the server frozen) against none; keys per second
//! through the mirror on loopback; the lag from a send to a remote watcher.
//!
//! ```sh
//! cargo run --release -p keybus-nats --example bench   # about 20 s
//! ```
//!
//! It starts its own `nats-server` (from `$NATS_SERVER`, the directory
//! `bash .ci/provision-nats` fills, `$KEYBUS_NATS_HOME/bin`, or `PATH`) on
//! 127.0.0.1 with a temporary store, and stops it at the end. Flags:
//! `--sends N` (2,000,000 per run), `--keys N` (10,000), `--distinct N`
//! (100,000), `--lag-samples N` (2,000).

use keybus::conflate::Hub;
use keybus_nats::codec::{DisplayKeys, DisplayValues};
use keybus_nats::{ensure_bucket, KvFeed, KvMirror, Remote, Start};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Zipf};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

type Error = Box<dyn std::error::Error + Send + Sync>;

struct Server {
    child: Child,
    dir: PathBuf,
    url: String,
}

impl Server {
    fn start() -> Result<Server, Error> {
        let bin = std::env::var_os("NATS_SERVER")
            .map(PathBuf::from)
            .or_else(|| {
                // Where `.ci/provision-nats` puts it, as the tests look.
                let home = std::env::var_os("KEYBUS_NATS_HOME")
                    .map(PathBuf::from)
                    .or_else(|| {
                        let cache = std::env::var_os("XDG_CACHE_HOME")
                            .map(PathBuf::from)
                            .or_else(|| {
                                Some(PathBuf::from(std::env::var_os("HOME")?).join(".cache"))
                            })?;
                        Some(cache.join("keybus-nats"))
                    })?;
                let p = home.join("bin").join("nats-server");
                p.is_file().then_some(p)
            })
            .unwrap_or_else(|| "nats-server".into());
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let dir = std::env::temp_dir().join(format!("keybus-nats-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let child = Command::new(&bin)
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{}: {e}; run `bash .ci/provision-nats`", bin.display()))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err("nats-server did not start".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Server {
            child,
            dir,
            url: format!("nats://127.0.0.1:{port}"),
        })
    }

    fn signal(&self, sig: &str) {
        let _ = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.signal("-CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Nanoseconds per send over `keys`, on this thread.
fn send_cost(hub: &Hub<u64, u64>, keys: &[u64]) -> f64 {
    let tx = hub.sender();
    let start = Instant::now();
    for (i, k) in keys.iter().enumerate() {
        tx.send(*k, i as u64).unwrap();
    }
    start.elapsed().as_nanos() as f64 / keys.len() as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Error> {
    let (mut sends, mut keys, mut distinct, mut samples) =
        (2_000_000usize, 10_000u64, 100_000u64, 2_000usize);
    let mut args = lexopt::Parser::from_env();
    while let Some(arg) = args.next()? {
        use lexopt::prelude::*;
        match arg {
            Long("sends") => sends = args.value()?.parse()?,
            Long("keys") => keys = args.value()?.parse()?,
            Long("distinct") => distinct = args.value()?.parse()?,
            Long("lag-samples") => samples = args.value()?.parse()?,
            _ => return Err(arg.unexpected().into()),
        }
    }
    let server = Server::start()?;
    let client = async_nats::connect(&server.url).await?;
    let js = async_nats::jetstream::ContextBuilder::new()
        .timeout(Duration::from_secs(1))
        .build(client);
    let zipf = Zipf::new(keys as f64, 1.1).map_err(|e| format!("{e:?}"))?;
    let mut rng = SmallRng::seed_from_u64(1);
    let trace: Vec<u64> = (0..sends).map(|_| zipf.sample(&mut rng) as u64).collect();
    println!(
        "keybus-nats bench: {} cores, {sends} Zipf sends over {keys} keys per run, median of 3",
        std::thread::available_parallelism()?
    );

    // 1. The send path.
    let bare: Vec<f64> = (0..3).map(|_| send_cost(&Hub::new(), &trace)).collect();
    let plain: Vec<f64> = (0..3)
        .map(|_| {
            let hub = Hub::new();
            let _rx = hub.receiver(); // never drained: pure coalescing
            send_cost(&hub, &trace)
        })
        .collect();
    let mut connected = Vec::new();
    let mut frozen = Vec::new();
    let mut batched = Vec::new();
    for run in 0..3 {
        // With a flush interval the mirror drains every 5 ms, so more sends
        // find their key pending and coalesce (the cheaper send).
        let store = ensure_bucket(&js, &format!("flush{run}")).await?;
        let hub = Hub::new();
        let m = KvMirror::new(&hub, store, DisplayKeys, DisplayValues)
            .flush_interval(Duration::from_millis(5))
            .spawn();
        let (h, t) = (hub.clone(), trace.clone());
        batched.push(tokio::task::spawn_blocking(move || send_cost(&h, &t)).await?);
        tokio::time::timeout(Duration::from_secs(60), m.settled()).await?;

        let store = ensure_bucket(&js, &format!("send{run}")).await?;
        let hub = Hub::new();
        let m = KvMirror::new(&hub, store.clone(), DisplayKeys, DisplayValues).spawn();
        let h = hub.clone();
        let t = trace.clone();
        connected.push(tokio::task::spawn_blocking(move || send_cost(&h, &t)).await?);
        tokio::time::timeout(Duration::from_secs(60), m.settled()).await?;
        server.signal("-STOP"); // the mirror cannot write: its receiver saturates
        let h = hub.clone();
        let t = trace.clone();
        frozen.push(tokio::task::spawn_blocking(move || send_cost(&h, &t)).await?);
        server.signal("-CONT");
        tokio::time::timeout(Duration::from_secs(60), m.settled()).await?;
    }
    println!("\n| send path | ns/send |\n|---|---:|");
    println!("| hub, no receiver | {:.1} |", median(bare));
    println!(
        "| hub + one undrained receiver (reference) | {:.1} |",
        median(plain)
    );
    println!(
        "| hub + KV mirror, server connected | {:.1} |",
        median(connected)
    );
    println!(
        "| hub + KV mirror, server frozen (SIGSTOP) | {:.1} |",
        median(frozen)
    );
    println!(
        "| hub + KV mirror, flush_interval 5 ms, connected | {:.1} |",
        median(batched)
    );

    // 2. Keys per second through the mirror: `distinct` keys, each sent once.
    println!("\n| mirror throughput, {distinct} distinct keys | keys/s |\n|---|---:|");
    for in_flight in [64usize, 256, 1024] {
        let store = ensure_bucket(&js, &format!("thru{in_flight}")).await?;
        let hub: Hub<u64, u64> = Hub::new();
        let m = KvMirror::new(&hub, store, DisplayKeys, DisplayValues)
            .max_in_flight(in_flight)
            .spawn();
        let tx = hub.sender();
        let start = Instant::now();
        for k in 0..distinct {
            tx.send(k, k).unwrap();
        }
        let s = tokio::time::timeout(Duration::from_secs(120), m.settled()).await?;
        let secs = start.elapsed().as_secs_f64();
        println!(
            "| max_in_flight {in_flight} | {:.0} ({} puts, {} retries) |",
            distinct as f64 / secs,
            s.puts,
            s.retries
        );
    }

    // 3. Lag: send → mirror → server → feed → remote hub → receiver.
    let store = ensure_bucket(&js, "lag").await?;
    let hub: Hub<u64, u64> = Hub::new();
    let _m = KvMirror::new(&hub, store.clone(), DisplayKeys, DisplayValues).spawn();
    let remote: Hub<u64, Remote<u64>> = Hub::new();
    let mut rx = remote.receiver();
    let feed = KvFeed::new(store, remote.sender(), DisplayKeys, DisplayValues)
        .start(Start::New)
        .spawn();
    feed.caught_up().await;
    let t0 = Instant::now();
    let watcher = tokio::spawn(async move {
        let mut lags = Vec::with_capacity(samples);
        while lags.len() < samples {
            let Ok(e) = rx.recv_async().await else { break };
            if let Some(sent) = e.value.value() {
                lags.push((t0.elapsed().as_nanos() as u64).saturating_sub(*sent));
            }
        }
        lags
    });
    let tx = hub.sender();
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    for i in 0..samples as u64 {
        tick.tick().await;
        tx.send(i % 100, t0.elapsed().as_nanos() as u64).unwrap();
    }
    let mut lags = tokio::time::timeout(Duration::from_secs(30), watcher).await??;
    lags.sort_unstable();
    let pct = |p: f64| lags[((lags.len() - 1) as f64 * p) as usize] as f64 / 1e3;
    println!(
        "\n| lag, send → remote watcher, 1 send/ms, {} samples | µs |\n|---|---:|\n| p50 | {:.0} |\n| p99 | {:.0} |\n| max | {:.0} |",
        lags.len(),
        pct(0.5),
        pct(0.99),
        pct(1.0)
    );
    Ok(())
}
