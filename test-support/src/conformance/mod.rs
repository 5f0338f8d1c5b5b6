//! Conformance suites written once as generic functions over an
//! implementation trait; the test files in `tests/` only wrap each function in
//! a `#[test]` per implementation.
//!
//! - [`conflate`]: every rule of the conflate contract, for any [`Conflate`]
//!   implementation.
//! - [`broadcast`]: every rule of the broadcast contract, for any
//!   [`Broadcast`](crate::broadcast_api::Broadcast) implementation (rule 7's
//!   cursors, `seek` and the `Stream` form live in `broadcast_cursor.rs`,
//!   re-exported there).
//! - [`support`]: the helpers those suites (and the conflate bad-input and soak
//!   suites) share: draining, closed-ness checks, conservation, jitter, the
//!   stall watchdog.
//!
//! [`Conflate`]: crate::conflate_api::Conflate

pub mod broadcast;
mod broadcast_cursor;
pub mod conflate;
pub mod support;
