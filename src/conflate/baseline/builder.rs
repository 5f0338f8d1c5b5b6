//! The baseline [`HubBuilder`] and [`ReceiverBuilder`]: a hub's merge, table
//! and tombstones; a receiver's filter, merge, bound and snapshot.

use super::hub::Hub;
use super::receiver::Receiver;
use super::shared::Shared;
use crate::conflate::common::builder::conflate_builders;
use crate::conflate::common::policy::{no_state_table, Merge, ReceiverConfig};
use crate::conflate::common::removal::Tombstones;
use crate::sync::Arc;
use std::fmt;
use std::hash::Hash;

conflate_builders! {
    path: "keybus::baseline::conflate",
    receiver_cost: [/// Takes the hub mutex once.
    ],
    retain_cost: [/// Cost: every send then takes the hub mutex, even with no receiver, for
        /// one more lookup and merge (and a key and value clone when the key
        /// enters the table, a value clone otherwise).
    ],
    tombstones_cost: [/// The test runs once per send, before the hub mutex, and once per event
        /// a receiver takes.
    ],
    hub_build: {
        /// The hub. Allocates the shared state; never blocks.
        #[must_use]
        pub fn build(self) -> Hub<K, V> {
            Hub::from_parts(self.merge, self.retain, self.tombstones)
        }
    },
    receiver_doc: [/// Configures one receiver: which keys it takes and how it coalesces.
        ///
        /// Built by [`Hub::receiver_builder`]; finish with [`ReceiverBuilder::build`].
        /// The builder does not hold the send side open.
    ],
    key_filter_cost: [/// Runs under the hub mutex: it must not call back into this bus.
        /// Allocates the shared closure.
    ],
    merge_cost: [/// Runs under the hub mutex: it must not call back into this bus.
        /// Allocates the shared closure.
    ],
    snapshot_cost: [/// The copy and the registration are one hold of the hub mutex
        /// (O(keys) clones and filter calls), which stalls every send meanwhile.
    ],
    max_pending_cost: [/// Cost: O(1) per send, under the hub mutex it holds anyway.
    ],
    receiver_build: {
        /// Registers the receiver. It starts empty (unless
        /// [`snapshot`](Self::snapshot)) and sees only sends that happen after this
        /// returns; born closed if the send side is already closed. Takes the hub
        /// mutex once; allocates the receiver's wake-up primitive; a snapshot
        /// receiver also copies the table under the mutex (O(keys)).
        #[must_use = "a receiver is registered at once and deregistered when dropped; keep it to receive"]
        pub fn build(self) -> Receiver<K, V> {
            let registration = self.shared.register(self.config);
            Receiver::new(self.shared, registration)
        }
    },
}
