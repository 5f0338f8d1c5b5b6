//! The receiver list: read by every send without a lock, changed by the rare
//! register / deregister / hard close in O(1) amortized.
//!
//! One array of receiver pointers, in registration order (the fan-out order),
//! with holes where receivers left; the writer side ([`ListWriter`]) lives under
//! the hub's writer lock. A send does not read the writer's array length: it
//! reads a *view* (array, length) of one of two view slots, the one its entry
//! CAS on the hub state word picked and counted itself on (see `state.rs`). A
//! writer publishes a change by writing the *other* view — after waiting until
//! no send is in flight there (those sends entered before the previous flip) —
//! and flipping `CURRENT`, together with the receiver count, in one CAS. So a
//! send sees the list exactly as of its entry: every receiver registered
//! before it entered, none registered after (docs/design.md, "The registry").
//!
//! What a writer does, none of it a copy of the list:
//!
//! - **register**: store the pointer at the end of the array, publish. The
//!   entry is past every view a send in flight holds (a view's length never
//!   exceeds the writer's, see below), so no send reads it before the flip.
//! - **deregister**: null the entry (a send in flight may still have read the
//!   pointer), drop trailing holes from the length, publish, then wait a
//!   second grace period on the slot it just left: afterwards no send that
//!   could have read the pointer, or a view longer than the new length, is in
//!   flight, and none can enter that slot before the next writer rewrites its
//!   view. Only then is the core's count taken back — and only then may an
//!   index at or past the new length be reused by a later registration, so a
//!   send never reads one index as two receivers (the reuse trap).
//! - **compaction / growth / shrinking**: when holes outnumber live receivers
//!   (and a minimum), the array is full, or it is sized for four times the
//!   live receivers, the live pointers are copied in order into the spare
//!   array (or a fresh one sized for twice the live receivers), which is
//!   published; the old array becomes the spare only after a second grace
//!   period. Each copy is paid for by the removals or registrations since the
//!   last one (at least as many as it copies): O(1) amortized.
//!
//! A send therefore reads at most `2 × live + HOLES_MIN` entries, each hole one
//! load and a branch. Sends never wait for a writer. A writer waits only for
//! sends already in flight, each a bounded fan-out (user merges and filters
//! included: they must not register or drop receivers of the same hub, which
//! would wait for themselves; that panics instead, see `reentrancy.rs`).
//!
//! The array holds raw pointers (`Arc::into_raw`), not `Arc`s: the registry
//! owns one strong count of every listed core, so publishing a change costs no
//! atomic read-modify-write on any receiver's cache line.

use super::core::RxCore;
use super::shared::HashState;
use super::state::{HubState, MAX_RECEIVERS};
use crate::sync::{spin_wait, Arc, AtomicPtr, Ordering, UnsafeCell};
use std::collections::HashMap;
use std::ptr;

/// Holes tolerated before a compaction, whatever the number of live receivers
/// (small under the model checkers and in unit tests, so that small models
/// reach a compaction).
const HOLES_MIN: usize = if cfg!(any(loom, shuttle, test)) {
    1
} else {
    16
};

/// The smallest array (small under the model checkers and in unit tests, so
/// that small models reach a growth).
const MIN_CAPACITY: usize = if cfg!(any(loom, shuttle, test)) { 2 } else { 8 };

/// The capacity a rebuild gives the array for `live` receivers: room for as
/// many registrations again (plus the one that may be waiting), so the next
/// growth is paid for by those.
fn capacity_for(live: usize) -> usize {
    MIN_CAPACITY.max(2 * (live + 1))
}

/// Whether an array of `len` entries may serve a rebuild for `live`
/// receivers: large enough, and not so large that a removal would shrink it.
fn fits(len: usize, live: usize) -> bool {
    (capacity_for(live)..=capacity_for(4 * live)).contains(&len)
}

/// An array of receiver pointers: `Arc::into_raw` of a listed core, or null (a
/// hole, or never used). Its length is fixed at allocation; only the entries
/// change.
type Array<K, V> = Vec<AtomicPtr<RxCore<K, V>>>;

fn array<K, V>(capacity: usize) -> Array<K, V> {
    (0..capacity)
        .map(|_| AtomicPtr::new(ptr::null_mut()))
        .collect()
}

