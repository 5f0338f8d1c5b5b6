//! The lock of one shard of the hub's cells and of an own-value receiver's
//! shards and queue: `SpinLock`, one read-modify-write per critical section,
//! and [`ShardLock`], which parks instead where a merge runs under it
//! (docs/design.md, "Locks that cost one RMW").

use crate::sync::{lock, snooze, AtomicBool, Mutex, MutexGuard, Ordering, UnsafeCell};
use crossbeam_utils::Backoff;

pub(crate) struct SpinLock(AtomicBool);

/// Unlocks on drop, also when user code under the lock unwinds.
pub(crate) struct SpinGuard<'a>(&'a SpinLock);

impl SpinLock {
    pub(crate) fn new() -> Self {
        SpinLock(AtomicBool::new(false))
    }

    /// Acquire pairs with the Release of the previous holder's unlock: its
    /// writes happen-before this critical section.
    #[inline]
    pub(crate) fn lock(&self) -> SpinGuard<'_> {
        if self
            .0
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        SpinGuard(self)
    }

    /// Acquires without a guard; [`SpinLock::unlock_raw`] releases. For a
    /// holder of several locks whose set is a bitmask (a cut's window).
    #[inline]
    pub(crate) fn lock_raw(&self) {
        std::mem::forget(self.lock());
    }

    /// Releases a lock taken with [`SpinLock::lock_raw`].
    ///
    /// # Safety
    /// The caller holds the lock (took it with `lock_raw` and has not released
    /// it).
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
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
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

/// A shard's lock: the one-RMW spin lock, or a parking mutex where user code
/// (a hub merge) runs under it. Fixed per hub.
pub(crate) enum ShardLock {
    Spin(SpinLock),
    Park(Mutex<()>),
}

/// Holds a [`ShardLock`] (or stands for a lock held some other way).
pub(crate) enum ShardGuard<'a> {
    Spin(#[allow(dead_code)] SpinGuard<'a>),
    Park(#[allow(dead_code)] MutexGuard<'a, ()>),
    /// The caller holds the lock by other means (a cut's window).
    None,
}

impl ShardLock {
    pub(crate) fn new(park: bool) -> Self {
        if park {
            ShardLock::Park(Mutex::new(()))
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
            ShardLock::Park(m) => ShardGuard::Park(lock(m)),
        }
    }
}

/// Data behind a [`ShardLock`]: a mutex whose lock is the one-RMW spin lock
/// where no user code runs under it, and `std`'s where a user merge does.
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
    Park(#[allow(dead_code)] MutexGuard<'a, ()>),
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
            ShardLock::Park(m) => HeldLock::Park(lock(m)),
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
