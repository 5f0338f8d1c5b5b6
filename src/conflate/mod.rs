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
//!   one count in a slot its thread owns.
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
//!   removes its key from the table, and the send reaches no receiver.
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
//! it then takes its entries 32 at a time, so a publisher waits for at most one
//! such window, whatever the backlog. With `retain_latest` the cells are the
//! state table, so keeping it costs a send nothing more. A snapshot receiver's
//! registration holds sends off while it copies the table (only hubs with a
//! table, only while a snapshot receiver registers). The arguments, the traps
//! they rule out and the cost of each operation next to the one-mutex baseline:
//! `docs/design.md` in the repository.
//!
//! Measured figures (throughput against the baseline, bytes per pending key and
//! per idle receiver) are kept in one place, `docs/performance.md`, written from
//! `bench-report` runs.

mod barrier;
mod cell_rx;
mod cells;
mod core;
mod lock;
mod queue;
mod receiver;
mod registry;
mod sender;
mod shared;
mod slab;
mod state;
pub(crate) mod stripes;
mod tickets;
mod watch;

pub use crate::error::{RecvError, RecvTimeoutError, SendError, TryRecvError};
pub use crate::event::Event;
pub use crate::stats::{HubStats, ReceiverInfo, ReceiverStats};
pub use receiver::{Iter, Receiver, TryIter};
pub use sender::Sender;
pub use watch::ReceiverWatch;

use crate::hub_word::HubWord;
use crate::policy::{no_state_table, KeyFilter, Merge, ReceiverConfig};
use crate::removal::{Correction, Seen, Tombstones};
use crate::sync::Arc;
use cell_rx::CellLocal;
use core::RxCore;
use receiver::Kind;
use shared::Shared;
use std::fmt;
use std::hash::Hash;

/// Which shards `key` lands in: (the hub's cells, a receiver with its own
/// values). Loom models pick keys on distinct shards with it; the hasher is
/// fixed under loom.
#[cfg(loom)]
#[doc(hidden)]
pub fn __loom_shard_of<K: Hash>(key: &K) -> (usize, usize) {
    use std::hash::BuildHasher;
    let hash = shared::HashState::default().hash_one(key);
    (cells::shard_of(hash), core::shard_index(hash))
}

#[cfg(loom)]
#[doc(hidden)]
pub mod __loom;

/// The construction handle of a conflate bus: a cheap `Clone` handle, `Send +
/// Sync`. Holding a hub keeps the send side open; see the
/// [module docs](self#closing).
pub struct Hub<K, V> {
    shared: Arc<Shared<K, V>>,
}

impl<K, V> Hub<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
{
    /// A hub whose receivers keep the newer value when a pending key is sent again.
    #[must_use]
    pub fn new() -> Self {
        Hub {
            shared: Arc::new(Shared::new(Merge::NewerWins, false, Tombstones::default())),
        }
    }

    /// A hub whose receivers merge a send into a pending slot with `merge(pending,
    /// incoming)`; `None` annihilates the key. A receiver can override it with
    /// [`ReceiverBuilder::merge`].
    ///
    /// ```
    /// use keybus::conflate::Hub;
    ///
    /// // Sum deltas; a zero sum leaves nothing to deliver.
    /// let hub = Hub::with_merge(|a: i64, b: i64| Some(a + b).filter(|s| *s != 0));
    /// let (tx, mut rx) = (hub.sender(), hub.receiver());
    /// tx.send("k", 5).unwrap();
    /// tx.send("k", -5).unwrap();
    /// assert!(rx.try_recv().is_err());
    /// ```
    #[must_use]
    pub fn with_merge<F>(merge: F) -> Self
    where
        F: Fn(V, V) -> Option<V> + Send + Sync + 'static,
    {
        Hub {
            shared: Arc::new(Shared::new(
                Merge::With(std::sync::Arc::new(merge)),
                false,
                Tombstones::default(),
            )),
        }
    }

