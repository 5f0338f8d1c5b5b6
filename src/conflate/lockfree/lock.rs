//! The lock of one shard of the hub's cells and of an own-value receiver's
//! shards and queue: `SpinLock`, one read-modify-write per critical section,
//! and `ParkLock`, also one, whose waiters park where a merge runs under it;
//! [`ShardLock`] is either (docs/design.md, "Locks that cost one RMW").

use super::barrier::{self, Light};
#[allow(unused_imports)]
use crate::sync::ListenerExt as _;
use crate::sync::{fence, snooze, AtomicBool, AtomicU32, Notify, Ordering, UnsafeCell};
use crossbeam_utils::Backoff;

pub(crate) struct SpinLock(AtomicBool);

/// Unlocks on drop, also when user code under the lock unwinds.
pub(crate) struct SpinGuard<'a>(&'a SpinLock);

impl SpinLock {
    pub(crate) fn new() -> Self {
        SpinLock(AtomicBool::new(false))
    }

    /// Acquire pairs with the Release of the previous holder's unlock: its
    /// writes happen-before this critical section. SeqCst (the same locked
    /// instruction on x86): a holder's SeqCst loads under the lock are then
    /// ordered against a waiter that stored, fenced and read the lock free
    /// ([`SpinLock::wait_free`]).
    #[inline]
    pub(crate) fn lock(&self) -> SpinGuard<'_> {
        if self
            .0
            .compare_exchange_weak(false, true, Ordering::SeqCst, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        SpinGuard(self)
    }

    /// [`SpinLock::lock`], and whether it found the lock held: another
    /// thread at work under it now (the cells' merged mode splits on that,
    /// `Cells::lock_or`).
    #[inline]
    pub(crate) fn lock_noting_contention(&self) -> (SpinGuard<'_>, bool) {
        // SeqCst: as in `lock`. The strong CAS (on x86 the same
        // instruction): a weak one may fail spuriously, which would read as
        // contention where there is none (miri makes it fail so).
        let contended = self
            .0
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::Relaxed)
            .is_err();
        if contended {
            self.lock_contended();
        }
        (SpinGuard(self), contended)
    }

    /// Releases a lock whose guard was forgotten (a cut's current shard,
    /// `cells/cut.rs`).
    ///
    /// # Safety
    /// The caller holds the lock (forgot the guard of its `lock` and has not
    /// released it).
    #[inline]
    pub(crate) unsafe fn unlock_raw(&self) {
        // Release: as in `SpinGuard::drop`.
        self.0.store(false, Ordering::Release);
    }

    #[cold]
    fn lock_contended(&self) {
        let backoff = Backoff::new();
        loop {
            // Test before the CAS, so waiters share the line read-only.
            while self.0.load(Ordering::Relaxed) {
                snooze(&backoff);
            }
            if self
                .0
                .compare_exchange_weak(false, true, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }

    /// Waits until the lock reads free, without taking it: the sole
    /// receiver's cut barrier (docs/design.md, "The sole receiver owns its
    /// values"). The caller stored a value (the cut epoch) and then ran a
    /// SeqCst fence; a holder loads that value SeqCst after its SeqCst lock.
    /// In the order of SeqCst operations either the holder's lock comes
    /// first, and this load reads it (or a later value) and waits for the
    /// release, or the fence does, and the holder reads the stored value.
    /// Acquire: a release this reads (or one its value follows in the lock's
    /// modification order) makes the holder's writes visible to the caller.
    #[inline]
    pub(crate) fn wait_free(&self) {
        // Inline, the free lock a cut finds in nearly every shard costs a
        // load and a branch; the wait is out of line.
        if self.0.load(Ordering::SeqCst) {
            self.wait_free_contended();
        }
    }

    #[cold]
    #[inline(never)]
    fn wait_free_contended(&self) {
        let backoff = Backoff::new();
        // SeqCst: as in `wait_free`.
        while self.0.load(Ordering::SeqCst) {
            snooze(&backoff);
        }
    }
}

impl Drop for SpinGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        // Release: this critical section's writes happen-before the next
        // holder's.
        self.0 .0.store(false, Ordering::Release);
    }
}

