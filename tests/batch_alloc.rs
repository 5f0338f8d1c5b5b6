//! `Receiver::try_recv_all_into`, both implementations: it appends the batch
//! `try_recv_all` would return to the caller's `Vec`, leaves the `Vec` alone on
//! an error or a panic, and allocates nothing once the `Vec` has room (warm
//! steady state: keys made pending again, then one batch read, round after
//! round).
//!
//! Counts come from the per-thread counting allocator of
//! `test-support/src/counting.rs`, as in `tests/alloc.rs`.

use keybus::{Event, TryRecvError};
use keybus_test_support::counting::{allocations_in, Counting};
use keybus_test_support::{broadcast_api, conflate_api};

#[global_allocator]
static ALLOC: Counting = Counting;

const KEYS: u64 = 64;
const ROUNDS: u64 = 1_000;

/// A value whose `Clone` panics when it holds `POISON`.
#[derive(Debug, PartialEq)]
struct Brittle(u64);

const POISON: u64 = 13;

impl Clone for Brittle {
    fn clone(&self) -> Self {
        assert_ne!(self.0, POISON, "Brittle::clone panics on POISON");
        Brittle(self.0)
    }
}

fn keys_values(batch: &[Event<u64, u64>]) -> Vec<(u64, u64)> {
    batch.iter().map(|e| (e.key, e.value)).collect()
}

/// The conflate bodies: `Receiver::try_recv_all_into`.
mod conflate {
    use super::*;
    use keybus_test_support::conflate_api::*;

    /// Appends after what `out` holds, returns how many, and answers
    /// `Empty` / `Closed` with `out` untouched, like `try_recv_all`.
    pub fn try_recv_all_into_appends_the_batch_and_keeps_out_on_errors<I: Conflate>() {
        appends_the_batch_and_keeps_out_on_errors::<I>(Hub::<I, u64, u64>::new());
    }

    /// The same with a state table (`keybus::conflate` keeps a table hub's
    /// sole receiver's values in places its cells name).
    pub fn try_recv_all_into_appends_the_batch_on_a_table_hub<I: Conflate>() {
        appends_the_batch_and_keeps_out_on_errors::<I>(
            Hub::<I, u64, u64>::builder().retain_latest().build(),
        );
    }

    fn appends_the_batch_and_keeps_out_on_errors<I: Conflate>(hub: Hub<I, u64, u64>) {
        let tx = hub.sender();
        let mut rx = hub.receiver();
        tx.send(99, 99).unwrap();
        let mut out = vec![rx.try_recv().unwrap()];
        assert_eq!(rx.try_recv_all_into(&mut out), Err(TryRecvError::Empty));
        assert_eq!(keys_values(&out), [(99, 99)]);
        tx.send(2, 20).unwrap();
        tx.send(1, 10).unwrap();
        tx.send(2, 21).unwrap();
        assert_eq!(rx.try_recv_all_into(&mut out), Ok(2));
        assert_eq!(keys_values(&out), [(99, 99), (2, 21), (1, 10)]);
        assert_eq!(out[1].sends, 2);
        assert!(rx.is_empty());
        // The last backlog after a graceful close comes back with `Ok`.
        tx.send(3, 30).unwrap();
        drop(tx);
        drop(hub);
        assert_eq!(rx.try_recv_all_into(&mut out), Ok(1));
        assert_eq!(out.len(), 4);
        assert_eq!(rx.try_recv_all_into(&mut out), Err(TryRecvError::Closed));
        assert_eq!(out.len(), 4);
        let stats = rx.stats();
        assert_eq!((stats.received, stats.delivered), (5, 4));
    }