/// What a send reads: the first `len` entries of an array.
struct View<K, V> {
    entries: *const AtomicPtr<RxCore<K, V>>,
    len: usize,
}

impl<K, V> Clone for View<K, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K, V> Copy for View<K, V> {}

/// One view slot. A model-checked cell: under loom, a writer that rewrote a
/// view while a send in flight on its slot could still read it (a missing
/// grace period) is reported as a data race on this cell.
struct ViewCell<K, V>(UnsafeCell<View<K, V>>);

// SAFETY: the cell holds a pointer into an array of `AtomicPtr`s (which are
// `Send + Sync` for every pointee) and a length; sharing it between threads is
// what the grace periods order: it is written only by the registry writer
// (under the hub's writer lock) while its slot is not current and no send is in
// flight on it, and read only by sends in flight on its slot.
unsafe impl<K, V> Sync for ViewCell<K, V> {}
// SAFETY: as above; the cell owns nothing (the arrays belong to `ListWriter`).
unsafe impl<K, V> Send for ViewCell<K, V> {}

impl<K, V> ViewCell<K, V> {
    fn empty() -> Self {
        ViewCell(UnsafeCell::new(View {
            entries: ptr::null(),
            len: 0,
        }))
    }
}

/// [`Listed::split_last`]: the last core and the list before it.
pub(crate) type LastAndRest<'a, K, V> = (&'a RxCore<K, V>, Listed<'a, K, V>);

/// A borrowed receiver list: every core in it stays alive for `'a`.
pub(crate) struct Listed<'a, K, V>(&'a [AtomicPtr<RxCore<K, V>>]);

impl<'a, K, V> Listed<'a, K, V> {
    /// The core an entry names, if it is not a hole.
    #[inline]
    fn core(entry: &'a AtomicPtr<RxCore<K, V>>) -> Option<&'a RxCore<K, V>> {
        // Relaxed: a non-null entry a send can read was stored before the flip
        // its entry CAS synchronized with (Release flip, Acquire entry), or,
        // for a lock holder, by the writer itself; the core it names was built
        // before that store. A concurrent store can only be a null (a receiver
        // leaving): non-null stores land past every in-flight view, or in
        // another array (module docs).
        let core = entry.load(Ordering::Relaxed);
        // `Listed` is made only by `Registry::list` (for a send in flight on
        // its slot) and `ListWriter::listed` (for the lock holder). A non-null
        // entry is the registry's count of a live core, released only after a
        // grace period that waits for every send in flight when it was nulled,
        // and only under the writer lock.
        // SAFETY: so a non-null entry read here names a live core.
        unsafe { core.as_ref() }
    }

    /// The live cores, in fan-out (registration) order; holes are skipped.
    #[inline]
    pub(crate) fn iter(&self) -> impl Iterator<Item = &'a RxCore<K, V>> + 'a {
        self.0.iter().filter_map(Self::core)
    }

    /// The last live core and the list before it (to move the value into the
    /// last). Trailing holes are rare: a writer publishes none, so only a
    /// receiver leaving during this send makes one.
    #[inline]
    pub(crate) fn split_last(&self) -> Option<LastAndRest<'a, K, V>> {
        let mut end = self.0.len();
        while end > 0 {
            end -= 1;
            if let Some(last) = Self::core(&self.0[end]) {
                return Some((last, Listed(&self.0[..end])));
            }
        }
        None
    }
}

/// The registry's shared side: the two views sends read.
pub(crate) struct Registry<K, V> {
    views: [ViewCell<K, V>; 2],
}

impl<K, V> Registry<K, V> {
    pub(crate) fn new() -> Self {
        Registry {
            views: [ViewCell::empty(), ViewCell::empty()],
        }
    }

