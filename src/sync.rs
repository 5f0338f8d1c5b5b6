//! The one place the crate names its synchronization primitives.
//!
//! Normal builds use `std` (and `event-listener` for parking); `--cfg loom` swaps in
//! loom's model-checked versions so the protocols in `conflate` and `broadcast` can
//! be explored exhaustively by the models in `loom-tests/`, and `--cfg shuttle`
//! swaps in shuttle's, for the randomized schedules of `tests/shuttle_*.rs`. Code
//! elsewhere never names `std::sync::atomic` directly.

#[cfg(not(any(loom, shuttle)))]
#[allow(unused_imports)]
pub(crate) use std::sync::{
    atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering},
    Arc, Mutex, MutexGuard,
};

#[cfg(loom)]
#[allow(unused_imports)]
pub(crate) use loom::sync::{
    atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering},
    Arc, Mutex, MutexGuard,
};

#[cfg(all(shuttle, not(loom)))]
#[allow(unused_imports)]
pub(crate) use shuttle::sync::{
    atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering},
    Arc, Mutex, MutexGuard,
};

/// Locks `m`, ignoring poisoning.
///
/// Every critical section in this crate that runs user code (merge, key filter)
/// repairs its state before the panic leaves it, so a poisoned mutex holds a
/// consistent value and the bus stays usable (SPEC conflate rule 9).
#[cfg(not(any(loom, shuttle)))]
pub(crate) fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Locks `m`, ignoring poisoning (model checkers' mutexes).
#[cfg(any(loom, shuttle))]
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits, without parking, until `done()` holds. For grace periods that end when
/// sends already in flight finish (a bounded fan-out each): spins briefly, then
/// yields the thread. Under a model checker each retry yields to the scheduler.
pub(crate) fn spin_wait(mut done: impl FnMut() -> bool) {
    #[cfg(not(any(loom, shuttle)))]
    {
        let backoff = crossbeam_utils::Backoff::new();
        while !done() {
            if backoff.is_completed() {
                std::thread::yield_now();
            } else {
                backoff.snooze();
            }
        }
    }
    #[cfg(loom)]
    while !done() {
        loom::thread::yield_now();
    }
    #[cfg(all(shuttle, not(loom)))]
    while !done() {
        shuttle::thread::yield_now();
    }
}

#[cfg(not(any(loom, shuttle)))]
pub(crate) use event_listener::{
    Event as Notify, EventListener as Listener, Listener as ListenerExt,
};

#[cfg(any(loom, shuttle))]
pub(crate) use model_notify::{Listener, ListenerExt, Notify};

/// A stand-in for `event_listener::Event` built from the model checker's mutex and
/// condvar, so that park/wake protocols are checked too. Deadlines are not modeled:
/// a model has no clock, so `wait_deadline` waits like `wait` (a model that relies
/// on a timeout firing would deadlock, which the checker reports).
#[cfg(any(loom, shuttle))]
mod model_notify {
    #[cfg(loom)]
    use loom::{
        sync::{Arc, Condvar, Mutex},
        thread::yield_now,
    };
    #[cfg(all(shuttle, not(loom)))]
    use shuttle::{
        sync::{Arc, Condvar, Mutex},
        thread::yield_now,
    };
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use std::time::Instant;

    /// Stands in for `event_listener::Listener`, whose methods the loom listener
    /// has inherently.
    #[allow(dead_code)]
    pub(crate) trait ListenerExt {}

    #[derive(Default)]
    struct Inner {
        notified: Mutex<u64>,
        cond: Condvar,
    }

    pub(crate) struct Notify {
        inner: Arc<Inner>,
    }

    pub(crate) struct Listener {
        inner: Arc<Inner>,
        seen: u64,
    }

    impl Default for Notify {
        fn default() -> Self {
            Self::new()
        }
    }

    impl Notify {
        pub(crate) fn new() -> Self {
            Notify {
                inner: Arc::new(Inner::default()),
            }
        }

        pub(crate) fn listen(&self) -> Listener {
            let seen = *self.inner.notified.lock().unwrap();
            Listener {
                inner: self.inner.clone(),
                seen,
            }
        }

        pub(crate) fn notify(&self, _n: usize) -> usize {
            *self.inner.notified.lock().unwrap() += 1;
            self.inner.cond.notify_all();
            1
        }
    }

    impl Listener {
        pub(crate) fn wait(self) {
            let mut n = self.inner.notified.lock().unwrap();
            while *n == self.seen {
                n = self.inner.cond.wait(n).unwrap();
            }
        }

        pub(crate) fn wait_deadline(self, _deadline: Instant) -> Option<()> {
            self.wait();
            Some(())
        }
    }

    impl Future for Listener {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if *self.inner.notified.lock().unwrap() != self.seen {
                Poll::Ready(())
            } else {
                yield_now();
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }
}

// ---------------------------------------------------------------------------------
// broadcast additions (h2-broadcast). Additive only: nothing above this line changed.
// ---------------------------------------------------------------------------------

/// The `Arc` a [`SlotCell`] holds. Always `std`'s: `arc-swap` needs it, and loom
/// does not need to see payload reference counts (the slot protocol's atomics are
/// the stamps, which are loom's under `--cfg loom`).
pub(crate) use std::sync::Arc as CellArc;

/// Process-wide statics that no model explores. Loom's atomics cannot live in a
/// `static` (they belong to one model execution), so the few counters that must be
/// unique across the whole process (broadcast `generation()`) use `std`'s in every
/// build.
pub(crate) mod process {
    pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
    pub(crate) use std::sync::OnceLock;
}

/// One broadcast ring slot's value: an optional `Arc` that readers can *protect*
/// before they clone through it, so that a writer replacing the slot mid-read never
/// frees memory a reader is still using (DESIGN-NOTES broadcast 1).
///
/// `arc-swap`'s `ArcSwapOption` normally. Its `swap` pays every outstanding reader
/// debt before it returns, so the `Arc` it hands back has an exact strong count and
/// `Arc::get_mut` on it is a sound uniqueness test (the recycling path relies on it).
#[cfg(not(loom))]
pub(crate) struct SlotCell<T>(arc_swap::ArcSwapOption<T>);

/// A reader's protection of a [`SlotCell`]'s value: while it lives, the `Arc` it
/// names is neither freed nor uniquely owned by the writer.
#[cfg(not(loom))]
pub(crate) struct SlotGuard<T>(arc_swap::Guard<Option<CellArc<T>>>);

#[cfg(not(loom))]
impl<T> SlotCell<T> {
    pub(crate) fn empty() -> Self {
        SlotCell(arc_swap::ArcSwapOption::empty())
    }

    /// Lock-free; protects the current value (usually without touching its
    /// reference count).
    pub(crate) fn load(&self) -> SlotGuard<T> {
        SlotGuard(self.0.load())
    }

    /// Installs `new` and returns the previous value with every reader's
    /// protection already converted into a real reference count.
    pub(crate) fn swap(&self, new: Option<CellArc<T>>) -> Option<CellArc<T>> {
        self.0.swap(new)
    }
}

#[cfg(not(loom))]
impl<T> SlotGuard<T> {
    pub(crate) fn get(&self) -> Option<&T> {
        self.0.as_deref()
    }
}

/// Loom stand-in for `ArcSwapOption`: a loom mutex around the `Arc`. `arc-swap`'s
/// own protocol is not loom-instrumented (and is not ours to check); the stand-in
/// keeps the property the slot protocol relies on (a load returns some value that
/// was swapped in, protected while the guard lives) but synchronizes *more* than
/// `arc-swap` does: every load acquires the last swap. Models therefore cannot find
/// a bug that needs `arc-swap`'s weaker per-pointer ordering; the argument for that
/// case is on the reader's fence in `broadcast/slot.rs`.
#[cfg(loom)]
pub(crate) struct SlotCell<T>(loom::sync::Mutex<Option<CellArc<T>>>);

/// See the non-loom `SlotGuard`; here the protection is a plain reference count.
#[cfg(loom)]
pub(crate) struct SlotGuard<T>(Option<CellArc<T>>);

#[cfg(loom)]
impl<T> SlotCell<T> {
    pub(crate) fn empty() -> Self {
        SlotCell(loom::sync::Mutex::new(None))
    }

    pub(crate) fn load(&self) -> SlotGuard<T> {
        SlotGuard(self.0.lock().unwrap().clone())
    }

    pub(crate) fn swap(&self, new: Option<CellArc<T>>) -> Option<CellArc<T>> {
        std::mem::replace(&mut *self.0.lock().unwrap(), new)
    }
}

#[cfg(loom)]
impl<T> SlotGuard<T> {
    pub(crate) fn get(&self) -> Option<&T> {
        self.0.as_deref()
    }
}
