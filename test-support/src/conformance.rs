//! The contract of each bus, written once over its API traits.

pub mod broadcast;
