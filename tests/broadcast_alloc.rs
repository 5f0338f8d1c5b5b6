//! Non-functional rule (docs/design.md, "The contract"): no allocation on a broadcast append once the ring is
//! full (for a value type that owns no heap data). Measured with a counting global
//! allocator that counts per thread, only while asked to, so the test harness and
//! the other test cannot disturb the count.

use keybus_test_support::counting::{self, Counting};

#[global_allocator]
static ALLOC: Counting = Counting;

use counting::allocations_in;

/// Full-ring tests for one implementation's `Buffer` (`$m`), named `$full` (no
/// reader) and `$with_readers` (idle readers and one reading on the writer's
/// thread); `$ring` names a module of their shared steps.
macro_rules! full_ring_tests {
    ($($m:ident)::+ => $ring:ident: $full:ident, $with_readers:ident) => {
        mod $ring {
            pub type Ring = $($m)::+::Buffer<[u64; 4]>;

            /// Fills `buf` three times over (so any lazily made state exists before
            /// counting), running `touch` after every append.
            pub fn fill(buf: &Ring, mut touch: impl FnMut()) {
                for i in 1..=3 * buf.capacity() as u64 {
                    buf.append([i; 4]).unwrap();
                    touch();
                }
            }

            /// Allocations made by 10,000 appends to `buf`, running `after(i,
            /// revision)` after the `i`th.
            pub fn appends_allocate(buf: &Ring, mut after: impl FnMut(u64, u64)) -> usize {
                super::allocations_in(|| {
                    for i in 0..10_000u64 {
                        let revision = buf.append([i; 4]).unwrap();
                        after(i, revision);
                    }
                })
            }
        }

        #[test]
        fn $full() {
            use $ring::{appends_allocate, fill, Ring};
            let buf = Ring::new(8);
            fill(&buf, || {
                let _ = buf.latest();
            });
            let appends = appends_allocate(&buf, |i, revision| {
                if i % 64 == 0 {
                    // A reader on the same thread copies and lets go.
                    assert_eq!(buf.latest().unwrap().revision, revision);
                }
            });
            assert_eq!(appends, 0, "appends to a full ring allocated");
            // The meter itself works.
            assert_eq!(allocations_in(|| drop(std::hint::black_box(Box::new(1u8)))), 1);
            let changed = allocations_in(|| {
                for i in 0..1_000u64 {
                    buf.append_if_changed([i / 2; 4]).unwrap();
                }
            });
            assert_eq!(changed, 0, "append_if_changed to a full ring allocated");
        }

        /// Full-ring appends with readers attached: idle ones (a keybus reader is
        /// only a cursor) and ones reading on the writer's thread between appends.
        #[test]
        fn $with_readers() {
            use $ring::{appends_allocate, fill, Ring};
            let buf = Ring::new(16);
            let idle: Vec<_> = (0..4).map(|_| buf.reader()).collect();
            let mut reading = buf.reader();
            fill(&buf, || {
                let _ = reading.try_next();
            });
            let appends = appends_allocate(&buf, |_, revision| {
                let entry = reading.try_next().unwrap();
                assert_eq!(entry.revision, revision);
            });
            assert_eq!(appends, 0, "appends and Reader::try_next on a full ring allocated");
            // A batch read returns a `Vec`: exactly that one allocation.
            let batch = allocations_in(|| {
                let page = buf.try_read(buf.tail() - 4, 4).unwrap();
                assert_eq!(page.len(), 4);
            });
            assert_eq!(batch, 1, "a batch read allocates its Vec and nothing else");
            drop(idle);
        }
    };
}

full_ring_tests!(keybus::baseline::broadcast => baseline_ring:
    baseline_full_ring_appends_allocate_nothing,
    baseline_full_ring_appends_with_readers_allocate_nothing
);
full_ring_tests!(keybus::broadcast => lockfree_ring:
    lockfree_full_ring_appends_allocate_nothing,
    lockfree_full_ring_appends_with_readers_allocate_nothing
);

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
macro_rules! concurrent_reader_appends {
    ($name:ident, $($m:ident)::+) => {
        #[test]
        fn $name() {
            use $($m)::+::{Buffer, ReadError};
            use std::sync::atomic::{AtomicU64, Ordering};
            use std::sync::Arc;
            const READS: u64 = 20_000;
            const MAX_APPENDS: u64 = 5_000_000;
            let buf: Buffer<[u64; 4]> = Buffer::new(64);
            for i in 1..=128 {
                buf.append([i; 4]).unwrap();
            }
            let mut reader = buf.reader();
            let read = Arc::new(AtomicU64::new(0));
            let progress = read.clone();
            let reading = std::thread::spawn(move || {
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
                while read.load(Ordering::Relaxed) < READS && appends < MAX_APPENDS {
                    buf.append([appends; 4]).unwrap();
                    appends += 1;
                }
            });
            buf.close();
            let gaps = reading.join().unwrap();
            println!(
                "{}: {allocations} allocations in {appends} full-ring appends while a \
                 reader on another thread read {} values ({gaps} gaps)",
                stringify!($($m)::+),
                read.load(Ordering::Relaxed)
            );
            assert!(
                allocations as u64 <= MAX_GROWTH,
                "{allocations} allocations in {appends} appends"
            );
        }
    };
}

/// Allocations allowed in a whole `concurrent_reader_appends` run: one-off pool
/// growth, not a per-append cost.
const MAX_GROWTH: u64 = 4;

concurrent_reader_appends!(
    baseline_concurrent_reader_appends,
    keybus::baseline::broadcast
);
concurrent_reader_appends!(lockfree_concurrent_reader_appends, keybus::broadcast);