    /// The list a send in flight on `slot` fans out to.
    ///
    /// # Safety
    /// The caller is a send in flight on `slot` (`HubState::enter_send` returned
    /// `InFlight(slot)` and `leave_send(slot)` has not run) for as long as it
    /// uses the returned list: no writer rewrites that view, reuses an index
    /// inside it, frees its array or releases a core in it meanwhile.
    #[inline]
    pub(crate) unsafe fn list(&self, slot: usize) -> Listed<'_, K, V> {
        // A plain read: the view was written before the flip that made `slot`
        // current, and the caller's entry CAS (Acquire) read that flip or a
        // later RMW of its release sequence.
        // SAFETY: no writer writes this cell while a send is in flight on its
        // slot (the writer waits until none is, and none enters a slot that is
        // not current, which it is while written).
        let view = self.views[slot].0.with(|v| unsafe { *v });
        if view.len == 0 {
            return Listed(&[]);
        }
        // SAFETY: a non-empty view names the first `len` entries of an array of
        // `ListWriter` (`publish`), which is freed or reused only after a grace
        // period that waits for every send in flight on a slot whose view names
        // it (the caller's contract).
        Listed(unsafe { std::slice::from_raw_parts(view.entries, view.len) })
    }

    /// Publishes the writer's array and length to new sends and sets the state
    /// word's receiver count: writes the view of the non-current slot, after
    /// waiting until no send is in flight there, then flips `CURRENT` to it.
    /// Returns the slot that was current (now stale: its view is the old one).
    fn publish(&self, w: &ListWriter<K, V>, state: &HubState) -> usize {
        let cur = state.load().current();
        let other = 1 - cur;
        // Grace period: sends still in flight on `other` entered before the
        // last flip and may be reading its view. New sends cannot enter there
        // until we flip (only the writer flips, and we are it). Acquire (in
        // `load`) pairs with their Release `leave_send`: their reads
        // happen-before the write below.
        spin_wait(|| state.load().in_flight(other) == 0);
        // Checked in debug builds and under the model checkers (whose CI runs
        // are release builds), so a missing grace period fails a model with
        // this message as well as loom's report of the race on the cell.
        assert_grace(state, other, "rewriting the view of");
        let view = View {
            entries: w.array.as_ptr(),
            len: w.len,
        };
        // SAFETY: no send is in flight on `other` (waited above) and none can
        // enter it before the flip below; writers are serialized by the writer
        // lock, so this is the only access.
        self.views[other].0.with_mut(|v| unsafe { *v = view });
        // Release (in the flip's RMW): a send that enters on `other` after it
        // sees the view written above, and every entry and core stored before.
        state.flip_list(w.live as u64);
        cur
    }

    /// Waits until no send is in flight on `stale`, a slot that is no longer
    /// current: afterwards none reads its view (nor the entries, array and
    /// cores it names) until a writer rewrites it.
    fn grace(state: &HubState, stale: usize) {
        // Acquire pairs with each such send's Release `leave_send`: its last
        // touch of any entry or core happens-before the caller reuses or
        // releases one.
        spin_wait(|| state.load().in_flight(stale) == 0);
        assert_grace(state, stale, "releasing what the view names of");
    }

    /// Appends `core`. O(1) amortized: the array grows by doubling.
    pub(crate) fn register(
        &self,
        w: &mut ListWriter<K, V>,
        state: &HubState,
        core: &Arc<RxCore<K, V>>,
    ) {
        // Before anything changes, so that the panic leaves the list as it was.
        assert!(
            (w.live as u64) < MAX_RECEIVERS,
            "too many receivers on one hub"
        );
        if w.len == w.array.len() {
            self.rebuild(w, state);
        }
        let raw = Arc::into_raw(core.clone());
        // Relaxed: published by the flip in `publish`. Index `len` is past
        // every view a send in flight holds (views longer than the writer's
        // length exist only inside a deregistration, before its second grace
        // period), so no send reads this entry before then.
        w.array[w.len].store(raw.cast_mut(), Ordering::Relaxed);
        w.index.insert(raw as usize, w.len);
        w.len += 1;
        w.live += 1;
        self.publish(w, state);
    }

    /// Removes `core` (if listed) and returns the registry's count of it, once
    /// no send can still touch it through a view.
    pub(crate) fn deregister(
        &self,
        w: &mut ListWriter<K, V>,
        state: &HubState,
        core: &RxCore<K, V>,
    ) -> Option<Arc<RxCore<K, V>>> {
        let at = w.index.remove(&(core as *const RxCore<K, V> as usize))?;
        // The listed pointer, not `core`: it carries the provenance of
        // `Arc::into_raw` (the whole allocation, counts included). Relaxed:
        // sends in flight read null or the core; the flip below orders the
        // null before every later entry.
        let removed = w.array[at].swap(ptr::null_mut(), Ordering::Relaxed);
        debug_assert!(!removed.is_null(), "a listed core has a non-null entry");
        w.live -= 1;
        if at + 1 == w.len {
            // Trailing holes go: their indices may be reused after the
            // second grace period below. Each hole is dropped once.
            while w.len > 0 && w.array[w.len - 1].load(Ordering::Relaxed).is_null() {
                w.len -= 1;
            }
        }
        let too_many_holes = w.len - w.live > w.live.max(HOLES_MIN);
        // An array sized for four times as many receivers as remain (a rebuild
        // sizes it for twice as many) shrinks too.
        let too_large = w.array.len() > capacity_for(4 * w.live);
        if too_many_holes || too_large {
            // Publishes and waits for both grace periods itself.
            self.rebuild(w, state);
        } else {
            let stale = self.publish(w, state);
            Self::grace(state, stale);
        }
        // SAFETY: `removed` was listed, so the registry owns one count of it
        // from `Arc::into_raw` (in `register`); its entry is null, every view
        // published since lacks it, and no send that read it is in flight (the
        // grace periods above). It is taken back once: its index entry is gone.
        Some(unsafe { Arc::from_raw(removed) })
    }

    /// Copies the live entries, in order, into a fresh array (the spare if it
    /// fits) sized for twice the live receivers plus one, publishes it, and
    /// keeps the old array as the spare once no send can read it (if it could
    /// serve the next rebuild).
    fn rebuild(&self, w: &mut ListWriter<K, V>, state: &HubState) {
        #[cfg(test)]
        if w.len > w.live {
            w.rebuilds.1 += 1;
        } else {
            w.rebuilds.0 += 1;
        }
        let next = match w.spare.take() {
            Some(spare) if fits(spare.len(), w.live) => spare,
            _ => array(capacity_for(w.live)),
        };
        let mut len = 0;
        for entry in &w.array[..w.len] {
            // Relaxed: only the writer stores entries, and we are it.
            let core = entry.load(Ordering::Relaxed);
            if !core.is_null() {
                // Relaxed: `next` is no view's array (it is fresh, or the
                // spare, whose last readers left before it became the spare);
                // published by the flip in `publish`.
                next[len].store(core, Ordering::Relaxed);
                w.index.insert(core as usize, len);
                len += 1;
            }
        }
        debug_assert_eq!(len, w.live);
        let old = std::mem::replace(&mut w.array, next);
        w.len = len;
        let stale = self.publish(w, state);
        // The old array is named by no view but the stale one (the other slot's
        // senders were drained by `publish`); once the stale slot's senders
        // leave, nothing reads it, and its view is rewritten before that slot
        // is current again.
        Self::grace(state, stale);
        // Kept for the next rebuild only if it could serve it: a spare that
        // could not (the list grew or shrank a lot) is freed now.
        w.spare = fits(old.len(), w.live).then_some(old);
    }

    /// Empties the list; returns the registry's counts of every core that was
    /// listed, once no send can still touch them through a view.
    pub(crate) fn clear(
        &self,
        w: &mut ListWriter<K, V>,
        state: &HubState,
    ) -> Vec<Arc<RxCore<K, V>>> {
        let listed: Vec<*mut RxCore<K, V>> = w.array[..w.len]
            .iter()
            // Relaxed: as in `deregister`.
            .map(|entry| entry.swap(ptr::null_mut(), Ordering::Relaxed))
            .filter(|core| !core.is_null())
            .collect();
        w.len = 0;
        w.live = 0;
        w.index.clear();
        let stale = self.publish(w, state);
        Self::grace(state, stale);
        listed
            .into_iter()
            // SAFETY: each was a listed entry, so the registry owns one count
            // of it; all are nulled, unpublished and past their grace periods
            // (as in `deregister`); each is taken back once.
            .map(|core| unsafe { Arc::from_raw(core) })
            .collect()
    }
}

