//! A cell receiver's consumer side ([`CellLocal`], owned by its `Receiver`)
//! and the cell receiver's reads of the hub's cells: its stats and the clean-up
//! after its deregistration (docs/design.md, "One cell per key", "The cut is
//! one instant"). The receiver's shared part is `cell_rx.rs`.

use super::cell_rx::CellRx;
use super::cells::Cells;
use super::close_flags::Closing;
use super::queue::{CellId, Head};
use super::solo::{Solo, Took};
use crate::conflate::common::event::Event;
use crate::conflate::common::stats::ReceiverStats;
use crate::sync::{lock, Arc, AtomicU64, Ordering};
use std::panic::{self, AssertUnwindSafe};

/// The consumer's side of a cell receiver (owned by its `Receiver`).
pub(crate) struct CellLocal<K, V> {
    head: Head,
    /// The cut epoch the consumer is in (it is the only one that moves it).
    epoch: u8,
    /// The pending entries were given up (after a close): `head` is no longer
    /// the consumer's.
    let_go: bool,
    /// A cut's entries, kept for the next cut (its capacity).
    entries: Vec<(CellId, u64)>,
    /// The hub's sole receiver's values, while this receiver is it and has
    /// not yet seen them converted into cells (`solo.rs`).
    solo: Option<Arc<Solo<K, V>>>,
    /// The solo part after a close let go of it: its counts are the
    /// receiver's final stats.
    solo_left: Option<Arc<Solo<K, V>>>,
    values: std::marker::PhantomData<fn() -> (K, V)>,
}

impl<K, V> Default for CellLocal<K, V> {
    fn default() -> Self {
        CellLocal {
            head: Head::default(),
            epoch: 0,
            let_go: false,
            entries: Vec::new(),
            solo: None,
            solo_left: None,
            values: std::marker::PhantomData,
        }
    }
}

impl<K, V> CellLocal<K, V> {
    /// The consumer side of the hub's sole receiver: its values in `solo`
    /// until they are converted into cells.
    pub(crate) fn with_solo(solo: Arc<Solo<K, V>>) -> Self {
        CellLocal {
            solo: Some(solo),
            ..Self::default()
        }
    }

    /// The solo part, while there is one.
    #[inline(always)]
    fn solo(&self) -> Option<&Arc<Solo<K, V>>> {
        self.solo.as_ref()
    }

    /// The solo part whose counts are the receiver's stats: while it is
    /// the receiver's, and after a close let go of it.
    pub(crate) fn counted_solo(&self) -> Option<&Arc<Solo<K, V>>> {
        self.solo.as_ref().or(self.solo_left.as_ref())
    }

    /// The entries became cells: lets go of the solo part (nothing is left
    /// in it) and goes on as a cell receiver, announced as about to park so
    /// that a consumer that armed the solo part is woken by the cells'
    /// pushes.
    #[cold]
    fn switch_to_cells(&mut self, rx: &CellRx) {
        if let Some(solo) = self.solo() {
            let (values, keys, lost) = solo.tear_down();
            debug_assert!(values.is_empty(), "converted: nothing left");
            // Entries a panicking conversion dropped: counted by this
            // consumer, the only writer of its counts.
            rx.consumed.dropped(lost);
            drop((values, keys));
        }
        self.solo = None;
        let _ = rx.queue.park(&self.head);
    }

    /// Lets go of the solo part's values (a close): counted as dropped,
    /// dropped here, outside every lock.
    fn drop_solo(&self, rx: &CellRx) {
        if let Some(solo) = self.solo() {
            let (values, keys, sends) = solo.tear_down();
            rx.consumed.dropped(sends);
            drop((values, keys));
        }
    }
}

