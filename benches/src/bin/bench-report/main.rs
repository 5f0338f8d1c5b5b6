//! A quick, self-contained performance report: keybus against the mutex baseline
//! and the peers a user would pick instead, measured interleaved in one run.
//!
//! ```text
//! cargo run --release -p keybus-benches --bin bench-report              # quick: under a minute
//! cargo run --release -p keybus-benches --bin bench-report -- --full    # more rounds, longer runs
//! cargo run --release -p keybus-benches --bin bench-report -- --only broadcast --rounds 5
//! cargo run --release -p keybus-benches --bin bench-report -- --targets  # see `targets/mod.rs`
//! ```
//!
//! It runs the same scenarios as `cargo bench` (`benches/support/*_scenarios.rs`,
//! included below by `#[path]`; sized and listed in `scenarios/`), with fewer and shorter measurements and no
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
//!
//! # Layout
//!
//! | file | its job |
//! |---|---|
//! | `main.rs` | the shared scenario bodies included, the dispatch |
//! | `options.rs` | the flags |
//! | `scenarios/` | the scenario table: `mod.rs` (what a scenario is, the order), `broadcast.rs`, `conflate.rs`, `send_paths.rs` (the targets' send paths), `metrics.rs` |
//! | `rounds.rs` | rounds, interleaving, medians, the cut latencies |
//! | `print.rs` | the markdown tables |
//! | `plots.rs` | the SVG plots |
//! | `report.rs` | the report run: progress, tables, files |
//! | `targets/` | `--targets`: the target table (`list.rs`), its rounds (`run.rs`), its printout (`mod.rs`), the cost of a lock on this machine (`machine.rs`) |

#[macro_use]
#[path = "../../../support/common.rs"]
mod common;

#[macro_use]
#[path = "../../../support/conflate_scenarios.rs"]
mod conflate_support;

#[macro_use]
#[path = "../../../support/broadcast_scenarios.rs"]
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
#[path = "../../../support/metrics_scenarios.rs"]
mod metrics_support;

mod options;
mod plots;
mod print;
mod report;
mod rounds;
mod scenarios;
/// `--targets`: the redesign issue's target table, keybus against the baseline.
mod targets;

fn main() {
    let opts = options::options();
    if opts.targets {
        targets::main(&opts);
    } else {
        report::run(&opts);
    }
}