    /// A `V: Clone` that panics while the batch is taken (in
    /// `keybus::conflate` a receiver sharing the cells clones what the
    /// state table keeps; the baseline clones at the send instead):
    /// `out` never keeps part of a batch, and the receiver goes on.
    pub fn a_panicking_clone_leaves_out_as_it_was<I: Conflate>() {
        use std::panic::{catch_unwind, AssertUnwindSafe};
        let hub = Hub::<I, u64, Brittle>::builder().retain_latest().build();
        let tx = hub.sender();
        let mut rx = hub.receiver();
        tx.send(0, Brittle(0)).unwrap();
        let mut out = vec![rx.try_recv().unwrap()];
        tx.send(1, Brittle(1)).unwrap();
        let sent = catch_unwind(|| tx.send(2, Brittle(POISON)));
        let read = catch_unwind(AssertUnwindSafe(|| rx.try_recv_all_into(&mut out)));
        assert!(sent.is_err() || read.is_err(), "no clone of POISON ran");
        match read {
            Err(_) => assert!(out.iter().map(|e| e.key).eq([0]), "{out:?}"),
            Ok(taken) => assert_eq!(out.len(), 1 + taken.unwrap_or(0)),
        }
        out.truncate(1);
        tx.send(3, Brittle(3)).unwrap();
        assert_eq!(
            rx.try_recv_all_into(&mut out)
                .map(|_| out.last().map(|e| e.key)),
            Ok(Some(3))
        );
    }

    /// `try_recv_all` is `try_recv_all_into` a fresh `Vec`: the same
    /// batch from two receivers fed the same sends.
    pub fn try_recv_all_returns_what_try_recv_all_into_appends<I: Conflate>() {
        let hub = Hub::<I, u64, u64>::new();
        let tx = hub.sender();
        let (mut a, mut b) = (hub.receiver(), hub.receiver());
        for i in 0..3 * KEYS {
            tx.send(i * 7 % KEYS, i).unwrap();
        }
        let mut out = Vec::new();
        let n = b.try_recv_all_into(&mut out).unwrap();
        assert_eq!(n, KEYS as usize);
        assert_eq!(a.try_recv_all().unwrap(), out);
    }

    /// Warm steady state: `KEYS` keys made pending, then one
    /// `try_recv_all_into` into a cleared `Vec` that has room.
    /// Returns the allocations counted in the batch reads.
    fn warm_batch_reads<I: Conflate>(
        tx: &Sender<I, u64, u64>,
        rx: &mut Receiver<I, u64, u64>,
    ) -> usize {
        let mut out = Vec::with_capacity(KEYS as usize);
        let mut round = |rx: &mut Receiver<I, u64, u64>, count: bool| -> usize {
            for k in 0..KEYS {
                tx.send(k, k).unwrap();
            }
            out.clear();
            let mut got = Ok(0);
            let n = if count {
                allocations_in(|| got = rx.try_recv_all_into(&mut out))
            } else {
                got = rx.try_recv_all_into(&mut out);
                0
            };
            assert_eq!(got, Ok(KEYS as usize));
            assert!(out.iter().map(|e| e.key).eq(0..KEYS), "queue order");
            n
        };
        // Warm up: tables, queues and their spare blocks reach their
        // size (64 rounds, as `tests/alloc.rs` argues for queue blocks).
        for _ in 0..64 {
            round(rx, false);
        }
        (0..ROUNDS).map(|_| round(rx, true)).sum()
    }

    /// A receiver of every key with the hub's merge (in
    /// `keybus::conflate`, one that shares the hub's cells).
    pub fn warm_try_recv_all_into_allocates_nothing<I: Conflate>() {
        let hub = Hub::<I, u64, u64>::new();
        let tx = hub.sender();
        let mut rx = hub.receiver();
        let n = warm_batch_reads::<I>(&tx, &mut rx);
        assert_eq!(n, 0, "warm try_recv_all_into allocated {n} times");
    }

    /// A receiver with a key filter (in `keybus::conflate`, one that
    /// keeps its own values).
    pub fn warm_try_recv_all_into_of_a_filtered_receiver_allocates_nothing<I: Conflate>() {
        let hub = Hub::<I, u64, u64>::new();
        let tx = hub.sender();
        let mut rx = hub.receiver_builder().key_filter(|_| true).build();
        let n = warm_batch_reads::<I>(&tx, &mut rx);
        assert_eq!(n, 0, "warm try_recv_all_into allocated {n} times");
    }

    /// What the `_into` form saves: `try_recv_all` allocates its `Vec`.
    pub fn try_recv_all_allocates_its_vec<I: Conflate>() {
        let hub = Hub::<I, u64, u64>::new();
        let tx = hub.sender();
        let mut rx = hub.receiver();
        warm_batch_reads::<I>(&tx, &mut rx);
        tx.send(1, 1).unwrap();
        let mut got = None;
        let n = allocations_in(|| got = Some(rx.try_recv_all()));
        assert_eq!(got.unwrap().unwrap().len(), 1);
        assert!(n >= 1, "try_recv_all allocated {n} times");
    }
}

