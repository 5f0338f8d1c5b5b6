//! Lock-free broadcast (stub).
