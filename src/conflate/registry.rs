//! The receiver list: read by every send without a lock, replaced by the rare
//! register / deregister / hard close.
//!
//! Two list slots, and the hub's state word says which one is current and counts
//! the sends in flight on each (see `state.rs`). A send enters on the current slot
//! in the same CAS that decides it against a close, then reads that slot's list
//! through a plain pointer load: no reference count, no hazard slot, nothing
//! written. A writer, serialized by `writer`, builds the new list in the *other*
//! slot — after waiting until no send is still in flight there (the grace period:
//! those sends entered before the previous flip) — and then flips `CURRENT`.
//!
//! Sends never wait for a writer. A writer waits only for sends already in flight
//! on the old slot, each a bounded fan-out (user merges and filters included:
//! they must not register or drop receivers of the same hub, which would wait
//! for themselves).
//!
//! This replaces an `arc-swap` snapshot: that cost about 90 instructions per send
//! (debt slot claim and release); this costs one pointer load, because the
//! protection rides on the in-flight count the send takes anyway.

use super::core::RxCore;
use super::state::HubState;
use crate::sync::{spin_wait, Arc, AtomicPtr, Ordering};

/// Live receivers in registration order (the fan-out order).
pub(crate) type ReceiverList<K, V> = Vec<Arc<RxCore<K, V>>>;

pub(crate) struct Registry<K, V> {
    slots: [AtomicPtr<ReceiverList<K, V>>; 2],
}

impl<K, V> Registry<K, V> {
    pub(crate) fn new() -> Self {
        let empty = || AtomicPtr::new(Box::into_raw(Box::new(ReceiverList::new())));
        Registry {
            slots: [empty(), empty()],
        }
    }

    /// The list of `slot`.
    ///
    /// # Safety
    /// The caller is a send in flight on `slot` (`HubState::enter_send` returned
    /// `InFlight(slot)` and `leave_send(slot)` has not run), or holds the registry
    /// writer lock and `slot` is the current one. Either way no writer frees or
    /// replaces that slot's list meanwhile.
    pub(crate) unsafe fn list(&self, slot: usize) -> &ReceiverList<K, V> {
        // Acquire pairs with the Release swap in `replace`.
        let ptr = self.slots[slot].load(Ordering::Acquire);
        // SAFETY: every slot always holds a pointer from `Box::into_raw`, freed
        // only in `replace` (for the non-current slot, after its grace period) and
        // in `drop`; the caller's contract keeps both away for the borrow.
        unsafe { &*ptr }
    }

    /// Replaces the receiver list with `next(current)` and makes it current,
    /// setting the state word's receiver count to its length in the same step.
    /// The caller holds the registry writer lock.
    pub(crate) fn replace(
        &self,
        state: &HubState,
        next: impl FnOnce(&ReceiverList<K, V>) -> ReceiverList<K, V>,
    ) {
        let cur = state.load().current();
        let other = 1 - cur;
        // Grace period: sends still in flight on `other` entered before the last
        // flip and may be reading its list. New sends cannot enter there until we
        // flip (only the writer flips, and we are it). Acquire (in `load`) pairs
        // with their Release `leave_send`: their reads happen-before the free.
        spin_wait(|| state.load().in_flight(other) == 0);
        // SAFETY: we hold the writer lock and `cur` is current.
        let new_list = next(unsafe { self.list(cur) });
        let receivers = new_list.len() as u64;
        // Release: a sender that reads this pointer after seeing the flip sees the
        // list's contents.
        let stale = self.slots[other].swap(Box::into_raw(Box::new(new_list)), Ordering::AcqRel);
        // The grace period, asserted where it matters: a list is freed only while
        // no send is in flight on its slot. Checked in debug builds and under the
        // model checkers (whose CI runs are release builds), so a missing or
        // broken grace period fails a model with this message instead of
        // surfacing, if at all, as a crash on reused memory. Sound as an
        // invariant: after the wait above no send can enter `other` before our
        // flip below.
        if cfg!(any(loom, shuttle, debug_assertions)) {
            let in_flight = state.load().in_flight(other);
            assert!(
                in_flight == 0,
                "registry: freeing receiver list {other} while {in_flight} send(s) \
                 in flight may still read it (grace period not awaited)"
            );
        }
        // SAFETY: `stale` came from `Box::into_raw`; no send is in flight on
        // `other` (grace period above) and none can enter before the flip below.
        drop(unsafe { Box::from_raw(stale) });
        state.flip_list(receivers);
    }
}

impl<K, V> Drop for Registry<K, V> {
    fn drop(&mut self) {
        for slot in &self.slots {
            let ptr = slot.load(Ordering::Relaxed);
            // SAFETY: `&mut self`: no send and no writer exists any more; each
            // pointer came from `Box::into_raw` and is freed once, here.
            drop(unsafe { Box::from_raw(ptr) });
        }
    }
}