/// A lock whose waiters park, for critical sections that run user code (a
/// merge, which may be slow or block): acquired with a CAS and released with
/// a store, as [`SpinLock`], so an uncontended section costs one RMW where
/// `std`'s mutex takes two (its release is a swap, to learn whether to wake
/// someone).
///
/// A release learns whether to wake from `parking` instead, a count that
/// waiters raise before they park; the two sides are a Dekker pairing on the
/// asymmetric fence (docs/design.md, "Locks that cost one RMW"): the release
/// stores the lock free, runs the light side and loads `parking`; a waiter
/// raises `parking`, runs the heavy side (membarrier), and only then tries the
/// lock again before it parks. Either the release sees the waiter and
/// notifies, or the waiter's try sees the lock free (or held by a later
/// holder, whose own release then sees the waiter). The heavy side runs only
/// once a waiter has spun out its backoff, when the holder is slow or
/// descheduled, which is when parking pays.
pub(crate) struct ParkLock {
    locked: AtomicBool,
    /// Waiters that spun out and may park (raised before their last tries).
    parking: AtomicU32,
    /// The release's side of the fence, as the process decided it.
    light: Light,
    notify: Notify,
}

/// Unlocks a [`ParkLock`] on drop, also when user code under it unwinds.
pub(crate) struct ParkGuard<'a>(&'a ParkLock);

impl ParkLock {
    pub(crate) fn new() -> Self {
        // Before `Light::now`: the process's choice of fences is made once.
        barrier::init();
        ParkLock {
            locked: AtomicBool::new(false),
            parking: AtomicU32::new(0),
            light: Light::now(),
            notify: Notify::new(),
        }
    }

    /// Acquire pairs with the Release of the previous holder's unlock, as in
    /// [`SpinLock::lock`].
    #[inline]
    pub(crate) fn lock(&self) -> ParkGuard<'_> {
        if !self.try_lock() {
            self.lock_contended();
        }
        ParkGuard(self)
    }

    #[inline]
    fn try_lock(&self) -> bool {
        self.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[cold]
    fn lock_contended(&self) {
        // Spin first (not under the models, which learn nothing from it):
        // a holder running on another core is about to let go.
        let backoff = Backoff::new();
        while !cfg!(any(loom, shuttle)) && !backoff.is_completed() {
            if !self.locked.load(Ordering::Relaxed) && self.try_lock() {
                return;
            }
            backoff.snooze();
        }
        // Announce, then the heavy side, then the tries: see the type's
        // documentation. Relaxed: the fence orders it (under the models, where
        // both sides are `SeqCst` fences, the fences alone make the pairing).
        self.parking.fetch_add(1, Ordering::Relaxed);
        barrier::heavy();
        loop {
            if self.try_lock() {
                break;
            }
            let listener = self.notify.listen();
            // Registration, then a full fence, then the last try: paired with
            // the fence `notify` starts with (docs/design.md, "Parking
            // without lost wake-ups").
            fence(Ordering::SeqCst);
            if self.try_lock() {
                break;
            }
            listener.wait();
        }
        self.parking.fetch_sub(1, Ordering::Relaxed);
    }

    #[inline]
    fn unlock(&self) {
        // Release: this section's writes happen-before the next holder's.
        self.locked.store(false, Ordering::Release);
        // The light side between the store and the load (see the type).
        barrier::light(self.light);
        if self.parking.load(Ordering::Relaxed) != 0 {
            self.notify.notify(1);
        }
    }
}

impl Drop for ParkGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.unlock();
    }
}

/// A shard's lock: the one-RMW spin lock, or the parking one where user code
/// (a merge) runs under it. Fixed per shard.
pub(crate) enum ShardLock {
    Spin(SpinLock),
    Park(ParkLock),
}

/// Holds a [`ShardLock`] (or stands for a lock held some other way).
pub(crate) enum ShardGuard<'a> {
    Spin(#[allow(dead_code)] SpinGuard<'a>),
    Park(#[allow(dead_code)] ParkGuard<'a>),
    /// The caller holds the lock by other means (a cut's current shard).
    None,
}

impl ShardLock {
    pub(crate) fn new(park: bool) -> Self {
        if park {
            ShardLock::Park(ParkLock::new())
        } else {
            ShardLock::Spin(SpinLock::new())
        }
    }

    /// The spin lock, if this is one.
    pub(crate) fn spin(&self) -> Option<&SpinLock> {
        match self {
            ShardLock::Spin(l) => Some(l),
            ShardLock::Park(_) => None,
        }
    }

    #[inline]
    pub(crate) fn lock(&self) -> ShardGuard<'_> {
        match self {
            ShardLock::Spin(l) => ShardGuard::Spin(l.lock()),
            ShardLock::Park(l) => ShardGuard::Park(l.lock()),
        }
    }
}

