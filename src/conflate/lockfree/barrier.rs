//! The asymmetric fence of the Dekker pairings between sends and the rare
//! operations that must see every send in flight: [`light`] on the send side,
//! [`heavy`] on the rare side (docs/design.md, "Sends in flight: one stripe per
//! thread").

#[cfg(not(any(loom, shuttle)))]
use std::sync::atomic::{compiler_fence, fence, AtomicU8, Ordering};

/// 0: not decided yet; 1: membarrier registered; 2: plain fences.
#[cfg(not(any(loom, shuttle)))]
static MODE: AtomicU8 = AtomicU8::new(0);

/// Decides, once per process, which fences the pairings use. Called when a hub
/// is made, before any send can reach it.
pub(crate) fn init() {
    #[cfg(not(any(loom, shuttle)))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let mode = if membarrier::register() { 1 } else { 2 };
            // Relaxed: the `Once` orders this store before every later
            // `init` returns, and hubs reach other threads only after that.
            MODE.store(mode, Ordering::Relaxed);
        });
    }
}

/// Whether the send side may use a compiler fence (membarrier is in use).
/// For [`Light::now`], and the measurements and tests that compare the two
/// modes.
#[allow(dead_code)]
pub(crate) fn asymmetric() -> bool {
    #[cfg(not(any(loom, shuttle)))]
    {
        MODE.load(Ordering::Relaxed) == 1
    }
    #[cfg(any(loom, shuttle))]
    {
        false
    }
}

/// Which send-side fence the pairings use, as [`init`] decided it: read once
/// per hub when it is made ([`Light::now`]) and kept in the hub, so a send
/// tests a byte on a line it reads anyway instead of loading the process-wide
/// static through its address (what code inlined into another crate does).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Light {
    /// Membarrier is in use: the send side may be a compiler fence.
    #[cfg(not(any(loom, shuttle)))]
    asymmetric: bool,
}

impl Light {
    /// The decision. Called after [`init`] (a hub makes its stripes, which
    /// call `init`, before it reads this): the decision never changes
    /// afterwards, so a copy taken now is the one every later send would
    /// read from the static.
    pub(crate) fn now() -> Light {
        Light {
            #[cfg(not(any(loom, shuttle)))]
            asymmetric: asymmetric(),
        }
    }
}

/// The send side's fence: between a send's stripe store and its load of the
/// state word (and between its leaving store and the load that checks for a
/// close). A compiler fence where membarrier is in use, else a full fence.
#[inline(always)]
pub(crate) fn light(light: Light) {
    #[cfg(not(any(loom, shuttle)))]
    {
        if light.asymmetric {
            compiler_fence(Ordering::SeqCst);
        } else {
            fence(Ordering::SeqCst);
        }
    }
    #[cfg(any(loom, shuttle))]
    {
        let _ = light;
        crate::sync::fence(crate::sync::Ordering::SeqCst);
    }
}

/// The rare side's fence: between a store to the state word (close, quiesce)
/// and the loads of every stripe. Pairs with [`light`]: afterwards, a send
/// that did not see the store has its stripe store visible to this thread.
pub(crate) fn heavy() {
    #[cfg(not(any(loom, shuttle)))]
    {
        if MODE.load(Ordering::Relaxed) == 1 {
            membarrier::barrier();
        } else {
            fence(Ordering::SeqCst);
        }
    }
    #[cfg(any(loom, shuttle))]
    crate::sync::fence(crate::sync::Ordering::SeqCst);
}

#[cfg(all(target_os = "linux", not(any(loom, shuttle, miri))))]
mod membarrier {
    //! The two `membarrier(2)` commands keybus uses.

    const QUERY: libc::c_long = 0;
    const PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    fn call(cmd: libc::c_long) -> libc::c_long {
        // SAFETY: `membarrier(cmd, flags = 0, cpu_id = 0)` takes no pointers;
        // an unknown command or an old kernel returns -1 (ENOSYS, EINVAL),
        // which the callers handle.
        unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                cmd,
                0 as libc::c_long,
                0 as libc::c_long,
            )
        }
    }

    /// Registers the process for expedited private barriers; `false` if the
    /// kernel lacks them (then plain fences are used).
    pub(super) fn register() -> bool {
        let supported = call(QUERY);
        supported >= 0
            && supported & PRIVATE_EXPEDITED != 0
            && supported & REGISTER_PRIVATE_EXPEDITED != 0
            && call(REGISTER_PRIVATE_EXPEDITED) == 0
    }

    /// A full barrier on every running thread of the process.
    pub(super) fn barrier() {
        // Registered in `register`, so this cannot fail with EPERM; any
        // other failure would leave sends unfenced, which must not pass
        // silently.
        let r = call(PRIVATE_EXPEDITED);
        assert!(
            r == 0,
            "keybus: membarrier(PRIVATE_EXPEDITED) failed after registration"
        );
    }
}

#[cfg(all(any(not(target_os = "linux"), miri), not(any(loom, shuttle))))]
mod membarrier {
    //! No asymmetric barrier here (not Linux, or under miri, which runs no
    //! system call it does not know): plain fences on both sides.
    pub(super) fn register() -> bool {
        false
    }
    pub(super) fn barrier() {
        unreachable!("only used after a successful register")
    }
}
