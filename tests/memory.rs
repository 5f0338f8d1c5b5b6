//! Memory footprint, measured with the counting allocator (heap bytes still
//! allocated, on the measuring thread): bytes per pending key per receiver, per
//! idle receiver, per retained broadcast entry and per broadcast reader, for
//! keybus and the baseline. `K = u64, V = u64` for conflate; broadcast values
//! are `[u64; 4]` (32 bytes) and `u64`.
//!
//! `cargo test --release --test memory -- --nocapture` prints the table that
//! `docs/performance.md` quotes. The assertions are loose bounds (the contract: a
//! receiver's memory is bounded by its pending keys, never by the number of
//! sends), not the numbers themselves. Two checks count what is left
//! behind instead: heap bytes after key churn and annihilation, and copies of
//! a value after a recurring key set is taken (none may outlive delivery).
//!
//! Hash tables and vectors grow by doubling, so bytes per key depend on where in
//! its growth step a table is: the table reports several sizes.

use keybus_test_support::broadcast_api::{self, Broadcast, BufferApi, Value};
use keybus_test_support::conflate_api::{
    self, Conflate, Hub, HubApi, HubBuilderApi, ReceiverApi, ReceiverBuilderApi, SenderApi,
};
use keybus_test_support::counting::{self, Counting};

#[global_allocator]
static ALLOC: Counting = Counting;

use counting::measure;

/// Live heap bytes left behind by `f` (its result is kept alive until measured).
fn live_bytes<R>(f: impl FnOnce() -> R) -> (R, isize) {
    let (r, usage) = measure(f);
    (r, usage.live_bytes)
}

/// The conflate rows of the footprint table for `I`, checking the bounds.
fn conflate_memory<I: Conflate>() -> Vec<String> {
    let name = I::NAME.replace(' ', "");
    let mut lines = Vec::new();
    // Per-thread lazy state (thread-locals such as the re-entrance mark)
    // is created here, not counted below.
    {
        let hub = Hub::<I, u64, u64>::new();
        let (tx, mut rx) = (hub.sender(), hub.receiver());
        tx.send(0, 0).unwrap();
        let _ = rx.try_recv();
    }
    // A million keys only in release builds (`cargo test --release`): the
    // debug build of CI's test stage would spend half a minute on it.
    let sizes: &[u64] = if cfg!(debug_assertions) {
        &[1_000, 10_000, 100_000]
    } else {
        &[1_000, 10_000, 100_000, 1_000_000]
    };
    for &keys in sizes {
        for receivers in [1u64, 4] {
            let hub = Hub::<I, u64, u64>::new();
            let tx = hub.sender();
            let rxs: Vec<_> = (0..receivers).map(|_| hub.receiver()).collect();
            let ((), bytes) = live_bytes(|| {
                for k in 0..keys {
                    tx.send(k, k).unwrap();
                }
            });
            assert!(rxs.iter().all(|rx| rx.len() == keys as usize));
            let per_key = bytes as f64 / (keys * receivers) as f64;
            lines.push(format!(
                    "| {name} | bytes per pending key per receiver ({keys} keys, {receivers} receiver{}) | {per_key:.1} |",
                    if receivers == 1 { "" } else { "s" }
                ));
            assert!(per_key < 1024.0, "{name}: {per_key} bytes per pending key");
            // Bounded by keys, not sends: 200,000 more sends to the same
            // keys (after one pass that lets full tables grow) add nothing.
            if keys == 1_000 {
                for k in 0..keys {
                    tx.send(k, k + 1).unwrap();
                }
                let ((), more) = live_bytes(|| {
                    for i in 0..200_000u64 {
                        tx.send(i % keys, i).unwrap();
                    }
                });
                assert_eq!(
                    more, 0,
                    "{name}: coalescing sends grew the heap by {more} bytes"
                );
            }
        }
    }
    let hub = Hub::<I, u64, u64>::new();
    let _warm = hub.receiver();
    const IDLE: usize = 64;
    let (idle, bytes) = live_bytes(|| (0..IDLE).map(|_| hub.receiver()).collect::<Vec<_>>());
    // The Vec holding the receivers is not the receivers' cost.
    let holder = (IDLE * std::mem::size_of_val(&idle[0])) as isize;
    let per_rx = (bytes - holder) as f64 / IDLE as f64;
    lines.push(format!(
            "| {name} | bytes per idle receiver (heap, {IDLE} receivers; plus {} bytes inline) | {per_rx:.0} |",
            std::mem::size_of_val(&idle[0])
        ));
    assert!(
        per_rx < 16.0 * 1024.0,
        "{name}: {per_rx} bytes per idle receiver"
    );
    drop(idle);
    lines
}

