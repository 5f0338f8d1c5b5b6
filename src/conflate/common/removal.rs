//! Key removal for both `conflate` implementations: the hub's tombstone test,
//! the merge rule that keeps a key's lives apart ([`Tombstones::across_lives`])
//! and the consumer's record of the keys a receiver has seen ([`Seen`])
//! (docs/design.md, "Removal: a tombstone is a send, the consumer decides").

use crate::conflate::common::event::Event;
use crate::conflate::common::policy::Merge;
use crate::conflate::common::stats::ReceiverStats;
use crate::sync::{AtomicU64, Ordering};
use hashbrown::HashSet;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};

/// Locks `held`, ignoring poison (see `Seen::held_mut`).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The user's tombstone test.
pub(crate) type TombstoneFn<V> = Arc<dyn Fn(&V) -> bool + Send + Sync>;

/// Which values are tombstones: none, unless the hub was built with
/// `HubBuilder::tombstones`.
pub(crate) struct Tombstones<V>(Option<TombstoneFn<V>>);

impl<V> Clone for Tombstones<V> {
    fn clone(&self) -> Self {
        Tombstones(self.0.clone())
    }
}

impl<V> Default for Tombstones<V> {
    fn default() -> Self {
        Tombstones(None)
    }
}

impl<V> Tombstones<V> {
    pub(crate) fn new(test: TombstoneFn<V>) -> Self {
        Tombstones(Some(test))
    }

    /// Whether this hub knows tombstones at all.
    #[inline]
    pub(crate) fn enabled(&self) -> bool {
        self.0.is_some()
    }

    /// Whether `value` is a tombstone. Runs user code (which may panic) only
    /// on a hub built with a tombstone test.
    #[inline]
    pub(crate) fn is(&self, value: &V) -> bool {
        match &self.0 {
            None => false,
            Some(test) => test(value),
        }
    }

    /// `merge`, made to keep lives apart: a tombstone replaces whatever is
    /// pending (the life ends), and a value after a tombstone replaces it (a
    /// new life starts); only two values of one life meet the user's merge.
    /// Newer-wins already does this and stays as it is (no indirect call).
    pub(crate) fn across_lives(&self, merge: Merge<V>) -> Merge<V>
    where
        V: 'static,
    {
        match (&self.0, merge) {
            (Some(test), Merge::With(user)) => {
                let test = test.clone();
                Merge::With(Arc::new(move |prev: V, next: V| {
                    if test(&next) || test(&prev) {
                        drop(prev);
                        Some(next)
                    } else {
                        user(prev, next)
                    }
                }))
            }
            (_, merge) => merge,
        }
    }

    /// The merge a state table folds with (the baseline's; the cells test
    /// tombstones themselves): `merge`, except that a tombstone, or a merge
    /// whose result is one, removes the key.
    pub(crate) fn table_merge(&self, merge: Merge<V>) -> Merge<V>
    where
        V: 'static,
    {
        let Some(test) = self.0.clone() else {
            return merge;
        };
        Merge::With(Arc::new(move |prev: V, next: V| {
            if test(&next) {
                drop(prev);
                return None;
            }
            merge.apply(prev, next).filter(|merged| !test(merged))
        }))
    }
}

/// One receiver's record, kept by its consumer: the keys it delivered an event
/// for in their current life, and what it dropped because it had not.
///
/// Memory: one key per key delivered and not since removed, so bounded by the
/// live key set. The counters (in [`Correction`], shared with every reader of
/// the receiver's stats) are written by the consumer only (a plain load and
/// store) and read by `stats` from any thread.
pub(crate) struct Seen<K, V> {
    keys: HashSet<K, foldhash::fast::RandomState>,
    /// An event taken to drop a tombstone that `peek` saw at the head, which
    /// turned out to be a value (a send replaced the tombstone in between): the
    /// head, held for the next take. Counted delivered by the queue already.
    /// In a mutex only so that the receiver stays `Sync` for any `V: Send`:
    /// the consumer reaches it through `&mut` (`get_mut`, no locking); only
    /// `len`, through `&`, locks it (`stats` reads [`Correction`]).
    held: Mutex<Option<Event<K, V>>>,
    /// What the receiver's stats must correct for, shared with the
    /// receiver's shared part (so its watches and the hub's listing read it).
    correction: Arc<Correction>,
}

/// What a consumer's [`Seen`] took from its queue without handing it on, for
/// every reader of the receiver's stats: the receiver, its watches and
/// `Hub::receivers` (the receiver's shared part holds it). Written by the
/// consumer only (a plain load and store), read from any thread.
#[derive(Debug, Default)]
pub(crate) struct Correction {
    /// Tombstones taken and dropped (the receiver had not seen the life).
    dropped_events: AtomicU64,
    /// The sends folded into them (the tombstone and the values before it).
    dropped_sends: AtomicU64,
    /// The held head's `sends` plus one; 0 while no head is held.
    held: AtomicU64,
}

