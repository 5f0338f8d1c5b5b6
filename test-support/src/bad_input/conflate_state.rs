//! Bad input for the conflate state table, snapshot receivers, bounds and
//! accounting, written once over [`Conflate`] and run against both
//! implementations by `tests/bad_input_conflate.rs`: `max_pending(0)` and
//! `.snapshot()` on a hub without `retain_latest` are documented panics whose
//! messages say what to do; a stats read never blocks a sender; user code that
//! calls back into its own hub from a snapshot registration or a table merge
//! panics instead of hanging, and leaves the hub usable.
//!
//! A wait that could hang on a bug has a deadline and fails instead.

use crate::conflate_api::*;
use crate::harness::Panic;
use crate::threads::Crew;
use keybus::TryRecvError;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::time::Duration;

/// The text of a caught panic payload.
fn message(payload: Box<dyn std::any::Any + Send>) -> String {
    Panic::from_payload(&*payload).message
}

pub fn max_pending_zero_panics_saying_what_to_do<I: Conflate>() {
    let hub = Hub::<I, u32, u32>::new();
    let err = catch_unwind(AssertUnwindSafe(|| {
        hub.receiver_builder().max_pending(0).build()
    }))
    .expect_err("max_pending(0) must panic");
    let msg = message(err);
    assert!(msg.contains("max_pending(0)"), "{msg}");
    assert!(msg.contains("n >= 1"), "{msg}");
    // Nothing was registered; the hub works.
    assert_eq!(hub.stats().receivers, 0);
    let mut rx = hub.receiver_builder().max_pending(1).build();
    hub.sender().send(1, 1).unwrap();
    assert_eq!(rx.try_recv().unwrap().value, 1);
}

pub fn snapshot_without_retain_latest_panics_saying_what_to_do<I: Conflate>() {
    for hub in [
        Hub::<I, u32, u32>::new(),
        Hub::<I, u32, u32>::builder().merge(|_, n| Some(n)).build(),
    ] {
        let err = catch_unwind(AssertUnwindSafe(|| {
            hub.receiver_builder().snapshot().build()
        }))
        .expect_err("snapshot() without a table must panic");
        let msg = message(err);
        assert!(msg.contains("retain_latest"), "{msg}");
        assert_eq!(hub.stats().receivers, 0);
    }
}

pub fn stats_read_never_blocks_a_sender_stuck_in_user_code<I: Conflate>() {
    // The merge parks its send (holding whatever the send holds:
    // the hub mutex in the baseline, a shard lock in the lock-free
    // bus) until told; stats must answer meanwhile.
    let (entered_tx, entered) = mpsc::channel::<()>();
    let (release, released) = mpsc::channel::<()>();
    let released = std::sync::Mutex::new(released);
    let hub = Hub::<I, u32, u32>::builder().retain_latest().build();
    let mut rx = hub
        .receiver_builder()
        .merge(move |_, n| {
            if n == 7 {
                entered_tx.send(()).unwrap();
                let _ = released
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(30));
            }
            Some(n)
        })
        .build();
    let tx = hub.sender();
    tx.send(1, 1).unwrap();
    let crew = Crew::new("stats_read_never_blocks_a_sender");
    // A panic here would leave the merge waiting for its release.
    crew.on_panic(|| {
        let _ = release.send(());
    });
    crew.scope(|s| {
        let stuck = crew.spawn(s, || tx.send(1, 7).unwrap());
        crew.recv_timeout(&entered, Duration::from_secs(30))
            .expect("the merge never ran");
        let (answer_tx, answer) = mpsc::channel();
        let (hub2, rx_ref) = (&hub, &rx);
        crew.spawn(s, move || {
            let h = hub2.stats();
            let r = rx_ref.stats();
            answer_tx.send((h, r)).unwrap();
        });
        let got = crew.recv_timeout(&answer, Duration::from_secs(20));
        release.send(()).unwrap();
        stuck.join().unwrap();
        let (h, r) = got.expect("a stats read blocked behind a running send");
        assert_eq!(h.receivers, 1);
        assert!(r.received >= 1);
    });
    let s = rx.stats();
    assert_eq!((s.received, s.pending, s.pending_sends), (2, 1, 2));
    assert_eq!(rx.try_recv().unwrap().value, 7);
}

pub fn snapshot_filter_calling_back_into_its_hub_panics_and_the_hub_still_works<I: Conflate>() {
    let hub = Hub::<I, u32, u32>::builder().retain_latest().build();
    let tx = hub.sender();
    tx.send(1, 1).unwrap();
    let inner = tx.clone();
    let err = catch_unwind(AssertUnwindSafe(|| {
        hub.receiver_builder()
            .key_filter(move |k: &u32| inner.send(*k + 100, 0).is_ok())
            .snapshot()
            .build()
    }))
    .expect_err("a send from the snapshot's filter must panic, not hang");
    assert!(message(err).contains("Sender::send"));
    // Sends are not held off any more, and registration works.
    tx.send(2, 2).unwrap();
    let mut rx = hub.receiver_builder().snapshot().build();
    assert_eq!(rx.try_recv_all().unwrap().len(), 2);
    assert_eq!(hub.stats().receivers, 1);
}

pub fn table_merge_calling_latest_or_snapshot_panics_instead_of_hanging<I: Conflate>() {
    for call in 0..2 {
        let slot: std::sync::Arc<std::sync::OnceLock<Hub<I, u32, u32>>> = Default::default();
        let seen = slot.clone();
        let hub = Hub::<I, u32, u32>::builder()
            .merge(move |_, n: u32| {
                let hub = seen.get().expect("set before the second send");
                if call == 0 {
                    let _ = hub.latest(&0);
                } else {
                    let _ = hub.snapshot();
                }
                Some(n)
            })
            .retain_latest()
            .build();
        let _ = slot.set(hub.clone());
        let tx = hub.sender();
        tx.send(0, 1).unwrap(); // enters the table: no merge
        let err = catch_unwind(AssertUnwindSafe(|| tx.send(0, 2)))
            .expect_err("a call back into the hub from its merge must panic");
        let msg = message(err);
        assert!(
            msg.contains("Hub::latest") || msg.contains("Hub::snapshot"),
            "{msg}"
        );
        // The panicking merge dropped the key from the table; the hub
        // goes on.
        assert_eq!(hub.latest(&0), None);
        tx.send(0, 3).unwrap();
        assert_eq!(hub.latest(&0), Some(3));
        hub.close_now();
        let mut rx = hub.receiver();
        assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
    }
}
