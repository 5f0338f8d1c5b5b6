//! The lock-free broadcast buffer behind [`crate::broadcast`]: the handles
//! (`buffer.rs`, `reader.rs`), the shared ring and its state word
//! (`ring.rs`), its places with their sequence stamps and value cells
//! (`place.rs`, `stamp.rs`, `cell.rs`), and node recycling (`pool.rs`).
//! `docs/design.md`, "Broadcast: the design", argues each protocol.

mod buffer;
mod cell;
mod place;
mod pool;
mod reader;
mod ring;
mod stamp;
// Unit tests run outside loom: a loom primitive outside `loom::model` panics.
#[cfg(all(test, not(loom)))]
mod tests;

pub use buffer::Buffer;
pub use reader::Reader;
