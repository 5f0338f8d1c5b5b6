//! The rounds: every implementation of a scenario once per round, the order
//! rotating, and the median round; the same for the publisher-latency
//! percentiles during a cut.

use crate::cf;
use crate::common::Role;
use crate::scenarios::{Plot, Scenario};
use std::time::{Duration, Instant};

/// The median result of one implementation in one scenario.
pub struct Row {
    pub scenario: String,
    pub name: &'static str,
    pub role: Role,
    pub plot: Plot,
    /// `None` when skipped.
    pub ns_per_op: Option<f64>,
    /// Left out of "best peer".
    pub not_comparable: bool,
    /// Rounds actually run.
    pub rounds: usize,
    pub note: String,
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Runs every implementation of `sc` once per round, rotating the order.
/// A scenario stops adding rounds once it has run this long and has at least
/// [`MIN_ROUNDS`] (keeps the quick report under a minute on a loaded machine).
pub const SCENARIO_BUDGET: Duration = Duration::from_millis(1_500);
pub const MIN_ROUNDS: usize = 3;

pub fn measure(sc: &Scenario, rounds: usize, budget: Option<Duration>, verbose: bool) -> Vec<Row> {
    let rounds = rounds.min(sc.max_rounds);
    let started = Instant::now();
    let mut ran = 0;
    let k = sc.entries.len();
    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); k];
    let mut extra: Vec<Vec<f64>> = vec![Vec::new(); k];
    for round in 0..rounds {
        for j in 0..k {
            let i = (round + j) % k;
            if let Ok(run) = &sc.entries[i].run {
                let (d, x) = run();
                if verbose {
                    eprintln!(
                        "    round {round} {:<16} {:>10.1} ns/op {}",
                        sc.entries[i].name,
                        d.as_nanos() as f64 / sc.ops as f64,
                        x.map_or(String::new(), |x| format!("({x:.1}%)"))
                    );
                }
                ns[i].push(d.as_nanos() as f64 / sc.ops as f64);
                extra[i].extend(x);
            }
        }
        ran = round + 1;
        if budget.is_some_and(|b| ran >= MIN_ROUNDS && started.elapsed() > b) {
            break;
        }
    }
    sc.entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let (ns_per_op, mut note) = match &e.run {
                Err(why) => (None, format!("skipped: {why}")),
                Ok(_) => {
                    let note = match sc.extra {
                        Some(what) if !extra[i].is_empty() => {
                            format!("{what} {:.1}%", median(extra[i].clone()))
                        }
                        _ => String::new(),
                    };
                    (Some(median(ns[i].clone())), note)
                }
            };
            if let Some(why) = e.not_comparable {
                note = if note.is_empty() {
                    why.to_string()
                } else {
                    format!("{note}; {why}")
                };
            }
            Row {
                scenario: sc.name.clone(),
                name: e.name,
                role: e.role,
                plot: sc.plot,
                ns_per_op,
                not_comparable: e.not_comparable.is_some(),
                rounds: ran,
                note,
            }
        })
        .collect()
}

/// Median percentiles of publisher latency during a cut, per implementation.
pub struct LatencyRow {
    pub name: &'static str,
    pub role: Role,
    /// p50, p90, p99, p99.9, max (ns); `None` when skipped.
    pub percentiles: Option<[f64; 5]>,
}

pub fn cut_latencies(rounds: usize, backlog: u64, refills: u64) -> Vec<LatencyRow> {
    let k = cf::CONFLATE_IMPLS.len();
    let mut got: Vec<Vec<[f64; 5]>> = vec![Vec::new(); k];
    for round in 0..rounds {
        for j in 0..k {
            let i = (round + j) % k;
            let imp = &cf::CONFLATE_IMPLS[i];
            if imp.caps.cut_latency {
                let l = (imp.cut_latency)(backlog, refills);
                got[i].push([l.p50, l.p90, l.p99, l.p999, l.max].map(|x| x as f64));
            }
        }
    }
    cf::CONFLATE_IMPLS
        .iter()
        .zip(got)
        .map(|(imp, g)| LatencyRow {
            name: imp.name,
            role: imp.role,
            percentiles: (!g.is_empty())
                .then(|| std::array::from_fn(|p| median(g.iter().map(|x| x[p]).collect()))),
        })
        .collect()
}
