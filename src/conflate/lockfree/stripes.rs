//! Sends in flight and sends accepted: `Stripes`, one word per thread per hub
//! that only its thread writes, and [`Stripes::wait_for_sends_in_flight`] for
//! the rare side (docs/design.md, "Sends in flight: one stripe per thread").

use super::barrier;
use super::state::HubState;
use super::thread_slots::Slots;
use crate::conflate::common::hub_word::HubWord;
use crate::sync::{spin_wait, AtomicU64, Ordering};

/// One accepted send in a stripe's count.
const SEND: u64 = 1 << 16;
/// The in-flight count (0 or 1 for an owned stripe).
const FLIGHT: u64 = SEND - 1;

/// Chunks of thread indices per hub (4,096 indices, 64 to a chunk): a
/// thread past them uses the shared stripe.
#[cfg(not(any(loom, shuttle)))]
const CHUNKS: usize = 64;
/// Chunks of model-thread indices for a `ThreadCounts` (two to a chunk).
#[cfg(any(loom, shuttle))]
const CHUNKS: usize = 2;

/// Model threads per hub that get a stripe of their own (more share the
/// shared stripe).
#[cfg(any(loom, shuttle))]
const MODEL_STRIPES: usize = 3;

/// One hub's stripes.
pub(crate) struct Stripes {
    /// Unique for the life of the process (see `thread_index::CACHE`).
    #[cfg(not(any(loom, shuttle)))]
    id: u64,
    #[cfg(not(any(loom, shuttle)))]
    slots: Slots,
    #[cfg(any(loom, shuttle))]
    model: [AtomicU64; MODEL_STRIPES],
    /// Which model thread owns which of `model` (a plain mutex: model
    /// threads run one at a time, and this is bookkeeping, not protocol).
    #[cfg(any(loom, shuttle))]
    owners: std::sync::Mutex<Vec<ModelThread>>,
    /// For threads without a stripe of their own: read-modify-writes.
    shared: AtomicU64,
    /// The send side's fence, as decided for the process (a copy on a line
    /// every send reads: `barrier::Light`).
    pub(crate) light: barrier::Light,
}

/// The calling model thread's index in `owners` (the order the threads
/// first asked in), taking the next one if it has none and `take` says so.
/// Bookkeeping under a plain mutex, not protocol: model threads run one at
/// a time.
#[cfg(any(loom, shuttle))]
fn model_index(owners: &std::sync::Mutex<Vec<ModelThread>>, take: bool) -> Option<usize> {
    #[cfg(loom)]
    let me = loom::thread::current().id();
    #[cfg(all(shuttle, not(loom)))]
    let me = shuttle::thread::current().id();
    let mut owners = owners.lock().unwrap_or_else(|e| e.into_inner());
    match owners.iter().position(|t| *t == me) {
        Some(at) => Some(at),
        None if take => {
            owners.push(me);
            Some(owners.len() - 1)
        }
        None => None,
    }
}

#[cfg(loom)]
type ModelThread = loom::thread::ThreadId;
#[cfg(all(shuttle, not(loom)))]
type ModelThread = shuttle::thread::ThreadId;

