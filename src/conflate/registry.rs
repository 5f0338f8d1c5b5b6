//! The receiver list: read by every send without a lock, replaced by the rare
//! register / deregister / hard close.
//!
//! Two list slots, and the hub's state word says which one is current and counts
//! the sends in flight on each (see `state.rs`). A send enters on the current slot
//! in the same CAS that decides it against a close, then reads that slot's list
//! through a plain pointer load: no reference count, no hazard slot, nothing
//! written. A writer, serialized by the hub's writer lock, rewrites the list in
//! the *other* slot in place — after waiting until no send is still in flight
//! there (the grace period: those sends entered before the previous flip) — and
//! then flips `CURRENT`.
//!
//! The lists hold raw pointers (`Arc::into_raw`), not `Arc`s: the registry owns
//! one strong count of every core in the *current* list. Rewriting a list is then
//! a copy of pointers — no atomic read-modify-write per receiver, no allocation
//! once both lists have grown — where it used to clone (and later drop) one `Arc`
//! per receiver, each an RMW on that receiver's own cache line. A removed core's
//! count is released only after the flip *and* a grace period on the list it was
//! removed from: from then on no send can be reading that list (no new send
//! enters a non-current slot), and the stale pointer in it is never dereferenced
//! before the next writer overwrites it (see docs/design.md, "The registry").
//!
//! Sends never wait for a writer. A writer waits only for sends already in flight,
//! each a bounded fan-out (user merges and filters included: they must not
//! register or drop receivers of the same hub, which would wait for themselves).
//!
//! This replaces an `arc-swap` snapshot: that cost about 90 instructions per send
//! (debt slot claim and release); this costs one pointer load, because the
//! protection rides on the in-flight count the send takes anyway.

use super::core::RxCore;
use super::state::HubState;
use crate::sync::{spin_wait, Arc, AtomicPtr, Ordering};

/// Live receivers in registration order (the fan-out order), as pointers from
/// `Arc::into_raw` (see the module docs for who owns them).
type PtrList<K, V> = Vec<*const RxCore<K, V>>;

/// [`Listed::split_last`]: the last core and the list before it.
pub(crate) type LastAndRest<'a, K, V> = (&'a RxCore<K, V>, Listed<'a, K, V>);

/// A borrowed receiver list: every core in it stays alive for `'a`.
pub(crate) struct Listed<'a, K, V>(&'a [*const RxCore<K, V>]);

impl<'a, K, V> Listed<'a, K, V> {
    /// The cores, in fan-out order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &'a RxCore<K, V>> + 'a {
        // SAFETY: `Listed` is only made by `Registry::list`, whose contract keeps
        // every listed core's strong count held by the registry (it is released
        // only after this list stopped being current and every send in flight
        // on it left; a writer reads only the current list) for `'a`.
        self.0.iter().map(|&p| unsafe { &*p })
    }

    /// The last core and the ones before it (to move the value into the last).
    pub(crate) fn split_last(&self) -> Option<LastAndRest<'a, K, V>> {
        let (&last, rest) = self.0.split_last()?;
        // SAFETY: as in `iter`.
        let last = unsafe { &*last };
        Some((last, Listed(rest)))
    }
}

pub(crate) struct Registry<K, V> {
    slots: [AtomicPtr<PtrList<K, V>>; 2],
}

impl<K, V> Registry<K, V> {
    pub(crate) fn new() -> Self {
        let empty = || AtomicPtr::new(Box::into_raw(Box::new(PtrList::new())));
        Registry {
            slots: [empty(), empty()],
        }
    }