impl CellRx {
    /// The receiver's accounting, from any thread (its own `stats` and its
    /// watches): `received` is derived from what every send that reached it
    /// became (a cell receiver counts nothing per send). The consumer's
    /// counts are loaded before the walk of its published head, which it
    /// stores before those counts: an entry taken is in the counts or still
    /// walked, never in both (the sum may lag while the consumer runs).
    pub(crate) fn stats<K, V>(&self, cells: &Cells<K, V>) -> ReceiverStats {
        match &self.correction {
            Some(c) => c.correct(|| self.queue_stats(cells)),
            None => self.queue_stats(cells),
        }
    }

    /// The receiver's accounting, from any thread, given its solo part if
    /// it was registered the hub's sole receiver: from that part until it
    /// is converted, then from its entries.
    pub(crate) fn current_stats<K, V>(
        &self,
        solo: Option<&Solo<K, V>>,
        cells: &Cells<K, V>,
    ) -> ReceiverStats {
        match solo {
            Some(solo) if !solo.is_converted() => self.solo_stats(solo),
            _ => self.stats(cells),
        }
    }

    /// The accounting of the hub's sole receiver while its values are its
    /// own (`solo.rs`): `received` counted per send under the shard locks,
    /// loaded after the consumer's counts, so never below their sum.
    pub(crate) fn solo_stats<K, V>(&self, solo: &Solo<K, V>) -> ReceiverStats {
        let counted = || {
            let (delivered, folded, mut dropped) = self.consumed.load();
            let received = solo.received();
            let pending = if self.is_closed() {
                // Closed, values not let go of yet: dropped.
                dropped = dropped.max(received.saturating_sub(folded));
                0
            } else {
                solo.len()
            };
            ReceiverStats::derived(received, 0, delivered, folded, 0, 0, dropped, pending)
        };
        match &self.correction {
            Some(c) => c.correct(counted),
            None => counted(),
        }
    }

    /// [`Self::stats`] as the queue counts them (before a tombstone record's
    /// correction).
    fn queue_stats<K, V>(&self, cells: &Cells<K, V>) -> ReceiverStats {
        let (mut delivered, mut folded, mut dropped) = self.consumed.load();
        let mut pending = 0;
        let mut pending_sends = 0;
        if self.walked_at_close.load(Ordering::Acquire) {
            dropped += self.dropped_at_close.load(Ordering::Relaxed);
        } else {
            let closed = self.is_closed();
            let walked = self.queue.for_each_seen(|cell, start| {
                // Saturating: an entry the consumer takes meanwhile may name
                // a cell reused since (its sequence only grows, but a reader
                // must never panic).
                let sends = cells.seq(cell).saturating_sub(start);
                if closed {
                    // Closed by the hub, entries not given up yet: dropped.
                    dropped += sends;
                } else {
                    pending += 1;
                    pending_sends += sends;
                }
            });
            if !walked {
                // Let go: what it dropped is counted by now (stored before
                // the lock `for_each_seen` took said so).
                (delivered, folded, dropped) = self.consumed.load();
            }
        }
        ReceiverStats::derived(
            folded + dropped + pending_sends,
            0,
            delivered,
            folded,
            0,
            0,
            dropped,
            pending,
        )
    }

    /// After the grace period that follows its deregistration: clears the
    /// marks of entries sends in flight pushed after the consumer let go.
    /// `false` (nothing done) if the consumer has not let go yet.
    pub(crate) fn clean_up<K, V>(&self, cells: &Cells<K, V>) -> bool {
        let mut abandoned = lock(&self.abandoned);
        let Some(head) = abandoned.as_mut() else {
            return false;
        };
        let end = self.queue.tail();
        while let Some((cell, start)) = self.queue.pop(head, end) {
            cells.forget(cell, start, self.id);
        }
        true
    }
}

