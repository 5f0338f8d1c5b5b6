//! Runs the targets in same-run pairs: round 0 is a warm-up, discarded; then
//! `rounds` rounds, each running every target once, keybus and the baseline
//! back to back, the order alternating from round to round (round `i` runs
//! keybus first when `i` is odd, the baseline first when it is even, the
//! warm-up included). Rounds are the outer loop, so a burst of load on the
//! shared machine lands in one round of many targets, which the ranges show,
//! rather than in every round of one target.
//!
//! A measurement that panics or does not account for its work marks its target
//! failed (with the reason) and the target is not run again.

use super::list::Target;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

/// One target's measured rounds: `(keybus cost, baseline cost)` per round.
pub struct Outcome {
    pub pairs: Vec<(f64, f64)>,
    /// Why the target stopped, if it did.
    pub failed: Option<String>,
}

impl Outcome {
    /// The baseline's cost over keybus's, per round (above 1: keybus faster).
    pub fn ratios(&self) -> Vec<f64> {
        self.pairs.iter().map(|&(k, b)| b / k).collect()
    }
}

/// Runs `run` once, turning a panic into an error naming `who`.
fn attempt(who: &str, run: &super::list::Run) -> Result<f64, String> {
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(Ok(cost)) if cost.is_finite() && cost > 0.0 => Ok(cost),
        Ok(Ok(cost)) => Err(format!("{who}: no usable cost ({cost})")),
        Ok(Err(why)) => Err(format!("{who}: {why}")),
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panicked".into());
            // One line, no table separators: it goes into a Markdown cell.
            let line = msg.lines().next().unwrap_or("").replace('|', "/");
            Err(format!("{who} panicked: {line}"))
        }
    }
}

/// The warm-up round and `rounds` measured rounds over `targets`; progress on
/// stderr (a line per target and round).
pub fn run(targets: &[Target], rounds: usize) -> Vec<Outcome> {
    let mut out: Vec<Outcome> = targets
        .iter()
        .map(|_| Outcome {
            pairs: Vec::new(),
            failed: None,
        })
        .collect();
    for round in 0..=rounds {
        let keybus_first = round % 2 == 1;
        let label = if round == 0 {
            "warm-up".to_string()
        } else {
            format!("round {round}/{rounds}")
        };
        let t = Instant::now();
        eprintln!(
            "{label} ({} first)",
            if keybus_first { "keybus" } else { "baseline" }
        );
        for (target, outcome) in targets.iter().zip(&mut out) {
            if outcome.failed.is_some() {
                continue;
            }
            let started = Instant::now();
            let pair = if keybus_first {
                attempt("keybus", &target.keybus)
                    .and_then(|k| attempt("baseline", &target.baseline).map(|b| (k, b)))
            } else {
                attempt("baseline", &target.baseline)
                    .and_then(|b| attempt("keybus", &target.keybus).map(|k| (k, b)))
            };
            match pair {
                Ok((k, b)) => {
                    eprintln!(
                        "  {:<44} {:>5.1}s  keybus {:>9.1}  baseline {:>9.1}  ratio {:>6.2}",
                        target.scenario,
                        started.elapsed().as_secs_f64(),
                        k,
                        b,
                        b / k
                    );
                    if round > 0 {
                        outcome.pairs.push((k, b));
                    }
                }
                Err(why) => {
                    eprintln!("  {:<44} FAILED: {why}", target.scenario);
                    outcome.failed = Some(format!("{label}: {why}"));
                }
            }
        }
        eprintln!("  ({label}: {:.1}s)", t.elapsed().as_secs_f64());
    }
    out
}
