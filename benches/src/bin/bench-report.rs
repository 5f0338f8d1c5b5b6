//! A quick, self-contained performance report: keybus against the mutex baseline
//! and the peers a user would pick instead, measured interleaved in one run.
//!
//! ```text
//! cargo run --release -p keybus-benches --bin bench-report              # quick: under a minute
//! cargo run --release -p keybus-benches --bin bench-report -- --full    # more rounds, longer runs
//! cargo run --release -p keybus-benches --bin bench-report -- --only broadcast --rounds 5
//! cargo run --release -p keybus-benches --bin bench-report -- --targets  # see `../targets/mod.rs`
//! ```
//!
//! It runs the same scenarios as `cargo bench` (`benches/support/*_scenarios.rs`,
//! included below by `#[path]`), with fewer and shorter measurements and no
//! statistics beyond a median: every scenario runs every implementation once per
//! round, the order rotating from round to round, and reports the median round.
//! Quick mode (the default): 5 rounds, but a scenario stops after 3 once it has
//! taken 1.5 s, so the whole report stays under a minute on a loaded 2-core
//! machine. `--full`: 9 rounds, 5× longer runs, no time budget. A progress line
//! per scenario goes to stderr (`--verbose`: one per measurement).
//! On a shared or small machine read the **ratios**, not the absolute numbers.
//!
//! Prints one markdown table (scenario, implementation, ops/s, ns/op, ratio to
//! the baseline, ratio to the best peer, notes) plus the publisher-latency
//! percentiles, and writes the same as `report.md` together with SVG plots into
//! `target/keybus-report/` (or `--out DIR`):
//!
//! - `conflate_receivers.svg`: conflate throughput against the receiver count;
//! - `conflate_threads.svg`: conflate throughput against the thread count;
//! - `broadcast_readers.svg`: broadcast throughput against the reader count;
//! - `broadcast_writer_cost.svg`: ns per append against attached readers;
//! - `cut_latency.svg`: publisher latency percentiles during a backlog cut.
//!
//! Ratios: "× baseline" is this implementation's ops/s over the baseline's (above 1
//! is faster); "× best peer" is its ops/s over the fastest peer's in that
//! scenario. For latency, the ratios are the baseline's (best peer's) latency over
//! this one's, so above 1 is again better.

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[macro_use]
#[path = "../../support/common.rs"]
mod common;

#[macro_use]
#[path = "../../support/conflate_scenarios.rs"]
mod conflate_support;

#[macro_use]
#[path = "../../support/broadcast_scenarios.rs"]
mod broadcast_support;

mod cf {
    pub use super::conflate_support::*;
    conflate_suite!();
}

mod bc {
    pub use super::broadcast_support::*;
    broadcast_suite!();
}

/// `keybus::metrics` scenarios; only with `--features metrics`.
#[cfg(feature = "metrics")]
#[path = "../../support/metrics_scenarios.rs"]
mod metrics_support;

/// More conflate scenarios (the send paths of the redesign's targets).
#[path = "../report_conflate.rs"]
mod report_conflate;

/// `--targets`: the redesign issue's target table, keybus against the baseline.
#[path = "../targets/mod.rs"]
mod targets;

use common::Role;

/// Where a scenario's result goes in the plots.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Plot {
    None,
    /// Conflate, one sender, this many receivers (hot keys).
    ConflateReceivers(u64),
    /// Conflate, this many threads in all (hot keys).
    ConflateThreads(u64),
    /// Broadcast, this many reading threads.
    BroadcastReaders(u64),
    /// Broadcast, writer cost with this many attached idle readers.
    WriterCost(u64),
}

/// One measurement: the timed duration and an optional extra number (the share
/// delivered, for broadcast readers).
type Measure = Box<dyn Fn() -> (Duration, Option<f64>)>;

struct Entry {
    name: &'static str,
    role: Role,
    /// Set where the peer does not do the same work (then it is left out of "best
    /// peer" and the note says why).
    not_comparable: Option<&'static str>,
    /// `Err(reason)` when the implementation cannot express the scenario.
    run: Result<Measure, &'static str>,
}

