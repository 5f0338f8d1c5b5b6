//! Unit tests of the lock-free ring that the shared conformance suite cannot
//! express: readers stalled inside `T::clone` (the writer never waits, and the
//! memory they hold back is bounded), value lifetimes through node recycling,
//! and small threaded races sized for Miri
//! (`cargo +nightly miri test --lib broadcast`).

use super::Buffer;
use crate::sync::{Arc, AtomicBool, AtomicUsize, Ordering};
use crate::ReadError;
use std::sync::mpsc;
use std::thread;

/// Miri runs every step of an interleaving, so keep the threaded tests tiny there.
const ROUNDS: u64 = if cfg!(miri) { 120 } else { 5_000 };

/// A value whose `clone` blocks until released, to stall a reader mid-copy.
struct Stall {
    entered: mpsc::SyncSender<()>,
    release: Arc<AtomicBool>,
}

impl Clone for Stall {
    fn clone(&self) -> Self {
        let _ = self.entered.try_send(());
        while !self.release.load(Ordering::Acquire) {
            thread::yield_now();
        }
        Stall {
            entered: self.entered.clone(),
            release: self.release.clone(),
        }
    }
}

#[test]
fn broadcast_writer_never_waits_for_a_reader_stalled_in_clone() {
    let (entered_tx, entered_rx) = mpsc::sync_channel(1);
    let release = Arc::new(AtomicBool::new(false));
    let value = || Stall {
        entered: entered_tx.clone(),
        release: release.clone(),
    };
    let buf = Buffer::new(2);
    buf.append(value()).unwrap();
    let reader = {
        let buf = buf.clone();
        thread::spawn(move || buf.try_read(0, 1).map(|page| page[0].revision))
    };
    entered_rx.recv().unwrap();
    // The reader is inside `T::clone` of revision 1; the writer laps it anyway.
    for expected in 2..=10 {
        assert_eq!(buf.append(value()).unwrap(), expected);
    }
    release.store(true, Ordering::Release);
    // It was reading a protected, committed value: it keeps its copy.
    assert_eq!(reader.join().unwrap(), Ok(1));
    assert_eq!(
        buf.try_read(0, 1).err(),
        Some(ReadError::Gap {
            after: 0,
            oldest: 9
        })
    );
}

/// A value that counts live instances and whose `clone` blocks while `stall` is
/// set, to hold reads inside `T::clone` for as long as a test wants.
struct Gate {
    live: Arc<AtomicUsize>,
    stall: Arc<AtomicBool>,
    entered: Arc<AtomicUsize>,
    n: u64,
}

impl Gate {
    fn new(g: &Gate, n: u64) -> Gate {
        g.live.fetch_add(1, Ordering::Relaxed);
        Gate {
            live: g.live.clone(),
            stall: g.stall.clone(),
            entered: g.entered.clone(),
            n,
        }
    }
}

