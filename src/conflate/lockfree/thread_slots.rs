//! `Slots`: one word per thread index, in chunks installed on first use, each
//! word written by the thread that owns its index alone. The storage of the
//! send stripes and of `ThreadCounts` (`stripes.rs`; docs/design.md, "Sends in
//! flight: one stripe per thread", "Accounting").
//!
//! Built on the crate's `sync` types, so the loom model
//! `conflate_stripes::thread_counts_first_adds_race_to_install_one_chunk`
//! explores the install race and the sum over the same code.

use crate::sync::{AtomicPtr, AtomicU64, Ordering};
use std::ptr;

/// Indices per chunk. Under the model checkers, two: two model threads then
/// race to install one chunk, and a third lands in the next.
#[cfg(not(any(loom, shuttle)))]
pub(crate) const CHUNK: usize = 64;
#[cfg(any(loom, shuttle))]
pub(crate) const CHUNK: usize = 2;

/// The words of `CHUNK` consecutive indices.
struct Chunk([AtomicU64; CHUNK]);

/// Words for thread indices `0..chunks * CHUNK`; a chunk is allocated when
/// one of its indices is first used and freed with the `Slots`.
pub(crate) struct Slots {
    chunks: Box<[AtomicPtr<Chunk>]>,
}

impl Slots {
    /// Room for `chunks` chunks, none allocated.
    pub(crate) fn new(chunks: usize) -> Self {
        Slots {
            chunks: (0..chunks)
                .map(|_| AtomicPtr::new(ptr::null_mut()))
                .collect(),
        }
    }

    /// The word of thread index `id`, its chunk installed if it was not;
    /// `None` past the last chunk.
    #[inline]
    pub(crate) fn slot(&self, id: usize) -> Option<&AtomicU64> {
        let cell = self.chunks.get(id / CHUNK)?;
        // Acquire pairs with the Release of the CAS that installed the
        // chunk: its zeroed words are visible.
        let mut chunk = cell.load(Ordering::Acquire);
        if chunk.is_null() {
            chunk = install(cell);
        }
        // SAFETY: `chunk` came from `Box::into_raw` in `install` and is freed
        // only by `drop`, which has `&mut self`: it outlives `&self`.
        Some(unsafe { &(*chunk).0[place(id)] })
    }

    /// The word of thread index `id` if its chunk is installed; installs
    /// nothing. (For the re-entrance test; the models have no such stripes.)
    #[cfg(not(any(loom, shuttle)))]
    pub(crate) fn installed(&self, id: usize) -> Option<&AtomicU64> {
        let cell = self.chunks.get(id / CHUNK)?;
        // Acquire: as in `slot`.
        let chunk = cell.load(Ordering::Acquire);
        // SAFETY: as in `slot`.
        (!chunk.is_null()).then(|| unsafe { &(*chunk).0[place(id)] })
    }

    /// Runs `f` on the word of every installed chunk.
    pub(crate) fn each(&self, mut f: impl FnMut(&AtomicU64)) {
        for cell in self.chunks.iter() {
            // Acquire: as in `slot`.
            let chunk = cell.load(Ordering::Acquire);
            if !chunk.is_null() {
                // SAFETY: as in `slot`.
                let chunk = unsafe { &*chunk };
                chunk.0.iter().for_each(&mut f);
            }
        }
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        for cell in self.chunks.iter() {
            // `&mut self`: no other thread uses the cell (a plain read in
            // effect; the model checkers' atomics have no common `get_mut`).
            let chunk = cell.load(Ordering::Acquire);
            if !chunk.is_null() {
                // SAFETY: from `Box::into_raw` in `install`, installed once
                // (the CAS), freed here once.
                drop(unsafe { Box::from_raw(chunk) });
            }
        }
    }
}

/// Allocates the chunk of `cell` unless another thread just did; returns the
/// one installed.
#[cold]
#[inline(never)]
fn install(cell: &AtomicPtr<Chunk>) -> *mut Chunk {
    let fresh = Box::into_raw(Box::new(Chunk(std::array::from_fn(|_| AtomicU64::new(0)))));
    // AcqRel: Release publishes the zeroed chunk; Acquire (on failure too)
    // sees the winner's.
    match cell.compare_exchange(ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => fresh,
        Err(winner) => {
            // SAFETY: `fresh` was never shared.
            drop(unsafe { Box::from_raw(fresh) });
            winner
        }
    }
}

/// Where index `id`'s word sits in its chunk. Stride: with 64 to a chunk,
/// indices 0..8 land on 8 different cache lines.
fn place(id: usize) -> usize {
    #[cfg(not(any(loom, shuttle)))]
    return (id % CHUNK % 8) * 8 + id % CHUNK / 8;
    #[cfg(any(loom, shuttle))]
    return id % CHUNK;
}
