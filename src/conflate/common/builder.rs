//! The builders both conflate implementations share, written once:
//! [`conflate_builders!`] writes `HubBuilder` and `ReceiverBuilder` (the
//! structs, their setters with their docs, their `Debug`) and `Hub::builder`.
//! Each implementation expands it once, in its own `builder.rs`, with the path
//! its doctests import, a paragraph on what each setting costs there, and the
//! items where the two differ: each builder's `build`.
//!
//! The expansion site must have in scope: `Hub`, `Receiver`, `Shared`, `Arc`,
//! `Merge`, `Tombstones`, `ReceiverConfig`, `no_state_table`, `Hash` and
//! `fmt`; its `Hub` must have `fn shared(&self) -> &Arc<Shared<K, V>>`, its
//! `Shared` `fn retains(&self) -> bool`.

/// Both builders and `Hub::builder`. `path` is the module the doctests
/// import `Hub` from; each `*_cost` is one paragraph of docs (`/// …` lines)
/// on what the call costs in that implementation; `hub_build` and
/// `receiver_build` are each builder's `build`, `receiver_doc` the docs of
/// `ReceiverBuilder`.
macro_rules! conflate_builders {
    (
        path: $path:literal,
        receiver_cost: [$(#[$receiver_cost:meta])*],
        retain_cost: [$(#[$retain_cost:meta])*],
        tombstones_cost: [$(#[$tombstones_cost:meta])*],
        hub_build: { $($hub_build:tt)* },
        receiver_doc: [$(#[$receiver_doc:meta])*],
        key_filter_cost: [$(#[$key_filter_cost:meta])*],
        merge_cost: [$(#[$merge_cost:meta])*],
        snapshot_cost: [$(#[$snapshot_cost:meta])*],
        max_pending_cost: [$(#[$max_pending_cost:meta])*],
        receiver_build: { $($receiver_build:tt)* } $(,)?
    ) => {
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
            #[doc = concat!("use ", $path, "::Hub;")]
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

            /// A receiver of every key with the hub's merge. It starts empty: it
            /// sees only sends made after this call returns. Born closed if the
            /// send side is already closed (by either close).
            ///
            $(#[$receiver_cost])*
            #[must_use = "a receiver is registered at once and deregistered when dropped; keep it to receive"]
            pub fn receiver(&self) -> Receiver<K, V> {
                self.receiver_builder().build()
            }

            /// A builder for a receiver with its own key filter, merge, bound or
            /// snapshot. Allocates nothing until [`ReceiverBuilder::build`].
            #[must_use = "a builder does nothing until `build` is called"]
            pub fn receiver_builder(&self) -> ReceiverBuilder<K, V> {
                ReceiverBuilder {
                    shared: self.shared().clone(),
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

        impl<K, V> fmt::Debug for HubBuilder<K, V> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct("HubBuilder")
                    .field("merge", &self.merge)
                    .field("retain_latest", &self.retain)
                    .field("tombstones", &self.tombstones.enabled())
                    .finish()
            }
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
            $(#[$retain_cost])*
            #[must_use = "builder methods return the changed builder; dropping it drops the setting"]
            pub fn retain_latest(self) -> Self {
                HubBuilder {
                    retain: true,
                    ..self
                }
            }

            /// Values for which `is_tombstone` is true *remove* their key (see the
            /// [module docs](crate::conflate#removal)): the state table forgets the
            /// key, a receiver that delivered an event of the key's current life
            /// gets the tombstone once, and a receiver that did not gets nothing.
            /// Without it, every value is a value.
            ///
            $(#[$tombstones_cost])*
            ///
            /// ```
            #[doc = concat!("use ", $path, "::Hub;")]
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

            $($hub_build)*
        }

        $(#[$receiver_doc])*
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
            /// Takes exactly `key`, compared on the send path with `K: Eq`: no
            /// closure of the caller's runs for this receiver. Replaces an earlier
            /// [`key`](Self::key) or [`key_filter`](Self::key_filter): the later
            /// call wins.
            #[must_use = "builder methods return the changed builder; dropping it drops the setting"]
            pub fn key(self, key: K) -> Self {
                ReceiverBuilder {
                    config: self.config.key(key),
                    ..self
                }
            }

            /// Takes the keys for which `keep` returns `true`. Runs on the sending
            /// thread, once per send, before anything is queued: an unwanted key
            /// never takes a slot. Replaces an earlier [`key`](Self::key) or
            /// [`key_filter`](Self::key_filter): the later call wins.
            ///
            $(#[$key_filter_cost])*
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

            /// This receiver's own merge, `merge(pending, incoming)`, overriding the
            /// hub's for this receiver only; `None` annihilates.
            ///
            $(#[$merge_cost])*
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
            /// [`ReceiverWatch::name`](super::ReceiverWatch::name) (an operator's
            /// alert can then say which consumer fell behind). Names need not be
            /// unique. No cost on any send.
            ///
            /// ```
            #[doc = concat!("use ", $path, "::Hub;")]
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
            $(#[$snapshot_cost])*
            ///
            /// # Panics
            ///
            /// If the hub was built without
            /// [`retain_latest`](HubBuilder::retain_latest): there is no table to
            /// start from. The message says so.
            ///
            /// ```
            #[doc = concat!("use ", $path, "::Hub;")]
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
                if !self.shared.retains() {
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
            /// [`ReceiverStats::overflowed`](crate::ReceiverStats::overflowed); sends
            /// for pending keys still merge.
            ///
            $(#[$max_pending_cost])*
            ///
            /// # Panics
            ///
            /// If `n` is 0 (a receiver that can hold nothing); the message says to pass
            /// `n >= 1` or leave the bound out.
            ///
            /// ```
            #[doc = concat!("use ", $path, "::Hub;")]
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

            $($receiver_build)*
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
    };
}

pub(crate) use conflate_builders;
