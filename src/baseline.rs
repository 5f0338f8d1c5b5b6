//! The same public API as [`crate::conflate`] and [`crate::broadcast`], implemented
//! the plain way: one mutex per hub / per buffer, like the Go originals.
//!
//! It is the oracle the differential tests compare against and the reference every
//! benchmark reports its ratios to. It is also a fine choice when contention is low
//! and simplicity matters more than throughput.

//!
//! The code lives beside the bus it mirrors: `src/conflate/baseline/` and
//! `src/broadcast/baseline.rs`, mounted here so that their public paths stay
//! `keybus::baseline::{conflate, broadcast}`.

#[path = "broadcast/baseline.rs"]
pub mod broadcast;
#[path = "conflate/baseline/mod.rs"]
pub mod conflate;
