//! Every public handle is `UnwindSafe + RefUnwindSafe` (both implementations),
//! and it is true: a panic in user code (a merge, a key filter, `T: PartialEq`)
//! caught by `std::panic::catch_unwind` with the handles captured as they are,
//! no `AssertUnwindSafe`, leaves the bus usable.
//!
//! The static assertions (and the API traits of `keybus_test_support`, which
//! require both) fail to compile if a handle loses the traits (boxed
//! closures, `UnsafeCell`s and listeners inside make the auto traits fail; the
//! crate implements them by hand, with the argument, in `src/unwind_safety.rs`).

use keybus_test_support::{broadcast_api, conflate_api};
use std::panic::{catch_unwind, RefUnwindSafe, UnwindSafe};

fn unwind_safe<T: UnwindSafe + RefUnwindSafe>() {}

/// The value a test's merge panics on.
const POISON: u32 = 13;

/// The conflate bodies, one generic function per test.
mod conflate {
    use super::*;
    use keybus_test_support::conflate_api::*;

    pub fn handles_are_unwind_safe<I: Conflate>() {
        unwind_safe::<Hub<I, String, Vec<u8>>>();
        unwind_safe::<HubBuilder<I, String, Vec<u8>>>();
        unwind_safe::<Sender<I, String, Vec<u8>>>();
        unwind_safe::<Receiver<I, String, Vec<u8>>>();
        unwind_safe::<ReceiverBuilder<I, String, Vec<u8>>>();
    }

    /// A panicking hub merge and a panicking key filter, each caught
    /// around a send with the hub and sender borrowed and the receivers
    /// moved in; the bus delivers what comes after.
    pub fn catch_unwind_around_panicking_user_code_leaves_the_bus_usable<I: Conflate>() {
        let hub = Hub::<I, u32, u32>::builder()
            .merge(|a: u32, b: u32| {
                assert_ne!(b, POISON, "merge panics on POISON");
                Some(a + b)
            })
            .build();
        let tx = hub.sender();
        let mut rx = hub.receiver();
        let filtered = hub
            .receiver_builder()
            .key_filter(|k: &u32| {
                assert_ne!(*k, POISON, "key filter panics on POISON");
                true
            })
            .build();

        // The merge panics only when a send coalesces: make key 1 pending.
        tx.send(1, 10).unwrap();
        let merge_panic = catch_unwind(|| tx.send(1, POISON));
        assert!(merge_panic.is_err(), "the merge's panic reaches the sender");
        let filter_panic = catch_unwind(|| tx.send(POISON, 1));
        assert!(
            filter_panic.is_err(),
            "the filter's panic reaches the sender"
        );
        // A documented panic of a builder, caught with the builder moved in.
        let builder = hub.receiver_builder();
        assert!(catch_unwind(move || builder.max_pending(0)).is_err());

        // Still usable: new sends, new receivers, receives, stats.
        tx.send(2, 5).unwrap();
        tx.send(2, 6).unwrap();
        let late = hub.receiver();
        tx.send(3, 1).unwrap();
        let (rx, rx_keys, filtered, late) = catch_unwind(move || {
            let keys: Vec<(u32, u32)> = rx.try_iter().map(|e| (e.key, e.value)).collect();
            (rx, keys, filtered, late)
        })
        .expect("no user code panics here");
        // Key 1's pending value was dropped by its panicking merge
        // (rule 9); key 2 merged 5 + 6.
        assert!(rx_keys.ends_with(&[(2, 11), (3, 1)]), "{rx_keys:?}");
        assert!(filtered.len() >= 2, "{filtered:?}");
        assert_eq!(late.len(), 1);
        assert!(!hub.is_closed() && !tx.is_closed());
        let stats = catch_unwind(|| hub.stats()).unwrap();
        assert_eq!(stats.receivers, 3);
        drop((rx, filtered, late));
    }
}

keybus_test_support::tests_for! {
    crate::conflate for lockfree = conflate_api::Lockfree, baseline = conflate_api::Baseline => {
        handles_are_unwind_safe,
        catch_unwind_around_panicking_user_code_leaves_the_bus_usable,
    }
}

/// A value whose comparison panics when either side is `POISON`.
#[derive(Clone, Debug)]
struct Touchy(u32);

impl PartialEq for Touchy {
    fn eq(&self, other: &Self) -> bool {
        assert!(self.0 != POISON && other.0 != POISON, "Touchy::eq panics");
        self.0 == other.0
    }
}

/// The broadcast bodies, one generic function per test.
mod broadcast {
    use super::*;
    use keybus_test_support::broadcast_api::*;

    pub fn handles_are_unwind_safe<B: Broadcast>() {
        unwind_safe::<B::Buffer<String>>();
        unwind_safe::<B::Reader<String>>();
    }

    /// `append_if_changed` runs `T::eq` under the writer lock; its panic,
    /// caught with the buffer borrowed, leaves the buffer unchanged and
    /// usable, and a reader moved into `catch_unwind` reads on.
    pub fn catch_unwind_around_a_panicking_eq_leaves_the_buffer_usable<B: Broadcast>() {
        let buf = B::Buffer::<Touchy>::new(8);
        let reader = buf.reader();
        buf.append(Touchy(POISON)).unwrap();
        let eq_panic = catch_unwind(|| buf.append_if_changed(Touchy(1)));
        assert!(eq_panic.is_err(), "T::eq's panic reaches the appender");
        assert_eq!(buf.tail(), 1, "the panicking append changed nothing");
        // The writer lock was released: plain appends go on.
        assert_eq!(buf.append(Touchy(2)).unwrap(), 2);
        let read = catch_unwind(move || {
            let mut reader = reader;
            let a = reader.try_next().unwrap();
            let b = reader.try_next().unwrap();
            (a.value.0, b.value.0, reader.cursor().revision())
        })
        .expect("no user code panics here");
        assert_eq!(read, (POISON, 2, 2));
    }
}

keybus_test_support::tests_for! {
    crate::broadcast for lockfree_broadcast = broadcast_api::Lockfree, baseline_broadcast = broadcast_api::Baseline => {
        handles_are_unwind_safe,
        catch_unwind_around_a_panicking_eq_leaves_the_buffer_usable,
    }
}