/// The broadcast rows of the footprint table for `B` with values `T` (named
/// `ty`), made by `value`, checking the bounds.
fn broadcast_memory<B: Broadcast, T: Value>(ty: &str, value: fn(u64) -> T) -> Vec<String> {
    let name = B::NAME.replace(' ', "");
    let mut lines = Vec::new();
    // Per-thread lazy state first (see `conflate_memory`).
    {
        let b = B::Buffer::<T>::new(4);
        b.append(value(0)).unwrap();
        let _ = b.latest();
    }
    const CAP: u64 = 4_096;
    let (buf, empty) = live_bytes(|| B::Buffer::<T>::new(CAP as usize));
    let ((), filled) = live_bytes(|| {
        for i in 0..3 * CAP {
            buf.append(value(i)).unwrap();
        }
    });
    let per_entry = (empty + filled) as f64 / CAP as f64;
    lines.push(format!(
            "| {name} | bytes per retained entry, `{ty}` ({} bytes), full ring of {CAP} | {per_entry:.1} |",
            std::mem::size_of::<T>()
        ));
    lines.push(format!(
        "| {name} | of which allocated by `Buffer::new` (empty ring), per slot, `{ty}` | {:.1} |",
        empty as f64 / CAP as f64
    ));
    assert!(per_entry < 256.0, "{name}: {per_entry} bytes per entry");
    let ((), steady) = live_bytes(|| {
        for i in 0..3 * CAP {
            buf.append(value(i)).unwrap();
        }
    });
    assert_eq!(steady, 0, "{name}: appends to a full ring grew the heap");
    let (readers, bytes) = live_bytes(|| (0..64).map(|_| buf.reader()).collect::<Vec<_>>());
    let holder = (64 * std::mem::size_of_val(&readers[0])) as isize;
    lines.push(format!(
        "| {name} | bytes per reader (heap; plus {} bytes inline) | {:.0} |",
        std::mem::size_of_val(&readers[0]),
        (bytes - holder) as f64 / 64.0
    ));
    lines
}

#[test]
fn memory_footprint() {
    let mut lines = vec![
        "| impl | what | bytes |".to_string(),
        "|---|---|---:|".to_string(),
    ];
    lines.extend(conflate_memory::<conflate_api::Lockfree>());
    lines.extend(conflate_memory::<conflate_api::Baseline>());
    let wide = |i: u64| [i; 4];
    let narrow = |i: u64| i;
    lines.extend(broadcast_memory::<broadcast_api::Lockfree, _>(
        "[u64; 4]", wide,
    ));
    lines.extend(broadcast_memory::<broadcast_api::Baseline, _>(
        "[u64; 4]", wide,
    ));
    lines.extend(broadcast_memory::<broadcast_api::Lockfree, _>(
        "u64", narrow,
    ));
    lines.extend(broadcast_memory::<broadcast_api::Baseline, _>(
        "u64", narrow,
    ));
    println!("\n{}\n", lines.join("\n"));
}

/// Repeated annihilation leaves the heap flat: a key sent and annihilated holds
/// nothing afterwards, neither its slot nor its ticket in the receiver's queue
/// (which `len()` would not show: it is computed from counters). One other key
/// stays pending throughout, so the queue is never empty and cannot be reset
/// wholesale.
fn annihilation_residue<I: Conflate>() {
    let name = I::NAME.replace(' ', "");
    let hub = Hub::<I, u64, i64>::with_merge(|a, b| Some(a + b).filter(|s| *s != 0));
    let tx = hub.sender();
    let mut rx = hub.receiver();
    const KEYS: u64 = 1_000;
    const PAIRS: u64 = 200_000;
    let anchor = u64::MAX;
    let pass = |pairs: u64| {
        tx.send(anchor, 1).unwrap();
        for i in 0..pairs {
            tx.send(i % KEYS, 1).unwrap();
            tx.send(i % KEYS, -1).unwrap();
        }
    };
    // One pass lets every table and list reach its working size.
    pass(KEYS);
    let ((), more) = live_bytes(|| pass(PAIRS));
    assert!(
        more <= 0,
        "{name}: {PAIRS} annihilated pairs grew the heap by {more} bytes"
    );
    assert_eq!(rx.len(), 1, "{name}: only the anchor is pending");
    assert_eq!(rx.try_recv().unwrap().key, anchor);
    assert!(
        rx.try_recv().is_err(),
        "{name}: an annihilated key was delivered"
    );
}

#[test]
fn annihilation_leaves_no_residue() {
    annihilation_residue::<conflate_api::Lockfree>();
    annihilation_residue::<conflate_api::Baseline>();
}

/// How a churn test's receiver takes its backlog.
#[derive(Clone, Copy, Debug)]
enum Take {
    /// One `try_recv_all` per round.
    Cut,
    /// `try_recv` until empty.
    Pop,
}

