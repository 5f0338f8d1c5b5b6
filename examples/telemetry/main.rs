//! In-process telemetry on keybus and on the mutex baseline, side by side.
//!
//! ```text
//! cargo run --release --example telemetry
//! cargo run --release --example telemetry -- --impl keybus --keys 50000 --zipf 0.9
//! ```
//!
//! # The scenario
//!
//! A metrics pipeline inside one process. `--keys` metrics (interned to `u32` ids,
//! named like `disk.host-0042`) belong to four families: `cpu.*`, `mem.*`, `disk.*`
//! and `net.*`. `--producers` threads publish `Sample { value, ts_ns }` updates for
//! `--duration-ms`, as fast as the bus takes them. Which metric is updated follows
//! a Zipf law with exponent `--zipf`: a few metrics are very hot, most are cold, as
//! in real fleets. Four consumers subscribe before the first send, a fifth later:
//!
//! - **dashboard** — renders every update it receives (`recv` loop);
//! - **indexer** — every 5 ms takes the whole backlog as one cut (`try_recv_all`)
//!   and spends those 5 ms "writing" it (a sleep), like a batched storage write;
//! - **disk.\* filter** — an alerting rule that only cares about one family
//!   (`key_filter`, applied at send, so other families never take a slot there);
//! - **key watcher** — follows the single hottest metric (`key`);
//! - **late dashboard** — connects halfway through as a snapshot receiver
//!   (`receiver_builder().snapshot()` on a `retain_latest` hub): it is born with the
//!   current value of every metric pending (`sends == 0`), then follows live.
//!
//! Then the producers stop, the send side closes gracefully (`Sender::close`) and
//! every consumer drains what is pending before it sees `Closed`.
//!
//! The sending time is split into `--rounds` rounds; each round runs every
//! implementation on a fresh hub, alternating which goes first, and the report
//! sums the rounds. Alternating cancels the drift of background load and the
//! advantage of running second (warm allocator, warm caches). Both
//! implementations replay exactly the same pre-sampled key sequence.
//!
//! The scenario is written once, as the macro `run_scenario!` (`scenario.rs`);
//! each implementation is one line expanding it for its module path.
//!
//! # Reading the numbers
//!
//! - **events** — deliveries a receiver handled. Each is the latest value of one
//!   metric; it never holds more than one pending value per metric.
//! - **sends folded** — the sum of `Event::sends`: how many sends those events stand
//!   for. Coalescing skips values, but never silently: every send is counted in
//!   exactly one delivered event.
//! - **sends/event** — the coalescing ratio. 1.0 means the receiver kept up with
//!   every single send; higher means it was slower than the producers and got the
//!   latest value instead of a backlog. The indexer reads only every 5 ms, so
//!   between two reads a hot metric is sent many times and it sees one event for
//!   all of them: far fewer events, same information, memory bounded by the key set.
//! - **events/s** — deliveries per second over the receiver's life (start to
//!   `Closed`).
//! - **check** — conservation after the graceful close, read from the bus's own
//!   accounting (`Hub::stats`, `Receiver::stats`): the hub accepted exactly the
//!   sends the producers counted; at each receiver everything that reached it is
//!   settled (`received == folded + annihilated + overflowed + dropped +
//!   pending_sends`), its events stand for exactly the `folded` sends, and with the
//!   sends its filter rejected it accounts for every accepted send. A mismatch
//!   makes the program exit with status 1.
//! - **sends/s** — what the producers pushed through the bus; the headline number.
//!   The side-by-side table divides keybus by the baseline.
//!
//! - **max age** — the oldest sample a receiver was handed (now minus `ts_ns`):
//!   how stale conflation let its view get, and how long a slow reader waits.
//!
//! On a machine with fewer cores than threads (2 producers + 4 consumers), the
//! consumers compete with the producers for CPU, and the numbers say as much about
//! the scheduler as about the bus: expect tens of percent between runs. Compare
//! the two implementations within one run, and look at the per-round lines.
//!
//! # Flags
//!
//! | flag | default | meaning |
//! |---|---|---|
//! | `--impl baseline\|keybus\|both` | `both` | which implementation(s) to run |
//! | `--keys N` | 10000 | number of distinct metrics |
//! | `--producers N` | 2 | producer threads |
//! | `--duration-ms N` | 1500 | how long the producers send, per implementation |
//! | `--rounds N` | 4 | alternating rounds that time is split into |
//! | `--zipf S` | 1.1 | Zipf exponent of update rates (0 = uniform) |
//! | `--help` | | this summary |
//!
//! A bad flag prints a message and exits with status 2.
//!
//! # Layout
//!
//! | file | its job |
//! |---|---|
//! | `main.rs` | the arguments, the rounds, the printout |
//! | `cli.rs` | the flags, their defaults, the usage text |
//! | `metric.rs` | metric ids, families, samples |
//! | `workload.rs` | the pre-sampled Zipf key sequences |
//! | `producer.rs` | the producers and what they count |
//! | `consumer.rs` | the five consumers and what they count |
//! | `scenario.rs` | the per-implementation runner (one round on one hub) |
//! | `report.rs` | tallies summed over rounds, the checks, the tables |
//! | `format.rs` | how numbers are shown |

mod cli;
mod consumer;
mod format;
mod metric;
mod producer;
mod report;
mod scenario;
mod workload;

use cli::{parse_args, Command, Config, USAGE};
use format::{group, rate, rounds, secs};
use report::{print_comparison, Report};
use scenario::run_once;
use std::fmt::Write as _;
use std::process::ExitCode;
use workload::Workload;

/// Runs every implementation in each round, alternating which goes first: the
/// load from other processes drifts over seconds, and whichever runs first in a
/// round warms the allocator and caches for the other. Returns one summed report
/// per implementation, in `cfg.impls` order.
fn run_rounds(cfg: &Config, workload: &Workload) -> Vec<Report> {
    let per_round = cfg.duration / cfg.rounds;
    let mut totals: Vec<Option<Report>> = cfg.impls.iter().map(|_| None).collect();
    for round in 0..cfg.rounds {
        let mut order: Vec<usize> = (0..cfg.impls.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        let mut line = format!("round {}/{}", round + 1, cfg.rounds);
        for i in order {
            let report = run_once(cfg.impls[i], per_round, workload);
            let _ = write!(line, "   {} {}", report.label, rate(report.send_rate()));
            match &mut totals[i] {
                Some(total) => total.absorb(report),
                slot => *slot = Some(report),
            }
        }
        println!("{line}");
    }
    totals.into_iter().flatten().collect()
}

fn main() -> ExitCode {
    let cfg = match parse_args(std::env::args().skip(1)) {
        Ok(Command::Run(cfg)) => cfg,
        Ok(Command::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("error: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    println!(
        "telemetry: {} metrics (cpu/mem/disk/net), Zipf s={}, {} producers, \
         {} per implementation in {}\n",
        group(u64::from(cfg.keys)),
        cfg.zipf,
        cfg.producers,
        secs(cfg.duration),
        rounds(cfg.rounds),
    );
    let workload = Workload::new(&cfg);
    let reports = run_rounds(&cfg, &workload);
    println!();
    for report in &reports {
        report.print(&cfg, &workload);
    }
    if let [keybus, baseline] = &reports[..] {
        print_comparison(keybus, baseline);
    }
    if reports.iter().all(Report::conserved) {
        ExitCode::SUCCESS
    } else {
        eprintln!("error: a receiver's deliveries do not account for every send");
        ExitCode::FAILURE
    }
}
