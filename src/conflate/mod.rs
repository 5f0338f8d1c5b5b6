//! Keyed latest-value fan-out, without a bus-wide lock.
//!
//! A [`Hub`] hands out [`Sender`]s (all handles to one send side) and any number of
//! [`Receiver`]s. Every send is fanned out to every live receiver; each receiver
//! holds **one slot per pending key** plus a **first-touch key queue**. A send for a
//! key that is already pending *merges* into its slot instead of queueing.
//!
//! ```
//! use keybus::conflate::Hub;
//!
//! let hub: Hub<&str, u32> = Hub::new();
//! let tx = hub.sender();
//! let mut rx = hub.receiver();
//!
//! tx.send("cpu", 10).unwrap();
//! tx.send("mem", 70).unwrap();
//! tx.send("cpu", 12).unwrap(); // merges into the pending "cpu" slot
//!
//! let cpu = rx.recv().unwrap();
//! assert_eq!((cpu.key, cpu.value, cpu.sends), ("cpu", 12, 2));
//! let mem = rx.recv().unwrap();
//! assert_eq!((mem.key, mem.value, mem.sends), ("mem", 70, 1));
//!
//! hub.close_graceful(); // or `tx.close()`: the same send side
//! assert!(rx.recv().is_err()); // drained, then closed
//! ```
//!
//! # Semantics
//!
//! - **Coalescing happens at send.** A send for a pending key merges into its slot
//!   and the key keeps its queue position; a send for a key not pending appends it
//!   at the back. Delivery is in first-touch order, so a hot key never starves a
//!   cold one.
//! - **Merge may annihilate.** The default merge is "newer wins";
//!   [`Hub::with_merge`] and [`ReceiverBuilder::merge`] take a
//!   `Fn(pending, incoming) -> Option<V>`, and `None` removes the key — slot and
//!   queue entry — leaving no residue. [`Event::sends`](crate::Event::sends) counts
//!   the sends merged into a delivery, so a skipped value is visible as a count.
//! - **Bounded by the key set.** A receiver's memory is bounded by the keys pending
//!   for it, not by the number of sends. Filters ([`ReceiverBuilder::key`],
//!   [`ReceiverBuilder::key_filter`]; the later call wins) apply at send, so an
//!   unwanted key never takes a slot.
//! - **A receiver starts empty**: it sees sends made after it was created. Register
//!   first, then take your snapshot of the producer's state, or let the hub keep
//!   the state and build a snapshot receiver (below). A send with no live
//!   receiver (and no state table) returns `Ok(())` after one atomic load and
//!   one count in a stripe its thread owns.
//! - **[`Receiver::try_recv_all`] is one cut**: everything pending as of one
//!   instant, in queue order, one entry per key.
//!   [`Receiver::try_recv_all_into`] appends the same cut to a `Vec` of the
//!   caller's, so a consumer loop can reuse one allocation.
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
//!   instant: every key in the table at that instant that passes the receiver's
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
//!   blocks a sender.
//! - **Bounded receivers** ([`ReceiverBuilder::max_pending`]). At most `n` keys
//!   pending; a send for a key not pending while `n` are is refused at this
//!   receiver only (drop-new: nothing is renumbered) and counted in
//!   `overflowed`; sends for pending keys still merge. `max_pending(0)` panics
//!   (documented).
//!
//! # Removal
//!
//! A hub merge that returns `None` *annihilates*: at a receiver with the key
//! pending, the pending value and the send vanish, as if neither happened.
//! That is right for a create/delete pair nobody observed, and wrong for the
//! end of an entity a consumer already knows: it would keep it forever. For
//! that, build the hub with [`HubBuilder::tombstones`]: values the test
//! accepts are *tombstones*, and a tombstone removes its key.
//!
//! - **The table forgets the key**: [`Hub::latest`] is `None`, [`Hub::snapshot`]
//!   and snapshot receivers leave it out; a later value starts a new *life* of
//!   the key at the back of the table's order.
//! - **A receiver that delivered an event of the key's current life** (took a
//!   value of it with any receive method) **gets the tombstone, once**, as an
//!   ordinary [`Event`] whose value is the tombstone, with `sends` counting it
//!   and any values folded into it since the last take.
//! - **A receiver that did not** (it registered after the life began and was
//!   not seeded with it, or the key stayed pending from the first value to the
//!   tombstone) **gets nothing**: the values and the tombstone count as
//!   `annihilated` in its stats.
//! - **No merge folds across a removal**: a tombstone replaces a pending value,
//!   and a value replaces a pending tombstone (the key's next life), whatever
//!   the merge; only two values of one life meet the hub's or a receiver's
//!   merge. A merge whose result is a tombstone removes the key from the table.
//! - A key filter decides a tombstone like any send; a bounded receiver with
//!   no room refuses it like any new key (counted in `overflowed`).
//!
//! Each receiver's consumer keeps the keys it delivered (one per live key
//! delivered), so the receiver decides when it takes an event: until then a
//! tombstone it will drop still counts in [`Receiver::len`] and the stats'
//! `pending`. With tombstones, `len() > 0` therefore does not promise that
//! `recv` returns at once; [`Receiver::peek`] (which drops such tombstones)
//! does.
//!
//! The informer pattern, a consumer keeping a copy of the hub's state:
//!
//! ```
//! use keybus::conflate::Hub;
//! use std::collections::HashMap;
//!
//! #[derive(Clone, Debug, PartialEq)]
//! enum Pod {
//!     Up { restarts: u32 },
//!     Deleted,
//! }
//!
//! let hub = Hub::builder()
//!     .retain_latest()
//!     .tombstones(|pod: &Pod| *pod == Pod::Deleted)
//!     .build();
//! let tx = hub.sender();
//! tx.send("web-1", Pod::Up { restarts: 0 }).unwrap();
//! tx.send("web-2", Pod::Up { restarts: 0 }).unwrap();
//!
//! // A late consumer: the table first, then every change.
//! let mut informer = hub.receiver_builder().snapshot().build();
//! let mut cache = HashMap::new();
//! let mut apply = |cache: &mut HashMap<_, _>, key, pod| match pod {
//!     Pod::Deleted => assert!(cache.remove(&key).is_some(), "only known pods end"),
//!     pod => drop(cache.insert(key, pod)),
//! };
//! for event in informer.try_recv_all().unwrap() {
//!     apply(&mut cache, event.key, event.value);
//! }
//! tx.send("web-1", Pod::Up { restarts: 1 }).unwrap();
//! tx.send("web-3", Pod::Up { restarts: 0 }).unwrap();
//! tx.send("web-3", Pod::Deleted).unwrap(); // born and gone unseen: nothing
//! tx.send("web-2", Pod::Deleted).unwrap();
//! for event in informer.try_recv_all().unwrap() {
//!     apply(&mut cache, event.key, event.value);
//! }
//! let table: HashMap<_, _> = hub.snapshot().into_iter().collect();
//! assert_eq!(cache, table); // {"web-1": Up { restarts: 1 }}
//! ```
//!
//! # Closing
//!
//! | call | effect |
//! |---|---|
//! | [`Hub::close_graceful`], [`Sender::close`], or dropping the hub and every sender | graceful: the send side closes; each receiver delivers everything pending, then reports closed (and deregisters itself) |
//! | [`Receiver::close`], or dropping it | this receiver only: pending values dropped, deregistered now |
//! | [`Hub::close_now`] | hard: send side and every receiver closed now, nothing drains; receivers made later are born closed |
//!
//! All are idempotent. A send racing a graceful close either publishes (returns
//! `Ok` and every receiver delivers it before reporting closed) or returns `Err`
//! and publishes nothing. A send racing [`Hub::close_now`] returns `Ok` or `Err`;
//! nothing is leaked or left half-delivered. ([`Hub::close`], the old name
//! of the hard close, is deprecated.)
//!
//! [`HubStats`] says how the receivers left: `receivers` (live now) reaches 0
//! after a clean shutdown, and `receivers_drained`, `receivers_dropped` and
//! `receivers_hard_closed` tell a drain from a loss. To watch a receiver from
//! another task while its consumer owns it, take a [`ReceiverWatch`]
//! ([`Receiver::watch`]); [`Hub::receivers`] lists the live receivers with
//! their backlog.
//!
//! Precedence on the receive side: closed beats empty beats a value for `try_*` and
//! [`Receiver::peek`]; closed beats a timeout, and a zero or past deadline still
//! returns a ready value. A dropped [`Receiver::recv_async`] future consumes
//! nothing.
//!
//! # Panics in user code
//!
//! Merges and key filters run on the sending thread with no bus-wide lock held (a
//! merge holds only its key's shard lock of one receiver). If one panics, the panic
//! reaches the caller of `send`, and the bus stays usable: no lock is poisoned, the
//! send is no longer counted in flight, later sends reach every receiver. What
//! became of that send:
//!
//! - a send reaches the *plain* receivers first (every key, the hub's newer-wins
//!   merge, no bound: they share the hub's one value per key, in one step), then
//!   the others in registration order: those before the panicking one have it,
//!   the panicking receiver and those after it do not;
//! - a panicking **key filter** changes nothing at its receiver;
//! - a panicking **merge** drops that receiver's pending value for the key (both
//!   inputs were moved into the merge): the key is no longer pending there;
//! - a panicking hub merge (the state table's fold, in a hub built with one)
//!   removes its key from the table, and the send reaches no receiver;
//! - a `K: Clone` or `V: Clone` that panics inside a receive (a plain
//!   receiver clones the key and, while other receivers still have the key
//!   pending, the value out of the hub's shared cell): a pop drops that key,
//!   a `try_recv_all` drops its whole batch, and the stats count them in
//!   `dropped`; the rest stays pending.
//!
//! # Thread safety
//!
//! [`Hub`] and [`Sender`] are cheap `Clone + Send + Sync` handles. A [`Receiver`]
//! is `Send + Sync`, and its consuming methods take `&mut self`: one consumer.
//!
//! # Design and performance
//!
//! No lock is shared by the whole bus on the send path, and no shared
//! read-modify-write either: a send marks itself in flight on a word its thread
//! owns (paired with the rare closes and registrations by an asymmetric fence),
//! loads the hub's state word once, and hashes the key once. The plain receivers
//! share one *cell* per key in the hub: a send for a key pending at all of them
//! is one lock of the key's cell shard (one compare-and-swap; the release is a
//! store) and one write, however many they are. A send for a key not pending
//! at one of them pushes an entry to that receiver's lock-free first-touch queue
//! (one compare-and-swap). A receiver with a key filter, its own merge or a bound
//! keeps its own values, sharded, and costs one shard lock per send on top.
//!
//! A cut (`try_recv_all`) is one read-modify-write of the receiver's queue word;
//! it then takes its entries a group of 1,024 at a time, locking each shard the
//! group names once and holding one shard at a time, so a publisher waits for
//! at most one shard's share of a group, whatever the backlog. With `retain_latest` the cells are the
//! state table, so keeping it costs a send nothing more. A snapshot receiver's
//! registration holds sends off while it copies the table (only hubs with a
//! table, only while a snapshot receiver registers). The arguments, the traps
//! they rule out and the cost of each operation next to the one-mutex baseline:
//! `docs/design.md` in the repository.
//!
//! Measured figures (throughput against the baseline, bytes per pending key and
//! per idle receiver) are kept in one place, `docs/performance.md`, written from
//! `bench-report` runs.
//!
//! # Where the code is
//!
//! `lockfree/` is this module's implementation; `baseline/` is the one-mutex
//! twin, public as [`crate::baseline::conflate`] (mounted from
//! `src/baseline.rs`); `common/` is what the two share (the public stats
//! types, merges and filters, removal, the hub word's close bits, the
//! re-entrancy guard, the iterators, the key hasher).

pub(crate) mod common;
pub(crate) mod lockfree;

pub use crate::error::{RecvError, RecvTimeoutError, SendError, TryRecvError};
pub use common::event::Event;
pub use common::stats::{HubStats, ReceiverInfo, ReceiverStats};
pub use lockfree::{
    Hub, HubBuilder, Iter, Receiver, ReceiverBuilder, ReceiverWatch, Sender, TryIter,
};

/// Which shards `key` lands in: (the hub's cells, a receiver with its own
/// values). Loom models pick keys on distinct shards with it; the hasher is
/// fixed under loom.
#[cfg(loom)]
#[doc(hidden)]
pub use lockfree::__loom_shard_of;

#[cfg(loom)]
#[doc(hidden)]
pub use lockfree::__loom;
