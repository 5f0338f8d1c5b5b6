//! A live dashboard on `keybus::conflate`: a Zipf telemetry workload sends
//! into a `retain_latest` hub, and every browser connection (Server-Sent
//! Events) is its own snapshot receiver of it, paced, coalescing when slow.
//!
//! `cargo run --release -p keybus-dashboard -- --help` lists the flags; the
//! routes are in [`app::router`].

pub mod api;
pub mod app;
pub mod cli;
pub mod connections;
pub mod events;
pub mod json;
pub mod page;
pub mod server;
pub mod workload;

pub use server::serve;
