//! The JSON endpoints: `/stats`, `/snapshot`, and `POST /workload/stop`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::app::App;
use crate::json::{ConnStats, Stats};

/// `GET /stats`: the hub's stats and every open connection's receiver stats.
pub async fn stats(State(app): State<Arc<App>>) -> Json<Stats> {
    // Connections first, the hub after: with no send in flight the hub's
    // `receivers` then counts at most the listed connections plus any that
    // opened since.
    let connections: Vec<ConnStats> = app
        .conns
        .all()
        .iter()
        .map(|c| ConnStats {
            id: c.id,
            pace_ms: c.options.pace.as_millis() as u64,
            prefix: c.options.prefix.clone(),
            age_ms: c.opened.elapsed().as_millis() as u64,
            messages: c.messages.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            stats: c.stats().into(),
        })
        .collect();
    Json(Stats {
        uptime_ms: app.started.elapsed().as_millis() as u64,
        keys: app.config.keys,
        producing: app.workload.producing(),
        send_rate: app.send_rate(),
        rss_bytes: rss_bytes(),
        hub: app.hub.stats().into(),
        connections_opened: app.conns.opened_total(),
        conserved: connections.iter().filter(|c| c.stats.conserved()).count(),
        connections,
    })
}

/// `GET /snapshot`: the hub's state table, by metric name.
pub async fn snapshot(State(app): State<Arc<App>>) -> Json<BTreeMap<String, f64>> {
    let table = app.hub.snapshot();
    Json(
        table
            .into_iter()
            .map(|(id, value)| (app.names[id as usize].clone(), value))
            .collect(),
    )
}

/// `POST /workload/stop`: stops the producers (with `--allow-stop` only).
pub async fn stop(State(app): State<Arc<App>>) -> (StatusCode, &'static str) {
    if !app.config.allow_stop {
        return (
            StatusCode::NOT_FOUND,
            "not found: /workload/stop needs the --allow-stop flag\n",
        );
    }
    app.workload.stop();
    (StatusCode::OK, "stopping\n")
}

/// Resident memory from `/proc/self/statm` (pages), `None` where it is absent.
fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // The page size is 4 KiB on every Linux target this runs on in practice;
    // reading it would need libc.
    Some(pages * 4096)
}
