//! The lock-free [`HubBuilder`] and [`ReceiverBuilder`]: a hub's merge,
//! table and tombstones; a receiver's filter, merge, bound and snapshot, and
//! which kind of receiver `build` registers (cell or own-value).
//!
//! The argument: `docs/design.md`, "Two kinds of receiver" and "Snapshot
//! registration is one instant".

use super::cell_local::CellLocal;
use super::core::RxCore;
use super::hub::Hub;
use super::receiver::{Kind, Receiver};
use super::shared::Shared;
use crate::conflate::common::policy::{no_state_table, KeyFilter, Merge, ReceiverConfig};
use crate::conflate::common::removal::{Correction, Seen, Tombstones};
use crate::sync::Arc;
use std::fmt;
use std::hash::Hash;

/// The hub's builders and receivers: where a hub and a receiver are
/// configured.
impl<K, V> Hub<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
{
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
}

/// Builds a [`Hub`]: its merge, and whether it keeps a state table. From
/// [`Hub::builder`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct HubBuilder<K, V> {
    pub(super) merge: Merge<V>,
    pub(super) retain: bool,
    pub(super) tombstones: Tombstones<V>,
    pub(super) keys: std::marker::PhantomData<fn() -> K>,
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
    pub(super) shared: Arc<Shared<K, V>>,
    pub(super) config: ReceiverConfig<K, V>,
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