/// A thread's stripe of one hub: its own (plain stores) or the shared one.
#[derive(Clone, Copy)]
pub(crate) enum Stripe<'a> {
    Own(&'a AtomicU64),
    Shared(&'a AtomicU64),
}

impl Stripe<'_> {
    /// Whether this thread already has a send in flight on this hub (user
    /// code inside that send is sending again): `Some` for an owned stripe,
    /// which only this thread writes; `None` for the shared stripe, which
    /// cannot tell (a thread on it marks a `SendScope` instead). Relaxed:
    /// the owner reads its own last store.
    #[inline]
    pub(crate) fn owned_in_flight(self) -> Option<bool> {
        match self {
            Stripe::Own(w) => Some(w.load(Ordering::Relaxed) & FLIGHT != 0),
            Stripe::Shared(_) => None,
        }
    }

    /// The sending thread, as far as this hub can tell: its own stripe's
    /// address, or 0 on the shared stripe, which any number of threads use
    /// (the cells' merged mode, `Cells::lock_for_send`).
    #[inline]
    pub(crate) fn identity(self) -> usize {
        match self {
            Stripe::Own(w) => std::ptr::from_ref(w) as usize,
            Stripe::Shared(_) => 0,
        }
    }

    /// Counts one accepted send that is never in flight (no receiver, no
    /// table: nothing to publish). Relaxed: a count, read by `Stripes::sent`.
    #[inline]
    pub(crate) fn count(self) {
        match self {
            Stripe::Own(w) => w.store(w.load(Ordering::Relaxed) + SEND, Ordering::Relaxed),
            Stripe::Shared(w) => {
                w.fetch_add(SEND, Ordering::Relaxed);
            }
        }
    }

    /// Marks a send in flight; the caller then loads the state word. `light`:
    /// the hub's (`Stripes::light`). The
    /// store is Relaxed: [`barrier::light`] orders it before that load, and
    /// [`barrier::heavy`] on the rare side makes it visible there
    /// (docs/design.md, "Sends in flight: one stripe per thread").
    #[inline]
    pub(crate) fn enter(self, light: barrier::Light) {
        match self {
            Stripe::Own(w) => {
                let now = w.load(Ordering::Relaxed);
                debug_assert_eq!(now & FLIGHT, 0, "one send in flight per thread and hub");
                w.store(now + 1, Ordering::Relaxed);
            }
            Stripe::Shared(w) => {
                let before = w.fetch_add(1, Ordering::Relaxed);
                assert!(before & FLIGHT < FLIGHT - 1, "too many sends in flight");
            }
        }
        barrier::light(light);
    }

    /// Ends a send in flight; `counted`: it was accepted (it counts in
    /// `sent`), else it was refused or retried. Release: everything the send
    /// published happens-before any Acquire load that sees this store (a
    /// grace period, a drained check).
    #[inline]
    pub(crate) fn leave(self, counted: bool) {
        let delta = if counted {
            SEND - 1
        } else {
            0u64.wrapping_sub(1)
        };
        match self {
            Stripe::Own(w) => {
                let now = w.load(Ordering::Relaxed);
                w.store(now.wrapping_add(delta), Ordering::Release);
            }
            Stripe::Shared(w) => {
                w.fetch_add(delta, Ordering::Release);
            }
        }
    }
}

/// Ends a send in flight on `stripe` (see [`Stripe::leave`]), then tells
/// whether the send side closed meanwhile: the caller must then wake the
/// receivers, one of which may be waiting for this very send to leave before
/// it reports `Closed`. The fence pairs with the close's heavy one: either the
/// close (and the receivers it told) sees this stripe left, or this load sees
/// `TX_CLOSED` — never neither. `light`: the hub's (`Stripes::light`).
#[inline]
pub(crate) fn leave_and_see_close(
    stripe: Stripe<'_>,
    counted: bool,
    state: &HubState,
    light: barrier::Light,
) -> bool {
    stripe.leave(counted);
    barrier::light(light);
    state.load().tx_closed()
}

impl Stripes {
    pub(crate) fn new() -> Self {
        barrier::init();
        Stripes {
            #[cfg(not(any(loom, shuttle)))]
            id: {
                // Relaxed: only uniqueness matters. Starts at 1: 0 is the
                // empty cache. 2^64 hubs are never made.
                static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
                NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            },
            #[cfg(not(any(loom, shuttle)))]
            slots: Slots::new(CHUNKS),
            #[cfg(any(loom, shuttle))]
            model: std::array::from_fn(|_| AtomicU64::new(0)),
            #[cfg(any(loom, shuttle))]
            owners: std::sync::Mutex::new(Vec::new()),
            shared: AtomicU64::new(0),
            // After `init` above.
            light: barrier::Light::now(),
        }
    }