    /// A builder for a hub with a merge and/or a state table
    /// ([`HubBuilder::retain_latest`]). [`Hub::new`] and [`Hub::with_merge`]
    /// are its two common cases.
    ///
    /// ```
    /// use keybus::conflate::Hub;
    ///
    /// let hub = Hub::builder()
    ///     .merge(|total: u64, delta: u64| Some(total + delta))
    ///     .retain_latest()
    ///     .build();
    /// let tx = hub.sender();
    /// tx.send("requests", 3).unwrap(); // no receiver yet: the table keeps it
    /// tx.send("requests", 4).unwrap();
    /// assert_eq!(hub.latest(&"requests"), Some(7));
    ///
    /// // A late dashboard starts from the table, then follows the live stream.
    /// let mut dash = hub.receiver_builder().snapshot().build();
    /// let first = dash.try_recv().unwrap();
    /// assert_eq!((first.key, first.value, first.sends), ("requests", 7, 0));
    /// ```
    #[must_use = "a builder does nothing until `build` is called"]
    pub fn builder() -> HubBuilder<K, V> {
        HubBuilder {
            merge: Merge::NewerWins,
            retain: false,
            tombstones: Tombstones::default(),
            keys: std::marker::PhantomData,
        }
    }

    /// The state table's value for `key`: the hub's merge of every accepted
    /// send for it since it last entered the table. `None` if the key is not in
    /// the table, or the hub was built without
    /// [`retain_latest`](HubBuilder::retain_latest).
    ///
    /// One hash, one cell-shard lock (the lock a send for a key of that shard
    /// takes for its table update), one clone of the value; never waits for
    /// anything else.
    ///
    /// # Panics
    /// If called from user code running inside a send of this hub (a merge, a
    /// key filter), which could hold that very shard lock.
    #[must_use]
    pub fn latest(&self, key: &K) -> Option<V> {
        if !self.shared.retain {
            return None;
        }
        crate::reentrancy::forbid_inside_send(&*self.shared, "Hub::latest");
        self.shared.cells.latest(self.shared.hash(key), key)
    }

    /// The whole state table as of one instant, in its first-touch order: a
    /// key enters at the back when a send makes it present, and leaves when the
    /// hub's merge returns `None`. Empty without
    /// [`retain_latest`](HubBuilder::retain_latest).
    ///
    /// Locks every cell shard (in a fixed order) before copying, so sends for
    /// any key wait for O(keys) clones; allocates the returned `Vec` and sorts
    /// it (O(keys log keys)) after the locks are released.
    ///
    /// ```
    /// use keybus::conflate::Hub;
    ///
    /// let hub: Hub<&str, u32> = Hub::builder().retain_latest().build();
    /// let tx = hub.sender();
    /// tx.send("b", 1).unwrap();
    /// tx.send("a", 2).unwrap();
    /// tx.send("b", 3).unwrap(); // keeps its place
    /// assert_eq!(hub.snapshot(), vec![("b", 3), ("a", 2)]);
    /// ```
    ///
    /// # Panics
    /// If called from user code running inside a send of this hub.
    #[must_use]
    pub fn snapshot(&self) -> Vec<(K, V)> {
        if !self.shared.retain {
            return Vec::new();
        }
        crate::reentrancy::forbid_inside_send(&*self.shared, "Hub::snapshot");
        self.shared.cells.snapshot()
    }

    /// The send side's accounting: sends accepted and refused, receivers live.
    /// See [`HubStats`]. Never blocks a sender: lock-free loads (the per-thread
    /// stripes that count `sent`, a counter, the state word). Exact once no
    /// send runs.
    #[must_use]
    pub fn stats(&self) -> HubStats {
        self.shared.stats()
    }

    /// A handle to the one send side. Never blocks.
    #[must_use]
    pub fn sender(&self) -> Sender<K, V> {
        self.shared.acquire_handle();
        Sender {
            shared: self.shared.clone(),
        }
    }

    /// A receiver of every key with the hub's merge. It starts empty. Takes a
    /// registry lock that sends never take.
    #[must_use = "a receiver is registered at once and deregistered when dropped; keep it to receive"]
    pub fn receiver(&self) -> Receiver<K, V> {
        self.receiver_builder().build()
    }

    /// Configures a receiver: a key filter and/or its own merge.
    #[must_use = "a builder does nothing until `build` is called"]
    pub fn receiver_builder(&self) -> ReceiverBuilder<K, V> {
        ReceiverBuilder {
            shared: self.shared.clone(),
            config: ReceiverConfig::default(),
        }
    }

