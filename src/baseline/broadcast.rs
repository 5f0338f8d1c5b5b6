//! Baseline broadcast (stub).
