//! `UnwindSafe` and `RefUnwindSafe` for every public handle, both
//! implementations.
//!
//! The auto traits fail on their own for three kinds of interior state, none of
//! which a caller of `catch_unwind` can see half-changed:
//!
//! - **Boxed user closures** (`Arc<dyn Fn(V, V) -> Option<V> + Send + Sync>`
//!   merges, `Arc<dyn Fn(&K) -> bool + Send + Sync>` key filters): `dyn Fn` is
//!   not `RefUnwindSafe` because the compiler cannot see what it captures. The
//!   bus only ever calls them; whatever state a closure keeps is its author's,
//!   reachable by them without the bus.
//! - **`UnsafeCell`s** behind the bus's own locks (the conflate cells' shard
//!   data, the own-value receivers' key shards and queue, the broadcast ring's
//!   value pool): each is written only under its lock or by its single owner,
//!   and every lock is released by a drop guard that first restores the
//!   protected state, also when user code (a merge, a key filter, `K: Clone`,
//!   `V: Clone`, `T: PartialEq`) unwinds under it; broadcast's `T: Clone` runs
//!   under no lock, only a pin whose guard releases it. A panic in user
//!   code reaches the caller with the bus usable: no poisoned lock, no
//!   half-written slot (conflate rule 9 and the broadcast writer lock's guard,
//!   docs/design.md "Panics in user code"; tested in `tests/unwind_safety.rs`
//!   and the conformance suites' panic tests).
//! - **Atomics and event listeners**: every protocol built on them (the state
//!   word, stripes, cursors, parking) is a sequence of single atomic steps; a
//!   panic between two steps cannot happen inside the bus (none of its own code
//!   panics there, and user code runs outside those windows or under a guard).
//!
//! The baseline keeps its state under one `std::sync::Mutex` that it never
//! lets user code poison (user code runs inside `catch_unwind` and the state
//! is repaired before the panic resumes), so only its conflate handles, for
//! their closures, need the manual impls; its broadcast `Buffer` and `Reader`
//! are unwind-safe by the auto traits already.
//!
//! The impls are unconditional in `K`, `V` and `T`, like the standard
//! library's channels: the bus hands out clones, never references into its
//! values, so a value's own interior mutability is not reachable through a
//! handle.

use std::panic::{RefUnwindSafe, UnwindSafe};

/// `impl UnwindSafe + RefUnwindSafe` for each listed handle type.
macro_rules! unwind_safe {
    ($([$($params:ident),+] $ty:ty),+ $(,)?) => {
        $(
            impl<$($params),+> UnwindSafe for $ty {}
            impl<$($params),+> RefUnwindSafe for $ty {}
        )+
    };
}

unwind_safe! {
    [K, V] crate::conflate::Hub<K, V>,
    [K, V] crate::conflate::HubBuilder<K, V>,
    [K, V] crate::conflate::ReceiverBuilder<K, V>,
    [K, V] crate::conflate::Sender<K, V>,
    [K, V] crate::conflate::Receiver<K, V>,
    [T] crate::broadcast::Buffer<T>,
    [T] crate::broadcast::Reader<T>,
    [K, V] crate::baseline::conflate::Hub<K, V>,
    [K, V] crate::baseline::conflate::HubBuilder<K, V>,
    [K, V] crate::baseline::conflate::ReceiverBuilder<K, V>,
    [K, V] crate::baseline::conflate::Sender<K, V>,
    [K, V] crate::baseline::conflate::Receiver<K, V>,
}