struct Scenario {
    name: String,
    /// Operations per measurement (ns/op = duration / ops).
    ops: u64,
    /// What the extra number means, e.g. "delivered".
    extra: Option<&'static str>,
    plot: Plot,
    /// Caps the rounds of a long scenario (the million-key one).
    max_rounds: usize,
    entries: Vec<Entry>,
}

impl Entry {
    /// `run` measured as `name`, on `role`'s side of the comparison.
    fn new(name: &'static str, role: Role, run: Result<Measure, &'static str>) -> Entry {
        Entry {
            name,
            role,
            not_comparable: None,
            run,
        }
    }

    /// Left out of "best peer" where `why` says so.
    fn not_comparable(self, why: Option<&'static str>) -> Entry {
        Entry {
            not_comparable: why,
            ..self
        }
    }
}

/// A measurement that only times `f` (no extra number).
fn timed(f: impl Fn() -> Duration + 'static) -> Result<Measure, &'static str> {
    Ok(Box::new(move || (f(), None)))
}

impl Scenario {
    /// `ops` operations per measurement of each entry; no extra number, no plot,
    /// no cap on the rounds.
    fn new(name: impl Into<String>, ops: u64, entries: Vec<Entry>) -> Scenario {
        Scenario {
            name: name.into(),
            ops,
            extra: None,
            plot: Plot::None,
            max_rounds: usize::MAX,
            entries,
        }
    }

    /// The entries' extra number is `what` (a percentage).
    fn extra(self, what: &'static str) -> Scenario {
        Scenario {
            extra: Some(what),
            ..self
        }
    }

    fn plot(self, plot: Plot) -> Scenario {
        Scenario { plot, ..self }
    }
}

/// The median result of one implementation in one scenario.
struct Row {
    scenario: String,
    name: &'static str,
    role: Role,
    plot: Plot,
    /// `None` when skipped.
    ns_per_op: Option<f64>,
    /// Left out of "best peer".
    not_comparable: bool,
    /// Rounds actually run.
    rounds: usize,
    note: String,
}

struct Options {
    full: bool,
    /// `--targets`: run the target table instead of the report.
    targets: bool,
    verbose: bool,
    rounds: usize,
    only: Option<String>,
    /// `--targets --profile SIDE`: run each selected target once, one side
    /// only, no warm-up and no table (for `valgrind --tool=callgrind`).
    profile: Option<String>,
    out: PathBuf,
}

fn options() -> Options {
    let mut o = Options {
        full: false,
        targets: false,
        verbose: false,
        rounds: 0,
        only: None,
        profile: None,
        out: PathBuf::from("target/keybus-report"),
    };
    // Flags via `lexopt` (`--flag value` or `--flag=value`).
    use lexopt::prelude::*;
    let usage = "bench-report [--quick | --full] [--targets] [--rounds N] [--only SUBSTRING] \
                 [--profile keybus|baseline] [--out DIR] [--verbose]";
    let fail = |message: String| -> ! {
        eprintln!("{message} (try --help)");
        std::process::exit(2);
    };
    let mut parser = lexopt::Parser::from_env();
    let value = |parser: &mut lexopt::Parser| -> String {
        let raw = parser.value().unwrap_or_else(|e| fail(e.to_string()));
        raw.string().unwrap_or_else(|e| fail(e.to_string()))
    };
    while let Some(arg) = parser.next().unwrap_or_else(|e| fail(e.to_string())) {
        match arg {
            Long("quick") => o.full = false,
            Long("full") => o.full = true,
            Long("targets") => o.targets = true,
            Long("verbose") => o.verbose = true,
            Long("rounds") => {
                let v = value(&mut parser);
                o.rounds = v
                    .parse()
                    .unwrap_or_else(|_| fail(format!("--rounds: not a number: {v}")));
            }
            Long("only") => o.only = Some(value(&mut parser)),
            Long("profile") => {
                let side = value(&mut parser);
                if side != "keybus" && side != "baseline" {
                    fail(format!("--profile: keybus or baseline, not {side}"));
                }
                o.profile = Some(side);
            }
            Long("out") => o.out = PathBuf::from(value(&mut parser)),
            Short('h') | Long("help") => {
                println!("{usage}");
                std::process::exit(0);
            }
            other => fail(other.unexpected().to_string()),
        }
    }
    if o.rounds == 0 {
        o.rounds = if o.targets {
            targets::DEFAULT_ROUNDS
        } else if o.full {
            9
        } else {
            5
        };
    }
    o
}

/// Peers that, with no reader attached, store nothing (tokio and async-broadcast
/// answer "no receiver"; one channel per reader means no channel at all): their
/// "append" then does different work from a ring that retains history.
fn stores_nothing_alone(name: &str, readers: usize) -> Option<&'static str> {
    (readers == 0 && matches!(name, "tokio" | "async-broadcast" | "crossbeam"))
        .then_some("stores nothing without a reader: not comparable")
}