    /// Graceful close, from the hub: the send side closes (later sends return
    /// `Err`), and every receiver still delivers everything pending, then
    /// reports closed and deregisters. The same as [`Sender::close`] on any
    /// sender of this hub. Idempotent; returns once every receiver was told
    /// (a send still in flight finishes on its own, and receivers wait for
    /// it).
    ///
    /// ```
    /// use keybus::conflate::Hub;
    ///
    /// let hub: Hub<&str, u32> = Hub::new();
    /// let mut rx = hub.receiver();
    /// hub.sender().send("cpu", 1).unwrap();
    /// hub.close_graceful();
    /// assert!(hub.sender().send("cpu", 2).is_err());
    /// assert_eq!(rx.recv().unwrap().value, 1); // still delivered
    /// assert!(rx.recv().is_err()); // then closed
    /// assert_eq!(hub.stats().receivers_drained, 1);
    /// ```
    pub fn close_graceful(&self) {
        self.shared.close_tx();
    }

    /// Hard close: the send side and every receiver close now, nothing drains
    /// (pending values are dropped and counted in each receiver's
    /// [`ReceiverStats::dropped`]), and receivers made afterwards are born
    /// closed. Idempotent. For a shutdown that delivers what is pending, use
    /// [`close_graceful`](Self::close_graceful).
    ///
    /// ```
    /// use keybus::conflate::Hub;
    ///
    /// let hub: Hub<&str, u32> = Hub::new();
    /// let mut rx = hub.receiver();
    /// hub.sender().send("cpu", 1).unwrap();
    /// hub.close_now();
    /// assert!(rx.recv().is_err()); // nothing drains
    /// assert_eq!(rx.stats().dropped, 1);
    /// assert_eq!(hub.stats().receivers_hard_closed, 1);
    /// ```
    pub fn close_now(&self) {
        self.shared.close_hub();
    }

    /// The hard close, under its old name: [`close_now`](Self::close_now).
    #[deprecated(
        since = "0.1.1",
        note = "`Hub::close` is the hard close: call `close_now` for that, or `close_graceful` to let receivers drain"
    )]
    pub fn close(&self) {
        self.close_now();
    }

    /// Every live receiver of this hub (registered, not closed, not yet
    /// drained), in [`ReceiverInfo::id`] order, with its name and its
    /// accounting: `stats.pending` keys and `stats.pending_sends` sends are
    /// its backlog, readable without the receiver, which its consumer owns.
    ///
    /// Takes the registry lock (which registrations and deregistrations take,
    /// never sends) for O(receivers) lock-free stats reads; a receiver of
    /// every key with the hub's newer-wins merge walks its pending entries
    /// (O(pending keys)). Allocates the `Vec`.
    ///
    /// ```
    /// use keybus::conflate::Hub;
    ///
    /// let hub: Hub<u32, u32> = Hub::new();
    /// let tx = hub.sender();
    /// let mut fast = hub.receiver_builder().name("fast").build();
    /// let _slow = hub.receiver_builder().name("slow").build();
    /// for k in 0..5 {
    ///     tx.send(k, k).unwrap();
    /// }
    /// fast.try_recv_all().unwrap();
    /// let behind: Vec<_> = hub
    ///     .receivers()
    ///     .into_iter()
    ///     .map(|rx| (rx.name.as_deref().map(str::to_owned), rx.stats.pending))
    ///     .collect();
    /// assert_eq!(behind, [(Some("fast".into()), 0), (Some("slow".into()), 5)]);
    /// ```
    ///
    /// # Panics
    /// If called from user code running inside a send of this hub.
    pub fn receivers(&self) -> Vec<ReceiverInfo> {
        self.shared.receivers()
    }

    /// Whether the hard close ([`close_now`](Self::close_now)) was called.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.shared.state.load().hub_closed()
    }
}

impl<K, V> Default for Hub<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
{
    fn default() -> Self {
        Self::new()
    }
}

impl<K, V> Clone for Hub<K, V> {
    fn clone(&self) -> Self {
        self.shared.acquire_handle();
        Hub {
            shared: self.shared.clone(),
        }
    }
}

impl<K, V> Drop for Hub<K, V> {
    fn drop(&mut self) {
        self.shared.release_handle();
    }
}

impl<K, V> fmt::Debug for Hub<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.shared.state.load().fmt_handle(f, "Hub")
    }
}

