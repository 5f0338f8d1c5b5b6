//! Keyed latest-value fan-out, the plain way: one mutex per hub.
//!
//! The same public API and semantics as [`crate::conflate`], built like the Go
//! original: one hub mutex guards every receiver's pending set, and one atomic
//! state word lets a send skip that mutex when nobody listens. It is the oracle
//! for differential tests and the reference every benchmark is measured
//! against; it is also a fine choice when contention is low.
//!
//! ```
//! use keybus::baseline::conflate::{Hub, TryRecvError};
//!
//! // Deltas per counter: a pending delta absorbs the next one.
//! let hub = Hub::with_merge(|pending: i64, next: i64| Some(pending + next));
//! let tx = hub.sender();
//! let mut rx = hub.receiver(); // register first: a receiver starts empty
//!
//! tx.send("rx_bytes", 100).unwrap();
//! tx.send("tx_bytes", 7).unwrap();
//! tx.send("rx_bytes", 20).unwrap(); // coalesces: rx_bytes keeps its place
//! assert_eq!(rx.len(), 2);
//!
//! let first = rx.try_recv().unwrap();
//! assert_eq!((first.key, first.value, first.sends), ("rx_bytes", 120, 2));
//!
//! tx.close(); // graceful: what is pending still arrives
//! assert_eq!(rx.try_recv().unwrap().key, "tx_bytes");
//! assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
//! ```
//!
//! # Semantics
//!
//! - Each receiver holds one slot per pending key and a queue of keys in
//!   first-touch order. A send for a pending key merges into its slot and the
//!   key keeps its queue position; a send for any other key appends it at the
//!   back. Delivery is in queue order, so a hot key never starves a cold one.
//! - The merge is "newer wins" ([`Hub::new`]) or `merge(pending, incoming)`
//!   ([`Hub::with_merge`], or per receiver [`ReceiverBuilder::merge`]).
//!   `None` annihilates: slot and queue entry both go, with no residue; a later
//!   send for that key appends it afresh with `sends == 1`.
//! - [`Event::sends`] counts every send merged into a delivery since its key
//!   became pending.
//! - A receiver's memory is bounded by its pending keys, never by the number of
//!   sends. Key filters ([`ReceiverBuilder::key`], [`ReceiverBuilder::key_filter`],
//!   one setting, the later call wins) apply at send, so an unwanted key never
//!   takes a slot.
//! - A receiver starts empty: it sees only sends made after it was created.
//!   Register before taking any snapshot of the producer's state, or let the
//!   hub keep the state and build a snapshot receiver (below). A send with no
//!   live receiver (and no state table) returns `Ok(())` and publishes
//!   nothing.
//! - Sends fan out to receivers in registration order.
//! - [`Receiver::try_recv_all`] takes everything pending as of one instant, in
//!   queue order, one event per key, or an error with nothing;
//!   [`Receiver::try_recv_all_into`] appends it to a caller's `Vec`.
//! - Precedence. `try_recv`, `try_recv_all`, `peek`: closed beats empty beats
//!   value. Blocking forms: closed beats timeout, and a zero or past deadline
//!   still returns a ready value. A dropped [`Receiver::recv_async`] future
//!   consumes nothing. "Closed" means: this receiver or the hub was closed, or
//!   the send side closed and nothing is pending.
//!
//! # State table, snapshot receivers, accounting and bounds
//!
//! - **State table** ([`HubBuilder::retain_latest`]). The hub keeps per key the
//!   value obtained by applying the hub's merge to every accepted send for it
//!   (with or without a receiver; `None` removes the key), in first-touch order.
//!   Memory is bounded by the live key set. [`Hub::latest`] reads one key,
//!   [`Hub::snapshot`] the whole table as of one instant. Without
//!   `retain_latest` the hub keeps nothing: `latest` is `None`, `snapshot` is
//!   empty, and [`ReceiverBuilder::snapshot`] panics (documented). A panicking
//!   hub merge removes its key from the table, and that send then reaches no
//!   receiver (the table is updated first).
//! - **Snapshot receivers** ([`ReceiverBuilder::snapshot`]). Registration is one
//!   instant (one hold of the hub mutex): every key in the table at that instant that passes the receiver's
//!   filter is pending at the new receiver with the table's value and `sends ==
//!   0`, in table order (the first `max_pending` of them, if bounded); every
//!   send after it reaches the receiver like any other. Nothing is missing or
//!   counted twice, so "register before you snapshot" does not apply to such a
//!   receiver. A later send for a snapshot key merges into it with the
//!   receiver's merge and the event reports `sends == 1`.
//! - **Accounting** ([`Receiver::stats`], [`Hub::stats`]). Every send that
//!   reached a receiver past its filter ends in exactly one of `folded`
//!   (delivered), `annihilated`, `overflowed`, `dropped` or `pending_sends`, so
//!   whenever no send is in flight `received == folded + annihilated +
//!   overflowed + dropped + pending_sends`; `received + filtered` is every send
//!   accepted while the receiver was registered, less those whose key filter
//!   panicked (they count nowhere). A panicking merge counts its send and the
//!   sends folded into the slot it drops as `dropped`. Reading stats never
//!   blocks a sender: the counters are written under the hub mutex and read
//!   without it.
//! - **Bounded receivers** ([`ReceiverBuilder::max_pending`]). At most `n` keys
//!   pending; a send for a key not pending while `n` are is refused at this
//!   receiver only (drop-new: nothing is renumbered) and counted in
//!   `overflowed`; sends for pending keys still merge. `max_pending(0)` panics
//!   (documented).
//!
//! # Closing
//!
//! All three kinds are idempotent.
//!
//! - [`Hub::close_graceful`] and [`Sender::close`] are graceful: sends fail from then on, and each receiver
//!   still delivers everything pending for it, then answers `Closed`. Dropping
//!   every [`Hub`] and [`Sender`] handle does the same (receivers do not keep the
//!   send side open). A receiver that reaches `Closed` this way deregisters
//!   itself.
//! - [`Receiver::close`], or dropping the receiver, closes that receiver only:
//!   its pending values are dropped and it is deregistered at once.
//! - [`Hub::close_now`] is hard: the send side and every receiver close now and
//!   nothing drains; receivers made afterwards are born closed. (`Hub::close`,
//!   its old name, is deprecated.)
//!
//! [`HubStats`] counts how the receivers left (drained, dropped by their
//! owner, torn down by the hard close); [`Receiver::watch`] and
//! [`Hub::receivers`] read a receiver's stats without owning it.
//!
//! A send racing a graceful close on another thread either returns `Ok` and is
//! delivered by every receiver before its `Closed`, or returns `Err` and
//! publishes nothing: both decide under the hub mutex. A send racing
//! `Hub::close_now` returns `Ok` (delivered to every receiver, then torn down with
//! them) or `Err`; nothing is leaked or half-delivered.
//!
//! # Panics in user code
//!
//! Key filters and merges run under the hub mutex, during the fan-out of a
//! send, one receiver at a time in registration order. If one panics at
//! receiver R:
//!
//! - the panic propagates out of [`Sender::send`], after the mutex is released
//!   unpoisoned;
//! - receivers before R in the fan-out have the send; receivers after R do not;
//! - a **key filter** panic changes nothing at R;
//! - a **merge** panic **drops R's pending slot** for that key: the key is no
//!   longer pending at R, its queue entry is removed, and R's `len()` falls by
//!   one (the pending value was moved into the merge and is gone);
//! - the bus stays usable: no poisoned lock, no deadlock, no lost wake-up, and
//!   later sends are delivered to every receiver.
//!
//! `K: Hash` runs once per send before anything changes (a panic there reaches
//! no receiver). `K: Eq`, `K: Clone` and `V: Clone` panics at R behave like a
//! key filter panic. User code must not call back into the same bus: the hub
//! mutex is held, and re-entering it deadlocks.
//!
//! # Thread safety
//!
//! [`Hub`] and [`Sender`] are cheap `Clone` handles, `Send + Sync`.
//! [`Receiver`] is `Send + Sync`; its consuming methods take `&mut self`, so
//! each receiver has one consumer. Sends from many threads serialize on the hub
//! mutex. The no-receiver fast path is one Acquire load of the state word,
//! which every registration, deregistration and close writes (Release) while
//! holding the mutex.
//!
//! # Performance
//!
//! - A send with no live receiver (and no state table): one atomic load and
//!   one count in a stripe its thread owns; no lock, no hashing.
//! - With a state table every send takes the hub mutex, receivers or not, for
//!   one more lookup and merge.
//! - Otherwise: one hash per send, then the hub mutex for the whole fan-out:
//!   per receiver a filter check and an O(1) lookup; coalescing allocates
//!   nothing. The key and value are cloned per accepting receiver but the last.
//! - A receiver's memory is one node per pending key; its storage keeps the
//!   high-water mark of pending keys (like a `HashMap`'s capacity) and never
//!   grows with the number of sends.
//! - Every receive takes the same mutex: pop, peek and close are O(1),
//!   `try_recv_all` O(pending keys), register/deregister O(receivers).
//!   Waiting parks the thread (or task) on that receiver's own notifier, which
//!   is signalled only when its queue goes from empty to non-empty, or on close.
//! - Everything contends on one lock: sends block each other, and a consumer
//!   polling `peek` in a loop slows every sender. [`crate::conflate`] is the
//!   design without a bus-wide lock.

mod builder;
mod hub;
mod queue;
mod receiver;
mod sender;
mod shared;
mod state;
#[cfg(test)]
mod tests;
mod watch;

pub use crate::{
    Event, HubStats, ReceiverInfo, ReceiverStats, RecvError, RecvTimeoutError, SendError,
    TryRecvError,
};
pub use builder::{HubBuilder, ReceiverBuilder};
pub use hub::Hub;
pub use receiver::{Iter, Receiver, TryIter};
pub use sender::Sender;
pub use watch::ReceiverWatch;