    /// Whether this thread has a send in flight on this hub by its own
    /// stripe (false for a thread without one: its sends mark a `SendScope`).
    /// Takes no thread index and installs no chunk: for the re-entrance
    /// checks of calls other than `send`, which may run on any thread at any
    /// time.
    #[cfg(not(any(loom, shuttle)))]
    pub(crate) fn in_flight_here(&self) -> bool {
        let (cached, stripe) = thread_index::CACHE.with(std::cell::Cell::get);
        let stripe = if cached == self.id {
            // SAFETY: as in `mine`.
            unsafe { &*stripe }
        } else {
            match self.slots.installed(thread_index::peek()) {
                Some(stripe) => stripe,
                None => return false,
            }
        };
        // Relaxed: only this thread writes its stripe.
        stripe.load(Ordering::Relaxed) & FLIGHT != 0
    }

    /// [`Stripes::in_flight_here`] for a model thread.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn in_flight_here(&self) -> bool {
        match model_index(&self.owners, false).and_then(|at| self.model.get(at)) {
            Some(w) => w.load(Ordering::Relaxed) & FLIGHT != 0,
            None => false,
        }
    }

    /// This thread's stripe of this hub.
    #[cfg(not(any(loom, shuttle)))]
    #[inline]
    pub(crate) fn mine(&self) -> Stripe<'_> {
        let (cached, stripe) = thread_index::CACHE.with(std::cell::Cell::get);
        if cached == self.id {
            // The cache holds `self.id` only if this thread stored it in
            // `lookup`, with a pointer to this thread's stripe in one of
            // `self`'s chunks; ids are never reused, and the chunks are freed
            // only by `drop(&mut self)`. The exit guard clears the cache
            // before the thread index changes hands.
            // SAFETY: so while `&self` lives the pointer is valid, and the
            // stripe it names is still this thread's.
            return Stripe::Own(unsafe { &*stripe });
        }
        self.lookup()
    }

    /// Counts one accepted send that is never in flight (see
    /// [`Stripe::count`]) on this thread's stripe. The cached stripe's count
    /// is inline and the lookup out of line, so the no-receiver send is one
    /// straight run of code (one taken branch per send in a loop, where the
    /// two kinds of stripe merged into one tail took three).
    #[cfg(not(any(loom, shuttle)))]
    #[inline]
    pub(crate) fn count_mine(&self) {
        let (cached, stripe) = thread_index::CACHE.with(std::cell::Cell::get);
        if cached == self.id {
            // SAFETY: as in `mine`: the cache names this thread's stripe of
            // `self`, valid while `&self` lives.
            let w = unsafe { &*stripe };
            w.store(w.load(Ordering::Relaxed) + SEND, Ordering::Relaxed);
        } else {
            self.count_looked_up();
        }
    }

    #[cfg(not(any(loom, shuttle)))]
    #[cold]
    #[inline(never)]
    fn count_looked_up(&self) {
        self.lookup().count();
    }

    #[cfg(not(any(loom, shuttle)))]
    #[cold]
    fn lookup(&self) -> Stripe<'_> {
        let Some(stripe) = self.slots.slot(thread_index::get()) else {
            return Stripe::Shared(&self.shared);
        };
        // The slots live as long as `self` (see `mine`).
        thread_index::CACHE.with(|c| c.set((self.id, stripe as *const _)));
        Stripe::Own(stripe)
    }

    /// Counts one accepted send that is never in flight on this model
    /// thread's stripe.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn count_mine(&self) {
        self.mine().count();
    }

    /// This model thread's stripe of this hub.
    #[cfg(any(loom, shuttle))]
    pub(crate) fn mine(&self) -> Stripe<'_> {
        let at = model_index(&self.owners, true).expect("taken if missing");
        match self.model.get(at) {
            Some(w) => Stripe::Own(w),
            None => Stripe::Shared(&self.shared),
        }
    }

    /// Runs `f` on every stripe: the shared one first, then each allocated
    /// one (`true` for owned stripes).
    fn each(&self, mut f: impl FnMut(&AtomicU64, bool)) {
        f(&self.shared, false);
        #[cfg(any(loom, shuttle))]
        for w in &self.model {
            f(w, true);
        }
        #[cfg(not(any(loom, shuttle)))]
        self.slots.each(|w| f(w, true));
    }

    /// Accepted sends: exact once no send runs, lagging otherwise. Relaxed:
    /// whatever made the sends finish for the reader (a join, a channel)
    /// orders their stores before these loads.
    pub(crate) fn sent(&self) -> u64 {
        let mut sum = 0;
        self.each(|w, _| sum += w.load(Ordering::Relaxed) / SEND);
        sum
    }

    /// Whether any send is in flight now. Acquire pairs with each send's
    /// Release leave: a `false` means every send this saw leave published
    /// everything before. For the drained check after a close, which runs
    /// after the close's [`barrier::heavy`] (docs/design.md, "Close versus
    /// send").
    pub(crate) fn any_in_flight(&self) -> bool {
        let mut any = false;
        self.each(|w, _| any |= w.load(Ordering::Acquire) & FLIGHT != 0);
        any
    }

    /// Waits until every send that may not have seen a decision the caller
    /// just stored in the state word has left: [`barrier::heavy`], then each
    /// stripe found in flight is waited on until its owner leaves (the word
    /// changes) — the shared stripe until nothing is in flight on it.
    ///
    /// Acquire (each load) pairs with the sends' Release leave: what they
    /// published happens-before the caller's next step.
    pub(crate) fn wait_for_sends_in_flight(&self) {
        barrier::heavy();
        self.each(|w, own| {
            let seen = w.load(Ordering::Acquire);
            if seen & FLIGHT == 0 {
                return;
            }
            if own {
                spin_wait(|| w.load(Ordering::Acquire) != seen);
            } else {
                spin_wait(|| w.load(Ordering::Acquire) & FLIGHT == 0);
            }
        });
    }
}