/// Key churn leaves the heap flat: every round sends `KEYS` keys never sent
/// before and takes them all, so the live key set is `KEYS` at most, and what
/// the hub keeps for keys that are gone must not grow with the rounds (conflate
/// rule 3: memory bounded by the live key set). `filtered`: `Some(true)`, a
/// receiver with a key filter (its own values); `Some(false)`, the hub's
/// sole plain receiver (in keybus its values in its queue); `None`, a plain
/// receiver registered beside another that then left (in keybus the hub's
/// shared cells).
fn churn_residue<I: Conflate>(take: Take, filtered: Option<bool>) {
    let name = I::NAME.replace(' ', "");
    let hub = Hub::<I, u64, u64>::new();
    let tx = hub.sender();
    let mut rx = match filtered {
        Some(true) => hub.receiver_builder().key_filter(|_: &u64| true).build(),
        Some(false) => hub.receiver(),
        None => {
            // Registered beside another plain receiver: in keybus, one that
            // shares the cells, alone once the other left.
            let first = hub.receiver();
            let rx = hub.receiver();
            drop(first);
            rx
        }
    };
    const KEYS: u64 = 10_000;
    let mut next = 0u64;
    let mut round = |rounds: u64| {
        for _ in 0..rounds {
            for _ in 0..KEYS {
                tx.send(next, next).unwrap();
                next += 1;
            }
            let taken = match take {
                Take::Cut => rx.try_recv_all().unwrap().len(),
                Take::Pop => std::iter::from_fn(|| rx.try_recv().ok()).count(),
            };
            assert_eq!(taken as u64, KEYS, "{name}: one event per key");
        }
    };
    // A few rounds let every table and list reach its working size.
    round(4);
    let ((), more) = live_bytes(|| round(40));
    // A hub that kept every key it ever saw would grow by at least 40 × 10,000
    // keys × 16 bytes here (6.4 MB). The bound leaves room for tables still
    // reaching their working size: the keys of a round spread unevenly over a
    // hub's shards, and a shard that first holds more than before grows its
    // slab by a chunk (keybus: at most one more per shard here, 32 of them
    // of 24 KiB; the sizes are in `cells/slab.rs`).
    let bound = 1 << 20;
    assert!(
        more <= bound,
        "{name} ({take:?}, key filter {filtered:?}): 400,000 keys come and gone \
         grew the heap by {more} bytes (more than {bound})"
    );
}

#[test]
fn key_churn_leaves_no_residue() {
    for take in [Take::Cut, Take::Pop] {
        for filtered in [Some(false), Some(true), None] {
            churn_residue::<conflate_api::Lockfree>(take, filtered);
            churn_residue::<conflate_api::Baseline>(take, filtered);
        }
    }
}

/// A recurring key set leaves no copy of a value behind: every round sends
/// each key again and takes them all, so the keys' cells (keybus) or slots
/// (the baseline) are reused round after round, and once every event is
/// dropped no value may live on in the hub (conflate rule 3). Counted with a
/// shared token: each value is a clone of it, so its strong count is one plus
/// the copies still alive anywhere.
///
/// `shared`: the receiver registered beside another plain one, which then
/// left, so in keybus it shares the hub's cells; a sole one keeps its
/// values itself.
///
/// `retained`: a `retain_latest` hub, whose table keeps one copy per key (in
/// keybus the cells; its sole plain receiver keeps copies of its own in the
/// places the cells name). `snapshot`: the receiver is a snapshot receiver
/// (in keybus one that shares the cells, alone in its hub's list of them,
/// so its sends take the cells' short path for the first send after a take).
fn recurring_keys_leave_no_copies<I: Conflate>(
    take: Take,
    shared: bool,
    retained: bool,
    snapshot: bool,
) {
    let name = I::NAME.replace(' ', "");
    let token = std::sync::Arc::new(0u64);
    let hub = if retained {
        Hub::<I, u64, std::sync::Arc<u64>>::builder()
            .retain_latest()
            .build()
    } else {
        Hub::<I, u64, std::sync::Arc<u64>>::new()
    };
    let tx = hub.sender();
    let first = shared.then(|| hub.receiver());
    let mut rx = if snapshot {
        hub.receiver_builder().snapshot().build()
    } else {
        hub.receiver()
    };
    drop(first);
    const KEYS: u64 = 1_000;
    for round in 0..4 {
        for k in 0..KEYS {
            tx.send(k, token.clone()).unwrap();
        }
        let taken = match take {
            Take::Cut => rx.try_recv_all().unwrap().len(),
            Take::Pop => std::iter::from_fn(|| rx.try_recv().ok()).count(),
        };
        assert_eq!(taken as u64, KEYS, "{name}: one event per key");
        assert_eq!(
            std::sync::Arc::strong_count(&token),
            1 + if retained { KEYS as usize } else { 0 },
            "{name} ({take:?}, retained {retained}, snapshot {snapshot}): values left in \
             the hub after round {round}, every event dropped"
        );
    }
}

#[test]
fn recurring_keys_leave_no_copies_behind() {
    for take in [Take::Cut, Take::Pop] {
        for (shared, retained, snapshot) in [
            (false, false, false),
            (true, false, false),
            (false, true, false),
            (false, true, true),
        ] {
            recurring_keys_leave_no_copies::<conflate_api::Lockfree>(
                take, shared, retained, snapshot,
            );
            recurring_keys_leave_no_copies::<conflate_api::Baseline>(
                take, shared, retained, snapshot,
            );
        }
    }
}