/// Builds a [`Hub`]: its merge, and whether it keeps a state table. From
/// [`Hub::builder`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct HubBuilder<K, V> {
    merge: Merge<V>,
    retain: bool,
    tombstones: Tombstones<V>,
    keys: std::marker::PhantomData<fn() -> K>,
}

impl<K, V> HubBuilder<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
{
    /// The hub's merge, as [`Hub::with_merge`]: receivers without their own
    /// use it, and so does the state table. `None` annihilates (and removes the
    /// key from the table). Without it: newer wins.
    #[must_use = "builder methods return the changed builder; dropping it drops the setting"]
    pub fn merge<F>(self, merge: F) -> Self
    where
        F: Fn(V, V) -> Option<V> + Send + Sync + 'static,
    {
        HubBuilder {
            merge: Merge::With(std::sync::Arc::new(merge)),
            ..self
        }
    }

    /// Keeps a state table: per key, the hub's merge of every accepted send
    /// (whether or not a receiver listens), in first-touch order; `None` from
    /// the merge removes the key. Enables [`Hub::latest`], [`Hub::snapshot`]
    /// and [`ReceiverBuilder::snapshot`]. Memory: one entry per live key.
    ///
    /// Cost per send: the table is the hub's cells, so a send writes its
    /// key's cell (one shard lock, one lookup, the value moved in) even with no
    /// receiver, and the plain receivers share that write; a key entering the
    /// table also clones the key and takes a first-touch number (one
    /// `fetch_add`). A hub without it pays nothing: the send path tests "no
    /// receiver and no table" with one mask of the state word it loads anyway.
    #[must_use = "builder methods return the changed builder; dropping it drops the setting"]
    pub fn retain_latest(self) -> Self {
        HubBuilder {
            retain: true,
            ..self
        }
    }

    /// Values for which `is_tombstone` is true *remove* their key (see the
    /// [module docs](self#removal)): the state table forgets the key, a
    /// receiver that delivered an event of the key's current life gets the
    /// tombstone once, and a receiver that did not gets nothing. Without
    /// it, every value is a value.
    ///
    /// The test runs once per send (before any lock) and once per event a
    /// receiver takes; keep it cheap (a `matches!`). A panic in it reaches
    /// the sender, with nothing published, or the receiver, with the event
    /// taken and counted delivered.
    ///
    /// ```
    /// use keybus::conflate::Hub;
    ///
    /// #[derive(Clone, Debug, PartialEq)]
    /// enum Pod { Running(u32), Gone }
    ///
    /// let hub = Hub::builder()
    ///     .retain_latest()
    ///     .tombstones(|v: &Pod| matches!(v, Pod::Gone))
    ///     .build();
    /// let tx = hub.sender();
    /// let mut watcher = hub.receiver();
    /// tx.send("web-1", Pod::Running(1)).unwrap();
    /// assert_eq!(watcher.try_recv().unwrap().value, Pod::Running(1));
    /// tx.send("web-2", Pod::Running(2)).unwrap(); // never taken...
    /// tx.send("web-1", Pod::Gone).unwrap();
    /// tx.send("web-2", Pod::Gone).unwrap(); // ...so its removal is not news
    ///
    /// assert_eq!(hub.latest(&"web-1"), None); // the table forgot both
    /// assert!(hub.snapshot().is_empty());
    /// let removed = watcher.try_recv().unwrap(); // seen, so told once
    /// assert_eq!((removed.key, removed.value), ("web-1", Pod::Gone));
    /// assert!(watcher.try_recv().is_err()); // web-2: nothing
    /// ```
    #[must_use = "builder methods return the changed builder; dropping it drops the setting"]
    pub fn tombstones<F>(self, is_tombstone: F) -> Self
    where
        F: Fn(&V) -> bool + Send + Sync + 'static,
    {
        HubBuilder {
            tombstones: Tombstones::new(std::sync::Arc::new(is_tombstone)),
            ..self
        }
    }

    /// The hub. Allocates the shared state (and the table's 32 cell shards with
    /// `retain_latest`); never blocks.
    #[must_use]
    pub fn build(self) -> Hub<K, V> {
        Hub {
            shared: Arc::new(Shared::new(self.merge, self.retain, self.tombstones)),
        }
    }
}

impl<K, V> fmt::Debug for HubBuilder<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HubBuilder")
            .field("merge", &self.merge)
            .field("retain_latest", &self.retain)
            .field("tombstones", &self.tombstones.enabled())
            .finish()
    }
}