/// The registry's writer side: the array, its length and the index of each
/// listed core. Lives under the hub's writer lock, which serializes every
/// writer; dropping it (with the hub's shared state: no send and no writer
/// remains) takes back the registry's count of every core still listed
/// (receivers dropped inside a send stay listed).
pub(crate) struct ListWriter<K, V> {
    /// Receivers in registration order, with holes (null); never resized in
    /// place (a rebuild replaces it), so a view's pointer stays valid.
    array: Array<K, V>,
    /// Entries `..len` are published (the last one is live, or `len == 0`).
    len: usize,
    /// Non-null entries in `..len`: the live receivers.
    live: usize,
    /// The array index of each listed core, by address.
    index: HashMap<usize, usize, HashState>,
    /// The previous array, read by no send: the next rebuild's target.
    spare: Option<Array<K, V>>,
    /// Rebuilds so far: (growths, compactions) (tests).
    #[cfg(test)]
    rebuilds: (usize, usize),
}

impl<K, V> ListWriter<K, V> {
    pub(crate) fn new() -> Self {
        ListWriter {
            array: Vec::new(),
            len: 0,
            live: 0,
            index: HashMap::default(),
            spare: None,
            #[cfg(test)]
            rebuilds: (0, 0),
        }
    }

    /// The listed cores, for the holder of the writer lock (`&self` is only
    /// reachable through it): none is released while the borrow lasts.
    pub(crate) fn listed(&self) -> Listed<'_, K, V> {
        Listed(&self.array[..self.len])
    }
}

