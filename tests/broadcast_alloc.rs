//! Non-functional rule (docs/design.md, "The contract"): no allocation on a broadcast append once the ring is
//! full (for a value type that owns no heap data). Measured with a counting global
//! allocator that counts per thread, only while asked to, so the test harness and
//! the other test cannot disturb the count. Written once over the broadcast API
//! traits, run against both implementations.

use keybus_test_support::broadcast_api::{
    Baseline, Broadcast, BufferApi, Lockfree, ReadError, ReaderApi,
};
use keybus_test_support::counting::{allocations_in, Counting};
use keybus_test_support::threads::{self, Crew};
use std::sync::atomic::{AtomicU64, Ordering};

#[global_allocator]
static ALLOC: Counting = Counting;

keybus_test_support::tests_for! {
    crate for baseline = Baseline, lockfree = Lockfree => {
        full_ring_appends_allocate_nothing,
        full_ring_appends_with_readers_allocate_nothing,
        concurrent_reader_appends,
    }
}

/// Appends to `buf` until its ring is full three times over, running `after`
/// with each revision (so lazily made state is made before counting), then
/// counts the allocations of 10,000 more appends, each followed by `after`.
fn full_ring_append_allocations<Buf: BufferApi<[u64; 4]>>(
    buf: &Buf,
    mut after: impl FnMut(u64),
) -> usize {
    for i in 1..=3 * buf.capacity() as u64 {
        after(buf.append([i; 4]).unwrap());
    }
    allocations_in(|| {
        for i in 0..10_000u64 {
            after(buf.append([i; 4]).unwrap());
        }
    })
}

fn full_ring_appends_allocate_nothing<B: Broadcast>() {
    let buf = B::Buffer::<[u64; 4]>::new(8);
    // A reader on the same thread copies and lets go.
    let appends = full_ring_append_allocations(&buf, |revision| {
        assert_eq!(buf.latest().unwrap().revision, revision);
    });
    assert_eq!(appends, 0, "appends to a full ring allocated");
    // The meter itself works.
    assert_eq!(
        allocations_in(|| drop(std::hint::black_box(Box::new(1u8)))),
        1
    );
    let changed = allocations_in(|| {
        for i in 0..1_000u64 {
            buf.append_if_changed([i / 2; 4]).unwrap();
        }
    });
    assert_eq!(changed, 0, "append_if_changed to a full ring allocated");
}

/// Full-ring appends with readers attached: idle ones (a keybus reader is only
/// a cursor) and ones reading on the writer's thread between appends.
fn full_ring_appends_with_readers_allocate_nothing<B: Broadcast>() {
    let buf = B::Buffer::<[u64; 4]>::new(16);
    let idle: Vec<_> = (0..4).map(|_| buf.reader()).collect();
    let mut reading = buf.reader();
    let appends = full_ring_append_allocations(&buf, |revision| {
        assert_eq!(reading.try_next().unwrap().revision, revision);
    });
    assert_eq!(
        appends, 0,
        "appends and Reader::try_next on a full ring allocated"
    );
    // A batch read returns a `Vec`: exactly that one allocation.
    let batch = allocations_in(|| {
        let page = buf.try_read(buf.tail() - 4, 4).unwrap();
        assert_eq!(page.len(), 4);
    });
    assert_eq!(batch, 1, "a batch read allocates its Vec and nothing else");
    drop(idle);
}

/// Allocations allowed in a whole `concurrent_reader_appends` run: one-off pool
/// growth, not a per-append cost.
const MAX_GROWTH: u64 = 4;

/// With a reader on another thread, a lock-free reader may have pinned the node
/// the writer would recycle; the writer then sets it aside and claims the next
/// one, allocating only when every node it tried was pinned (by design, see
/// `broadcast::pool`). One reading thread pins one node at a time, so past the
/// first append or two that grow the pool by one node, appends allocate nothing:
/// asserted with a small allowance (`MAX_GROWTH`, far below one per append) for
/// the rare reader that unpins one evicted node and pins the next between the
/// writer's two claims. The count is printed
/// (`cargo test --test broadcast_alloc -- --nocapture`). The writer appends until
/// the reader has read `READS` values (or `MAX_APPENDS`), so the two really
/// overlap.
fn concurrent_reader_appends<B: Broadcast>() {
    const READS: u64 = 20_000;
    const MAX_APPENDS: u64 = 5_000_000;
    let buf = B::Buffer::<[u64; 4]>::new(64);
    for i in 1..=128 {
        buf.append([i; 4]).unwrap();
    }
    let mut reader = buf.reader();
    let read = AtomicU64::new(0);
    let progress = &read;
    let crew = Crew::new("concurrent_reader_appends");
    crew.on_panic(|| buf.close());
    let (appends, allocations, gaps) = crew.scope(|s| {
        let reading = crew.spawn(s, move || {
            let mut gaps = 0u64;
            loop {
                // Spins (never parks), so it overlaps the appends.
                match reader.try_next() {
                    Ok(_) => {
                        progress.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(ReadError::Gap { .. }) => gaps += 1,
                    Err(ReadError::Empty) => std::hint::spin_loop(),
                    Err(ReadError::Closed) => return gaps,
                    Err(e) => panic!("{e:?}"),
                }
            }
        });
        let mut appends = 0u64;
        let allocations = allocations_in(|| {
            // A reader that panicked never reaches READS.
            while read.load(Ordering::Relaxed) < READS && appends < MAX_APPENDS && !crew.panicked()
            {
                buf.append([appends; 4]).unwrap();
                appends += 1;
            }
        });
        buf.close();
        (appends, allocations, reading.join().unwrap())
    });
    println!(
        "{}: {allocations} allocations in {appends} full-ring appends while a \
         reader on another thread read {} values ({gaps} gaps)",
        B::NAME,
        read.load(Ordering::Relaxed)
    );
    assert!(
        allocations as u64 <= MAX_GROWTH,
        "{allocations} allocations in {appends} appends"
    );
}

/// A thread of the threaded test above panicking (planted) fails it.
#[test]
fn planted_panics_fail_instead_of_hanging() {
    threads::audit(&[
        "lockfree::concurrent_reader_appends",
        "baseline::concurrent_reader_appends",
    ]);
}