/// A count that many threads add to without a shared read-modify-write: one
/// slot per thread index (`Slots`, as the stripes), each written by its
/// thread alone with a plain load and store, and a shared word with
/// `fetch_add` for a thread without an index (past 4,096 threads, or one
/// exiting). The sum is exact once no adder runs, lagging otherwise (as
/// [`Stripes::sent`]). For a receiver's `filtered` count (conflate rule 13:
/// keeping stats adds no shared read-modify-write to any send). Under loom
/// and shuttle, model threads take indices in the order they first add (two
/// to a chunk, four in all), so the models explore the same slots.
pub(crate) struct ThreadCounts {
    slots: Slots,
    /// Which model thread has which index (bookkeeping, not protocol, as
    /// `Stripes::owners`).
    #[cfg(any(loom, shuttle))]
    owners: std::sync::Mutex<Vec<ModelThread>>,
    shared: AtomicU64,
}

impl ThreadCounts {
    /// `per_thread`: whether to keep slots per thread (else every add is the
    /// shared word's; for a count that is never added to, which then costs
    /// no allocation).
    pub(crate) fn new(per_thread: bool) -> Self {
        ThreadCounts {
            slots: Slots::new(if per_thread { CHUNKS } else { 0 }),
            #[cfg(any(loom, shuttle))]
            owners: std::sync::Mutex::new(Vec::new()),
            shared: AtomicU64::new(0),
        }
    }

