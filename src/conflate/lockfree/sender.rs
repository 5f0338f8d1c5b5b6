//! The send side: a cheap handle; a send takes no lock shared by the whole bus.
//!
//! The argument: `docs/design.md`, "Sends in flight: one stripe per thread",
//! "Close versus send" and "One hash per send".

use super::core::RxCore;
use super::registry::Listed;
use super::shared::Shared;
use super::state::Word;
use super::stripes::{leave_and_see_close, Stripe};
use crate::conflate::common::hub_word::HubWord;
use crate::conflate::common::reentrancy::{reentered, SendScope};
use crate::error::SendError;
use crate::sync::Arc;
use std::fmt;
use std::hash::Hash;

/// The send side of a [`Hub`](super::Hub): a cheap `Clone` handle, `Send + Sync`.
///
/// Every clone is a handle to the one send side; closing any of them closes it.
/// The send side also closes, gracefully, when the hub and every `Sender` are
/// dropped.
pub struct Sender<K, V> {
    pub(crate) shared: Arc<Shared<K, V>>,
}

/// Ends one send in flight, also when user code panics out of the fan-out, so
/// a stripe can never stay in flight (docs/design.md, "Panics in user code").
struct InFlight<'a, K, V> {
    shared: &'a Shared<K, V>,
    stripe: Stripe<'a>,
}

impl<K, V> Drop for InFlight<'_, K, V> {
    fn drop(&mut self) {
        leave(self.shared, self.stripe, true);
    }
}

/// Leaves the stripe; if the send side closed meanwhile, a receiver may be
/// waiting for this very send to leave before it reports `Closed`: wake them
/// all (see `stripes::leave_and_see_close`).
#[inline]
fn leave<K, V>(shared: &Shared<K, V>, stripe: Stripe<'_>, counted: bool) {
    if leave_and_see_close(stripe, counted, &shared.state, shared.stripes.light) {
        shared.wake_all();
    }
}