impl Clone for Gate {
    fn clone(&self) -> Self {
        self.entered.fetch_add(1, Ordering::AcqRel);
        while self.stall.load(Ordering::Acquire) {
            thread::yield_now();
        }
        Gate::new(self, self.n)
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The memory bound while readers are stalled (docs/design.md, "Broadcast:
/// memory bound while a reader is stalled"): `k` reads stalled inside `T::clone` keep at most `k`
/// extra value nodes alive, however many appends run meanwhile; the writer never
/// waits for them; each stalled read still returns the revision it started.
#[test]
fn broadcast_stalled_readers_hold_back_at_most_one_node_each() {
    const CAPACITY: usize = 4;
    const STALLED: u64 = 3;
    let appends: u64 = if cfg!(miri) { 60 } else { 10_000 };
    let proto = Gate {
        live: Arc::new(AtomicUsize::new(0)),
        stall: Arc::new(AtomicBool::new(true)),
        entered: Arc::new(AtomicUsize::new(0)),
        n: 0,
    };
    let buf = Buffer::new(CAPACITY);
    for n in 1..=STALLED {
        buf.append(Gate::new(&proto, n)).unwrap();
    }
    let readers: Vec<_> = (1..=STALLED)
        .map(|n| {
            let buf = buf.clone();
            thread::spawn(move || {
                buf.try_read(n - 1, 1)
                    .map(|page| (page[0].revision, page[0].value.n))
            })
        })
        .collect();
    while proto.entered.load(Ordering::Acquire) < STALLED as usize {
        thread::yield_now();
    }
    let bound = CAPACITY + 2 + STALLED as usize;
    for n in STALLED + 1..=appends {
        buf.append(Gate::new(&proto, n)).unwrap();
        assert!(
            buf.ring.nodes() <= bound,
            "{} nodes after {n} appends",
            buf.ring.nodes()
        );
        assert!(proto.live.load(Ordering::Relaxed) <= bound);
    }
    proto.stall.store(false, Ordering::Release);
    for (n, r) in (1..=STALLED).zip(readers) {
        assert_eq!(r.join().unwrap(), Ok((n, n)));
    }
    // The nodes they held are recycled again: no growth from here on.
    let nodes = buf.ring.nodes();
    for n in 0..4 * CAPACITY as u64 {
        buf.append(Gate::new(&proto, appends + 1 + n)).unwrap();
    }
    assert_eq!(buf.ring.nodes(), nodes);
    drop(buf);
    assert_eq!(proto.live.load(Ordering::Relaxed), 0);
}

/// Counts live values, to catch leaks and double drops on the recycling path.
#[derive(Debug)]
struct Tracked(Arc<AtomicUsize>, u64);

impl Tracked {
    fn new(live: &Arc<AtomicUsize>, n: u64) -> Self {
        live.fetch_add(1, Ordering::Relaxed);
        Tracked(live.clone(), n)
    }
}

impl Clone for Tracked {
    fn clone(&self) -> Self {
        Tracked::new(&self.0, self.1)
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[test]
fn broadcast_ring_keeps_at_most_capacity_plus_two_values_and_leaks_none() {
    let live = Arc::new(AtomicUsize::new(0));
    let buf = Buffer::new(3);
    for n in 1..=20 {
        buf.append(Tracked::new(&live, n)).unwrap();
        assert!(live.load(Ordering::Relaxed) <= 3 + 2);
    }
    let held = buf.try_read(17, 8).unwrap();
    assert_eq!(
        held.iter().map(|e| e.value.1).collect::<Vec<_>>(),
        [18, 19, 20]
    );
    // A reader's copy is its own and pins nothing; appends keep recycling.
    for n in 21..=30 {
        buf.append(Tracked::new(&live, n)).unwrap();
    }
    drop(held);
    assert!(live.load(Ordering::Relaxed) <= 3 + 2);
    drop(buf);
    assert_eq!(live.load(Ordering::Relaxed), 0);
}

#[test]
fn broadcast_threaded_readers_see_exact_revisions() {
    let buf: Buffer<String> = Buffer::new(2);
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let mut r = buf.reader_at(buf.cursor_at(0));
            thread::spawn(move || loop {
                match r.next() {
                    Ok(e) => assert_eq!(e.value, e.revision.to_string()),
                    Err(ReadError::Gap { after, oldest }) => assert!(oldest > after + 1),
                    Err(ReadError::Closed) => return r.cursor().revision(),
                    Err(e) => panic!("unexpected {e:?}"),
                }
            })
        })
        .collect();
    let latest = {
        let buf = buf.clone();
        thread::spawn(move || {
            while !buf.is_closed() {
                if let Some(e) = buf.latest() {
                    assert_eq!(e.value, e.revision.to_string());
                }
                for e in buf.retained() {
                    assert_eq!(e.value, e.revision.to_string());
                }
            }
        })
    };
    for n in 1..=ROUNDS {
        buf.append(n.to_string()).unwrap();
    }
    buf.close();
    latest.join().unwrap();
    for r in readers {
        assert_eq!(r.join().unwrap(), ROUNDS);
    }
}

#[test]
fn broadcast_threaded_appenders_and_append_if_changed() {
    let buf: Buffer<Box<u64>> = Buffer::new(4);
    let appenders: Vec<_> = (0..2u64)
        .map(|t| {
            let buf = buf.clone();
            thread::spawn(move || {
                for i in 0..ROUNDS / 4 {
                    buf.append_if_changed(Box::new(t * 1_000_000 + i)).unwrap();
                }
            })
        })
        .collect();
    let mut r = buf.reader_at(buf.cursor_at(0));
    let mut last = 0;
    while last < 2 * (ROUNDS / 4) {
        match r.try_next() {
            Ok(e) => last = e.revision,
            Err(ReadError::Gap { oldest, .. }) => last = oldest - 1,
            Err(ReadError::Empty) => thread::yield_now(),
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    for a in appenders {
        a.join().unwrap();
    }
    // Every append was distinct, so none was skipped.
    assert_eq!(buf.tail(), 2 * (ROUNDS / 4));
}
