//! The conflate conformance suite: every rule of the conflate contract
//! (docs/design.md, "The contract") pinned by at least one test named
//! `ruleN_...`, written once as a generic function over [`Conflate`] and run
//! per implementation by `tests/conformance_conflate.rs`. One file per topic
//! (the rule numbers are `docs/design.md`'s, "The contract"):
//!
//! | file | what it pins |
//! |---|---|
//! | `api.rs` | the handles' auto traits (`Send`, `Sync`, `Unpin`, ...) |
//! | `coalescing.rs` | rules 1–3: coalescing at send, merges and annihilation, key filters and per-receiver merges |
//! | `registration.rs` | rule 4: a receiver starts empty |
//! | `cut.rs` | rule 5: `try_recv_all` is one cut |
//! | `precedence.rs` | rule 6: `Closed` over a value over `Empty` or `Timeout` |
//! | `close.rs` | rule 7: the kinds of close |
//! | `shutdown.rs` | rule 7 from the hub: `close_graceful`, `close_now`, and how the hub counts departures |
//! | `wake.rs` | parked receivers woken by a send or a close from another thread |
//! | `close_race.rs` | rule 8: a close racing sends |
//! | `user_code.rs` | rule 9: panics in key filters and merges |
//! | `state_table.rs` | rules 11–12: the state table and snapshot receivers |
//! | `accounting.rs` | rule 13: the stats |
//! | `bounds.rs` | rule 14: `max_pending`, also against a racing cut |
//! | `removal.rs` | rule 15: tombstones |
//! | `observe.rs` | `ReceiverWatch` and `Hub::receivers` |
//!
//! Every test function is re-exported here, so `tests/conformance_conflate.rs`
//! names each one once with [`tests_for!`](crate::tests_for).
//!
//! Race tests use real threads and bounded loops. Nothing here asserts on time,
//! and no sleep stands in for synchronization: where a deadline appears it is
//! the API under test (`recv_timeout` returning `Timeout`), except the stall
//! watchdog of the `wake_*` and `rule8_race_*` tests, which turns a receiver
//! never woken into a failure instead of a hang.
//!
//! [`Conflate`]: crate::conflate_api::Conflate

pub mod accounting;
pub mod api;
pub mod bounds;
pub mod close;
pub mod close_race;
pub mod coalescing;
pub mod cut;
pub mod observe;
pub mod precedence;
pub mod registration;
pub mod removal;
pub mod shutdown;
pub mod state_table;
pub mod user_code;
pub mod wake;

pub use accounting::*;
pub use api::*;
pub use bounds::*;
pub use close::*;
pub use close_race::*;
pub use coalescing::*;
pub use cut::*;
pub use observe::*;
pub use precedence::*;
pub use registration::*;
pub use removal::*;
pub use shutdown::*;
pub use state_table::*;
pub use user_code::*;
pub use wake::*;