impl<K, V> Drop for ListWriter<K, V> {
    fn drop(&mut self) {
        for entry in &self.array[..self.len] {
            // Relaxed: `&mut self`: no send and no other writer exists.
            let core = entry.load(Ordering::Relaxed);
            if !core.is_null() {
                // SAFETY: a listed entry: the registry owns one count of it
                // (from `register`), taken back once, here.
                drop(unsafe { Arc::from_raw(core) });
            }
        }
    }
}

/// Fails loudly (debug builds, loom, shuttle) if a send is still in flight on
/// `slot` when the writer is about to `what` that slot.
fn assert_grace(state: &HubState, slot: usize, what: &str) {
    if cfg!(any(loom, shuttle, debug_assertions)) {
        let in_flight = state.load().in_flight(slot);
        assert!(
            in_flight == 0,
            "registry: {what} slot {slot} while {in_flight} send(s) in flight \
             may still read it (grace period not awaited)"
        );
    }
}

#[cfg(test)]
impl<K, V> ListWriter<K, V> {
    /// Checks the writer side's invariants and returns the listed cores in
    /// fan-out order.
    pub(crate) fn check(&self) -> Vec<*const RxCore<K, V>> {
        assert!(self.len <= self.array.len());
        let listed: Vec<_> = self.array[..self.len]
            .iter()
            .map(|entry| entry.load(Ordering::Relaxed).cast_const())
            .filter(|core| !core.is_null())
            .collect();
        assert_eq!(listed.len(), self.live, "live count");
        assert_eq!(self.index.len(), self.live, "index size");
        for (at, core) in self.array[..self.len].iter().enumerate() {
            let core = core.load(Ordering::Relaxed);
            if !core.is_null() {
                assert_eq!(self.index.get(&(core as usize)), Some(&at), "index");
            }
        }
        if self.len > 0 {
            let last = self.array[self.len - 1].load(Ordering::Relaxed);
            assert!(!last.is_null(), "a trailing hole was kept");
        }
        assert!(
            self.array.len() <= capacity_for(4 * self.live),
            "an array of {} entries for {} live receivers",
            self.array.len(),
            self.live
        );
        assert!(
            self.len - self.live <= self.live.max(HOLES_MIN),
            "{} holes for {} live receivers",
            self.len - self.live,
            self.live
        );
        listed
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Hub, Receiver};
    use crate::sync::Arc;
    use std::thread;

    fn listed(hub: &Hub<u32, u64>) -> Vec<usize> {
        hub.shared
            .with_list_writer(|w| w.check().into_iter().map(|p| p as usize).collect())
    }

    fn addrs(rxs: &[&Receiver<u32, u64>]) -> Vec<usize> {
        rxs.iter()
            .map(|rx| Arc::as_ptr(&rx.core) as usize)
            .collect()
    }

