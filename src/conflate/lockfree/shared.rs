//! What every handle of one hub shares: the state word, the stripes, the
//! receiver registry, the cells, the clock, the hasher and the hub's merge.
//!
//! The argument: `docs/design.md`, "The registry", "Registration versus send"
//! and "Snapshot registration is one instant".

use super::barrier;
use super::cell_rx::CellRx;
use super::cells::Cells;
use super::close_flags::Closing;
use super::core::RxCore;
use super::registry::{self, Registry, Writer};
use super::solo::{Moved, Solo};
use super::state::HubState;
use super::stripes::Stripes;
use crate::conflate::common::counters::{Departure, Departures};
use crate::conflate::common::hash::KeyHasher;
use crate::conflate::common::hub_word::HubWord;
use crate::conflate::common::policy::{KeyFilter, Merge};
use crate::conflate::common::reentrancy::{self, SendScope};
use crate::conflate::common::removal::Tombstones;
use crate::conflate::common::stats::{HubStats, ReceiverInfo};
use crate::error::SendError;
use crate::sync::{lock, Arc, AtomicPtr, AtomicU64, AtomicUsize, Mutex, MutexGuard, Ordering};
use crossbeam_utils::CachePadded;
use std::hash::Hash;

#[cfg(test)]
thread_local! {
    /// Acquisitions of any hub's writer lock on this thread (tests only).
    pub(crate) static WRITER_LOCKS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The registry writer's lock: serializes register, deregister, the closes
/// and grace periods. No send takes it (but a send that leaves after a close,
/// to wake the receivers).
pub(crate) struct WriterState<K, V> {
    /// Set by `Hub::close_now`: receivers made afterwards are born closed.
    closed: bool,
    list: Writer<K, V>,
    /// Cell receivers a collection released: their allocations, for the
    /// next registrations (`SPARE_CELL_RXS` at most).
    spare_cell_rxs: Vec<Arc<CellRx>>,
    /// The solo part `Shared::solo` names, while it names one.
    solo: Option<Arc<Solo<K, V>>>,
    /// Solo parts made so far: the next one's number (`Solo::for_table`).
    solo_parts: u64,
    /// Solo parts sends no longer reach but a send in flight may still
    /// hold: let go of after the next grace period (`Shared::maybe_collect`).
    retired_solos: Vec<Arc<Solo<K, V>>>,
    /// Loom builds keep what they let go of, so that a send that still
    /// reaches one trips its check instead of reading freed memory.
    #[cfg(loom)]
    let_go_solos: Vec<Arc<Solo<K, V>>>,
}

impl<K, V> WriterState<K, V> {
    /// The retired solo parts, after a grace period: no send reaches them
    /// now (in loom builds they are kept, marked let go of, and a send that
    /// still reaches one panics).
    fn let_go_of_retired_solos(&mut self) -> Vec<Arc<Solo<K, V>>> {
        let solos = std::mem::take(&mut self.retired_solos);
        #[cfg(loom)]
        {
            for solo in &solos {
                solo.mark_let_go();
            }
            self.let_go_solos.extend(solos);
            Vec::new()
        }
        #[cfg(not(loom))]
        solos
    }
}

/// Released cell receivers kept for reuse: as many as a collection releases
/// at once (a batch of retirements), so that a churn of registrations and
/// drops allocates no receiver.
const SPARE_CELL_RXS: usize = 32;

pub(crate) struct Shared<K, V> {
    pub(crate) state: HubState,
    /// Sends in flight and sends accepted, per thread.
    pub(crate) stripes: Stripes,
    pub(crate) registry: Registry<K, V>,
    writer: Mutex<WriterState<K, V>>,
    hasher: KeyHasher,
    pub(crate) merge: Merge<V>,
    /// Which values remove their key (`HubBuilder::tombstones`).
    pub(crate) tombstones: Tombstones<V>,
    /// One cell per live key, for the cell receivers and the state table.
    pub(crate) cells: Cells<K, V>,
    /// Moves on every cut of a cell receiver and every change of the cell
    /// receivers: a cell stamped with the clock's value needs no fan-out.
    pub(crate) clock: CachePadded<AtomicU64>,
    /// `retain_latest`.
    pub(crate) retain: bool,
    /// Cell receivers listed now (written under the writer lock). A send
    /// skips the cells when there are none and no table.
    cell_receivers: AtomicUsize,
    /// `Hub` and `Sender` handles alive; the last one to drop closes the send side.
    handles: AtomicUsize,
    /// Refused sends (rare: one shared counter).
    refused: AtomicU64,
    /// How registered receivers left (`HubStats::receivers_*`), written under
    /// the writer lock.
    departures: Departures,
    /// The next receiver's number (`ReceiverInfo::id`), taken at build.
    serials: AtomicU64,
    /// The hub's sole plain receiver's values while it is that (`solo.rs`):
    /// read by every send that has cell receivers, after their count, and
    /// stored (under the writer lock) before the count that shows its
    /// receiver, and cleared under `QUIESCE` or when its receiver leaves.
    /// Held by `WriterState::solo` while stored, then retired.
    solo: AtomicPtr<Solo<K, V>>,
}

/// Clears `QUIESCE` when a snapshot registration ends, also by a panic in the
/// user code it runs (key filter, clones), so sends can never stay held off.
struct Unquiesce<'a>(&'a HubState);

