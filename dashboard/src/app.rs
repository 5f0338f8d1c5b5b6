//! The server's shared state and its routes.

use axum::http::{StatusCode, Uri};
use axum::routing::{get, post};
use axum::Router;
use keybus::conflate::Hub;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cli::Config;
use crate::connections::Connections;
use crate::workload::{metric_name, MetricHub, Workload, WorkloadConfig};
use crate::{api, events, page};

/// How often the send rate is sampled.
const RATE_EVERY: Duration = Duration::from_millis(500);

/// Everything the handlers share.
pub struct App {
    /// The `retain_latest` hub the workload sends into.
    pub hub: MetricHub,
    /// Metric names by id.
    pub names: Arc<[String]>,
    /// The open connections.
    pub conns: Arc<Connections>,
    /// The producers.
    pub workload: Workload,
    /// The flags it runs with.
    pub config: Config,
    /// When it started.
    pub started: Instant,
    /// Sends per second over the last [`RATE_EVERY`], as `f64` bits.
    rate_bits: Arc<AtomicU64>,
}

impl App {
    /// Builds the hub and starts the workload; call within a tokio runtime
    /// (the send-rate sampler is a task).
    pub fn start(config: Config) -> Arc<App> {
        let hub: MetricHub = Hub::builder().retain_latest().build();
        let names: Arc<[String]> = (0..config.keys).map(metric_name).collect();
        let workload = Workload::start(
            &hub,
            &WorkloadConfig {
                keys: config.keys,
                producers: config.producers,
                zipf: config.zipf,
                rate: config.rate,
                duration: config.duration,
            },
        );
        let rate_bits = Arc::new(AtomicU64::new(0f64.to_bits()));
        tokio::spawn(sample_rate(hub.clone(), rate_bits.clone()));
        Arc::new(App {
            conns: Arc::new(Connections::new(config.max_connections)),
            hub,
            names,
            workload,
            config,
            started: Instant::now(),
            rate_bits,
        })
    }

    /// Sends per second over the last sampling interval.
    pub fn send_rate(&self) -> f64 {
        f64::from_bits(self.rate_bits.load(Ordering::Relaxed))
    }
}

/// Every [`RATE_EVERY`], the hub's `sent` delta over the time it took. Stops
/// when nothing but this task holds the hub.
async fn sample_rate(hub: MetricHub, rate_bits: Arc<AtomicU64>) {
    let mut ticker = tokio::time::interval(RATE_EVERY);
    let (mut last_at, mut last_sent) = (Instant::now(), hub.stats().sent);
    loop {
        ticker.tick().await;
        let (now, sent) = (Instant::now(), hub.stats().sent);
        let secs = now.duration_since(last_at).as_secs_f64();
        if secs > 0.0 {
            let rate = (sent - last_sent) as f64 / secs;
            rate_bits.store(rate.to_bits(), Ordering::Relaxed);
        }
        (last_at, last_sent) = (now, sent);
    }
}

/// The routes.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(page::index))
        .route("/app.js", get(page::script))
        .route("/events", get(events::events))
        .route("/stats", get(api::stats))
        .route("/snapshot", get(api::snapshot))
        .route("/workload/stop", post(api::stop))
        .fallback(not_found)
        .with_state(app)
}

async fn not_found(uri: Uri) -> (StatusCode, String) {
    (
        StatusCode::NOT_FOUND,
        format!("not found: {uri} (the routes: /, /events, /stats, /snapshot)\n"),
    )
}
