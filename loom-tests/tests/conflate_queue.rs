//! Loom models of a cell receiver's first-touch queue (`src/conflate/lockfree/queue/`,
//! docs/design.md, "The first-touch queue"): producers claim positions with one
//! CAS on the tail word, which also carries the cut epoch and the parked bit.
//! Under loom a block holds 3 entries, so these models cross block boundaries
//! (the marker offset, the next-block hand-over, the consumer freeing a block).
//!
//! Run one: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release
//! -p keybus-loom-tests --test conflate_queue MODEL`.
#![cfg(loom)]

use keybus::conflate::__loom::{QueueHead, QueueModel};
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

/// Two producers push two entries each (crossing a block boundary) while the
/// consumer cuts once and then drains. Every entry comes out exactly once, each
/// producer's in its order; an entry is in the cut exactly when its push landed
/// in the cut's epoch (the epoch the push's own CAS reported). Trap: a cut that
/// is not one instant of the tail word (a push counted in the cut but stamped
/// with the next epoch, or the reverse), an entry lost or read twice at a
/// boundary.
///
/// Rule: conflate 5, "The first-touch queue". Mutant: d (`.ci/mutants`).
#[test]
fn pushes_vs_cut_each_entry_once_on_its_side_of_the_cut() {
    loom::model(|| {
        let q = Arc::new(QueueModel::default());
        // Per entry (producer * 2 + i): the epoch its push landed in, plus one.
        let landed = Arc::new([
            AtomicU64::new(0),
            AtomicU64::new(0),
            AtomicU64::new(0),
            AtomicU64::new(0),
        ]);
        let producers: Vec<_> = (0..2u32)
            .map(|p| {
                let (q, landed) = (q.clone(), landed.clone());
                thread::spawn(move || {
                    for i in 0..2u32 {
                        let id = p * 2 + i;
                        let (epoch, _) = q.push(id, u64::from(id) * 10);
                        landed[id as usize].store(u64::from(epoch) + 1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        let mut head = QueueHead::default();
        let end = q.start_cut();
        let mut cut = Vec::new();
        while let Some(e) = q.pop_cut(&mut head, &end) {
            cut.push(e);
        }
        for p in producers {
            p.join().unwrap();
        }
        let rest = q.drain(&mut head);
        let all: Vec<(u32, u64)> = cut.iter().chain(&rest).copied().collect();
        assert_each_entry_once_in_its_producers_order(&all);
        for &(c, _) in &cut {
            let epoch = landed[c as usize].load(Ordering::Relaxed) - 1;
            assert_eq!(
                epoch,
                u64::from(end.epoch()),
                "entry {c} in the cut landed after it"
            );
        }
        for &(c, _) in &rest {
            let epoch = landed[c as usize].load(Ordering::Relaxed) - 1;
            assert_eq!(
                epoch,
                u64::from(end.epoch()) + 1,
                "entry {c} after the cut landed before it"
            );
        }
        match Arc::try_unwrap(q) {
            Ok(q) => q.release(&head),
            Err(_) => unreachable!("every producer joined"),
        }
    });
}

/// Two producers push two entries each (crossing a block boundary) while the
/// consumer pops as a receive does (`Queue::pop_ready`: the place at its head
/// first, the tail word only when that place is not written yet). Every entry
/// comes out exactly once, each producer's in its order, with its start; a
/// pop never returns a place a producer claimed but has not written. Trap: a
/// pop that trusts a place without its written test (a claimed place reads as
/// cell 0 less one), or reads past a block's last place.
///
/// Rule: conflate 1 (each receiver sees each pending key once, in first-touch
/// order), "The first-touch queue". Mutant: d3 (`.ci/mutants`).
#[test]
fn pushes_vs_pop_each_entry_once() {
    loom::model(|| {
        let q = Arc::new(QueueModel::default());
        let producers: Vec<_> = (0..2u32)
            .map(|p| {
                let q = q.clone();
                thread::spawn(move || {
                    for i in 0..2u32 {
                        let id = p * 2 + i;
                        q.push(id, u64::from(id) * 10);
                    }
                })
            })
            .collect();
        let mut head = QueueHead::default();
        let mut all = Vec::new();
        // Two pops racing the producers, the rest after they finished.
        for _ in 0..2 {
            all.extend(q.pop(&mut head));
        }
        for p in producers {
            p.join().unwrap();
        }
        while let Some(e) = q.pop(&mut head) {
            all.push(e);
        }
        assert_each_entry_once_in_its_producers_order(&all);
        match Arc::try_unwrap(q) {
            Ok(q) => q.release(&head),
            Err(_) => unreachable!("every producer joined"),
        }
    });
}

/// The two-producer models' check: entries 0 to 3 (producer `id / 2`,
/// start `id * 10`) each exactly once, each producer's in its order, each
/// with its start.
fn assert_each_entry_once_in_its_producers_order(all: &[(u32, u64)]) {
    let ids: Vec<u32> = all.iter().map(|&(c, _)| c).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        vec![0, 1, 2, 3],
        "every entry exactly once: {ids:?}"
    );
    for p in 0..2u32 {
        let mine: Vec<u32> = ids.iter().copied().filter(|c| c / 2 == p).collect();
        assert_eq!(mine, vec![p * 2, p * 2 + 1], "one producer's order");
    }
    for &(c, start) in all {
        assert_eq!(
            start,
            u64::from(c) * 10,
            "the entry's start travels with it"
        );
    }
}

/// The consumer announces it parks while a producer pushes: exactly when the
/// announcement came first (it returned `true` on an empty queue), the push
/// reports that it must wake the consumer. Trap: a lost wake-up (a push that
/// clears nothing, or a park that lands after the push on a non-empty queue).
///
/// Rule: "Parking without lost wake-ups". Mutant: e1 (`.ci/mutants`).
#[test]
fn park_vs_push_exactly_one_side_sees_the_other() {
    loom::model(|| {
        let q = Arc::new(QueueModel::default());
        // One entry pushed and read first: the race below is on an installed
        // block (the push's fast path), not on the first block's install.
        let mut head = QueueHead::default();
        q.push(1, 0);
        assert_eq!(q.pop(&mut head), Some((1, 0)));
        let producer = {
            let q = q.clone();
            thread::spawn(move || q.push(7, 0).1)
        };
        let parked = q.park(&head);
        let woke = producer.join().unwrap();
        // The park came first (on the empty queue) exactly when the push found
        // the bit to clear.
        assert_eq!(
            parked, woke,
            "a parked consumer is woken by the next push, and only then"
        );
        match Arc::try_unwrap(q) {
            Ok(q) => q.release(&head),
            Err(_) => unreachable!("the producer joined"),
        }
    });
}

/// A watch walks the queue from the consumer's published head while the
/// consumer pops every entry, leaving (and recycling) the first block. The
/// walk sees a suffix of the entries, in order, each with its own start: the
/// consumer cannot recycle a block the walker is in (it takes the published
/// head's lock to leave a block), and the walker never starts behind the
/// published position. Trap: a walk that reads a block the consumer reset
/// (a cell id of 0 spins forever, another is garbage), or starts at a stale
/// position in the wrong block.
///
/// Rule: conflate 13 (a `ReceiverWatch`'s stats), "Accounting". Mutant: n
/// (`.ci/mutants`).
#[test]
fn watch_walk_vs_consumer_leaving_a_block() {
    loom::model(|| {
        let q = Arc::new(QueueModel::default());
        // Four entries: a block holds three, so the consumer leaves one.
        for id in 0..4u32 {
            q.push(id, u64::from(id) * 10);
        }
        let watcher = {
            let q = q.clone();
            thread::spawn(move || q.seen().expect("the consumer holds on"))
        };
        let mut head = QueueHead::default();
        let mut popped = Vec::new();
        while let Some(e) = q.pop(&mut head) {
            popped.push(e);
        }
        let seen = watcher.join().unwrap();
        let all: Vec<(u32, u64)> = (0..4u32).map(|id| (id, u64::from(id) * 10)).collect();
        assert_eq!(popped, all);
        assert!(
            all.ends_with(&seen),
            "a walk sees a suffix of the queue: {seen:?}"
        );
        match Arc::try_unwrap(q) {
            Ok(q) => q.release(&head),
            Err(_) => unreachable!("the watcher joined"),
        }
    });
}
