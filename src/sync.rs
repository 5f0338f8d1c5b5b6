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
    atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering},
    Arc, Mutex, MutexGuard,
};

#[cfg(loom)]
#[allow(unused_imports)]
pub(crate) use loom::sync::{
    atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering},
    Arc, Mutex, MutexGuard,
};

#[cfg(all(shuttle, not(loom)))]
#[allow(unused_imports)]
pub(crate) use shuttle::sync::{
    atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering},
    Arc, Mutex, MutexGuard,
};

/// Locks `m`, ignoring poisoning.
///
/// Every critical section in this crate that runs user code (merge, key filter)
/// repairs its state before the panic leaves it, so a poisoned mutex holds a
/// consistent value and the bus stays usable (conflate rule 9, docs/design.md).
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

/// Process-wide statics that no model explores. Loom's atomics cannot live in a
/// `static` (they belong to one model execution), so the few counters that must be
/// unique across the whole process (broadcast `generation()`) use `std`'s in every
/// build.
pub(crate) mod process {
    pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
    pub(crate) use std::sync::OnceLock;
}

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// `std`'s `UnsafeCell` behind loom's closure API (`with` / `with_mut`), so code
/// written for loom's checked cell compiles unchanged in normal builds (as in
/// tokio's `loom` module). Shuttle does not check data accesses; it gets this too.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> Self {
        UnsafeCell(std::cell::UnsafeCell::new(value))
    }

    /// Runs `f` on a pointer for shared reads of the contents.
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Runs `f` on a pointer for exclusive access to the contents.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}
