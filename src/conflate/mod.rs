//! Lock-free conflate (stub).
