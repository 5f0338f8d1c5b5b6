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
use crate::conflate::common::builder::conflate_builders;
use crate::conflate::common::policy::{no_state_table, KeyFilter, Merge, ReceiverConfig};
use crate::conflate::common::removal::{Correction, Seen, Tombstones};
use crate::sync::Arc;
use std::fmt;
use std::hash::Hash;

conflate_builders! {
    path: "keybus::conflate",
    receiver_cost: [/// Takes a registry lock that sends never take.
    ],
    retain_cost: [/// Cost per send: the table is the hub's cells, so a send writes its
        /// key's cell (one shard lock, one lookup, the value moved in) even with no
        /// receiver, and the plain receivers share that write; a key entering the
        /// table also clones the key and takes a first-touch number (one
        /// `fetch_add`). A lone plain receiver of a newer-wins hub without
        /// tombstones keeps a copy of its pending values (one `V` clone per
        /// send), written under the same lock, so that its receives take
        /// them without visiting the table. A hub without it pays nothing: the send path tests "no
        /// receiver and no table" with one mask of the state word it loads anyway.
    ],
    tombstones_cost: [/// The test runs once per send (before any lock) and once per event a
        /// receiver takes; keep it cheap (a `matches!`). A panic in it reaches
        /// the sender, with nothing published, or the receiver, with the event
        /// taken and counted delivered.
    ],
    hub_build: {
        /// The hub. Allocates the shared state (and the table's 32 cell shards with
        /// `retain_latest`); never blocks.
        #[must_use]
        pub fn build(self) -> Hub<K, V> {
            Hub {
                shared: Arc::new(Shared::new(self.merge, self.retain, self.tombstones)),
            }
        }
    },
    receiver_doc: [/// Configures a [`Receiver`]; from [`Hub::receiver_builder`].
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
    ],
    key_filter_cost: [/// Runs with no lock held.
    ],
    merge_cost: [/// Runs on the sending thread holding only this receiver's shard lock
        /// for the key.
    ],
    snapshot_cost: [/// Cost, at [`build`](Self::build): sends on this hub are held off while
        /// the sends in flight finish and the table is copied and filtered
        /// (O(keys) clones and filter calls); receivers without `snapshot` never
        /// hold sends off.
    ],
    max_pending_cost: [/// Cost: none on a coalescing send; a send for a new key compares two
        /// counters under the queue lock it takes anyway; each pop takes that lock
        /// once more (to count the take where senders read it).
    ],
    receiver_build: {
        /// Registers the receiver. It starts empty (unless
        /// [`snapshot`](Self::snapshot)); if the hub is closed it is born closed.
        ///
        /// A receiver of every key with the hub's newer-wins merge and no bound
        /// shares the hub's cells (it keeps no values of its own); any other keeps
        /// its pending values itself. Both behave the same; they cost differently
        /// (see [`Sender::send`](super::Sender::send)).
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
                let (rx, solo) = self
                    .shared
                    .register_cell(snapshot, serial, name, correction.clone());
                let local = match solo {
                    Some(solo) => CellLocal::with_solo(solo),
                    None => CellLocal::default(),
                };
                Kind::Cells(rx, local)
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
    },
}