    /// Adds one for this thread. Relaxed: a count that orders nothing (read
    /// as `Stripes::sent` is).
    #[inline]
    pub(crate) fn add_one(&self) {
        match self.slots.slot(self.my_index()) {
            // Only this thread writes its slot (thread indices are unique
            // among live threads; the index's mutex orders a previous
            // owner's last store before this load).
            Some(slot) => slot.store(slot.load(Ordering::Relaxed) + 1, Ordering::Relaxed),
            None => {
                self.shared.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// This thread's index (`thread_index::NONE`, past every chunk, if it
    /// has none).
    #[cfg(not(any(loom, shuttle)))]
    #[inline]
    fn my_index(&self) -> usize {
        thread_index::get()
    }

    /// This model thread's index: the order it first added in.
    #[cfg(any(loom, shuttle))]
    fn my_index(&self) -> usize {
        model_index(&self.owners, true).expect("taken if missing")
    }

    /// The count: exact once no adder runs. Relaxed: whatever made the adds
    /// finish for the reader orders their stores before these loads.
    pub(crate) fn sum(&self) -> u64 {
        let mut sum = self.shared.load(Ordering::Relaxed);
        self.slots.each(|w| sum += w.load(Ordering::Relaxed));
        sum
    }
}

#[cfg(not(any(loom, shuttle)))]
mod thread_index {
    //! Process-wide thread indices, one per live sending thread.
    use std::cell::Cell;
    use std::sync::atomic::AtomicU64;
    use std::sync::Mutex;

    /// "No index yet" (and, after the guard ran, "no index any more").
    pub(super) const NONE: usize = usize::MAX;

    static FREE: Mutex<Vec<usize>> = Mutex::new(Vec::new());
    static NEXT: Mutex<usize> = Mutex::new(0);

    std::thread_local! {
        /// This thread's index (a `const` thread-local without a
        /// destructor: one load, always accessible).
        static ID: Cell<usize> = const { Cell::new(NONE) };
        /// Gives the id back when the thread exits.
        static GUARD: Guard = const { Guard };
        /// The stripe this thread last used: (the hub's `Stripes::id`, its
        /// stripe for this thread). Read on every send. Cleared by `Guard`
        /// when the index is given back.
        pub(super) static CACHE: Cell<(u64, *const AtomicU64)> =
            const { Cell::new((0, std::ptr::null())) };
    }

    struct Guard;

    impl Drop for Guard {
        fn drop(&mut self) {
            let id = ID.with(|c| c.replace(NONE));
            // A send from a later thread-local destructor must not use the
            // stripe given back below: it finds no cache and no id, and uses
            // the hub's shared stripe.
            CACHE.with(|c| c.set((0, std::ptr::null())));
            if id != NONE {
                // The mutex orders this thread's last stripe stores before
                // the next owner's first load.
                FREE.lock().unwrap_or_else(|e| e.into_inner()).push(id);
            }
        }
    }

    /// This thread's index if it has one (`NONE`, past every chunk,
    /// otherwise): takes none.
    pub(super) fn peek() -> usize {
        ID.with(Cell::get)
    }

    /// This thread's index, taking one on first use; `NONE` if the thread is
    /// exiting (its guard already ran or cannot be registered).
    #[inline]
    pub(super) fn get() -> usize {
        let id = ID.with(Cell::get);
        if id != NONE {
            return id;
        }
        take()
    }

    #[cold]
    fn take() -> usize {
        // Registering the guard (its destructor) first: if that fails, the
        // thread is being torn down, and an id taken now would never return.
        if GUARD.try_with(|_| ()).is_err() {
            return NONE;
        }
        let reused = FREE.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let id = reused.unwrap_or_else(|| {
            let mut next = NEXT.lock().unwrap_or_else(|e| e.into_inner());
            *next += 1;
            *next - 1
        });
        ID.with(|c| c.set(id));
        id
    }
}

#[cfg(all(test, not(any(loom, shuttle))))]
mod tests {
    use super::{Stripes, ThreadCounts};
    use std::sync::Barrier;

    /// Runs `work` on `threads` threads that are all alive while any of them
    /// works (a barrier before and after), so no two share a thread index.
    fn all_alive_at_once(threads: usize, work: impl Fn() + Sync) {
        let barrier = Barrier::new(threads);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    barrier.wait();
                    work();
                    barrier.wait();
                });
            }
        });
    }

    #[test]
    fn thread_counts_are_exact_across_threads_of_two_chunks() {
        // Smaller under miri, which runs every step of every thread.
        let (threads, per) = if cfg!(miri) { (70, 3) } else { (80, 1_000) };
        let counts = ThreadCounts::new(true);
        let never = ThreadCounts::new(false);
        // More than 64 threads alive at once: their indices span two chunks.
        all_alive_at_once(threads, || {
            for _ in 0..per {
                counts.add_one();
            }
            never.add_one();
        });
        // The joins order every add before these reads.
        assert_eq!(counts.sum(), (threads * per) as u64);
        assert_eq!(never.sum(), threads as u64, "the shared word alone");
    }

    #[test]
    fn stripes_follow_the_hub_a_thread_sends_on() {
        // One thread alternating between hubs (each switch misses the
        // per-thread cache), then a hub dropped and a new one made, which
        // may reuse its address but never its id.
        let (a, b) = (Stripes::new(), Stripes::new());
        for i in 0..10u64 {
            for _ in 0..=i {
                a.mine().count();
            }
            let s = b.mine();
            s.enter(b.light);
            s.leave(true);
        }
        assert_eq!((a.sent(), b.sent()), (55, 10));
        drop(a);
        let c = Stripes::new();
        c.mine().count();
        assert_eq!((b.sent(), c.sent()), (10, 1));
        assert!(!b.any_in_flight());
        let s = b.mine();
        s.enter(b.light);
        assert!(b.any_in_flight());
        s.leave(false);
        assert!(!b.any_in_flight());
        assert_eq!(b.sent(), 10, "a send that left uncounted counts nowhere");
    }

    #[test]
    fn stripes_are_exact_across_many_threads_and_reused_thread_indices() {
        // Smaller under miri, which runs every step of every thread.
        let (threads, per, serial) = if cfg!(miri) {
            (70, 3, 5)
        } else {
            (80, 1_000, 50)
        };
        let stripes = Stripes::new();
        // More than 64 threads alive at once: thread indices span two chunks.
        all_alive_at_once(threads, || {
            for i in 0..per {
                let me = stripes.mine();
                if i % 2 == 0 {
                    me.count();
                } else {
                    me.enter(stripes.light);
                    me.leave(true);
                }
            }
        });
        let all = (threads * per) as u64;
        assert_eq!(stripes.sent(), all);
        // Threads one after another reuse indices; nothing is lost in the handover.
        for _ in 0..serial {
            std::thread::scope(|s| {
                s.spawn(|| {
                    for _ in 0..100 {
                        stripes.mine().count();
                    }
                });
            });
        }
        let all = all + serial * 100;
        assert_eq!(stripes.sent(), all);
        stripes.wait_for_sends_in_flight();
        assert!(!stripes.any_in_flight());
    }

    #[test]
    fn waiting_for_sends_in_flight_waits_for_a_send_that_entered() {
        let stripes = Stripes::new();
        let entered = std::sync::atomic::AtomicBool::new(false);
        let left = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let me = stripes.mine();
                me.enter(stripes.light);
                entered.store(true, std::sync::atomic::Ordering::SeqCst);
                // Stay in flight until the waiter has had every chance to
                // return early (it must not).
                for _ in 0..1_000 {
                    std::thread::yield_now();
                }
                left.store(true, std::sync::atomic::Ordering::SeqCst);
                me.leave(true);
            });
            while !entered.load(std::sync::atomic::Ordering::SeqCst) {
                std::thread::yield_now();
            }
            stripes.wait_for_sends_in_flight();
            assert!(left.load(std::sync::atomic::Ordering::SeqCst));
        });
    }
}
