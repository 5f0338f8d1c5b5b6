//! Differential tests: the same random op sequences applied step by step to two
//! implementations of one API, every result and every observable query compared.
//!
//! - `differential_conflate`: `keybus::conflate` against `keybus::baseline::conflate`.
//! - `differential_broadcast`: `keybus::broadcast` against `keybus::baseline::broadcast`.
//! - `*_model`, `*_baseline_model`: each implementation against the reference model
//!   in `test-support/src/*_ops/model.rs`, the tie-breaker when the two disagree.
//!
//! Sequences are generated from seeded RNGs, so every run is the same. On a
//! mismatch the test shrinks the sequence, prints it with its seed, and fails.
//!
//! `fuzz_corpus_replays` also runs every committed fuzz input (`fuzz/corpus/*`, and
//! any crash artifact copied there) through the same pairs, so a fuzzer finding
//! becomes a `cargo test` regression by adding its file.
//!
//! Knobs (environment):
//! - `KEYBUS_DIFF_OPS`: total ops per test (default 300 000; scale up for soak runs).
//! - `KEYBUS_DIFF_SEED`: run only the sequence with this seed (as printed on failure).

use keybus_test_support as common;

use common::harness::{self, Rng};
use common::{broadcast_ops, conflate_ops};
use std::time::Instant;

/// Ops per test unless `KEYBUS_DIFF_OPS` says otherwise.
const DEFAULT_OPS: usize = 300_000;

/// Runs sequences with seeds `base, base + 1, ...` until `total_ops` ops ran.
///
/// `generate` builds a sequence of about the given length from a seeded source;
/// `check` runs it and describes a mismatch; `shrink` minimises a failing one.
fn drive<S: std::fmt::Display>(
    test: &str,
    base_seed: u64,
    total_ops: usize,
    generate: impl Fn(&mut Rng, usize) -> S,
    ops_in: impl Fn(&S) -> usize,
    check: impl Fn(&S) -> Result<harness::Tally, String>,
    shrink: impl Fn(&S, &dyn Fn(&S) -> bool) -> S,
) {
    harness::quiet_expected_panics();
    let total_ops = harness::env_usize("KEYBUS_DIFF_OPS").unwrap_or(total_ops);
    let only = harness::env_u64("KEYBUS_DIFF_SEED");
    let started = Instant::now();
    let (mut ran_ops, mut sequences) = (0, 0);
    let mut tally = harness::Tally::new();
    let mut seed = only.unwrap_or(base_seed);
    while ran_ops < total_ops || (only.is_some() && sequences == 0) {
        // A sequence's length comes from its own seed, so one seed replays alone.
        let mut rng = Rng(fastrand::Rng::with_seed(seed));
        let len = rng.0.usize(50..=300);
        let scenario = generate(&mut rng, len);
        match check(&scenario) {
            Ok(t) => harness::merge_tally(&mut tally, t),
            Err(report) => {
                let small = shrink(&scenario, &|s| check(s).is_err());
                let small_report = check(&small).expect_err("shrinking keeps a failure");
                panic!(
                    "{test}: mismatch with seed {seed:#x} after {sequences} clean sequences\n\
                 {report}\n\n\
                 shrunk to {} ops:\n{small_report}\n{small}\n\
                 replay: KEYBUS_DIFF_SEED={seed:#x} cargo test --test differential {test}",
                    ops_in(&small),
                );
            }
        }
        ran_ops += ops_in(&scenario);
        sequences += 1;
        if only.is_some() {
            break;
        }
        seed = seed.wrapping_add(1);
    }
    eprintln!(
        "{test}: {ran_ops} ops in {sequences} sequences, {:.2?}\n  outcomes: {tally:?}",
        started.elapsed()
    );
}

/// One `#[test]` per line: `name: ops_module, A vs B, base seed` runs [`drive`]
/// over `ops_module`'s generator with `ops_module::check::<A, B>`.
macro_rules! differential_tests {
    ($($test:ident: $ops:ident, $a:ident vs $b:ident, $seed:expr;)+) => {$(
        #[test]
        fn $test() {
            drive(
                stringify!($test),
                $seed,
                DEFAULT_OPS,
                $ops::Scenario::generate,
                |s| s.ops.len(),
                $ops::check::<$ops::$a, $ops::$b>,
                |s, fails| s.shrink(fails),
            );
        }
    )+};
}

differential_tests! {
    differential_conflate: conflate_ops, Lockfree vs Baseline, 0xC0F1_A7E0;
    differential_conflate_model: conflate_ops, Lockfree vs Model, 0x40DE_1C0F;
    differential_conflate_baseline_model: conflate_ops, Baseline vs Model, 0xBA5E_1C0F;
    differential_broadcast: broadcast_ops, Lockfree vs Baseline, 0xB0AD_CA57;
    differential_broadcast_model: broadcast_ops, Lockfree vs Model, 0x40DE_1B0A;
    differential_broadcast_baseline_model: broadcast_ops, Baseline vs Model, 0xBA5E_1B0A;
}

/// The committed inputs of one fuzz target, by file name.
fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("readable corpus entry").path())
        .filter(|path| path.is_file())
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).expect("readable corpus file"))
        })
        .collect();
    files.sort();
    files
}

/// Runs a scenario on a pair of implementations; describes a mismatch.
type Check<S> = fn(&S) -> Result<harness::Tally, String>;

/// Replays every committed input of fuzz target `target` through `checks`.
fn replay<S: std::fmt::Display>(
    target: &str,
    generate: impl Fn(&mut harness::Bytes<'_>) -> S,
    checks: &[Check<S>],
) {
    let verbose = std::env::var_os("KEYBUS_DIFF_PRINT").is_some();
    for (name, data) in corpus(target) {
        let scenario = generate(&mut harness::Bytes::new(&data));
        if verbose {
            eprintln!("{target}/{name}:\n{scenario}");
        }
        for check in checks {
            if let Err(report) = check(&scenario) {
                panic!("fuzz/corpus/{target}/{name}:\n{report}\n{scenario}");
            }
        }
    }
}

/// [`replay`] for the fuzz target named after `ops_module`, through the same
/// three pairs as the differential tests.
macro_rules! replay_corpus {
    ($ops:ident) => {{
        use $ops::{check, Baseline, Lockfree, Model, Scenario};
        replay(
            stringify!($ops),
            |src| Scenario::generate(src, harness::FUZZ_MAX_OPS),
            &[
                check::<Lockfree, Baseline>,
                check::<Lockfree, Model>,
                check::<Baseline, Model>,
            ],
        )
    }};
}

#[test]
fn fuzz_corpus_replays() {
    harness::quiet_expected_panics();
    replay_corpus!(conflate_ops);
    replay_corpus!(broadcast_ops);
}
