//! # keybus
//!
//! Lock-free in-process fan-out buses for high-throughput telemetry.
//!
//! - [`conflate`]: keyed latest-value fan-out. Each receiver keeps one slot per
//!   pending key and a first-touch-ordered key queue; a send for a pending key merges
//!   into its slot. A slow receiver never lags into loss: it catches up to the latest
//!   value of every key, with memory bounded by the live key set.
//! - [`broadcast`]: a bounded cursor history. One ring of revisions, many readers
//!   with their own cursors; a reader that falls behind gets an explicit gap.
//! - [`baseline`]: the same API done the plain way (one mutex). It is the oracle for
//!   differential tests and what every benchmark is measured against.
//! - `metrics` (behind the cargo feature `metrics`, off by default): a recorder
//!   for the [`metrics`](https://docs.rs/metrics) facade that fans every counter,
//!   gauge and histogram update into a conflate hub, so dashboards and
//!   exporters each read the facade's numbers at their own pace. Enable it with
//!   `keybus = { version = "0.1", features = ["metrics"] }`.
//!
//! ## conflate versus broadcast
//!
//! Pick [`conflate`] when consumers care about the *current state of each entity*
//! (dashboards, indexers, cache invalidation): memory is bounded by the key set and
//! nothing is ever reported lost, only folded (see [`Event::sends`]). Pick
//! [`broadcast`] when consumers need *every revision* of one stream within a
//! retention window, and must be told exactly when they fell out of it.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(rust_2018_idioms)]

pub mod baseline;
pub mod broadcast;
pub mod conflate;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;

mod appending;
mod error;
mod padding;
mod sync;
mod unwind_safety;
mod wait;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// `compile_fail` doctests pinning the `#[must_use]` attributes.
#[cfg(doctest)]
mod must_use_checks;

pub use broadcast::Entry;
pub use conflate::{Event, HubStats, ReceiverInfo, ReceiverStats};
pub use error::{AppendError, ReadError, RecvError, RecvTimeoutError, SendError, TryRecvError};
