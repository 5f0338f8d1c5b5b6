//! Turns user code that calls back into its own hub from a hang into a panic:
//! the thread-local list of hubs whose send (or snapshot registration's user
//! code) this thread is running, and the check a hub call makes against it
//! (docs/design.md, "Re-entrance").

use std::cell::Cell;

/// Hubs whose send this thread is running, innermost last. A fixed array of
/// `Cell`s rather than a `RefCell<Vec>`: marking a send is then two plain
/// thread-local stores, with no borrow flag and no capacity check on the send
/// path. Sends nested through more than `DEPTH` distinct hubs are not recorded
/// beyond the first `DEPTH` (their re-entrance would go undetected).
const DEPTH: usize = 8;

struct Running {
    hubs: [Cell<usize>; DEPTH],
    len: Cell<usize>,
}

impl Running {
    const fn new() -> Self {
        Running {
            hubs: [const { Cell::new(0) }; DEPTH],
            len: Cell::new(0),
        }
    }

    fn contains(&self, hub: usize) -> bool {
        self.hubs[..self.len.get().min(DEPTH)]
            .iter()
            .any(|h| h.get() == hub)
    }
}

#[cfg(not(any(loom, shuttle)))]
std::thread_local! {
    static RUNNING: Running = const { Running::new() };
}

#[cfg(loom)]
loom::thread_local! {
    static RUNNING: Running = Running::new();
}

#[cfg(all(shuttle, not(loom)))]
shuttle::thread_local! {
    static RUNNING: Running = Running::new();
}

/// Marks the current thread as running a send of the hub at `hub` (any address
/// unique to the hub while it lives, e.g. its shared state) until dropped,
/// including when user code unwinds out of the send.
pub(crate) struct SendScope {
    hub: usize,
}

impl SendScope {
    /// Marks the send; panics first (as [`forbid_inside_send`]) if this thread is
    /// already inside a send of the same hub: a send from its own user code.
    #[track_caller]
    pub(crate) fn enter<T>(hub: *const T) -> Self {
        let hub = hub as usize;
        let nested = RUNNING.with(|r| {
            // Not nested in any send: the common case, one load.
            if r.len.get() != 0 && r.contains(hub) {
                return true;
            }
            let len = r.len.get();
            if let Some(slot) = r.hubs.get(len) {
                slot.set(hub);
            }
            r.len.set(len + 1);
            false
        });
        if nested {
            reentered("Sender::send");
        }
        SendScope { hub }
    }
}

impl Drop for SendScope {
    fn drop(&mut self) {
        // Scopes nest, so this send is the innermost one.
        RUNNING.with(|r| {
            let len = r.len.get();
            debug_assert!(len > 0, "a send scope is always marked");
            debug_assert!(
                len > DEPTH || r.hubs[len - 1].get() == self.hub,
                "send scopes end innermost first"
            );
            r.len.set(len.saturating_sub(1));
        });
    }
}

/// Whether the current thread is inside a send of the hub at `hub`.
pub(crate) fn inside_send<T>(hub: *const T) -> bool {
    let hub = hub as usize;
    // `try_with`: during thread teardown the list may already be gone, and then no
    // send of ours is running on this thread.
    RUNNING.try_with(|r| r.contains(hub)).unwrap_or(false)
}

/// Panics if the current thread is inside a send of the hub at `hub`: `call` (e.g.
/// `"Hub::receiver"`) was made from user code that send runs, and would wait for
/// that send to finish, i.e. forever.
#[track_caller]
pub(crate) fn forbid_inside_send<T>(hub: *const T, call: &str) {
    if inside_send(hub) {
        reentered(call);
    }
}

#[cold]
#[track_caller]
pub(crate) fn reentered(call: &str) -> ! {
    panic!(
        "keybus: {call} called from user code (a merge, a key filter, or a key's \
         or value's Clone/Eq/Hash/Drop) running inside Sender::send on the same \
         hub; such code must not call back into its own hub, which would wait \
         for the very send that runs it"
    );
}
