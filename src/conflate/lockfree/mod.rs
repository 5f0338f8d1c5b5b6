//! The lock-free conflate bus behind [`crate::conflate`]: the handles
//! (`hub.rs`, `builder.rs`, `sender.rs`, `receiver.rs`, `watch.rs`), what
//! every handle shares (`shared.rs`, `state.rs`, `registry.rs`), the sends in
//! flight (`stripes.rs`, `barrier.rs`), the hub's per-key cells and the cell
//! receivers' queues (`cells/`, `lock.rs`, `cell_rx.rs`, `cell_local.rs`,
//! `queue/`), and the receivers with their own values (`core/`, `slab.rs`,
//! `tickets.rs`). `docs/design.md`, "Conflate: the design", argues each
//! protocol.

mod barrier;
mod builder;
mod cell_local;
mod cell_rx;
mod cells;
mod close_flags;
mod core;
mod hub;
mod lock;
mod queue;
mod receiver;
mod registry;
mod sender;
mod shared;
mod slab;
mod solo;
mod state;
pub(crate) mod stripes;
mod thread_slots;
mod tickets;
mod watch;

pub use builder::{HubBuilder, ReceiverBuilder};
pub use hub::Hub;
pub use receiver::{Iter, Receiver, TryIter};
pub use sender::Sender;
pub use watch::ReceiverWatch;

/// Which shards `key` lands in: (the hub's cells, a receiver with its own
/// values). Loom models pick keys on distinct shards with it; the hasher is
/// fixed under loom.
#[cfg(loom)]
#[doc(hidden)]
pub fn __loom_shard_of<K: std::hash::Hash>(key: &K) -> (usize, usize) {
    let hash = crate::conflate::common::hash::KeyHasher::default().hash(key);
    (cells::shard_of(hash), core::shard_index(hash))
}

#[cfg(loom)]
#[doc(hidden)]
pub mod __loom;

#[cfg(test)]
mod tests;