impl<K: Eq + Clone, V: Clone> CellLocal<K, V> {
    /// Takes the oldest pending key.
    #[inline]
    pub(crate) fn pop(&mut self, rx: &CellRx, cells: &Cells<K, V>) -> Option<Event<K, V>> {
        if self.let_go {
            return None;
        }
        if let Some(solo) = self.solo() {
            match solo.pop() {
                Took::Some(event) => {
                    rx.consumed.took(1, event.sends);
                    solo.maybe_compact();
                    return Some(event);
                }
                Took::Empty => return None,
                Took::Converted => self.switch_to_cells(rx),
            }
        }
        loop {
            let (cell, start) = rx.queue.pop_ready(&mut self.head)?;
            let epoch = self.epoch;
            let taken = match panic::catch_unwind(AssertUnwindSafe(|| {
                cells.take(cell, start, rx, epoch)
            })) {
                Ok(taken) => taken,
                Err(payload) => {
                    // A `K::clone` or `V::clone` panicked: the entry is as it
                    // was; it is dropped and counted so, the panic continues.
                    rx.consumed.dropped(cells.forget(cell, start, rx.id));
                    panic::resume_unwind(payload);
                }
            };
            if let Some(event) = taken {
                rx.consumed.took(1, event.sends);
                return Some(event);
            }
            // Stale: a hard close cleared it meanwhile.
            if rx.is_closed() {
                return None;
            }
        }
    }

    /// A copy of the oldest pending key's event.
    pub(crate) fn peek(&mut self, rx: &CellRx, cells: &Cells<K, V>) -> Option<Event<K, V>> {
        if self.let_go {
            return None;
        }
        if let Some(solo) = self.solo() {
            match solo.peek() {
                Took::Some(event) => return Some(event),
                Took::Empty => return None,
                Took::Converted => self.switch_to_cells(rx),
            }
        }
        loop {
            let (cell, start) = rx.queue.front(&mut self.head, rx.queue.tail())?;
            if let Some(event) = cells.peek(cell, start, rx, self.epoch) {
                return Some(event);
            }
            if rx.is_closed() {
                return None;
            }
            // Stale: skip it.
            rx.queue.pop(&mut self.head, rx.queue.tail());
        }
    }

    /// Everything pending as of one instant, in first-touch order: the cut's
    /// epoch bump on the queue's tail word is the instant (docs/design.md,
    /// "The cut is one instant"). Appended to `out`; returns how many.
    pub(crate) fn cut_into(
        &mut self,
        rx: &CellRx,
        cells: &Cells<K, V>,
        clock: &AtomicU64,
        out: &mut Vec<Event<K, V>>,
    ) -> usize {
        if self.let_go {
            return 0;
        }
        if let Some(solo) = self.solo() {
            let start = out.len();
            match solo.cut_into(out) {
                Took::Some((batch, sends)) => {
                    if rx.is_closed() {
                        // A hard close raced the cut, as below.
                        rx.consumed.dropped(sends);
                        out.truncate(start);
                        return 0;
                    }
                    rx.consumed.took(batch as u64, sends);
                    solo.maybe_compact();
                    return batch;
                }
                Took::Empty => return 0,
                Took::Converted => self.switch_to_cells(rx),
            }
        }
        if rx.queue.len(&self.head) == 0 {
            // Nothing queued: the empty batch is the instant of that load.
            return 0;
        }
        let before = rx.queue.start_cut();
        let epoch = before.epoch();
        debug_assert_eq!(epoch, self.epoch, "only the consumer cuts");
        self.epoch = epoch.wrapping_add(1);
        // Announce: every send after this sees the clock moved and checks
        // this receiver's epoch (AcqRel, and the Release store after it pairs
        // with the Acquire in `cells::help`).
        clock.fetch_add(1, Ordering::AcqRel);
        rx.announced.store(u32::from(self.epoch), Ordering::Release);
        let mut entries = std::mem::take(&mut self.entries);
        entries.clear();
        rx.queue.drain_into(&mut self.head, before, &mut entries);
        let start = out.len();
        let mut untaken = Vec::new();
        let taken = panic::catch_unwind(AssertUnwindSafe(|| {
            cells.take_batch_into(&entries, rx, epoch, out, &mut untaken)
        }));
        let sends = match taken {
            Ok(sends) => sends,
            Err(payload) => {
                // A `K::clone` or `V::clone` panicked: the whole batch is dropped
                // and counted so (the events taken, and the entries not taken,
                // which are as they were), the panic continues.
                let mut sends: u64 = out[start..].iter().map(|e| e.sends).sum();
                for &(cell, from) in &untaken {
                    sends += cells.forget(cell, from, rx.id);
                }
                rx.consumed.dropped(sends);
                self.entries = entries;
                out.truncate(start);
                panic::resume_unwind(payload);
            }
        };
        self.entries = entries;
        if rx.is_closed() {
            // A hard close raced the cut: it falls after the close, which
            // abandons everything (as `RxCore::cut_into`).
            rx.consumed.dropped(sends);
            out.truncate(start);
            return 0;
        }
        let batch = out.len() - start;
        rx.consumed.took(batch as u64, sends);
        batch
    }
}