/// Data behind a [`ShardLock`]: a mutex whose lock is the spin lock where no
/// user code runs under it, and the parking one where a user merge does.
pub(crate) struct ShardMutex<T> {
    lock: ShardLock,
    data: UnsafeCell<T>,
}

// SAFETY: `data` is reached only through a guard, made only by a holder of
// `lock`, which serializes every access across threads.
unsafe impl<T: Send> Sync for ShardMutex<T> {}
// SAFETY: the mutex owns its data.
unsafe impl<T: Send> Send for ShardMutex<T> {}

/// What a [`ShardMutexGuard`] holds: [`ShardGuard`] without its `None`,
/// which no `ShardMutex` makes. Two variants, so the drop tells them apart
/// with one compare (the third made it decode the parking guard's niche).
enum HeldLock<'a> {
    Spin(#[allow(dead_code)] SpinGuard<'a>),
    Park(#[allow(dead_code)] ParkGuard<'a>),
}

/// Access to a [`ShardMutex`]'s data while its lock is held.
///
/// It keeps a raw pointer, not a `&mut T`: a reference held in the guard
/// would stay live (and, with the guard passed to `drop`, protected) past the
/// unlock, while the next holder makes its own.
pub(crate) struct ShardMutexGuard<'a, T> {
    data: *mut T,
    _lock: HeldLock<'a>,
    _data: std::marker::PhantomData<&'a mut T>,
}

impl<T> ShardMutex<T> {
    pub(crate) fn new(park: bool, data: T) -> Self {
        ShardMutex {
            lock: ShardLock::new(park),
            data: UnsafeCell::new(data),
        }
    }

    #[inline]
    pub(crate) fn lock(&self) -> ShardMutexGuard<'_, T> {
        let guard = match &self.lock {
            ShardLock::Spin(l) => HeldLock::Spin(l.lock()),
            ShardLock::Park(l) => HeldLock::Park(l.lock()),
        };
        ShardMutexGuard {
            data: self.data.with_mut(|p| p),
            _lock: guard,
            _data: std::marker::PhantomData,
        }
    }
}

impl<T> std::ops::Deref for ShardMutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock, so no other guard exists; the
        // reference lives no longer than this borrow of the guard.
        unsafe { &*self.data }
    }
}

impl<T> std::ops::DerefMut for ShardMutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and this borrow of the guard is exclusive.
        unsafe { &mut *self.data }
    }
}

#[cfg(all(test, not(any(loom, shuttle))))]
mod tests {
    use super::ParkLock;
    use std::cell::Cell;
    use std::sync::Arc;
    use std::thread;
    use std::time::Duration;

    /// A count kept under a [`ParkLock`] with plain (non-atomic) reads and
    /// writes.
    struct Counted {
        lock: ParkLock,
        count: Cell<u64>,
    }

    // SAFETY: `count` is read and written only by a holder of `lock`.
    unsafe impl Sync for Counted {}

    /// Holders that sleep under the lock now and then, so that waiters spin
    /// out their backoff and park (the real fences: membarrier where the
    /// kernel has it): every add lands, and every parked waiter is woken (a
    /// lost wake-up hangs the test).
    #[test]
    fn park_lock_parks_waiters_behind_a_slow_holder_and_wakes_them() {
        let (threads, rounds) = if cfg!(miri) { (3, 10) } else { (4, 300) };
        let shared = Arc::new(Counted {
            lock: ParkLock::new(),
            count: Cell::new(0),
        });
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let shared = shared.clone();
                thread::spawn(move || {
                    for i in 0..rounds {
                        let _guard = shared.lock.lock();
                        shared.count.set(shared.count.get() + 1);
                        if (i + t) % 50 == 0 {
                            thread::sleep(Duration::from_millis(2));
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(shared.count.get(), (threads * rounds) as u64);
        assert_eq!(
            shared
                .lock
                .parking
                .load(std::sync::atomic::Ordering::Relaxed),
            0,
            "every waiter that announced itself left"
        );
    }
}
