//! Keeping a consumer's words off other threads' cache lines without raising
//! the alignment of the structure that holds them.
//!
//! `crossbeam_utils::CachePadded` aligns its value to 128 bytes, so any
//! structure holding one is over-aligned and every `Arc` of it is an aligned
//! allocation (`memalign`), several times the cost of a plain one: a cell
//! receiver's register + drop got measurably slower when its queue and its
//! counters gained a `CachePadded` field each, and [`Apart`] brought it back
//! (docs/performance.md, "2026-12-01 (later)", "Register + drop").

use std::mem::MaybeUninit;
use std::ops::{Deref, DerefMut};

/// Bytes kept clear on each side: one 64-byte line, so the value's lines hold
/// no neighbour's word. (Not two, against the adjacent-line prefetcher, as
/// `CachePadded`: each byte here is copied when the holder is moved into its
/// `Arc`, and one line measured as well.)
const CLEAR: usize = 64;

/// `T` with [`CLEAR`] bytes of padding before and after it and no alignment of
/// its own: whatever its address, no byte of `T` shares a 64-byte line with a
/// byte outside the `Apart`.
#[repr(C)]
pub(crate) struct Apart<T> {
    // Never read: uninitialized, so making an `Apart` writes only `value`.
    _before: MaybeUninit<[u8; CLEAR]>,
    value: T,
    _after: MaybeUninit<[u8; CLEAR]>,
}

impl<T> Apart<T> {
    pub(crate) const fn new(value: T) -> Self {
        Apart {
            _before: MaybeUninit::uninit(),
            value,
            _after: MaybeUninit::uninit(),
        }
    }
}

impl<T> Deref for Apart<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> DerefMut for Apart<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.value
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Apart<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.value.fmt(f)
    }
}