/// Configures a [`Receiver`]; from [`Hub::receiver_builder`].
///
/// ```
/// use keybus::conflate::Hub;
///
/// let hub: Hub<String, u64> = Hub::new();
/// let mut disks = hub
///     .receiver_builder()
///     .key_filter(|k: &String| k.starts_with("disk."))
///     .merge(|old, new| Some(old.max(new)))
///     .build();
/// let tx = hub.sender();
/// tx.send("disk.sda".into(), 3).unwrap();
/// tx.send("cpu".into(), 9).unwrap(); // filtered out at send: never takes a slot
/// tx.send("disk.sda".into(), 1).unwrap();
/// assert_eq!(disks.len(), 1);
/// assert_eq!(disks.recv().unwrap().value, 3);
/// ```
#[must_use = "a builder does nothing until `build` is called"]
pub struct ReceiverBuilder<K, V> {
    shared: Arc<Shared<K, V>>,
    config: ReceiverConfig<K, V>,
}

impl<K, V> ReceiverBuilder<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
{
    /// Takes exactly this key. Compared on the send path; no user code runs.
    /// Replaces an earlier [`key_filter`](Self::key_filter).
    #[must_use = "builder methods return the changed builder; dropping it drops the setting"]
    pub fn key(self, key: K) -> Self {
        ReceiverBuilder {
            config: self.config.key(key),
            ..self
        }
    }

    /// Takes the keys for which `keep` returns `true`. Runs on the sending thread
    /// with no lock held. Replaces an earlier [`key`](Self::key).
    #[must_use = "builder methods return the changed builder; dropping it drops the setting"]
    pub fn key_filter<F>(self, keep: F) -> Self
    where
        F: Fn(&K) -> bool + Send + Sync + 'static,
    {
        ReceiverBuilder {
            config: self.config.key_filter(keep),
            ..self
        }
    }

    /// This receiver's own merge, overriding the hub's for it only.
    #[must_use = "builder methods return the changed builder; dropping it drops the setting"]
    pub fn merge<F>(self, merge: F) -> Self
    where
        F: Fn(V, V) -> Option<V> + Send + Sync + 'static,
    {
        ReceiverBuilder {
            config: self.config.merge(merge),
            ..self
        }
    }

    /// Names the receiver, for [`Hub::receivers`] and
    /// [`ReceiverWatch::name`] (an operator's alert can then say which
    /// consumer fell behind). Names need not be unique. No cost on any send.
    ///
    /// ```
    /// use keybus::conflate::Hub;
    ///
    /// let hub: Hub<&str, u32> = Hub::new();
    /// let rx = hub.receiver_builder().name("dashboard").build();
    /// assert_eq!(rx.watch().name(), Some("dashboard"));
    /// assert_eq!(hub.receivers()[0].name.as_deref(), Some("dashboard"));
    /// ```
    pub fn name(self, name: impl Into<std::sync::Arc<str>>) -> Self {
        ReceiverBuilder {
            config: self.config.name(name.into()),
            ..self
        }
    }

    /// Starts the receiver with the hub's state table pending: every key in the
    /// table that passes this receiver's filter, with the table's value and
    /// `sends == 0`, in table order (at most [`max_pending`](Self::max_pending)
    /// of them, the first in that order). The copy and the registration are one
    /// instant against every send: every send before it is in the table, every
    /// send after it reaches the receiver like any other, none is missing and
    /// none counted twice. A later send for a snapshot key merges into it with
    /// this receiver's merge (the event then says `sends == 1`).
    ///
    /// Cost, at [`build`](Self::build): sends on this hub are held off while
    /// the sends in flight finish and the table is copied and filtered
    /// (O(keys) clones and filter calls); receivers without `snapshot` never
    /// hold sends off.
    ///
    /// # Panics
    ///
    /// If the hub was built without
    /// [`retain_latest`](HubBuilder::retain_latest): there is no table to
    /// start from. The message says so.
    ///
    /// ```
    /// use keybus::conflate::Hub;
    ///
    /// let hub: Hub<&str, u32> = Hub::builder().retain_latest().build();
    /// let tx = hub.sender();
    /// tx.send("cpu", 40).unwrap();
    /// let mut late = hub.receiver_builder().snapshot().build();
    /// tx.send("cpu", 41).unwrap(); // merges into the snapshot entry
    /// let e = late.recv().unwrap();
    /// assert_eq!((e.key, e.value, e.sends), ("cpu", 41, 1));
    /// ```
    #[must_use = "builder methods return the changed builder; dropping it drops the setting"]
    #[track_caller]
    pub fn snapshot(self) -> Self {
        if !self.shared.retain {
            no_state_table();
        }
        ReceiverBuilder {
            config: self.config.snapshot(),
            ..self
        }
    }

