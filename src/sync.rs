//! The one place the crate names its synchronization primitives.
//!
//! Normal builds use `std` (and `event-listener` for parking); `--cfg loom` swaps in
//! loom's model-checked versions so the protocols in `conflate` and `broadcast` can
//! be explored exhaustively by the models in `loom-tests/`, and `--cfg shuttle`
//! swaps in shuttle's, for the randomized schedules of `loom-tests/tests/shuttle_*.rs`. Code
//! elsewhere names `std::sync::atomic` only for what no model should explore:
//! the process-wide thread indices and hub ids of the per-thread stripes
//! (`conflate/lockfree/stripes.rs`; the stripes' words, `thread_slots.rs`,
//! are this module's types), the asymmetric fence's once-per-process
//! choice and its non-model fences (`conflate/lockfree/barrier.rs`; under the
//! models it uses this module's `fence`), unit tests, and the `metrics`
//! recorder's refusal counters.

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

/// One step of a wait that does not park: spins briefly, then yields the
/// thread (a lock holder or a producer preempted mid-step must get the core
/// back; on two cores the waiter would otherwise burn the holder's slice).
/// Under a model checker each step yields to the scheduler.
#[inline]
pub(crate) fn snooze(backoff: &crossbeam_utils::Backoff) {
    #[cfg(not(any(loom, shuttle)))]
    {
        if backoff.is_completed() {
            std::thread::yield_now();
        } else {
            backoff.snooze();
        }
    }
    #[cfg(loom)]
    {
        let _ = backoff;
        loom::thread::yield_now();
    }
    #[cfg(all(shuttle, not(loom)))]
    {
        let _ = backoff;
        shuttle::thread::yield_now();
    }
}

/// Waits, without parking, until `done()` holds ([`snooze`] between tries).
/// For grace periods that end when sends already in flight finish (a bounded
/// fan-out each).
pub(crate) fn spin_wait(mut done: impl FnMut() -> bool) {
    let backoff = crossbeam_utils::Backoff::new();
    while !done() {
        snooze(&backoff);
    }
}

#[cfg(not(any(loom, shuttle)))]
pub(crate) use event_listener::{
    Event as Notify, EventListener as Listener, Listener as ListenerExt,
};

#[cfg(any(loom, shuttle))]
pub(crate) use model_notify::{Listener, ListenerExt, Notify};

/// A stand-in for `event_listener::Event` built from the model checker's atomics,
/// mutex and condvar, so that park/wake protocols are checked too. Deadlines are
/// not modeled: a model has no clock, so `wait_deadline` waits like `wait` (a
/// model that relies on a timeout firing would deadlock, which the checker
/// reports).
///
/// Its `notify` is the weakest one `event-listener` 5 has shipped, so that the
/// models hold a waker protocol to the least ordering that any release the
/// `5.3` requirement admits gives: 5.0 to 5.3.0 look at the pointer to their listener list (null until
/// the first listener) and at an atomic count of unnotified listeners, both
/// Acquire, after their `SeqCst` fence, and return without taking the list lock
/// when they say there is none (`Event::notify`, `Inner::needs_notification`,
/// the count stored Release when the list lock is released); 5.3.1 and later
/// always take the lock (the early-out was removed after it lost wake-ups of its
/// own, and may come back). Skipping the lock is what a waker can rely on least:
/// a registration it is not ordered after (by a happens-before edge of the
/// waker's protocol, or the `SeqCst` fences' order) may be missed. A stand-in
/// that always locked would order every registration before or after every
/// `notify` by itself, and hide a waker protocol that lacks such an edge.
#[cfg(any(loom, shuttle))]
mod model_notify {
    #[cfg(loom)]
    use loom::{
        sync::{
            atomic::{fence, AtomicBool, Ordering},
            Arc, Condvar, Mutex,
        },
        thread::yield_now,
    };
    #[cfg(all(shuttle, not(loom)))]
    use shuttle::{
        sync::{
            atomic::{fence, AtomicBool, Ordering},
            Arc, Condvar, Mutex,
        },
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

    /// The list, under its lock: notifications so far, and listeners
    /// registered since the last one (event-listener's list and its `notified`
    /// index, reduced to what a model needs: every `notify` here wakes all).
    #[derive(Default)]
    struct List {
        generation: u64,
        unnotified: usize,
    }

    struct Inner {
        /// Whether some listener is registered and not yet notified: what
        /// event-listener's `notified` atomic (`usize::MAX` when none) tells a
        /// `notify` before it decides to lock. Written under the list lock,
        /// Release; read by `notify` without it, Acquire, after a `SeqCst`
        /// fence, as event-listener does.
        waiting: AtomicBool,
        list: Mutex<List>,
        cond: Condvar,
    }

    pub(crate) struct Notify {
        inner: Arc<Inner>,
    }

    pub(crate) struct Listener {
        inner: Arc<Inner>,
        /// The generation it was registered in: notified once it moved on.
        seen: u64,
    }

    impl Default for Notify {
        fn default() -> Self {
            Self::new()
        }
    }

    impl Inner {
        /// Updates `waiting` from the list, as event-listener's list guard does
        /// when it is dropped (`update_notified`, Release).
        fn publish(&self, list: &List) {
            self.waiting.store(list.unnotified > 0, Ordering::Release);
        }
    }

    impl Notify {
        pub(crate) fn new() -> Self {
            Notify {
                inner: Arc::new(Inner {
                    waiting: AtomicBool::new(false),
                    list: Mutex::new(List::default()),
                    cond: Condvar::new(),
                }),
            }
        }

        pub(crate) fn listen(&self) -> Listener {
            let mut list = self.inner.list.lock().unwrap();
            list.unnotified += 1;
            self.inner.publish(&list);
            Listener {
                inner: self.inner.clone(),
                seen: list.generation,
            }
        }

        pub(crate) fn notify(&self, _n: usize) -> usize {
            // "Make sure the notification comes after whatever triggered it."
            fence(Ordering::SeqCst);
            // The early-out: no listener waiting, as far as this load knows.
            if !self.inner.waiting.load(Ordering::Acquire) {
                return 0;
            }
            let mut list = self.inner.list.lock().unwrap();
            list.generation += 1;
            list.unnotified = 0;
            self.inner.publish(&list);
            self.inner.cond.notify_all();
            1
        }
    }

    impl Listener {
        pub(crate) fn wait(self) {
            let mut list = self.inner.list.lock().unwrap();
            while list.generation == self.seen {
                list = self.inner.cond.wait(list).unwrap();
            }
        }

        pub(crate) fn wait_deadline(self, _deadline: Instant) -> Option<()> {
            self.wait();
            Some(())
        }
    }

    impl Drop for Listener {
        /// A listener dropped before it was notified leaves the list (as in
        /// event-listener), so the early-out is taken again once none waits.
        fn drop(&mut self) {
            let mut list = self.inner.list.lock().unwrap();
            if list.generation == self.seen {
                list.unnotified -= 1;
                self.inner.publish(&list);
            }
        }
    }

    impl Future for Listener {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if self.inner.list.lock().unwrap().generation != self.seen {
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
