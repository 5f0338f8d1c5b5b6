//! `bench-report --targets`: the redesign issue's target table, keybus ÷
//! baseline speed as same-run ratios, and whether each target is met.
//!
//! ```text
//! cargo run --release -p keybus-benches --bin bench-report -- --targets             # 3 rounds
//! cargo run --release -p keybus-benches --bin bench-report -- --targets --rounds 5 --out DIR
//! cargo run --release -p keybus-benches --bin bench-report -- --targets --only register_drop
//! valgrind --tool=callgrind target/release/bench-report --targets --only try_recv_all --profile keybus
//! ```
//!
//! A warm-up round (discarded), then `--rounds` rounds (default 3) of every
//! target, keybus and the baseline back to back with the order alternating
//! per round (`run.rs`). Prints one Markdown table (per target: keybus's and the
//! baseline's cost as min–max over the rounds, the per-round ratio min–max and
//! median, the target, met or not) and writes it to `DIR/targets.md` (default
//! `target/keybus-report/`). `--only SUBSTRING` keeps the targets whose
//! bench-report scenario or wording contains it; `--full` runs 5× larger
//! measurements.
//!
//! `--profile keybus` (or `baseline`) runs each selected target once, that side
//! only, with no warm-up and no table: a fixed amount of work for a profiler
//! (callgrind's instruction counts per function, divided by the operations).
//!
//! Status: **met** when every round's ratio reaches the target; **not met**
//! when the median does not; **median only** when the median does but some
//! round does not (rerun with more rounds on a quieter machine).

mod list;
mod machine;
mod run;

use crate::options::Options;
use std::fmt::Write as _;
use std::time::Instant;

/// Measured rounds unless `--rounds` says otherwise.
pub const DEFAULT_ROUNDS: usize = 3;

/// `(min, max)` of a non-empty slice.
fn range(v: impl Iterator<Item = f64>) -> (f64, f64) {
    v.fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)))
}

fn num(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn span((lo, hi): (f64, f64)) -> String {
    format!("{}–{}", num(lo), num(hi))
}

/// The 1-minute load average, if the system says.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// The commit measured (and whether the tree had changes), if git says.
fn commit() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "--short", "HEAD"]) {
        Some(head) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            format!(
                "{head}{}",
                if dirty {
                    " (with uncommitted changes)"
                } else {
                    ""
                }
            )
        }
        None => "?".into(),
    }
}

/// The Markdown table and its summary line.
fn table(targets: &[list::Target], outcomes: &[run::Outcome]) -> String {
    let mut s = String::new();
    s.push_str(
        "| # | scenario | bench-report scenario | unit | keybus | baseline | ratio min–max | ratio median | target | status |\n",
    );
    s.push_str("|---:|---|---|---|---:|---:|---:|---:|---:|---|\n");
    let mut met = 0;
    for (i, (t, o)) in targets.iter().zip(outcomes).enumerate() {
        let goal = format!("{}≥ {}", if t.keep { "keep " } else { "" }, t.goal);
        let row_start = format!(
            "| {} | {} | `{}` | {} |",
            i + 1,
            t.what,
            t.scenario,
            t.unit.label()
        );
        if o.pairs.is_empty() {
            let why = o.failed.as_deref().unwrap_or("not run");
            let _ = writeln!(
                s,
                "{row_start} – | – | – | – | {goal} | **failed**: {why} |"
            );
            continue;
        }
        let ratios = o.ratios();
        let (lo, hi) = range(ratios.iter().copied());
        let mid = crate::rounds::median(ratios);
        let status = match &o.failed {
            Some(why) => format!("**failed** after {} rounds: {why}", o.pairs.len()),
            None if lo >= t.goal => {
                met += 1;
                "met".to_string()
            }
            None if mid >= t.goal => "median only".to_string(),
            None => "**not met**".to_string(),
        };
        let _ = writeln!(
            s,
            "{row_start} {} | {} | {} | {:.3} | {goal} | {status} |",
            span(range(o.pairs.iter().map(|p| p.0))),
            span(range(o.pairs.iter().map(|p| p.1))),
            span((lo, hi)),
            mid,
        );
    }
    let _ = writeln!(
        s,
        "\n{met} of {} targets met in every round.",
        targets.len()
    );
    s
}

pub fn main(opts: &Options) {
    let started = Instant::now();
    let scale = if opts.full { 5 } else { 1 };
    let wanted = |t: &list::Target| {
        opts.only
            .as_deref()
            .map_or(true, |o| t.scenario.contains(o) || t.what.contains(o))
    };
    let targets: Vec<list::Target> = list::targets(scale).into_iter().filter(wanted).collect();
    if let Some(side) = opts.profile.as_deref() {
        for t in &targets {
            let run = if side == "keybus" {
                &t.keybus
            } else {
                &t.baseline
            };
            match run() {
                Ok(cost) => println!("{side} {}: {cost:.2} {}", t.scenario, t.unit.label()),
                Err(why) => println!("{side} {}: {why}", t.scenario),
            }
        }
        return;
    }
    let load_before = load();
    eprintln!(
        "keybus bench-report --targets: {} targets, warm-up + {} rounds, scale {scale}",
        targets.len(),
        opts.rounds
    );
    let outcomes = run::run(&targets, opts.rounds);
    // After the rounds, so that it does not warm or disturb them.
    let lock_ns = machine::lock_ns();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut report = String::new();
    let _ = writeln!(
        report,
        "Redesign targets, keybus ÷ baseline speed (above 1: keybus faster), `u64` keys and \
         values, release build. Commit {}; {cores} cores; load average {load_before} before, \
         {} after; scale {scale}; {} measured round(s) after a discarded warm-up, keybus and the \
         baseline back to back in each, the order alternating per round; wall time {:.0} s. \
         keybus and baseline columns: the cost (unit column) min–max over the rounds; the \
         ratio of a round is baseline cost ÷ keybus cost of that round's pair. One uncontended \
         lock (a CAS and a Release store, amid stores) costs {lock_ns:.1} ns here \
         (`targets/machine.rs`).\n",
        commit(),
        load(),
        opts.rounds,
        started.elapsed().as_secs_f64(),
    );
    report.push_str(&table(&targets, &outcomes));
    report.push_str(
        "\nStatus: met = every round reaches the target; median only = the median does, \
         some round does not; not met = the median does not. Heap bytes per pending key: \
         `cargo test --release --test memory`.\n",
    );
    println!("\n{report}");
    let md = opts.out.join("targets.md");
    match std::fs::create_dir_all(&opts.out).and_then(|()| std::fs::write(&md, &report)) {
        Ok(()) => eprintln!("wrote {}", md.display()),
        Err(e) => eprintln!("could not write {}: {e}", md.display()),
    }
    eprintln!(
        "bench-report --targets wall time: {:.1}s",
        started.elapsed().as_secs_f64()
    );
}