    /// The list of `slot`.
    ///
    /// # Safety
    /// The caller is a send in flight on `slot` (`HubState::enter_send` returned
    /// `InFlight(slot)` and `leave_send(slot)` has not run), or holds the registry
    /// writer lock and `slot` is the current one. Either way no writer rewrites
    /// that slot's list, nor releases a core in it, meanwhile.
    pub(crate) unsafe fn list(&self, slot: usize) -> Listed<'_, K, V> {
        // Acquire pairs with the Release flip (`flip_list`), which follows the
        // writer's last store into this list: the caller entered after it.
        let ptr = self.slots[slot].load(Ordering::Acquire);
        // SAFETY: both slot pointers come from `Box::into_raw` in `new` and are
        // freed only in `drop`; a writer mutates a list only while its slot is
        // not current and no send is in flight on it, which the caller's
        // contract excludes for the borrow.
        Listed(unsafe { &*ptr }.as_slice())
    }

    /// Rewrites the non-current list as `edit(copy of the current list)` and
    /// flips to it, setting the state word's receiver count in the same step.
    /// Returns the slot that was current (now stale). The caller holds the
    /// registry writer lock.
    fn rewrite(&self, state: &HubState, edit: impl FnOnce(&mut PtrList<K, V>)) -> usize {
        let cur = state.load().current();
        let other = 1 - cur;
        // Grace period: sends still in flight on `other` entered before the last
        // flip and may be reading its list. New sends cannot enter there until we
        // flip (only the writer flips, and we are it). Acquire (in `load`) pairs
        // with their Release `leave_send`: their reads happen-before the writes.
        spin_wait(|| state.load().in_flight(other) == 0);
        // Relaxed: only writers store these pointers (never after `new`), and we
        // hold the writer lock.
        let cur_ptr = self.slots[cur].load(Ordering::Relaxed);
        let other_ptr = self.slots[other].load(Ordering::Relaxed);
        // The grace period, asserted where it matters: a list is rewritten (and
        // a core it named released) only while no send is in flight on its
        // slot. Checked in debug builds and under the model checkers (whose CI
        // runs are release builds), so a missing or broken grace period fails a
        // model with this message instead of surfacing, if at all, as a crash on
        // reused memory. Sound as an invariant: after the wait above no send can
        // enter `other` before our flip below.
        assert_grace(state, other, "rewriting");
        // SAFETY: two distinct boxes from `new`. `cur`'s list is only read (by
        // sends in flight on it, and by us); `other`'s list has no reader (grace
        // period above) and none can start before the flip below, so the
        // exclusive borrow is unique.
        let (current, next) = unsafe { (&*cur_ptr, &mut *other_ptr) };
        next.clear();
        next.extend_from_slice(current);
        edit(next);
        let receivers = next.len() as u64;
        // Release (in the flip's RMW): a send that enters on `other` after it
        // sees the list written above.
        state.flip_list(receivers);
        cur
    }

    /// Waits until no send is in flight on `stale`, a slot that is no longer
    /// current: afterwards none reads its list until a writer rewrites it.
    fn grace(state: &HubState, stale: usize) {
        // Acquire pairs with each such send's Release `leave_send`: its last
        // touch of any core happens-before the caller releases one.
        spin_wait(|| state.load().in_flight(stale) == 0);
        assert_grace(state, stale, "releasing cores of");
    }

    /// Appends `core`. The caller holds the registry writer lock.
    pub(crate) fn register(&self, state: &HubState, core: &Arc<RxCore<K, V>>) {
        let ptr = Arc::into_raw(core.clone());
        self.rewrite(state, |next| next.push(ptr));
    }

    /// Removes `core` (if listed) and returns the registry's count of it, once
    /// no send can still touch it through a list. The caller holds the registry
    /// writer lock.
    pub(crate) fn deregister(
        &self,
        state: &HubState,
        core: &RxCore<K, V>,
    ) -> Option<Arc<RxCore<K, V>>> {
        let target: *const RxCore<K, V> = core;
        let mut removed = None;
        let stale = self.rewrite(state, |next| {
            if let Some(i) = next.iter().position(|&p| p == target) {
                // The listed pointer, not `target`: it carries the provenance
                // of `Arc::into_raw` (the whole allocation, counts included).
                removed = Some(next.remove(i));
            }
        });
        let removed = removed?;
        Self::grace(state, stale);
        // SAFETY: `removed` was in the current list, so the registry owns one
        // count of it from `Arc::into_raw` (in `register`); it is no longer in
        // the current list, and the grace period means no send reads the stale
        // list. It is taken back once: it left the list.
        Some(unsafe { Arc::from_raw(removed) })
    }

    /// Empties the list; returns the registry's counts of every core that was
    /// listed, once no send can still touch them through a list. The caller
    /// holds the registry writer lock.
    pub(crate) fn clear(&self, state: &HubState) -> Vec<Arc<RxCore<K, V>>> {
        let stale = self.rewrite(state, |next| next.clear());
        Self::grace(state, stale);
        // Relaxed: as in `rewrite`.
        let ptr = self.slots[stale].load(Ordering::Relaxed);
        // `stale` was current until the flip: every pointer in its list carries
        // a count the registry owns (from `register`), none of them is in the
        // (now empty) current list. The list is then left with no pointer in it,
        // so each count is taken back once.
        // SAFETY: a box from `new`; no send reads the stale list (grace period).
        let listed = unsafe { &mut *ptr };
        listed
            .drain(..)
            // SAFETY: as above: each drained pointer carries one count the
            // registry owns, taken back once.
            .map(|p| unsafe { Arc::from_raw(p) })
            .collect()
    }
}

impl<K, V> Registry<K, V> {
    /// Takes back the registry's count of every core in the `current` list (the
    /// state word's current slot). Called once, by the owner's `Drop`, when no
    /// send and no writer exists any more.
    pub(crate) fn release_listed(&mut self, current: usize) {
        let ptr = self.slots[current].load(Ordering::Relaxed);
        // SAFETY: `&mut self`: no reader; the box from `new` is still live
        // (freed only in `drop`, after this).
        let listed = unsafe { &mut *ptr };
        for p in listed.drain(..) {
            // SAFETY: the current list owns one count of each of its cores
            // (from `register`); drained, so each is taken back once.
            drop(unsafe { Arc::from_raw(p) });
        }
    }
}

impl<K, V> Drop for Registry<K, V> {
    fn drop(&mut self) {
        for slot in &self.slots {
            let ptr = slot.load(Ordering::Relaxed);
            // SAFETY: `&mut self`: no send and no writer exists any more; each
            // pointer came from `Box::into_raw` and is freed once, here. The
            // cores it names are not touched (their counts are released by
            // `release_listed` or were already taken back).
            drop(unsafe { Box::from_raw(ptr) });
        }
    }
}

/// Fails loudly (debug builds, loom, shuttle) if a send is still in flight on
/// `slot` when the writer is about to `what` its list.
fn assert_grace(state: &HubState, slot: usize, what: &str) {
    if cfg!(any(loom, shuttle, debug_assertions)) {
        let in_flight = state.load().in_flight(slot);
        assert!(
            in_flight == 0,
            "registry: {what} receiver list {slot} while {in_flight} send(s) in flight \
             may still read it (grace period not awaited)"
        );
    }
}
