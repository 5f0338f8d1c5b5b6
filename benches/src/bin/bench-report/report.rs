//! The report run: the chosen scenarios one after the other with a progress
//! line each, the cut latencies, then the tables on stdout and `report.md` with
//! the plots in the output folder.

use crate::options::Options;
use crate::print::{latency_table, ns, table};
use crate::rounds::{cut_latencies, measure, SCENARIO_BUDGET};
use crate::scenarios::{self, Scenario};
use std::fmt::Write as _;
use std::time::Instant;

/// Runs the report `opts` asks for (not `--targets`).
pub fn run(opts: &Options) {
    let started = Instant::now();
    let scale = if opts.full { 5 } else { 1 };
    let all = scenarios::all(scale);
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
    match crate::plots::plots(&opts.out, &rows, &lat, backlog) {
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