/// A broadcast scenario that times appends: `(threads or readers, appends)`.
type AppendFn = fn(usize, u64) -> Duration;

/// Every ring's entry timing `scenario(imp)(arg, n)`, appends that run with
/// `readers` attached readers that do not read (not run where such a reader
/// would block the writer).
fn append_entries(
    scenario: fn(&bc::BroadcastImpl) -> AppendFn,
    arg: usize,
    readers: usize,
    n: u64,
) -> Vec<Entry> {
    bc::BROADCAST_IMPLS
        .iter()
        .map(|imp| {
            let f = scenario(imp);
            let run = if imp.runs_append(readers) {
                timed(move || f(arg, n))
            } else {
                Err("a reader that does not read blocks the writer (no drop-oldest)")
            };
            Entry::new(imp.name, imp.role, run)
                .not_comparable(stores_nothing_alone(imp.name, readers))
        })
        .collect()
}

/// One entry per conflate implementation (the peers too, with `peers`): `run(imp)`.
fn conflate_entries(
    peers: bool,
    run: impl Fn(&cf::ConflateImpl) -> Result<Measure, &'static str>,
) -> Vec<Entry> {
    cf::CONFLATE_IMPLS
        .iter()
        .filter(|imp| peers || imp.role != Role::Peer)
        .map(|imp| Entry::new(imp.name, imp.role, run(imp)))
        .collect()
}