    /// Holes, trailing reuse, compaction and growth keep the fan-out in
    /// registration order, the state word's count right and the holes bounded;
    /// every live receiver gets every send, once.
    #[test]
    fn order_holes_compaction_and_growth() {
        let hub: Hub<u32, u64> = Hub::with_merge(|a, b| Some(a + b));
        let tx = hub.sender();
        // Each live receiver with the step it registered at.
        let mut live: Vec<(Receiver<u32, u64>, u64)> = Vec::new();
        let n = if cfg!(miri) { 40 } else { 300 };
        // A deterministic churn: mostly growth at first, then mostly removals
        // from the front and the middle (holes), some from the back (trailing).
        for step in 0..n {
            let grow = step < n / 2 || step % 5 == 0;
            if grow || live.is_empty() {
                live.push((hub.receiver(), step));
            } else {
                let at = match step % 4 {
                    0 => 0,
                    1 => live.len() - 1,
                    _ => live.len() / 2,
                };
                drop(live.remove(at));
            }
            let rxs: Vec<_> = live.iter().map(|(rx, _)| rx).collect();
            assert_eq!(listed(&hub), addrs(&rxs), "fan-out order at step {step}");
            assert_eq!(hub.stats().receivers, live.len() as u64);
            tx.send((step % 4) as u32, 1).unwrap();
        }
        // Summed values: a receiver registered at step s got the sends of
        // steps s..n, each once.
        for (rx, since) in &mut live {
            let got: u64 = rx.try_iter().map(|e| e.value).sum();
            assert_eq!(got, n - *since, "receiver registered at step {since}");
        }
        drop(live);
        assert!(listed(&hub).is_empty());
        assert_eq!(hub.stats().receivers, 0);
        hub.shared.with_list_writer(|w| {
            assert_eq!((w.len, w.live), (0, 0));
            let (growths, compactions) = w.rebuilds;
            assert!(growths >= 3 && compactions >= 1, "{:?}", w.rebuilds);
        });
    }

    /// The bench's pattern: one receiver registered and dropped at the end of
    /// a standing list reuses the same index; no compaction, no growth.
    #[test]
    fn register_drop_at_the_end_reuses_the_index() {
        let hub: Hub<u32, u64> = Hub::new();
        let standing: Vec<_> = (0..10).map(|_| hub.receiver()).collect();
        let capacity = hub.shared.with_list_writer(|w| w.array.len());
        for _ in 0..100 {
            drop(hub.receiver());
            hub.shared.with_list_writer(|w| {
                assert_eq!((w.len, w.live, w.array.len()), (10, 10, capacity));
            });
        }
        assert_eq!(listed(&hub), addrs(&standing.iter().collect::<Vec<_>>()));
    }

    /// Receivers registered and dropped out of order (holes, compaction,
    /// growth, index reuse) while a sender sends: under miri a view or array
    /// reused, or a core freed, while a send could still read it is a data race
    /// or use-after-free report. The receivers registered before the sender
    /// started get every send exactly once (summed values, one per send); a
    /// churned receiver gets at most the sends made while it was listed.
    #[test]
    fn churn_with_holes_during_sends() {
        let (rounds, sends) = if cfg!(miri) { (6, 60) } else { (300, 20_000) };
        let hub: Hub<u32, u64> = Hub::with_merge(|a, b| Some(a + b));
        let mut first = hub.receiver();
        let tx = hub.sender();
        let churn_hub = hub.clone();
        let churn = thread::spawn(move || {
            let mut max_got = 0;
            for round in 0..rounds {
                let mut rxs: Vec<_> = (0..5).map(|_| churn_hub.receiver()).collect();
                // Drop the middle ones first (holes), then the rest, in an
                // order that varies per round.
                for at in [2, 1, round % 3] {
                    let mut rx = rxs.remove(at.min(rxs.len() - 1));
                    max_got = max_got.max(rx.try_iter().map(|e| e.value).sum::<u64>());
                }
                churn_hub.shared.with_list_writer(|w| {
                    w.check();
                });
            }
            max_got
        });
        let mut last = None;
        for k in 0..sends {
            tx.send(k % 8, 1).unwrap();
            if k == 0 {
                last = Some(hub.receiver());
            }
        }
        let max_got = churn.join().unwrap();
        assert!(max_got <= sends as u64);
        hub.shared.with_list_writer(|w| {
            let (growths, compactions) = w.rebuilds;
            assert!(growths >= 1 && compactions >= 1, "{:?}", w.rebuilds);
        });
        drop((hub, tx));
        let got: u64 = first.iter().map(|e| e.value).sum();
        assert_eq!(got, sends as u64, "the first receiver got every send once");
        let got: u64 = last.unwrap().iter().map(|e| e.value).sum();
        assert_eq!(
            got,
            sends as u64 - 1,
            "a receiver gets every later send once"
        );
    }
}