/// Fans one send out to the receivers with their own values, in
/// registration order: each whose key filter admits the send gets a clone,
/// the last one the value by move (a receiver that rejects the key costs no
/// clone).
#[inline(never)]
fn deliver_own<K: Eq + Clone, V>(own: &Listed<'_, RxCore<K, V>>, hash: u64, key: &K, value: V)
where
    V: Clone,
{
    if let Some((last, rest)) = own.split_last() {
        // The list may hold holes (receivers that left): `iter` skips them.
        for core in rest.iter() {
            if core.admits(key) {
                core.deliver(hash, key, value.clone());
            }
        }
        if last.admits(key) {
            last.deliver(hash, key, value);
        }
    }
}

/// The cells' part of a send (the table, then every cell receiver): the
/// hub's tombstone test, user code, before anything is locked; then
/// [`Cells::send`](super::cells::Cells::send), which takes the value by move.
///
/// # Safety
/// The caller is a send in flight until this returns (`Cells::send` wakes the
/// receivers it names before it returns).
#[inline(always)]
unsafe fn send_to_cells<K, V>(shared: &Shared<K, V>, hash: u64, key: &K, value: V, who: usize)
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
{
    let tombstone = shared.tombstones.is(&value);
    // SAFETY: the caller's contract, passed on.
    unsafe {
        shared.cells.send(
            hash,
            key,
            value,
            tombstone,
            &shared.registry,
            &shared.clock,
            who,
        )
    };
}

/// [`Cells::send_owned`](super::cells::Cells::send_owned) out of line, for
/// the copy of the send path of hubs without a table.
///
/// # Safety
/// As `Cells::send_owned`.
#[inline(never)]
#[cold]
unsafe fn send_owned_out_of_line<K, V>(
    shared: &Shared<K, V>,
    hash: u64,
    key: &K,
    value: V,
    solo: &super::solo::Solo<K, V>,
    who: usize,
) where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
{
    // SAFETY: the caller's contract, passed on.
    unsafe { shared.cells.send_owned(hash, key, value, solo, who) };
}

impl<K, V> Sender<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
{
    /// Sends `value` under `key` to every live receiver. Never blocks.
    ///
    /// For a receiver with `key` pending, the value merges into its pending
    /// value (the key keeps its queue position); otherwise the key is appended
    /// at the back. With no live receiver (and no state table) this is one
    /// atomic load of the hub's state plus a count in a stripe its thread owns
    /// (no read-modify-write), and returns `Ok(())`.
    ///
    /// Cost: one hash. Receivers of every key with the default merge share
    /// one cell per key: a send for a key pending at all of them is one lock
    /// of the key's cell shard and one write, however many they are. Each
    /// receiver with a key filter, its own merge or `max_pending` costs one
    /// lock of one of its shards on top. A send that coalesces allocates
    /// nothing.
    ///
    /// # Errors
    /// [`SendError`] with the key and value when the send side is closed; nothing
    /// was published.
    ///
    /// # Panics
    /// If a receiver's key filter or merge panics, the panic propagates here after
    /// the bus was repaired (see the [module docs](crate::conflate#panics-in-user-code)).
    #[inline]
    pub fn send(&self, key: K, value: V) -> Result<(), SendError<K, V>> {
        let shared = &*self.shared;
        // The no-receiver fast path: one Acquire load and an owned count.
        let now = shared.state.load();
        if now.open_and_idle() {
            shared.stripes.count_mine();
            return Ok(());
        }
        if now.tx_closed() {
            return shared.refuse(key, value);
        }
        if shared.retain {
            self.fan_out::<true>(shared.stripes.mine(), key, value)
        } else {
            self.fan_out::<false>(shared.stripes.mine(), key, value)
        }
    }

    /// The send proper, out of line so the fast path above stays small.
    ///
    /// First: a send from user code running inside a send (or inside a
    /// snapshot registration's user code) of this hub panics, before it marks
    /// its stripe or waits for anything. An owned stripe already in flight is
    /// that user code (this thread's send on this hub has not left); a thread
    /// on the shared stripe, which cannot tell, marks a thread-local scope
    /// around its send instead (what `Shared::inside_send` also reads).
    ///
    /// One copy per kind of hub (`TABLE`: `retain_latest`): a table hub's
    /// sole receiver's send is written into its copy (`Cells::send_owned`),
    /// and kept out of the other's, whose other paths it slowed by about
    /// half a nanosecond each when it was in both (docs/performance.md,
    /// "session twenty-eight").
    #[inline(never)]
    fn fan_out<const TABLE: bool>(
        &self,
        stripe: Stripe<'_>,
        key: K,
        value: V,
    ) -> Result<(), SendError<K, V>> {
        match stripe.owned_in_flight() {
            Some(false) => self.publish::<TABLE>(stripe, key, value),
            Some(true) => reentered("Sender::send"),
            None => self.publish_scoped::<TABLE>(stripe, key, value),
        }
    }

    /// [`Sender::publish`] inside a send scope: for a thread on the shared
    /// stripe. The scope drops after the send left (its drop only unmarks).
    #[cold]
    #[inline(never)]
    fn publish_scoped<const TABLE: bool>(
        &self,
        stripe: Stripe<'_>,
        key: K,
        value: V,
    ) -> Result<(), SendError<K, V>> {
        let _scope = SendScope::enter(&*self.shared);
        self.publish::<TABLE>(stripe, key, value)
    }

    /// Marks the send in flight, decides it against the state word, and
    /// publishes it: the cells (table and cell receivers), then the own-value
    /// receivers.
    #[inline(always)]
    fn publish<const TABLE: bool>(
        &self,
        stripe: Stripe<'_>,
        key: K,
        value: V,
    ) -> Result<(), SendError<K, V>> {
        let shared = &*self.shared;
        // Enter, then load the state word: the Dekker pairing of "Sends in
        // flight" (`Stripe::enter` runs the light fence between the two).
        stripe.enter(shared.stripes.light);
        let now = shared.state.load();
        // `now` is the word this send publishes under: after a hold-off, the
        // one loaded when it entered again (the table-only test below reads
        // its receiver count).
        let (now, key, value) = if now.publishes() {
            (now, key, value)
        } else {
            // Closed, idle or quiescing: out of line, so the path every
            // send takes keeps few values live.
            match self.held_off(stripe, now, key, value) {
                Ok(sent) => sent,
                Err(done) => return done,
            }
        };
        let _in_flight = InFlight { shared, stripe };
        let hash = shared.hash(&key);
        if now.receivers() == 0 {
            // No live receiver, so the table (`publishes` says this hub has
            // one): the cells alone, without looking at the receiver lists
            // or the sole receiver's part (docs/design.md, "Registration
            // versus send": a registration that happened before this send
            // is counted in the word it loaded; the cells still read their
            // own list after the clock).
            // SAFETY: in flight until `_in_flight` drops.
            unsafe { send_to_cells(shared, hash, &key, value, stripe.identity()) };
            return Ok(());
        }
        // SAFETY: this send is in flight until `_in_flight` drops, after the
        // last use of either list.
        let own = unsafe { shared.registry.own() };
        if shared.retain || shared.has_cell_receivers() {
            if let Some(solo) = shared.active_solo() {
                // The hub's sole plain receiver keeps its values itself
                // (`solo.rs`); it comes first, as the cells would.
                let (value, rest) = if own.is_empty() {
                    (value, None)
                } else {
                    (value.clone(), Some(value))
                };
                if solo.in_table() {
                    // A table hub: the cells name the part's places, under
                    // the one shard lock the send takes.
                    if TABLE {
                        // SAFETY: in flight until `_in_flight` drops; `solo`
                        // is the part this send loaded.
                        unsafe {
                            shared
                                .cells
                                .send_owned(hash, &key, value, solo, stripe.identity())
                        };
                    } else {
                        // Not reached (only a table hub makes such a part,
                        // and its sends take the other copy).
                        // SAFETY: as above.
                        unsafe {
                            send_owned_out_of_line(
                                shared,
                                hash,
                                &key,
                                value,
                                solo,
                                stripe.identity(),
                            )
                        };
                    }
                } else {
                    let sent = solo.send(hash, &key, value);
                    // The replaced value is user code's to drop: after the
                    // lock.
                    drop(sent.old);
                    if sent.wake {
                        solo.owner().notify.notify(usize::MAX);
                    }
                }
                if let Some(value) = rest {
                    deliver_own(&own, hash, &key, value);
                }
                return Ok(());
            }
            // The cells first (the table, then every cell receiver): a
            // panicking hub merge removes the key and reaches no receiver.
            if own.is_empty() {
                // The common case: the cells take the value by move.
                // SAFETY: in flight until `_in_flight` drops.
                unsafe { send_to_cells(shared, hash, &key, value, stripe.identity()) };
                return Ok(());
            }
            // SAFETY: as above.
            unsafe { send_to_cells(shared, hash, &key, value.clone(), stripe.identity()) };
        }
        if !own.is_empty() {
            deliver_own(&own, hash, &key, value);
        }
        Ok(())
    }

    /// A send whose state word said closed, idle (the last receiver left
    /// since the first look) or quiescing, with the stripe entered: refuses
    /// it (`Err(Err(_))`), accepts it with nothing to publish
    /// (`Err(Ok(()))`), or, once a snapshot registration is done holding
    /// sends off, hands the key and value back entered again, with the state
    /// word loaded then, which lets it publish (`Ok`).
    #[cold]
    #[inline(never)]
    #[allow(clippy::type_complexity)]
    fn held_off(
        &self,
        stripe: Stripe<'_>,
        mut now: Word,
        key: K,
        value: V,
    ) -> Result<(Word, K, V), Result<(), SendError<K, V>>> {
        let shared = &*self.shared;
        loop {
            if now.tx_closed() {
                leave(shared, stripe, false);
                return Err(shared.refuse(key, value));
            }
            if now.idle() {
                // The last receiver left since the first look.
                leave(shared, stripe, true);
                return Err(Ok(()));
            }
            if !now.quiescing() {
                return Ok((now, key, value));
            }
            // A snapshot registration is copying the table: wait holding
            // nothing, then decide afresh. User code of that registration on
            // this thread would wait for itself: it panics instead (the
            // registration marks a send scope while it runs user code).
            stripe.leave(false);
            if crate::conflate::common::reentrancy::inside_send(shared) {
                reentered("Sender::send");
            }
            shared.state.wait_quiesced();
            // Entered again, then the state word, as in `publish`.
            stripe.enter(shared.stripes.light);
            now = shared.state.load();
        }
    }

    /// Closes the send side gracefully: every receiver still delivers everything
    /// pending, then reports closed. Idempotent. Returns once every receiver was
    /// told; a send still in flight finishes on its own (the receivers wait for
    /// it).
    pub fn close(&self) {
        self.shared.close_tx();
    }

    /// Whether the send side is closed (by [`close`](Self::close), by
    /// [`Hub::close_now`](super::Hub::close_now), or by dropping every hub and sender).
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.shared.state.load().tx_closed()
    }
}

impl<K, V> Clone for Sender<K, V> {
    fn clone(&self) -> Self {
        self.shared.acquire_handle();
        Sender {
            shared: self.shared.clone(),
        }
    }
}

impl<K, V> Drop for Sender<K, V> {
    fn drop(&mut self) {
        self.shared.release_handle();
    }
}

impl<K, V> fmt::Debug for Sender<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.shared.state.load().fmt_handle(f, "Sender")
    }
}