/// Every broadcast and conflate scenario, sized by `scale` (1 = quick). Broadcast
/// first; the last scenario checks that no implementation's append slows down
/// after many threads read through it (keybus's did while its slots used
/// arc-swap, whose global debt list grows with the peak thread count).
fn scenarios(scale: u64) -> Vec<Scenario> {
    let mut out = Vec::new();

    // --- broadcast ------------------------------------------------------------
    let n = 500_000 * scale;
    for readers in [0usize, 1, 2, 4, 8, 16] {
        let entries = append_entries(|imp| imp.append, readers, readers, n);
        out.push(
            Scenario::new(format!("broadcast/append/{readers}_readers"), n, entries)
                .plot(Plot::WriterCost(readers as u64)),
        );
    }
    let n = 200_000 * scale;
    let entries = append_entries(|imp| imp.append_live_reader_threads, 64, 64, n);
    out.push(Scenario::new(
        "broadcast/append/64_live_reader_threads",
        n,
        entries,
    ));
    let n = 500_000 * scale;
    let entries = bc::BROADCAST_IMPLS
        .iter()
        .map(|imp| {
            let f = imp.slow_reader;
            let run: Result<Measure, _> = if imp.runs_slow_reader() {
                Ok(Box::new(move || {
                    let o = f(n, 2_000);
                    (o.elapsed, Some(o.delivered_pct(n)))
                }))
            } else {
                Err("the writer would wait for the slow reader (no drop-oldest)")
            };
            Entry::new(imp.name, imp.role, run)
        })
        .collect();
    out.push(Scenario::new("broadcast/slow_reader", n, entries).extra("delivered"));
    for readers in [1usize, 4, 16] {
        // Fewer appends with more readers: every reader gets every value.
        let n = 100_000 * scale / (1 + readers as u64 / 4);
        let entries = bc::BROADCAST_IMPLS
            .iter()
            .map(|imp| {
                let f = imp.readers;
                let run: Measure = Box::new(move || {
                    let o = f(readers, n);
                    (o.elapsed, Some(o.delivered_pct(n * readers as u64)))
                });
                Entry::new(imp.name, imp.role, Ok(run))
            })
            .collect();
        out.push(
            Scenario::new(
                format!("broadcast/readers/{readers}"),
                n * readers as u64,
                entries,
            )
            .extra("delivered")
            .plot(Plot::BroadcastReaders(readers as u64)),
        );
    }

    // --- conflate -------------------------------------------------------------
    let n = 2_000_000 * scale;
    let entries = conflate_entries(true, |imp| {
        let f = imp.no_receiver;
        timed(move || f(n))
    });
    out.push(Scenario::new("conflate/no_receiver_send", n, entries));
    let fan_outs: [(&str, u64, u64, u64, u64, Plot); 10] = [
        ("1x1_hot64", 1, 1, 64, 2_000_000, Plot::ConflateReceivers(1)),
        ("1x1_cold10k", 1, 1, 10_000, 500_000, Plot::None),
        ("1x1_cold1M", 1, 1, 1_000_000, 1_000_000, Plot::None),
        ("1x4_hot64", 1, 4, 64, 100_000, Plot::ConflateReceivers(4)),
        ("1x4_cold10k", 1, 4, 10_000, 50_000, Plot::None),
        ("1x16_hot64", 1, 16, 64, 20_000, Plot::ConflateReceivers(16)),
        ("2x2_hot64", 2, 2, 64, 500_000, Plot::ConflateThreads(4)),
        ("2x4_hot64", 2, 4, 64, 500_000, Plot::ConflateThreads(6)),
        ("4x4_hot64", 4, 4, 64, 500_000, Plot::ConflateThreads(8)),
        (
            "4x4_oversubscribed_1k_keys",
            4,
            4,
            1_000,
            200_000,
            Plot::None,
        ),
    ];
    for (name, s, r, keys, sends, plot) in fan_outs {
        // The million-key run is one pass over the keys whatever the scale.
        let sends = if keys >= 1_000_000 {
            sends
        } else {
            sends * scale
        };
        let entries = conflate_entries(true, |imp| {
            let f = imp.fan_out_counted;
            if imp.runs_keys(keys) {
                Ok(Box::new(move || {
                    let (d, accounted) = f(s, r, keys, sends);
                    (d, Some(100.0 * accounted as f64 / (sends * r) as f64))
                }))
            } else {
                Err("more keys than it can hold sensibly (one channel per key)")
            }
        });
        out.push(Scenario {
            max_rounds: if keys >= 1_000_000 { 3 } else { usize::MAX },
            ..Scenario::new(format!("conflate/{name}"), sends, entries)
                .extra("sends accounted")
                .plot(plot)
        });
    }
    // A hub with `retain_latest`, keybus and the baseline (the peers have no
    // table): the ratio is keybus+retain_latest over baseline+retain_latest (the baseline
    // role), and the rows without a table show the table's cost on the send path.
    type RetainFn = fn(bool, u64) -> Duration;
    let retain_runs: [(&str, u64, RetainFn, RetainFn); 3] = [
        (
            "no_receiver",
            2_000_000,
            cf::keybus_retain::no_receiver,
            cf::baseline_retain::no_receiver,
        ),
        (
            "1thread_hot64",
            1_000_000,
            cf::keybus_retain::hot_1thread,
            cf::baseline_retain::hot_1thread,
        ),
        (
            "1x1_hot64",
            1_000_000,
            cf::keybus_retain::hot_1x1,
            cf::baseline_retain::hot_1x1,
        ),
    ];
    for (name, sends, keybus_fn, baseline_fn) in retain_runs {
        let n = sends * scale;
        let entry = |label: &'static str, role: Role, f: RetainFn, retain: bool| {
            Entry::new(label, role, timed(move || f(retain, n))).not_comparable(
                (!retain)
                    .then_some("without a table: × baseline is against baseline+retain_latest"),
            )
        };
        let entries = vec![
            entry("keybus+retain_latest", Role::Keybus, keybus_fn, true),
            entry("baseline+retain_latest", Role::Baseline, baseline_fn, true),
            entry("keybus", Role::Peer, keybus_fn, false),
            entry("baseline", Role::Peer, baseline_fn, false),
        ];
        out.push(Scenario::new(
            format!("conflate/retain_latest/{name}"),
            n,
            entries,
        ));
    }
    // 1x1_hot64 is also the 2-thread point of the thread plot.
    for backlog in [100u64, 1_000, 10_000, 100_000] {
        let iters = (300_000 * scale / backlog).max(3);
        let entries = conflate_entries(true, |imp| {
            let f = imp.drain_cost;
            if imp.runs_backlog(backlog) {
                timed(move || f(backlog, iters))
            } else {
                Err("cannot hold a backlog this large (capacity 1,024, drop-oldest)")
            }
        });
        out.push(Scenario::new(
            format!("conflate/try_recv_all/{backlog}"),
            backlog * iters,
            entries,
        ));
    }

    // Registration churn against the number of receivers already registered
    // (keybus and the baseline; the peers register per key or not at all).
    for standing in [10u64, 1_000, 10_000] {
        // Fewer rounds where a registration may cost O(receivers).
        let iters = (20_000 * scale / (1 + standing / 100)).max(20);
        let entries = conflate_entries(false, |imp| {
            let f = imp.register_drop;
            timed(move || f(standing, iters))
        });
        out.push(Scenario::new(
            format!("conflate/register_drop/{standing}_registered"),
            iters,
            entries,
        ));
    }
    // The coalescing send (1 to 1,000 receivers, four kinds), the new-key
    // cycle, the counted no-receiver send, `try_recv_all` fan-outs.
    out.extend(report_conflate::scenarios(scale));

    // Last, as it was while keybus kept process-wide state (see the scenario).
    let n = 100_000 * scale;
    // 64 threads have read another ring; this one has no reader.
    let entries = append_entries(|imp| imp.append_after_threads, 64, 0, n);
    out.push(Scenario::new(
        "broadcast/append/0_readers_after_64_threads",
        n,
        entries,
    ));
    out
}

