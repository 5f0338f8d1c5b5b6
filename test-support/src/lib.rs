//! What keybus's integration tests and fuzz targets share: the op models and
//! lockstep runners (`conflate_ops`, `broadcast_ops`), the plumbing they run on
//! (`harness`: byte sources, quiet expected panics, shrinking), and the counting
//! allocator (`counting`).
//!
//! Not published: a dev-dependency of `keybus` (an integration test links this
//! crate and the library it depends on, which is the same `keybus`) and a
//! dependency of the fuzz package.

pub mod broadcast_ops;
pub mod conflate_api;
pub mod conflate_ops;
pub mod conformance;
pub mod counting;
pub mod harness;
