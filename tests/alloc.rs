//! Non-functional rule (docs/design.md, "The contract"): no allocation on a send that coalesces into an
//! existing slot. Also measured (and pinned where it is zero): a `try_recv` of a
//! pending key once the receiver is warmed up, and the send that makes a key
//! pending again afterwards. Both implementations: each test is a generic function,
//! instantiated per implementation by `tests_for!`.
//!
//! Known deviation (keybus::conflate only, see the last test): the *first*
//! coalescing send into a shard whose hash table is exactly full grows that
//! table (one allocation), because the send path looks the key up through
//! hashbrown's `HashTable::entry`, which reserves room for an insert before it
//! searches. Steady state, once each shard has grown, is allocation-free, which
//! is what the tests pin (after one uncounted coalescing pass).
//!
//! Counts come from a counting global allocator that counts per thread, only
//! while asked to (`test-support/src/counting.rs`). Run with `--nocapture` to see
//! the numbers printed for the non-pinned cases.

use keybus_test_support::conflate_api::*;
use keybus_test_support::counting::{self, Counting};

#[global_allocator]
static ALLOC: Counting = Counting;

use counting::allocations_in;

const KEYS: u64 = 64;

/// Runs `f`, counting its allocations only if `count`.
fn maybe_count(count: bool, f: impl FnOnce()) -> usize {
    if count {
        allocations_in(f)
    } else {
        f();
        0
    }
}
const ROUNDS: u64 = 1_000;

/// Sends for keys that are all pending already: every one merges
/// into its slot. Steady state: after one uncounted coalescing pass
/// (see the module docs for what that first pass can do).
fn coalescing_send_allocates_nothing<I: Conflate>() {
    let hub = Hub::<I, u64, u64>::new();
    let tx = hub.sender();
    let rx = hub.receiver();
    for k in 0..KEYS {
        tx.send(k, 0).unwrap();
    }
    for k in 0..KEYS {
        tx.send(k, 1).unwrap();
    }
    assert_eq!(rx.len(), KEYS as usize);
    let n = allocations_in(|| {
        for i in 0..ROUNDS * KEYS {
            tx.send(i % KEYS, i).unwrap();
        }
    });
    assert_eq!(n, 0, "coalescing sends allocated {n} times");
    assert_eq!(rx.len(), KEYS as usize);
}

/// The same with four receivers and a custom merge: still nothing.
fn coalescing_send_to_four_receivers_with_merge_allocates_nothing<I: Conflate>() {
    let hub = Hub::<I, u64, u64>::with_merge(|a: u64, b: u64| Some(a.wrapping_add(b)));
    let tx = hub.sender();
    let rxs: Vec<_> = (0..4).map(|_| hub.receiver()).collect();
    for _ in 0..2 {
        for k in 0..KEYS {
            tx.send(k, 1).unwrap();
        }
    }
    let n = allocations_in(|| {
        for i in 0..ROUNDS * KEYS {
            tx.send(i % KEYS, 1).unwrap();
        }
    });
    assert_eq!(n, 0, "coalescing sends to 4 receivers allocated {n} times");
    assert!(rxs.iter().all(|rx| rx.len() == KEYS as usize));
}

/// Warm steady state of a consumer that keeps up: `KEYS` keys made
/// pending, then taken one by one with `try_recv`, round after round.
/// Returns (allocations in the sends, allocations in the try_recvs).
fn warm_send_then_try_recv<I: Conflate>() -> (usize, usize) {
    let hub = Hub::<I, u64, u64>::new();
    let tx = hub.sender();
    let mut rx = hub.receiver();
    let round =
        |tx: &Sender<I, u64, u64>, rx: &mut Receiver<I, u64, u64>, count: bool| -> (usize, usize) {
            let mut sends = 0;
            let mut recvs = 0;
            for k in 0..KEYS {
                sends += maybe_count(count, || tx.send(k, k).unwrap());
            }
            for k in 0..KEYS {
                let mut got = None;
                recvs += maybe_count(count, || got = Some(rx.try_recv().unwrap()));
                assert_eq!(got.map(|e| e.key), Some(k));
            }
            (sends, recvs)
        };
    // Warm up: tables, queues and per-thread state reach their size.
    // 64 rounds: a cell receiver's queue blocks hold 31 entries,
    // so where a round of 64 starts in a block cycles with a
    // period of 31 rounds, and its pool of spare blocks reaches
    // the most any round needs only after one full cycle.
    for _ in 0..64 {
        round(&tx, &mut rx, false);
    }
    let mut total = (0, 0);
    for _ in 0..ROUNDS {
        let (s, r) = round(&tx, &mut rx, true);
        total.0 += s;
        total.1 += r;
    }
    println!(
        "{}: warm, {} rounds of {KEYS} keys: {} allocations in {} \
         sends of a not-pending key, {} in {} try_recv",
        I::NAME,
        ROUNDS,
        total.0,
        ROUNDS * KEYS,
        total.1,
        ROUNDS * KEYS
    );
    total
}

fn warm_try_recv_of_a_pending_key_allocates_nothing<I: Conflate>() {
    let (_, recvs) = warm_send_then_try_recv::<I>();
    assert_eq!(recvs, 0, "warm try_recv allocated {recvs} times");
}

fn warm_send_of_a_key_not_pending_allocates_nothing<I: Conflate>() {
    let (sends, _) = warm_send_then_try_recv::<I>();
    assert_eq!(
        sends, 0,
        "warm non-coalescing sends allocated {sends} times"
    );
}

keybus_test_support::tests_for! {
    crate for baseline = Baseline, lockfree = Lockfree => {
        coalescing_send_allocates_nothing,
        coalescing_send_to_four_receivers_with_merge_allocates_nothing,
        warm_try_recv_of_a_pending_key_allocates_nothing,
        warm_send_of_a_key_not_pending_allocates_nothing,
    }
}

/// Allocations in the first coalescing pass over `KEYS` freshly pending keys
/// (one receiver), summed over `trials` fresh hubs (each with its own hash seed,
/// so its own spread of keys over shards).
fn first_coalescing_pass<I: Conflate>(trials: usize) -> usize {
    let mut total = 0;
    for _ in 0..trials {
        let hub = Hub::<I, u64, u64>::new();
        let tx = hub.sender();
        let _rx = hub.receiver();
        for k in 0..KEYS {
            tx.send(k, 0).unwrap();
        }
        total += allocations_in(|| {
            for k in 0..KEYS {
                tx.send(k, 1).unwrap();
            }
        });
    }
    total
}

/// The first coalescing send for a pending key allocates nothing either: a hit
/// must not reserve room for an insert (a full table would grow). Printed with
/// `--nocapture`.
#[test]
fn first_coalescing_pass_allocations() {
    const TRIALS: usize = 100;
    let baseline = first_coalescing_pass::<Baseline>(TRIALS);
    let lockfree = first_coalescing_pass::<Lockfree>(TRIALS);
    println!(
        "first coalescing pass over {KEYS} pending keys, {TRIALS} fresh hubs: \
         baseline {baseline} allocations, keybus::conflate {lockfree} allocations \
         ({:.2} per hub)",
        lockfree as f64 / TRIALS as f64
    );
    assert_eq!(baseline, 0);
    assert_eq!(lockfree, 0, "a coalescing send allocated");
}
