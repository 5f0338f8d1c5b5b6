//! Shutdown: the graceful close reachable from the hub, the hard close named
//! as such (and its deprecated old name), and the hub's count of how each
//! receiver left, so that "0 receivers" after a shutdown reads as drained,
//! dropped or torn down.

use crate::conflate_api::*;
use crate::conformance::support::*;
use keybus::{HubStats, TryRecvError};

/// The hub's receivers as (live, drained, dropped, hard-closed) are `expected`,
/// and every receiver ever registered is live or left one of those three ways.
fn assert_departures(s: &HubStats, registered: u64, expected: (u64, u64, u64, u64)) {
    let got = (
        s.receivers,
        s.receivers_drained,
        s.receivers_dropped,
        s.receivers_hard_closed,
    );
    assert_eq!(
        got, expected,
        "(live, drained, dropped, hard-closed): {s:?}"
    );
    assert_eq!(
        got.0 + got.1 + got.2 + got.3,
        registered,
        "every registered receiver is live or left one way: {s:?}"
    );
}

/// A hub, its sender, and two receivers of it.
type TwoReceivers<I> = (
    Hub<I, u32, u32>,
    Sender<I, u32, u32>,
    [Receiver<I, u32, u32>; 2],
);

/// A hub with a plain receiver and a filtered one (the two kinds of the
/// lock-free implementation), 3 keys pending at each, 4 sends.
fn two_receivers<I: Conflate>() -> TwoReceivers<I> {
    let hub = Hub::<I, u32, u32>::new();
    let tx = hub.sender();
    let plain = hub.receiver();
    let filtered = hub.receiver_builder().key_filter(|k: &u32| *k < 10).build();
    for k in [1, 2, 3, 1] {
        tx.send(k, k).unwrap();
    }
    (hub, tx, [plain, filtered])
}

pub fn shutdown_close_graceful_from_the_hub_drains_then_closes<I: Conflate>() {
    let (hub, tx, mut rxs) = two_receivers::<I>();
    let watches = rxs.each_ref().map(|rx| rx.watch());
    hub.close_graceful();
    assert!(tx.is_closed(), "the send side closed");
    assert!(!hub.is_closed(), "is_closed is the hard close's flag");
    assert!(tx.send(9, 9).is_err());
    assert_eq!(hub.stats().refused, 1);
    for (rx, watch) in rxs.iter_mut().zip(&watches) {
        assert!(!watch.is_closed(), "values pending: not closed yet");
        assert_eq!(
            keys_of(rx),
            vec![1, 2, 3],
            "everything pending is delivered"
        );
        assert_eq!(rx.try_recv().err(), Some(TryRecvError::Closed));
        assert_fully_closed(rx);
        assert!(watch.is_closed());
        let s = conserved_stats(rx);
        assert_eq!((s.received, s.folded, s.dropped), (4, 4, 0));
    }
    let s = hub.stats();
    // Drained receivers deregister.
    assert_departures(&s, 2, (0, 2, 0, 0));
    // Idempotent, and the same close as the sender's.
    hub.close_graceful();
    tx.close();
    assert_eq!(hub.stats().receivers_drained, 2);
}

pub fn shutdown_close_now_drops_what_is_pending_and_the_stats_say_so<I: Conflate>() {
    let (hub, tx, mut rxs) = two_receivers::<I>();
    hub.close_now();
    assert!(hub.is_closed() && tx.is_closed());
    for rx in &mut rxs {
        assert_eq!(
            rx.try_recv().err(),
            Some(TryRecvError::Closed),
            "nothing drains"
        );
        assert_fully_closed(rx);
        let s = conserved_stats(rx);
        assert_eq!((s.received, s.folded, s.dropped, s.pending), (4, 0, 4, 0));
        assert!(rx.watch().is_closed());
    }
    let s = hub.stats();
    assert_departures(&s, 2, (0, 0, 0, 2));
    hub.close_now();
    assert_eq!(hub.stats().receivers_hard_closed, 2, "idempotent");
    assert!(hub.receiver().is_closed(), "born closed");
}

#[allow(deprecated)]
pub fn shutdown_deprecated_close_is_still_the_hard_close<I: Conflate>() {
    let (hub, _tx, mut rxs) = two_receivers::<I>();
    HubApi::close(&hub);
    assert!(hub.is_closed());
    for rx in &mut rxs {
        assert_eq!(rx.try_recv().err(), Some(TryRecvError::Closed));
        assert_eq!(rx.stats().dropped, 4);
    }
    assert_eq!(hub.stats().receivers_hard_closed, 2);
}

pub fn shutdown_receivers_closed_or_dropped_early_count_as_dropped<I: Conflate>() {
    let hub = Hub::<I, u32, u32>::new();
    let tx = hub.sender();
    let pending_at_drop = hub.receiver_builder().key(1).build();
    let mut closed_empty = hub.receiver();
    let mut drained = hub.receiver();
    tx.send(1, 1).unwrap();
    assert_eq!(drain(&mut closed_empty).len(), 1);
    let gone = pending_at_drop.watch();
    drop(pending_at_drop);
    assert!(gone.is_closed());
    assert_eq!((gone.stats().dropped, gone.stats().pending), (1, 0));
    closed_empty.close();
    let s = hub.stats();
    assert_eq!((s.receivers, s.receivers_dropped), (1, 2));
    drop(tx);
    drop(hub.clone()); // one handle less, the hub still holds the send side
    hub.close_graceful();
    assert_eq!(keys_of(&mut drained), vec![1]);
    assert!(drained.recv().is_err());
    drop(drained); // already deregistered: counted once
    let s = hub.stats();
    assert_departures(&s, 3, (0, 1, 2, 0));
}