fn median(mut v: Vec<f64>) -> f64 {
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
const SCENARIO_BUDGET: Duration = Duration::from_millis(1_500);
const MIN_ROUNDS: usize = 3;

fn measure(sc: &Scenario, rounds: usize, budget: Option<Duration>, verbose: bool) -> Vec<Row> {
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
struct LatencyRow {
    name: &'static str,
    role: Role,
    /// p50, p90, p99, p99.9, max (ns); `None` when skipped.
    percentiles: Option<[f64; 5]>,
}

fn cut_latencies(rounds: usize, backlog: u64, refills: u64) -> Vec<LatencyRow> {
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

fn si(x: f64) -> String {
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

fn ns(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// What a row is compared with: the baseline's number, and the lowest number of
/// a comparable peer with that peer's name, from `(role, name, number,
/// comparable)` per row (lower is better: ns per op, latency).
fn references(
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
fn table(rows: &[Row]) -> String {
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

fn latency_table(rows: &[LatencyRow], backlog: u64) -> String {
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

// --- plots --------------------------------------------------------------------

/// A fixed colour per implementation, the same in every plot.
fn colour(name: &str) -> RGBColor {
    match name {
        "keybus" => RGBColor(0, 90, 200),
        "baseline" => RGBColor(90, 90, 90),
        "mutex-map" => RGBColor(220, 120, 0),
        "tokio-watch" => RGBColor(150, 60, 170),
        "tokio-broadcast" | "tokio" => RGBColor(200, 30, 40),
        "async-broadcast" => RGBColor(20, 150, 120),
        "bus" => RGBColor(170, 140, 0),
        "crossbeam" => RGBColor(230, 90, 160),
        _ => RGBColor(0, 0, 0),
    }
}

type Series = Vec<(&'static str, Vec<(f64, f64)>)>;

/// Series of (x, y) per implementation from the rows whose plot key `pick`
/// maps to an x; `y` is ops/s in millions (or ns/op with `ns_per_op`).
fn series(rows: &[Row], pick: impl Fn(Plot) -> Option<u64>, ns_per_op: bool) -> Series {
    let mut out: Series = Vec::new();
    for r in rows {
        let (Some(x), Some(n)) = (pick(r.plot), r.ns_per_op) else {
            continue;
        };
        let y = if ns_per_op { n } else { 1e3 / n };
        match out.iter_mut().find(|(name, _)| *name == r.name) {
            Some((_, pts)) => pts.push((x as f64, y)),
            None => out.push((r.name, vec![(x as f64, y)])),
        }
    }
    for (_, pts) in &mut out {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

type LogChart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, LogCoord<f64>>>;
type Drawn = Result<(), Box<dyn std::error::Error>>;

/// What every plot shares: a 900×540 SVG at `path` with `caption` (text, font
/// size), `x` by a log `y` axis (both drawn by `mesh`), a line with dots per
/// series of `data` (keybus's thicker), and the legend at `legend`.
fn log_chart(
    path: &Path,
    caption: (&str, u32),
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
    data: &Series,
    legend: SeriesLabelPosition,
    mesh: impl FnOnce(&mut LogChart<'_, '_>) -> Drawn,
) -> Drawn {
    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(caption.0, ("sans-serif", caption.1))
        .margin(16)
        .x_label_area_size(46)
        .y_label_area_size(80)
        .build_cartesian_2d(x, y.log_scale())?;
    mesh(&mut chart)?;
    for (name, pts) in data {
        let c = colour(name);
        let width = if *name == "keybus" { 3 } else { 2 };
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(width)))?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3)));
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(legend)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// The lowest and the highest y of `data`.
fn y_range(data: &Series) -> (f64, f64) {
    let ys = data.iter().flat_map(|(_, p)| p.iter().map(|&(_, y)| y));
    ys.fold((f64::MAX, f64::MIN), |(lo, hi), y| (lo.min(y), hi.max(y)))
}

/// A line chart with a log y axis; `x_ticks` are the x values to label.
fn line_chart(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    x_ticks: &[f64],
    data: &Series,
) -> Drawn {
    if data.is_empty() {
        return Ok(());
    }
    let (lo, hi) = y_range(data);
    let x_max = x_ticks.iter().copied().fold(0.0, f64::max);
    let x_min = x_ticks.iter().copied().fold(f64::MAX, f64::min);
    let pad = (x_max - x_min).max(1.0) * 0.05;
    // Headroom at the top (log scale) keeps the legend off the data.
    let y = lo / 1.6..hi * 12.0;
    let x = (x_min - pad)..(x_max + pad);
    log_chart(
        path,
        (title, 22),
        x,
        y,
        data,
        SeriesLabelPosition::UpperRight,
        |chart| {
            chart
                .configure_mesh()
                .x_desc(x_desc)
                .y_desc(y_desc)
                .x_labels(40)
                .x_label_formatter(&|x| {
                    x_ticks
                        .iter()
                        .find(|t| (*t - x).abs() < 1e-9)
                        .map_or(String::new(), |t| format!("{t}"))
                })
                .y_label_formatter(&|y| {
                    if *y >= 10.0 {
                        format!("{y:.0}")
                    } else if *y >= 0.1 {
                        format!("{y:.2}")
                    } else {
                        format!("{y:.3}")
                    }
                })
                .draw()?;
            Ok(())
        },
    )
}

fn plots(
    out: &Path,
    rows: &[Row],
    lat: &[LatencyRow],
    backlog: u64,
) -> Result<Vec<PathBuf>, Box<dyn std::error::Error>> {
    std::fs::create_dir_all(out)?;
    let mut written = Vec::new();
    let mut chart = |file: &str, title: &str, x: &str, y: &str, ticks: &[f64], data: Series| {
        let p = out.join(file);
        line_chart(&p, title, x, y, ticks, &data).map(|()| written.push(p))
    };
    chart(
        "conflate_receivers.svg",
        "conflate: 1 sender, 64 hot keys (sends/s incl. drain, log scale)",
        "receivers",
        "million sends/s",
        &[1.0, 4.0, 16.0],
        series(
            rows,
            |p| match p {
                Plot::ConflateReceivers(r) => Some(r),
                _ => None,
            },
            false,
        ),
    )?;
    chart(
        "conflate_threads.svg",
        "conflate: senders x receivers, 64 hot keys, 2 cores (log scale)",
        "threads (1x1, 2x2, 2x4, 4x4)",
        "million sends/s",
        &[2.0, 4.0, 6.0, 8.0],
        series(
            rows,
            |p| match p {
                Plot::ConflateThreads(t) => Some(t),
                Plot::ConflateReceivers(1) => Some(2),
                _ => None,
            },
            false,
        ),
    )?;
    chart(
        "broadcast_readers.svg",
        "broadcast: 1 paced writer, N readers reading everything (log scale)",
        "readers",
        "million deliveries/s (appends x readers)",
        &[1.0, 4.0, 16.0],
        series(
            rows,
            |p| match p {
                Plot::BroadcastReaders(n) => Some(n),
                _ => None,
            },
            false,
        ),
    )?;
    chart(
        "broadcast_writer_cost.svg",
        "broadcast: writer cost per append on a full ring, idle readers attached (log scale)",
        "attached readers (not reading)",
        "ns per append",
        &[0.0, 1.0, 2.0, 4.0, 8.0, 16.0],
        series(
            rows,
            |p| match p {
                Plot::WriterCost(n) => Some(n),
                _ => None,
            },
            true,
        ),
    )?;
    // Latency: x = percentile.
    let data: Series = lat
        .iter()
        .filter_map(|r| {
            r.percentiles.map(|p| {
                (
                    r.name,
                    p.iter().enumerate().map(|(i, &v)| (i as f64, v)).collect(),
                )
            })
        })
        .collect();
    let labels = ["p50", "p90", "p99", "p99.9", "max"];
    let p = out.join("cut_latency.svg");
    latency_chart(&p, backlog, &data, &labels)?;
    written.push(p);
    Ok(written)
}

fn latency_chart(path: &Path, backlog: u64, data: &Series, labels: &[&str]) -> Drawn {
    let (lo, hi) = y_range(data);
    let title =
        format!("conflate: publisher send latency while a receiver cuts a {backlog}-key backlog");
    let y = (lo / 2.0).max(1.0)..hi * 2.0;
    let legend = SeriesLabelPosition::UpperLeft;
    log_chart(path, (&title, 20), -0.3..4.3, y, data, legend, |chart| {
        chart
            .configure_mesh()
            .x_desc("percentile")
            .y_desc("ns per send (log scale)")
            .x_labels(labels.len() * 4)
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && (0.0..labels.len() as f64).contains(&i) {
                    labels[i as usize].to_string()
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()?;
        Ok(())
    })
}

fn main() {
    let opts = options();
    if opts.targets {
        targets::main(&opts);
        return;
    }
    let started = Instant::now();
    let scale = if opts.full { 5 } else { 1 };
    #[allow(unused_mut)]
    let mut all = scenarios(scale);
    #[cfg(feature = "metrics")]
    all.extend(metrics_scenarios(scale));
    let wanted = |name: &str| opts.only.as_deref().map_or(true, |o| name.contains(o));
    let chosen: Vec<&Scenario> = all.iter().filter(|s| wanted(&s.name)).collect();
    let (backlog, refills) = (100_000u64, if opts.full { 5 } else { 2 });
    let with_latency = wanted("conflate/cut_latency");
    let total = chosen.len() + usize::from(with_latency);
    eprintln!(
        "keybus bench-report ({}; {} rounds per scenario, order rotating; {total} scenarios)",
        if opts.full { "full" } else { "quick" },
        opts.rounds
    );
    let mut rows = Vec::new();
    for (i, sc) in chosen.iter().enumerate() {
        let t = Instant::now();
        eprint!("[{:>2}/{total}] {:<42}", i + 1, sc.name);
        if opts.verbose {
            eprintln!();
        }
        let got = measure(
            sc,
            opts.rounds,
            (!opts.full).then_some(SCENARIO_BUDGET),
            opts.verbose,
        );
        let summary: Vec<String> = got
            .iter()
            .filter_map(|r| r.ns_per_op.map(|n| format!("{} {}", r.name, ns(n))))
            .collect();
        eprintln!(
            " {:>5.1}s  ns/op: {}",
            t.elapsed().as_secs_f64(),
            summary.join(", ")
        );
        rows.extend(got);
    }
    let mut lat = Vec::new();
    if with_latency {
        let t = Instant::now();
        eprint!("[{total:>2}/{total}] {:<42}", "conflate/cut_latency");
        lat = cut_latencies(opts.rounds.min(3), backlog, refills);
        eprintln!(" {:>5.1}s", t.elapsed().as_secs_f64());
    }

    let mut report = String::new();
    let ran = rows.iter().map(|r| r.rounds);
    let (fewest, most) = (ran.clone().min().unwrap_or(0), ran.max().unwrap_or(0));
    let _ = writeln!(
        report,
        "Throughput ({} mode; each number is the median of {} interleaved rounds, \
         the order rotating per round):\n",
        if opts.full { "full" } else { "quick" },
        if fewest == most {
            format!("{most}")
        } else {
            format!("{fewest} to {most}")
        }
    );
    report.push_str(&table(&rows));
    if with_latency {
        report.push('\n');
        report.push_str(&latency_table(&lat, backlog));
    }
    println!("\n{report}");
    match plots(&opts.out, &rows, &lat, backlog) {
        Ok(files) => {
            let md = opts.out.join("report.md");
            if let Err(e) = std::fs::write(&md, &report) {
                eprintln!("could not write {}: {e}", md.display());
            }
            eprintln!("wrote {} and {} plot(s):", md.display(), files.len());
            for f in files {
                eprintln!("  {}", f.display());
            }
        }
        Err(e) => eprintln!("plots failed: {e}"),
    }
    eprintln!(
        "bench-report wall time: {:.1}s",
        started.elapsed().as_secs_f64()
    );
}

/// One counter update through `keybus::metrics` against the floor (`metrics-util`'s
/// atomic registry, reported as the baseline) and the no-op recorder, per update
/// path (`benches/support/metrics_scenarios.rs`). Run with
/// `--features metrics -- --only metrics`.
#[cfg(feature = "metrics")]
fn metrics_scenarios(scale: u64) -> Vec<Scenario> {
    use metrics_support::{Path as UpdatePath, Role as MetricsRole, METRICS_IMPLS};
    let n = 1_000_000 * scale;
    UpdatePath::ALL
        .iter()
        .map(|&path| {
            let entries = METRICS_IMPLS
                .iter()
                .map(|imp| {
                    let run = imp.run;
                    let role = match imp.role {
                        MetricsRole::Keybus => Role::Keybus,
                        MetricsRole::Floor => Role::Baseline,
                        MetricsRole::Other => Role::Peer,
                    };
                    Entry::new(imp.name, role, timed(move || run(path, n)))
                        .not_comparable((role == Role::Peer).then_some("stores nothing"))
                })
                .collect();
            Scenario::new(format!("metrics/{}", path.name()), n, entries)
        })
        .collect()
}
