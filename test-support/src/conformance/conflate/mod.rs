//! The conflate conformance suite: every rule of the conflate contract
//! (docs/design.md, "The contract") pinned by at least one test named
//! `ruleN_...`, written once as a generic function over [`Conflate`] and run
//! per implementation by `tests/conformance_conflate.rs`.
//!
//! Race tests use real threads and bounded loops. Nothing here asserts on time,
//! and no sleep stands in for synchronization: where a deadline appears it is
//! the API under test (`recv_timeout` returning `Timeout`), except the stall
//! watchdog of the `wake_*` and `rule8_race_*` tests, which turns a receiver
//! never woken into a failure instead of a hang.
//!
//! [`Conflate`]: crate::conflate_api::Conflate

pub mod api_rules_1_4;
pub mod bounded;
pub mod observe;
pub mod removal;
pub mod rules_11_14;
pub mod rules_5_7;
pub mod rules_8_9;
pub mod shutdown;
pub mod wake;