keybus_test_support::tests_for! {
    crate::conflate for baseline = conflate_api::Baseline, lockfree = conflate_api::Lockfree => {
        try_recv_all_into_appends_the_batch_and_keeps_out_on_errors,
        try_recv_all_into_appends_the_batch_on_a_table_hub,
        a_panicking_clone_leaves_out_as_it_was,
        try_recv_all_returns_what_try_recv_all_into_appends,
        warm_try_recv_all_into_allocates_nothing,
        warm_try_recv_all_into_of_a_filtered_receiver_allocates_nothing,
        try_recv_all_allocates_its_vec,
    }
}

/// The broadcast bodies: `Buffer::try_read_into`, both implementations: appends, keeps
/// `out` on errors and on a panicking `T::clone`, and allocates nothing once
/// `out` has room for `limit` entries.
mod broadcast {
    use super::*;
    use keybus::ReadError;
    use keybus_test_support::broadcast_api::*;

    pub fn try_read_into_appends_the_page_and_keeps_out_on_errors<B: Broadcast>() {
        let buf = B::Buffer::<u64>::new(4);
        let mut out = Vec::new();
        assert_eq!(buf.try_read_into(0, 8, &mut out), Err(ReadError::Empty));
        for v in 1..=6 {
            buf.append(v * 10).unwrap();
        }
        // Retained 3..=6: cursor 0 is behind it.
        assert!(matches!(
            buf.try_read_into(0, 8, &mut out),
            Err(ReadError::Gap {
                after: 0,
                oldest: 3
            })
        ));
        assert!(out.is_empty());
        assert_eq!(buf.try_read_into(2, 3, &mut out), Ok(3));
        assert_eq!(buf.try_read_into(5, 3, &mut out), Ok(1));
        let got: Vec<(u64, u64)> = out.iter().map(|e| (e.revision, e.value)).collect();
        assert_eq!(got, [(3, 30), (4, 40), (5, 50), (6, 60)]);
        assert_eq!(buf.try_read_into(6, 3, &mut out), Err(ReadError::Empty));
        buf.close();
        assert_eq!(buf.try_read_into(6, 3, &mut out), Err(ReadError::Closed));
        assert_eq!(out.len(), 4);
    }

    pub fn try_read_into_a_panicking_clone_leaves_out_as_it_was<B: Broadcast>() {
        let buf = B::Buffer::<Brittle>::new(4);
        for v in [1, POISON, 3] {
            buf.append(Brittle(v)).unwrap();
        }
        let mut out = vec![];
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            buf.try_read_into(0, 3, &mut out)
        }));
        assert!(unwound.is_err());
        assert!(out.is_empty(), "part of a page was left in out");
        assert_eq!(buf.try_read_into(2, 3, &mut out), Ok(1));
    }

    pub fn warm_try_read_into_allocates_nothing<B: Broadcast>() {
        let buf = B::Buffer::<u64>::new(64);
        let mut out = Vec::with_capacity(64);
        let mut cursor = 0;
        // Warm: fill the ring once (its slots allocate on first use).
        for v in 0..64 {
            buf.append(v).unwrap();
        }
        cursor += buf.try_read_into(cursor, 64, &mut out).unwrap() as u64;
        let mut allocations = 0;
        for round in 0..ROUNDS {
            // Appends are not what is counted (the ring's own rule).
            for v in 0..16 {
                buf.append(round * 16 + v).unwrap();
            }
            out.clear();
            allocations += allocations_in(|| {
                cursor += buf.try_read_into(cursor, 64, &mut out).unwrap() as u64;
            });
        }
        assert_eq!(
            allocations, 0,
            "try_read_into allocated in the steady state"
        );
        assert_eq!(cursor, 64 + ROUNDS * 16);
    }
}

keybus_test_support::tests_for! {
    crate::broadcast for baseline_broadcast = broadcast_api::Baseline, lockfree_broadcast = broadcast_api::Lockfree => {
        try_read_into_appends_the_page_and_keeps_out_on_errors,
        try_read_into_a_panicking_clone_leaves_out_as_it_was,
        warm_try_read_into_allocates_nothing,
    }
}
