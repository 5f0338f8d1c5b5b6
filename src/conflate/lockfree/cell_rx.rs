//! A cell receiver: a receiver of every key with newer-wins coalescing that
//! holds no values of its own (docs/design.md, "One cell per key").
//!
//! Its pending keys are marks in the hub's cells; its first-touch order is its
//! [`Queue`] of entries (cell, sequence at the entry's start). A take reads
//! the cell's value and `sends` is the cell's sequence now minus the entry's
//! start. What the receiver owns is the queue, its wake-up event and a few
//! flags: nothing per key but its entries.

use super::close_flags::{CloseFlags, Closing};
use super::queue::{Head, Queue};
use crate::conflate::common::counters::Consumed;
use crate::conflate::common::removal::Correction;
use crate::padding::Apart;
use crate::sync::{lock, AtomicBool, AtomicU32, AtomicU64, Mutex, Notify, Ordering};

/// Where a cell receiver is registered, to pass to its constructor.
pub(crate) type RxId = u32;

/// The shared part of a cell receiver: what sends reach.
pub(crate) struct CellRx {
    /// Its marks' index in every cell.
    pub(crate) id: RxId,
    pub(crate) queue: Queue,
    /// The cut epoch the consumer (or a helping send) has announced with a
    /// clock bump (see `cells::help`).
    pub(crate) announced: AtomicU32,
    pub(crate) notify: Notify,
    flags: CloseFlags,
    /// The consumer's head once it let go of the receiver (closed or dropped):
    /// the clean-up after the grace period starts there.
    pub(super) abandoned: Mutex<Option<Head>>,
    /// Sends of the entries `Receiver::close` gave up (it walks them at once;
    /// written once, by the close that won).
    pub(super) dropped_at_close: AtomicU64,
    pub(super) walked_at_close: AtomicBool,
    /// What the consumer took and dropped (written by it only; read by its
    /// stats and its watches).
    pub(super) consumed: Apart<Consumed>,
    /// The receiver's number and name (`Hub::receivers`, watches).
    pub(crate) serial: u64,
    pub(crate) name: Option<std::sync::Arc<str>>,
    /// With tombstones: what the consumer's record took without handing on.
    pub(super) correction: Option<std::sync::Arc<Correction>>,
}

impl CellRx {
    pub(crate) fn new(
        id: RxId,
        serial: u64,
        name: Option<std::sync::Arc<str>>,
        correction: Option<std::sync::Arc<Correction>>,
    ) -> Self {
        CellRx {
            id,
            queue: Queue::new(),
            announced: AtomicU32::new(0),
            notify: Notify::new(),
            flags: CloseFlags::new(),
            abandoned: Mutex::new(None),
            dropped_at_close: AtomicU64::new(0),
            walked_at_close: AtomicBool::new(false),
            consumed: Apart::new(Consumed::default()),
            serial,
            name,
            correction,
        }
    }
}

impl CellRx {
    /// Makes a released receiver (nothing else holds it) into one just made by
    /// [`CellRx::new`], in place: what it held goes as its drop would let it
    /// go, and no allocation or copy of the whole structure is made. Every
    /// field is named, so a new field cannot be left out.
    pub(crate) fn renew(
        &mut self,
        new_id: RxId,
        new_serial: u64,
        new_name: Option<std::sync::Arc<str>>,
        new_correction: Option<std::sync::Arc<Correction>>,
    ) {
        let CellRx {
            id,
            queue,
            announced,
            notify,
            flags,
            abandoned,
            dropped_at_close,
            walked_at_close,
            consumed,
            serial,
            name,
            correction,
        } = self;
        Self::release_queue(queue, abandoned);
        queue.renew();
        *id = new_id;
        announced.store(0, Ordering::Relaxed);
        *notify = Notify::new();
        *flags = CloseFlags::new();
        dropped_at_close.store(0, Ordering::Relaxed);
        walked_at_close.store(false, Ordering::Relaxed);
        **consumed = Consumed::default();
        *serial = new_serial;
        *name = new_name;
        *correction = new_correction;
    }
}

impl CellRx {
    /// Frees the queue's blocks from the consumer's last head on (all of
    /// them if it never let go): what a drop or a renewal lets go of.
    fn release_queue(queue: &mut Queue, abandoned: &Mutex<Option<Head>>) {
        let head = lock(abandoned).take().unwrap_or_default();
        queue.release(&head);
    }
}

impl Drop for CellRx {
    fn drop(&mut self) {
        Self::release_queue(&mut self.queue, &self.abandoned);
    }
}

impl Closing for CellRx {
    fn close_flags(&self) -> &CloseFlags {
        &self.flags
    }
    fn close_notify(&self) -> &Notify {
        &self.notify
    }
}
