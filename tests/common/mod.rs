//! Shared by the integration tests that declare `mod common;` (and, file by file,
//! by the fuzz targets in `fuzz/`).

// Each test binary and fuzz target uses a different subset of these modules.
#![allow(dead_code)]

pub mod broadcast_ops;
pub mod conflate_ops;
pub mod harness;
