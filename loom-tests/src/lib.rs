//! Loom models of keybus's atomic protocols. The models live in `tests/`, one
//! file per protocol family (`conflate`, `conflate_snapshot`, `conflate_cells`,
//! `conflate_queue`, `conflate_stripes`, `broadcast`); this library has no code
//! of its own.
//!
//! A crate of its own so that `RUSTFLAGS="--cfg loom"` builds keybus's library
//! with loom's atomics (`src/sync.rs`) and nothing else of keybus: no
//! dev-dependencies, unit tests or examples. Run one model:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom LOOM_MAX_PREEMPTIONS=3 LOOM_MAX_BRANCHES=50000 \
//!   cargo test --release -p keybus-loom-tests --test conflate_queue park_vs_push_exactly_one_side_sees_the_other
//! ```
//!
//! `README.md` beside this crate's manifest lists every model with the rule and
//! the trap it checks, the bounds CI uses (`.ci/model`), what loom cannot check,
//! and why the shuttle scenarios live in keybus's `tests/` instead.
