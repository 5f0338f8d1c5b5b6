//! What both conflate implementations (`lockfree/` and `baseline/`) share:
//! the public [`Event`](event::Event) and stats types (`event.rs`,
//! `stats.rs`) and the counters behind them (`counters.rs`), merges, key
//! filters and receiver settings (`policy.rs`), removal (`removal.rs`), the
//! hub word's close bits (`hub_word.rs`), the re-entrancy guard
//! (`reentrancy.rs`), the receivers' iterators (`receiver_iter.rs`) and the
//! key hasher (`hash.rs`).

pub(crate) mod builder;
pub(crate) mod counters;
pub(crate) mod event;
pub(crate) mod hash;
pub(crate) mod hub_word;
pub(crate) mod policy;
pub(crate) mod receiver_iter;
pub(crate) mod reentrancy;
pub(crate) mod removal;
pub(crate) mod stats;
