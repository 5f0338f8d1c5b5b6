//! A counting global allocator for the allocation and memory tests.
//!
//! It counts per thread and only while a thread asked it to (`allocations_in`,
//! `measure`), so the test harness, other tests and other threads cannot disturb
//! a count. Every call is forwarded to `System` unchanged.
//!
//! A test crate installs it as its `#[global_allocator]` (a library cannot
//! choose one for every binary that links it):
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: keybus_test_support::counting::Counting = keybus_test_support::counting::Counting;
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The counting allocator: forwards to `System`, counting per thread while asked.
pub struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    /// Allocation calls (`alloc`, `alloc_zeroed`, `realloc`).
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
    /// Bytes allocated minus bytes freed, by this thread, while counting.
    static LIVE_BYTES: Cell<isize> = const { Cell::new(0) };
}

/// Notes one allocation call that changes live bytes by `delta`.
fn note(calls: usize, delta: isize) {
    // `try_with`: the allocator can be called while thread locals are torn down.
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + calls));
        let _ = LIVE_BYTES.try_with(|b| b.set(b.get() + delta));
    }
}

// SAFETY: every method forwards to `System` unchanged, with the caller's
// arguments; counting touches only const-initialized thread locals without
// destructors, which never allocate, so it cannot recurse into the allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(1, layout.size() as isize);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract for `layout`.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(1, layout.size() as isize);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(1, new_size as isize - layout.size() as isize);
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract: `ptr` was
        // allocated by this allocator (hence by `System`) with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(0, -(layout.size() as isize));
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract: `ptr` was
        // allocated by this allocator (hence by `System`) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// What a measured closure did to the heap, on this thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Allocation calls (`alloc`, `alloc_zeroed`, `realloc`).
    pub allocations: usize,
    /// Bytes still allocated when it returned (allocated minus freed).
    pub live_bytes: isize,
}

/// Runs `f` with counting on for this thread; returns its result and its usage.
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, Usage) {
    let calls = ALLOCATIONS.with(Cell::get);
    let bytes = LIVE_BYTES.with(Cell::get);
    let was = COUNTING.with(|c| c.replace(true));
    let r = f();
    COUNTING.with(|c| c.set(was));
    let usage = Usage {
        allocations: ALLOCATIONS.with(Cell::get) - calls,
        live_bytes: LIVE_BYTES.with(Cell::get) - bytes,
    };
    (r, usage)
}

/// Allocation calls made on this thread while `f` runs.
pub fn allocations_in(f: impl FnOnce()) -> usize {
    measure(f).1.allocations
}
