//! The counting global allocator of the allocation, memory and soak tests. It
//! keeps two books, each read by its own functions:
//!
//! - per thread, only while a thread asked for it ([`measure`],
//!   [`allocations_in`]): allocation calls and live bytes of one closure on one
//!   thread, so the test harness, other tests and other threads cannot disturb a
//!   count;
//! - process-wide, always ([`live_bytes`], [`reset_peak`], [`peak_bytes`]): heap
//!   bytes allocated and not yet freed by anyone, and their high-water mark, for
//!   the soak's bounds on a whole multi-threaded run.
//!
//! Every call is forwarded to `System` unchanged.
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
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// The counting allocator: forwards to `System`, counting per thread while asked
/// and process-wide always.
pub struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    /// Allocation calls (`alloc`, `alloc_zeroed`, `realloc`).
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
    /// Bytes allocated minus bytes freed, by this thread, while counting.
    static LIVE_BYTES: Cell<isize> = const { Cell::new(0) };
}

/// Heap bytes allocated and not yet freed, by anyone in the process.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// The highest `LIVE` seen since the last [`reset_peak`].
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// Notes, for this thread if it is counting, one allocation call that changes
/// live bytes by `delta`.
fn note(calls: usize, delta: isize) {
    // `try_with`: the allocator can be called while thread locals are torn down.
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + calls));
        let _ = LIVE_BYTES.try_with(|b| b.set(b.get() + delta));
    }
}

// Relaxed, both: these are statistics, read only at quiescent points (after
// joins, which synchronize); the sum is exact there, the peak approximate.
fn grew(bytes: usize) {
    let now = LIVE.fetch_add(bytes, Relaxed) + bytes;
    if now > PEAK.load(Relaxed) {
        PEAK.fetch_max(now, Relaxed);
    }
}

fn shrank(bytes: usize) {
    LIVE.fetch_sub(bytes, Relaxed);
}

/// Books an allocation of `layout` that `System` answered with `ptr` (null: it
/// failed, and nothing became live).
fn allocated(layout: Layout, ptr: *mut u8) -> *mut u8 {
    note(1, layout.size() as isize);
    if !ptr.is_null() {
        grew(layout.size());
    }
    ptr
}

// SAFETY: every method forwards to `System` unchanged, with the caller's
// arguments, so `System` upholds the `GlobalAlloc` contract; the bookkeeping
// touches only const-initialized thread locals without destructors and two
// static atomics, none of which allocates, so it cannot recurse into the
// allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract for `layout`.
        allocated(layout, unsafe { System.alloc(layout) })
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        allocated(layout, unsafe { System.alloc_zeroed(layout) })
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(1, new_size as isize - layout.size() as isize);
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract: `ptr` was
        // allocated by this allocator (hence by `System`) with `layout`.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            // On failure the old block stays allocated and nothing changes.
            grew(new_size);
            shrank(layout.size());
        }
        new
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(0, -(layout.size() as isize));
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract: `ptr` was
        // allocated by this allocator (hence by `System`) with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
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

/// Heap bytes allocated and not yet freed, by the whole process, now.
pub fn live_bytes() -> usize {
    LIVE.load(Relaxed)
}

/// Restarts the process-wide peak from the live bytes now, and returns them.
pub fn reset_peak() -> usize {
    let now = LIVE.load(Relaxed);
    PEAK.store(now, Relaxed);
    now
}

/// The highest process-wide live bytes since the last [`reset_peak`].
pub fn peak_bytes() -> usize {
    PEAK.load(Relaxed)
}
