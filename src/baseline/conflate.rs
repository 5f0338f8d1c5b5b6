//! Baseline conflate (stub).