impl Drop for Unquiesce<'_> {
    fn drop(&mut self) {
        self.0.unquiesce();
    }
}

impl<K, V> Shared<K, V> {
    pub(crate) fn new(merge: Merge<V>, retain: bool, tombstones: Tombstones<V>) -> Self
    where
        V: 'static,
    {
        let merge = tombstones.across_lives(merge);
        let (registry, list) = registry::new();
        Shared {
            state: HubState::new(retain),
            stripes: Stripes::new(),
            registry,
            writer: Mutex::new(WriterState {
                closed: false,
                list,
                spare_cell_rxs: Vec::new(),
                solo: None,
                solo_parts: 0,
                retired_solos: Vec::new(),
                #[cfg(loom)]
                let_go_solos: Vec::new(),
            }),
            hasher: KeyHasher::default(),
            cells: Cells::new(merge.clone(), retain, tombstones.clone()),
            merge,
            tombstones,
            clock: CachePadded::new(AtomicU64::new(0)),
            retain,
            cell_receivers: AtomicUsize::new(0),
            handles: AtomicUsize::new(1),
            refused: AtomicU64::new(0),
            departures: Departures::default(),
            serials: AtomicU64::new(0),
            solo: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The sole receiver's values, for a send that saw cell receivers
    /// counted (`has_cell_receivers`, Acquire, loaded first): a registration
    /// stores this before it counts its receiver.
    #[inline(always)]
    pub(crate) fn active_solo(&self) -> Option<&Solo<K, V>> {
        // Relaxed: ordered after the count's Acquire load (see the field).
        let p = self.solo.load(Ordering::Relaxed);
        // SAFETY: the writer state holds the named `Solo`; once cleared it
        // stays retired until a grace period (`retire_solo`, `maybe_collect`):
        // callers are sends in flight, which that waits for, or hold the
        // writer lock the letting go needs.
        unsafe { p.as_ref() }
    }

    /// Sends stop reaching the solo part (its receiver left, or became a
    /// cell receiver); one in flight may still hold it, so it is let go of
    /// after the next grace period. Under the writer lock.
    fn retire_solo(&self, w: &mut WriterState<K, V>) {
        self.solo.store(std::ptr::null_mut(), Ordering::Relaxed);
        if let Some(solo) = w.solo.take() {
            w.retired_solos.push(solo);
        }
    }

    /// Whether user code of this thread runs inside a send of this hub (or
    /// inside a snapshot registration's user code): its own stripe is in
    /// flight, or it marked a send scope (a thread on the shared stripe, a
    /// registration).
    pub(crate) fn inside_send(&self) -> bool {
        self.stripes.in_flight_here() || reentrancy::inside_send(self)
    }

    /// Panics, naming `call`, if [`Shared::inside_send`]: the call would wait
    /// for the very send that runs it.
    #[track_caller]
    pub(crate) fn forbid_inside_send(&self, call: &str) {
        if self.inside_send() {
            reentrancy::reentered(call);
        }
    }

    /// A number for a receiver being built. Relaxed: a unique count, nothing
    /// is published through it.
    pub(crate) fn next_serial(&self) -> u64 {
        self.serials.fetch_add(1, Ordering::Relaxed)
    }

    /// Every live (listed) receiver with its accounting, in number order.
    /// Under the writer lock, so the list is one instant of the registry; the
    /// stats are lock-free reads (a cell receiver's walks its pending
    /// entries, O(pending)). Sends never wait for it.
    pub(crate) fn receivers(&self) -> Vec<ReceiverInfo> {
        self.forbid_inside_send("Hub::receivers");
        let w = self.lock_writer();
        let mut out: Vec<ReceiverInfo> = w
            .list
            .own_cores()
            .into_iter()
            .map(|core| ReceiverInfo {
                id: core.id,
                name: core.name.clone(),
                stats: core.stats(),
            })
            .chain(w.list.cell_rxs().into_iter().map(|rx| ReceiverInfo {
                id: rx.serial,
                name: rx.name.clone(),
                stats: rx.current_stats(
                    w.solo.as_deref().filter(|solo| solo.owned_by(rx)),
                    &self.cells,
                ),
            }))
            .collect();
        drop(w);
        out.sort_by_key(|info| info.id);
        out
    }

    /// A refused send: counted, key and value handed back.
    #[cold]
    pub(crate) fn refuse(&self, key: K, value: V) -> Result<(), SendError<K, V>> {
        // Relaxed: a count; nothing is published through it.
        self.refused.fetch_add(1, Ordering::Relaxed);
        Err(SendError { key, value })
    }

    /// The hub's accounting; lock-free loads only.
    pub(crate) fn stats(&self) -> HubStats {
        HubStats {
            sent: self.stripes.sent(),
            refused: self.refused.load(Ordering::Relaxed),
            receivers: self.state.load().receivers(),
            ..self.departures.fill(HubStats::default())
        }
    }

    /// The hub-wide lock (registry writers only). Tests count its acquisitions
    /// to show that no send takes it.
    fn lock_writer(&self) -> MutexGuard<'_, WriterState<K, V>> {
        #[cfg(test)]
        WRITER_LOCKS.with(|n| n.set(n.get() + 1));
        lock(&self.writer)
    }

    /// Whether a table hub's sole plain receiver may keep its values itself:
    /// newer wins (the receiver's value is then the table's, so the two are
    /// written by the same send) and no tombstones (so no key leaves the
    /// table, and no cell goes idle, while a place it names is pending).
    fn table_keeps_solo(&self) -> bool {
        matches!(self.merge, Merge::NewerWins) && !self.tombstones.enabled()
    }

    /// Whether the hub keeps a state table (`HubBuilder::retain_latest`).
    pub(crate) fn retains(&self) -> bool {
        self.retain
    }

    /// The key's hash, computed once per send and reused for every receiver's
    /// shard choice and probe (docs/design.md, "One hash per send").
    pub(crate) fn hash(&self, key: &K) -> u64
    where
        K: Hash,
    {
        self.hasher.hash(key)
    }

    /// The send side is closed and no send can still publish: what a receiver
    /// sees now is everything it will ever get. For a receiver that was told
    /// the send side closed (after the close's heavy fence).
    pub(crate) fn quiescent_closed(&self) -> bool {
        self.state.load().tx_closed() && !self.stripes.any_in_flight()
    }

    /// Whether any cell receiver is listed. Acquire pairs with the Release
    /// store under the writer lock: a send that starts after a registration
    /// returned sees it.
    #[inline]
    pub(crate) fn has_cell_receivers(&self) -> bool {
        self.cell_receivers.load(Ordering::Acquire) != 0
    }

    fn count_cell_receivers(&self, w: &WriterState<K, V>) {
        self.cell_receivers
            .store(w.list.cell_live(), Ordering::Release);
    }

    /// Moves the clock (a change of the cell receivers). AcqRel: a send that
    /// reads the new value under a cell lock sees the registry change.
    fn tick(&self) {
        self.clock.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether a new receiver is born closed (the hub or the send side is
    /// closed); under the writer lock, as `close_tx` marks receivers under it.
    fn born_closed(&self, w: &WriterState<K, V>) -> bool {
        w.closed || self.state.load().tx_closed()
    }

    /// Lists an own-value receiver, unless it is born closed.
    pub(crate) fn register_own(&self, core: &Arc<RxCore<K, V>>) {
        self.forbid_inside_send("Hub::receiver (ReceiverBuilder::build)");
        let mut w = self.lock_writer();
        if self.born_closed(&w) {
            core.close();
            return;
        }
        w.list.register_own(&self.registry, core);
        self.state.add_receiver();
    }

    /// Makes and lists a cell receiver (born with the table pending if
    /// `snapshot`), or one born closed.
    pub(crate) fn register_cell(
        &self,
        snapshot: bool,
        serial: u64,
        name: Option<std::sync::Arc<str>>,
        correction: Option<std::sync::Arc<crate::conflate::common::removal::Correction>>,
    ) -> (Arc<CellRx>, Option<Arc<Solo<K, V>>>)
    where
        K: Eq + Clone,
        V: Clone,
    {
        self.forbid_inside_send("Hub::receiver (ReceiverBuilder::build)");
        let mut w = self.lock_writer();
        let id = w.list.next_cell_id();
        // A released receiver renewed in place if there is one (what it held
        // is let go here, as its last `Arc` would have), else a new one: in a
        // churn of registrations a malloc, a free and two copies of the
        // receiver saved per registration (docs/design.md, "The registry").
        let rx = match Self::unique_spare(&mut w.spare_cell_rxs) {
            Some(mut spare) => {
                Arc::get_mut(&mut spare)
                    .expect("`unique_spare` returns a receiver only it holds")
                    .renew(id, serial, name, correction);
                spare
            }
            None => Arc::new(CellRx::new(id, serial, name, correction)),
        };
        if self.born_closed(&w) {
            rx.close();
            return (rx, None);
        }
        let mut sole = None;
        let in_table = self.retain && self.table_keeps_solo();
        if (!self.retain || in_table) && !snapshot && w.list.cell_live() == 0 {
            // The only plain receiver of a hub without a table, or of a
            // newer-wins table without tombstones: its values are its own
            // until a second one comes (`solo.rs`). Stored before the count
            // below, which a send loads first. An earlier sole receiver's
            // part was retired when it left (or converted).
            debug_assert!(w.solo.is_none(), "a solo part outlived its receiver");
            self.retire_solo(&mut w);
            let solo = Arc::new(if in_table {
                w.solo_parts += 1;
                // SAFETY: the cells are the hub's, which outlives every
                // send, registrar and consumer of the part.
                unsafe { Solo::for_table(rx.clone(), &self.cells, w.solo_parts) }
            } else {
                Solo::new(rx.clone())
            });
            self.solo.store(
                std::ptr::from_ref::<Solo<K, V>>(&*solo).cast_mut(),
                Ordering::Relaxed,
            );
            w.solo = Some(solo.clone());
            sole = Some(solo);
        }
        if sole.is_none() {
            // A cell receiver the cells serve (a second plain receiver, a
            // snapshot one, one of a table with tombstones): their pops and
            // cuts take the shard locks one by one, so the cells' one lock
            // while one thread sends ends here, for good.
            self.cells.split();
        }
        let converting = sole.is_none() && w.solo.is_some();
        // A table hub's sends with no receiver counted go to the cells and
        // read their list of cell receivers, which names this one from
        // below: held off, none of them is in flight once it is listed, so
        // none makes it a cell entry while its part takes its sends.
        let table_sole = sole.is_some() && self.retain;
        let _resume = (snapshot || converting || table_sole).then(|| self.hold_sends_off());
        if converting {
            // A second plain receiver: the first one's entries become cells
            // first, with no send in flight.
            self.convert_solo(&mut w);
        }
        if snapshot {
            // Copies nothing but cell names and marks: no user code runs.
            self.cells.seed(&rx);
        }
        w.list.register_cell(&self.registry, &rx);
        self.count_cell_receivers(&w);
        self.tick();
        self.state.add_receiver();
        (rx, sole)
    }

    /// Moves the sole receiver's pending entries into the cells, in
    /// first-touch order, and stops sends from reaching its solo part.
    /// Under the writer lock with sends held off; the receiver is the one
    /// cell receiver listed. A panic in `K::clone` or `K::eq` drops that
    /// entry (counted so), finishes the conversion, and then continues.
    fn convert_solo(&self, w: &mut WriterState<K, V>)
    where
        K: Eq + Clone,
        V: Clone,
    {
        let Some(solo) = w.solo.clone() else {
            return;
        };
        let owner = solo.owner();
        let mut panicked = None;
        {
            // The clones and probes are user code: a call back into this hub
            // from them would wait for this registration; make it panic.
            let _scope = SendScope::enter(self);
            solo.convert(|moved: Vec<Moved<K, V>>| {
                for Moved {
                    hash,
                    key,
                    value,
                    sends,
                } in moved
                {
                    let cells = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        // SAFETY: the writer lock is held: the registry's
                        // cell list does not change meanwhile.
                        unsafe {
                            self.cells.send(
                                hash,
                                &key,
                                value,
                                false,
                                &self.registry,
                                &self.clock,
                                0,
                            )
                        };
                        self.cells.credit(hash, &key, sends - 1);
                    }));
                    if let Err(payload) = cells {
                        // The consumer counts it (its counts have one
                        // writer): when it lets the solo part go.
                        solo.count_lost(sends);
                        panicked.get_or_insert(payload);
                    }
                }
            });
        }
        self.retire_solo(w);
        // A consumer parked on the solo part looks again (it finds the
        // conversion and goes on with the cells).
        owner.notify.notify(usize::MAX);
        if let Some(payload) = panicked {
            std::panic::resume_unwind(payload);
        }
    }