impl Correction {
    /// The stats `read` returns (as the receiver's queue counts them), with
    /// the dropped tombstones moved from delivered to annihilated (they were
    /// taken from the queue but never handed to the consumer) and a held head
    /// counted pending.
    ///
    /// These counters are read first (Acquire, pairing with the consumer's
    /// Release stores, which follow the takes they count): the queue's
    /// counters read after them include every take they count, so the
    /// subtractions cannot underflow (saturating all the same: a head handed
    /// on meanwhile was counted held here).
    pub(crate) fn correct(&self, read: impl FnOnce() -> ReceiverStats) -> ReceiverStats {
        let events = self.dropped_events.load(Ordering::Acquire);
        let sends = self.dropped_sends.load(Ordering::Acquire);
        let held = self.held.load(Ordering::Acquire);
        let mut stats = read();
        stats.delivered = stats.delivered.saturating_sub(events);
        stats.folded = stats.folded.saturating_sub(sends);
        stats.annihilated += sends;
        if let Some(held_sends) = held.checked_sub(1) {
            // Taken from the queue, not yet handed on: still pending.
            stats.delivered = stats.delivered.saturating_sub(1);
            stats.folded = stats.folded.saturating_sub(held_sends);
            stats.pending += 1;
            stats.pending_sends += held_sends;
        }
        stats
    }

    /// The consumer holds `head` (`Some`) or none.
    fn hold(&self, head: Option<u64>) {
        self.held
            .store(head.map_or(0, |sends| sends + 1), Ordering::Release);
    }
}

impl<K: Hash + Eq + Clone, V> Seen<K, V> {
    /// Whether the consumer hands `event` on: a value, always (its key is then
    /// seen); a tombstone, only if its key was seen (and the key is then not).
    #[inline]
    pub(crate) fn admit(&mut self, event: &Event<K, V>, tombstones: &Tombstones<V>) -> bool {
        if tombstones.is(&event.value) {
            if self.keys.remove(&event.key) {
                return true;
            }
            // The consumer is the only writer. Release: pairs with the
            // Acquire loads in `correct`, so a reader that sees this drop
            // also sees the take that counted it delivered.
            let c = &*self.correction;
            let sends = c.dropped_sends.load(Ordering::Relaxed);
            c.dropped_sends
                .store(sends + event.sends, Ordering::Release);
            let events = c.dropped_events.load(Ordering::Relaxed);
            c.dropped_events.store(events + 1, Ordering::Release);
            false
        } else {
            // One probe; the key is cloned only the first time it is seen.
            self.keys.get_or_insert_with(&event.key, K::clone);
            true
        }
    }

    /// Whether `event` (a peeked head) would be dropped by [`admit`](Self::admit).
    fn would_drop(&self, event: &Event<K, V>, tombstones: &Tombstones<V>) -> bool {
        tombstones.is(&event.value) && !self.keys.contains(&event.key)
    }

    /// The next event the consumer gets from `pop` (one take of the
    /// receiver's queue, `Err` for empty or closed): the held head, or the
    /// first event taken that is admitted.
    pub(crate) fn pop<E>(
        &mut self,
        tombstones: &Tombstones<V>,
        mut pop: impl FnMut() -> Result<Event<K, V>, E>,
    ) -> Result<Event<K, V>, E> {
        if let Some(held) = self.held_mut().take() {
            self.correction.hold(None);
            return Ok(held);
        }
        loop {
            let event = pop()?;
            if self.admit(&event, tombstones) {
                return Ok(event);
            }
        }
    }

    /// A cut's batch, appended to `out` from `start` on, as the consumer gets
    /// it: the held head first, then what is admitted, in order. Returns how
    /// many events it leaves appended.
    pub(crate) fn cut_into(
        &mut self,
        tombstones: &Tombstones<V>,
        out: &mut Vec<Event<K, V>>,
        start: usize,
    ) -> usize {
        let mut at = start;
        for i in start..out.len() {
            if self.admit(&out[i], tombstones) {
                out.swap(at, i);
                at += 1;
            }
        }
        out.truncate(at);
        if let Some(held) = self.held_mut().take() {
            self.correction.hold(None);
            out.insert(start, held);
        }
        out.len() - start
    }

    /// What `peek` shows: what the next `pop` would return. A tombstone at
    /// the head that this receiver drops is dropped now (taken with `pop`);
    /// if a send replaced it with a value between the look and the take, the
    /// value taken is the head, and is held for the next take.
    pub(crate) fn peek<E>(
        &mut self,
        tombstones: &Tombstones<V>,
        mut peek: impl FnMut() -> Result<Event<K, V>, E>,
        mut pop: impl FnMut() -> Result<Event<K, V>, E>,
    ) -> Result<Event<K, V>, E>
    where
        K: Clone,
        V: Clone,
    {
        if let Some(held) = self.held_mut().as_ref() {
            return Ok(held.clone());
        }
        loop {
            let head = peek()?;
            if !self.would_drop(&head, tombstones) {
                return Ok(head);
            }
            let event = pop()?;
            if self.admit(&event, tombstones) {
                *self.held_mut() = Some(event.clone());
                self.correction.hold(Some(event.sends));
                return Ok(event);
            }
        }
    }
}

impl<K, V> Seen<K, V> {
    /// A record whose counts go to `correction` (the one the receiver's
    /// shared part holds).
    pub(crate) fn new(correction: Arc<Correction>) -> Self {
        Seen {
            keys: HashSet::default(),
            held: Mutex::new(None),
            correction,
        }
    }

    /// Whether an event is held (it counts as pending).
    pub(crate) fn holds(&self) -> bool {
        lock(&self.held).is_some()
    }

    fn held_mut(&mut self) -> &mut Option<Event<K, V>> {
        // A panic never happens with the lock held (nothing but a move runs
        // under it), so poisoning is ignored.
        self.held.get_mut().unwrap_or_else(|e| e.into_inner())
    }
}
