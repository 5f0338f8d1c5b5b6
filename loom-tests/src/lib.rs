//! keybus's model checks: the loom models and the shuttle scenarios, in
//! `tests/`, one file per protocol family. Loom (`--cfg loom`): `conflate`,
//! `conflate_snapshot`, `conflate_cells`, `conflate_queue`, `conflate_stripes`,
//! `broadcast`. Shuttle (`--cfg shuttle`): `shuttle_conflate`,
//! `shuttle_conflate_state`. Each file is empty without its cfg.
//!
//! A crate of its own so that `RUSTFLAGS="--cfg loom"` (or `--cfg shuttle`)
//! builds keybus's library with the checker's atomics (`src/sync.rs`) and
//! nothing else of keybus: no dev-dependencies, unit tests or examples. Run one
//! model or scenario:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom LOOM_MAX_PREEMPTIONS=3 LOOM_MAX_BRANCHES=50000 \
//!   cargo test --release -p keybus-loom-tests --test conflate_queue park_vs_push_exactly_one_side_sees_the_other
//! RUSTFLAGS="--cfg shuttle" CARGO_TARGET_DIR=target/shuttle KEYBUS_SHUTTLE_ITERS=1000 \
//!   cargo test --release -p keybus-loom-tests --test shuttle_conflate close_races_many_senders
//! ```
//!
//! `README.md` beside this crate's manifest lists every model and scenario with
//! the rule and the trap it checks, the bounds CI uses (`.ci/model`) and what
//! loom cannot check. The only code here is what the shuttle scenarios share.

/// Schedules per shuttle scenario: `KEYBUS_SHUTTLE_ITERS` (decimal, `_`
/// allowed), 10,000 when unset.
///
/// # Panics
///
/// If the variable is set but not a number.
#[cfg(shuttle)]
pub fn shuttle_iterations() -> usize {
    match std::env::var("KEYBUS_SHUTTLE_ITERS") {
        Ok(raw) => raw
            .trim()
            .replace('_', "")
            .parse()
            .unwrap_or_else(|_| panic!("KEYBUS_SHUTTLE_ITERS={raw:?} is not a number")),
        Err(_) => 10_000,
    }
}