    /// Bounds the receiver to `n` pending keys. A send for a key that is not
    /// pending while `n` are is refused at this receiver only (drop-new: the
    /// pending keys keep their slots and order) and counted in
    /// [`ReceiverStats::overflowed`]; sends for pending keys still merge.
    ///
    /// Cost: none on a coalescing send; a send for a new key compares two
    /// counters under the queue lock it takes anyway; each pop takes that lock
    /// once more (to count the take where senders read it).
    ///
    /// # Panics
    ///
    /// If `n` is 0 (a receiver that can hold nothing); the message says to pass
    /// `n >= 1` or leave the bound out.
    ///
    /// ```
    /// use keybus::conflate::Hub;
    ///
    /// let hub: Hub<u32, u32> = Hub::new();
    /// let tx = hub.sender();
    /// let mut rx = hub.receiver_builder().max_pending(2).build();
    /// for k in 0..5 {
    ///     tx.send(k, k).unwrap();
    /// }
    /// assert_eq!(rx.len(), 2);
    /// assert_eq!(rx.stats().overflowed, 3);
    /// ```
    #[must_use = "builder methods return the changed builder; dropping it drops the setting"]
    #[track_caller]
    pub fn max_pending(self, n: usize) -> Self {
        ReceiverBuilder {
            config: self.config.max_pending(n),
            ..self
        }
    }

    /// Registers the receiver. It starts empty (unless
    /// [`snapshot`](Self::snapshot)); if the hub is closed it is born closed.
    ///
    /// A receiver of every key with the hub's newer-wins merge and no bound
    /// shares the hub's cells (it keeps no values of its own); any other keeps
    /// its pending values itself. Both behave the same; they cost differently
    /// (see [`Sender::send`]).
    #[must_use = "a receiver is registered at once and deregistered when dropped; keep it to receive"]
    pub fn build(self) -> Receiver<K, V> {
        let ReceiverConfig {
            filter,
            merge,
            snapshot,
            max_pending,
            name,
        } = self.config;
        let serial = self.shared.next_serial();
        // With tombstones, the consumer's record of what it saw corrects the
        // stats; the receiver's shared part holds it for every reader.
        let correction = self
            .shared
            .tombstones
            .enabled()
            .then(|| std::sync::Arc::new(Correction::default()));
        let shares_cells = matches!(filter, KeyFilter::All)
            && merge.is_none()
            && matches!(self.shared.merge, Merge::NewerWins)
            && max_pending.is_none();
        let kind = if shares_cells {
            let rx = self
                .shared
                .register_cell(snapshot, serial, name, correction.clone());
            Kind::Cells(rx, CellLocal::default())
        } else {
            // The hub's merge keeps lives apart already (`Shared::new`).
            let merge = match merge {
                Some(own) => self.shared.tombstones.across_lives(own),
                None => self.shared.merge.clone(),
            };
            let core = Arc::new(RxCore::new(
                filter.clone(),
                merge,
                max_pending,
                serial,
                name,
                correction.clone(),
            ));
            if snapshot {
                self.shared.register_own_snapshot(
                    &core,
                    &filter,
                    max_pending.unwrap_or(usize::MAX),
                );
            } else {
                self.shared.register_own(&core);
            }
            Kind::Own(core, Default::default())
        };
        let seen = correction.map(|c| Box::new(Seen::new(c)));
        Receiver {
            kind,
            seen,
            shared: self.shared,
            listener: None,
        }
    }
}

impl<K, V> fmt::Debug for ReceiverBuilder<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReceiverBuilder")
            .field("filter", &self.config.filter)
            .field("merge", &self.config.merge)
            .field("snapshot", &self.config.snapshot)
            .field("max_pending", &self.config.max_pending)
            .field("name", &self.config.name)
            .finish()
    }
}

#[cfg(test)]
mod tests;