    /// The last spare cell receiver nothing else holds (a watch may still
    /// hold one), letting go of those it passes over.
    fn unique_spare(spares: &mut Vec<Arc<CellRx>>) -> Option<Arc<CellRx>> {
        while let Some(mut spare) = spares.pop() {
            if Arc::get_mut(&mut spare).is_some() {
                return Some(spare);
            }
        }
        None
    }

    /// Released cell receivers kept for reuse.
    #[cfg(test)]
    pub(crate) fn spare_cell_rxs(&self) -> usize {
        self.lock_writer().spare_cell_rxs.len()
    }

    /// Solo parts retired and not yet let go of.
    #[cfg(test)]
    pub(crate) fn retired_solos(&self) -> usize {
        self.lock_writer().retired_solos.len()
    }

    /// Sets `QUIESCE` and waits until no send is in flight; the guard lets
    /// sends in again. Caller holds the writer lock.
    fn hold_sends_off(&self) -> Unquiesce<'_> {
        self.state.quiesce();
        let resume = Unquiesce(&self.state);
        // A send that entered before the bit saw no quiesce and may update
        // the table; wait for it (Acquire in the wait pairs with its Release
        // leave: its updates happen-before the copy).
        self.stripes.wait_for_sends_in_flight();
        resume
    }

    /// Lists an own-value receiver born with the state table pending (rule
    /// 12), as one instant against every send: sends are held off and drained,
    /// the table is copied into `core`, `core` is listed, and sends resume.
    pub(crate) fn register_own_snapshot(
        &self,
        core: &Arc<RxCore<K, V>>,
        filter: &KeyFilter<K>,
        limit: usize,
    ) where
        K: Hash + Eq + Clone,
        V: Clone,
    {
        self.forbid_inside_send("Hub::receiver (ReceiverBuilder::build)");
        let mut w = self.lock_writer();
        if self.born_closed(&w) {
            core.close();
            return;
        }
        let _resume = self.hold_sends_off();
        {
            // The clones and the filter are user code: a call back into this
            // hub from them would wait for this registration; make it panic.
            let _scope = SendScope::enter(self);
            let entries = self.cells.snapshot();
            core.seed(
                entries
                    .into_iter()
                    .filter(|(key, _)| filter.accepts(key))
                    .take(limit)
                    .map(|(k, v)| (self.hash(&k), k, v)),
            );
        }
        w.list.register_own(&self.registry, core);
        self.state.add_receiver();
    }

    pub(crate) fn deregister_own(&self, core: &RxCore<K, V>, how: Departure) {
        let mut w = self.lock_writer();
        if w.list.deregister_own(&self.registry, core) {
            self.state.remove_receiver();
            self.departures.count(how);
        }
        self.maybe_collect(w);
    }

    pub(crate) fn deregister_cell(&self, rx: &CellRx, how: Departure) {
        let mut w = self.lock_writer();
        if w.solo.as_ref().is_some_and(|solo| solo.owned_by(rx)) {
            // The sole receiver leaves: sends stop looking at its solo part
            // (one in flight that still does finds it shut).
            self.retire_solo(&mut w);
        }
        if w.list.deregister_cell(rx) {
            self.count_cell_receivers(&w);
            self.tick();
            self.state.remove_receiver();
            self.departures.count(how);
        }
        // No collection here: the consumer lets go of its entries next (it
        // walks them, clearing their marks), then `let_go` collects, so the
        // grace period comes after that walk and the clean-up catches what
        // sends in flight pushed meanwhile.
    }

    /// A cell receiver's consumer let go of it (after a hard close): it may be
    /// cleaned up now.
    pub(crate) fn let_go(&self) {
        let w = self.lock_writer();
        self.maybe_collect(w);
    }

    /// Runs a grace period and releases what was retired, if enough is.
    fn maybe_collect(&self, mut w: MutexGuard<'_, WriterState<K, V>>) {
        if !w.list.should_collect() {
            return;
        }
        self.stripes.wait_for_sends_in_flight();
        let mut released = w.list.collect(|rx| rx.clean_up(&self.cells));
        let solos = w.let_go_of_retired_solos();
        let WriterState { spare_cell_rxs, .. } = &mut *w;
        released.keep_cells(spare_cell_rxs, SPARE_CELL_RXS);
        drop(w);
        // Receivers' last counts (and their queues), and solo parts no send
        // can reach now, dropped outside the lock.
        drop((released, solos));
    }

    /// Wakes every registered receiver: the last send in flight after a close
    /// finished, so a drain may be complete. Takes the writer lock; rare.
    pub(crate) fn wake_all(&self) {
        let w = self.lock_writer();
        for core in w.list.own_cores() {
            core.notify.notify(usize::MAX);
        }
        for rx in w.list.cell_rxs() {
            rx.notify.notify(usize::MAX);
        }
    }

    pub(crate) fn close_tx(&self) {
        self.forbid_inside_send("Sender::close");
        self.state.close_tx();
        // After this, a send that did not see `TX_CLOSED` has its stripe
        // visible to every thread the marks below reach (see `stripes.rs`).
        barrier::heavy();
        let w = self.lock_writer();
        for core in w.list.own_cores() {
            core.mark_tx_closed();
        }
        for rx in w.list.cell_rxs() {
            rx.mark_tx_closed();
        }
    }

    /// Hard close: the send side and every receiver, now; nothing drains.
    pub(crate) fn close_hub(&self) {
        self.forbid_inside_send("Hub::close_now");
        self.state.close_hub();
        let (own, cells, solo) = {
            let mut w = self.lock_writer();
            w.closed = true;
            let listed = w.list.clear(&self.registry);
            self.departures
                .count_hard_closed((listed.0.len() + listed.1.len()) as u64);
            self.count_cell_receivers(&w);
            self.state.clear_receivers();
            self.tick();
            // Held here: the receiver may leave meanwhile and retire it.
            (listed.0, listed.1, w.solo.clone())
        };
        for core in &own {
            core.close();
            core.clear();
        }
        // The sole receiver's values go now (a cut in progress drops its
        // batch itself when it sees the close).
        let solo_values = solo.as_deref().map(Solo::shut);
        for rx in &cells {
            // Its consumer lets go of its entries when it next looks (the
            // entries are its own to walk), or when it is dropped; the
            // values go now.
            rx.close();
        }
        self.cells.drop_values();
        drop(solo_values);
        for rx in &cells {
            rx.notify.notify(usize::MAX);
        }
    }

    pub(crate) fn acquire_handle(&self) {
        // Relaxed: like `Arc::clone`, a new handle is made from an existing one,
        // which keeps the count above zero meanwhile.
        self.handles.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn release_handle(&self) {
        // AcqRel: the last release must see every other handle's work done.
        if self.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.close_tx();
        }
    }
}
