//! SPEC non-functional rule: no allocation on a broadcast append once the ring is
//! full (for a value type that owns no heap data). Measured with a counting global
//! allocator that counts per thread, only while asked to, so the test harness and
//! the other test cannot disturb the count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn note_allocation() {
    // `try_with`: the allocator can be called while thread locals are torn down.
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    }
}

// SAFETY: every method forwards to `System` unchanged; counting touches only
// const-initialized thread locals without destructors, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract for `layout`.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation();
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made on this thread while `f` runs.
fn allocations_in(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCATIONS.with(Cell::get) - before
}

macro_rules! full_ring_appends_allocate_nothing {
    ($name:ident, $($m:ident)::+) => {
        #[test]
        fn $name() {
            use $($m)::+::Buffer;
            const CAPACITY: u64 = 8;
            let buf: Buffer<[u64; 4]> = Buffer::new(CAPACITY as usize);
            // Fill the ring (and let per-thread lazy state, such as arc-swap's
            // debt node, be created) before counting.
            for i in 1..=3 * CAPACITY {
                buf.append([i; 4]).unwrap();
                let _ = buf.latest();
            }
            let appends = allocations_in(|| {
                for i in 0..10_000u64 {
                    let revision = buf.append([i; 4]).unwrap();
                    if i % 64 == 0 {
                        // A reader on the same thread copies and lets go.
                        assert_eq!(buf.latest().unwrap().revision, revision);
                    }
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
    };
}

full_ring_appends_allocate_nothing!(
    baseline_full_ring_appends_allocate_nothing,
    keybus::baseline::broadcast
);
full_ring_appends_allocate_nothing!(
    lockfree_full_ring_appends_allocate_nothing,
    keybus::broadcast
);
