//! Buffer generations: an id per buffer instance, so that a cursor saved from one
//! buffer is not mistaken for a position in another (broadcast rule 7, docs/design.md).
//!
//! Shared by `broadcast` and `baseline::broadcast`, so generations are unique
//! across both kinds of buffer in one process.

use crate::sync::process::{AtomicU64, OnceLock, Ordering};
use std::hash::BuildHasher;

/// A fresh generation: unique within this process, and unlikely to repeat across
/// processes (so a cursor persisted by an earlier run does not look valid).
///
/// A process-wide counter makes ids unique; a per-process random seed makes them
/// differ between runs. `mix` is a bijection on `u64`, so distinct counter values
/// stay distinct after mixing.
pub(crate) fn next() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    static SEED: OnceLock<u64> = OnceLock::new();
    let seed = *SEED.get_or_init(|| {
        std::collections::hash_map::RandomState::new().hash_one(0x6b65_7962_7573_u64)
    });
    // Relaxed: the read-modify-write alone makes each value unique; nothing else is
    // published through this counter.
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    mix(seed.wrapping_add(n))
}

/// The splitmix64 finalizer: xor-shifts and odd multiplications, each invertible,
/// so the whole is a bijection.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    #[test]
    fn broadcast_generations_are_distinct() {
        let ids: std::collections::HashSet<u64> = (0..1000).map(|_| super::next()).collect();
        assert_eq!(ids.len(), 1000);
    }
}
