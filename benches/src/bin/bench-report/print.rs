//! The printed tables: throughput per scenario and the cut latencies, in
//! markdown, with the ratios to the baseline and to the best peer.

use crate::common::Role;
use crate::rounds::{LatencyRow, Row};
use std::fmt::Write as _;

pub fn si(x: f64) -> String {
    if x >= 1e9 {
        format!("{:.2} G", x / 1e9)
    } else if x >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1} k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

pub fn ns(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// What a row is compared with: the baseline's number, and the lowest number of
/// a comparable peer with that peer's name, from `(role, name, number,
/// comparable)` per row (lower is better: ns per op, latency).
pub fn references(
    rows: impl Iterator<Item = (Role, &'static str, Option<f64>, bool)> + Clone,
) -> (Option<f64>, Option<(f64, &'static str)>) {
    let baseline = rows
        .clone()
        .find(|r| r.0 == Role::Baseline)
        .and_then(|r| r.2);
    let best_peer = rows
        .filter(|r| r.0 == Role::Peer && r.3)
        .filter_map(|r| r.2.map(|n| (n, r.1)))
        .min_by(|a, b| a.0.total_cmp(&b.0));
    (baseline, best_peer)
}

/// The markdown table of throughput results.
pub fn table(rows: &[Row]) -> String {
    let mut s = String::new();
    s.push_str("| scenario | impl | ops/s | ns/op | × baseline | × best peer | note |\n");
    s.push_str("|---|---|---:|---:|---:|---:|---|\n");
    let mut i = 0;
    while i < rows.len() {
        let sc = &rows[i].scenario;
        let group: Vec<&Row> = rows[i..].iter().take_while(|r| &r.scenario == sc).collect();
        i += group.len();
        let (baseline, best_peer) = references(
            group
                .iter()
                .map(|r| (r.role, r.name, r.ns_per_op, !r.not_comparable)),
        );
        for r in &group {
            let Some(n) = r.ns_per_op else {
                let _ = writeln!(s, "| {sc} | {} | – | – | – | – | {} |", r.name, r.note);
                continue;
            };
            let vs_base = baseline.map_or("–".into(), |b| format!("{:.2}", b / n));
            let vs_peer = best_peer.map_or("–".into(), |(b, name)| {
                if r.role == Role::Peer {
                    format!("{:.2}", b / n)
                } else {
                    format!("{:.2} ({name})", b / n)
                }
            });
            let _ = writeln!(
                s,
                "| {sc} | {} | {} | {} | {vs_base} | {vs_peer} | {} |",
                r.name,
                si(1e9 / n),
                ns(n),
                r.note
            );
        }
    }
    s
}

pub fn latency_table(rows: &[LatencyRow], backlog: u64) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Publisher send latency (ns) while one receiver cuts a {backlog}-key backlog \
         with `try_recv_all` (median of rounds):\n"
    );
    s.push_str("| impl | p50 | p90 | p99 | p99.9 | max | p99 × baseline | p99 × best peer |\n");
    s.push_str("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    // Compared at p99.
    let (baseline, best_peer) = references(
        rows.iter()
            .map(|r| (r.role, r.name, r.percentiles.map(|p| p[2]), true)),
    );
    for r in rows {
        match r.percentiles {
            None => {
                let _ = writeln!(
                    s,
                    "| {} | – | – | – | – | – | – | skipped: no cut (one channel per key) |",
                    r.name
                );
            }
            Some(p) => {
                let vs_base = baseline.map_or("–".into(), |b| format!("{:.2}", b / p[2]));
                let vs_peer = best_peer.map_or("–".into(), |(b, name)| {
                    format!("{:.2} ({name})", b / p[2])
                });
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} | {} | {vs_base} | {vs_peer} |",
                    r.name,
                    ns(p[0]),
                    ns(p[1]),
                    ns(p[2]),
                    ns(p[3]),
                    ns(p[4])
                );
            }
        }
    }
    s
}