impl<K, V> CellLocal<K, V> {
    /// Announces that the consumer is about to park (see `Queue::park`);
    /// `false` if a push got in first.
    pub(crate) fn park(&self, rx: &CellRx) -> bool {
        if let (Some(solo), false) = (self.solo(), self.let_go) {
            solo.arm();
            return true;
        }
        self.let_go || rx.queue.park(&self.head)
    }

    /// Whether the entries were given up (`let_go`).
    pub(crate) fn released(&self) -> bool {
        self.let_go
    }

    /// `Receiver::close` (the close that won): clears the marks of every
    /// pending entry at once, so values pending nowhere else are dropped now,
    /// and counts their sends as dropped. Walks the queue without consuming
    /// it (the consumer lets go of it later, with `&mut`).
    pub(crate) fn give_up_at_close(&self, rx: &CellRx, cells: &Cells<K, V>) {
        if self.let_go {
            return;
        }
        self.drop_solo(rx);
        let mut dropped = 0;
        rx.queue.for_each_pending(&self.head, |cell, start| {
            dropped += cells.forget(cell, start, rx.id);
        });
        // Relaxed: read by this receiver's own handle (`stats`), ordered by
        // the flag's Release/Acquire.
        rx.dropped_at_close.store(dropped, Ordering::Relaxed);
        rx.walked_at_close.store(true, Ordering::Release);
    }

    /// Pending keys.
    pub(crate) fn len(&self, rx: &CellRx) -> usize {
        if self.let_go {
            return 0;
        }
        if let Some(solo) = self.solo() {
            if !solo.is_converted() {
                return solo.len() as usize;
            }
        }
        rx.queue.len(&self.head) as usize
    }

    /// Gives up every pending entry (a close): clears its marks, counts their
    /// sends as dropped, and hands the head to the receiver for the clean-up
    /// after the grace period. Idempotent.
    pub(crate) fn let_go(&mut self, rx: &CellRx, cells: &Cells<K, V>) {
        if self.let_go {
            return;
        }
        self.drop_solo(rx);
        self.solo_left = self.solo.take();
        // Entries a close already gave up (and counted) are walked again only
        // to clear marks that sends in flight set since.
        let counted = rx.walked_at_close.load(Ordering::Acquire);
        let end = rx.queue.tail();
        let mut dropped = 0;
        while let Some((cell, start)) = rx.queue.pop(&mut self.head, end) {
            let sends = cells.forget(cell, start, rx.id);
            if !counted {
                dropped += sends;
            }
        }
        rx.consumed.dropped(dropped);
        self.let_go = true;
        // Readers stop walking before the head is handed to the clean-up,
        // which frees blocks without publishing anything.
        rx.queue.let_go();
        *lock(&rx.abandoned) = Some(std::mem::take(&mut self.head));
    }
}
