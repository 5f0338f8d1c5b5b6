//! Rule 7: the three kinds of close (graceful from a sender or the hub, by
//! dropping every send handle; a receiver's own; the hub's hard close), what
//! each drops or drains, and that iterators and streams end at `Closed`.

use crate::conflate_api::*;
use crate::conformance::support::*;
use crate::threads::Crew;
use futures::StreamExt as _;
use keybus::RecvError;
use std::sync::Arc;

pub fn rule7_sender_close_is_graceful<I: Conflate>() {
    let hub = Hub::<I, u32, u32>::new();
    let tx = hub.sender();
    let tx2 = tx.clone();
    let mut a = hub.receiver();
    let mut b = hub.receiver_builder().key(2).build();
    for k in [1, 2, 3, 2] {
        tx.send(k, k).unwrap();
    }
    assert!(!tx.is_closed());
    tx.close();
    assert!(tx.is_closed() && tx2.is_closed());
    assert_eq!(tx2.send(4, 4).unwrap_err().into_inner(), (4, 4));
    assert!(!a.is_closed(), "pending values still to deliver");
    assert_eq!(a.len(), 3);
    assert_eq!(a.recv().unwrap().key, 1);
    assert_eq!(a.iter().map(|e| e.key).collect::<Vec<_>>(), vec![2, 3]);
    assert_fully_closed(&mut a);
    assert_eq!(drain(&mut b), vec![(2, 2, 2)]);
    assert_fully_closed(&mut b);
}

pub fn rule7_dropping_every_sender_and_hub_closes_gracefully<I: Conflate>() {
    let hub = Hub::<I, u32, u32>::new();
    let hub2 = hub.clone();
    let tx = hub.sender();
    let tx2 = tx.clone();
    let mut rx = hub.receiver();
    tx.send(1, 1).unwrap();
    drop(hub);
    drop(tx);
    // Handles remain: still open.
    tx2.send(2, 2).unwrap();
    assert!(!rx.is_closed());
    drop(tx2);
    assert!(!rx.is_closed());
    assert_eq!(rx.try_recv().unwrap().key, 1);
    let tx3 = hub2.sender();
    tx3.send(3, 3).unwrap();
    drop(tx3);
    drop(hub2);
    // Only the receiver is left: the send side is closed, drain then Closed.
    assert!(!rx.is_closed());
    assert_eq!(keys_of(&mut rx), vec![2, 3]);
    assert_fully_closed(&mut rx);
}

pub fn rule7_dropping_send_handles_wakes_a_parked_receiver<I: Conflate>() {
    let crew = Crew::new("rule7_dropping_send_handles_wakes");
    for _ in 0..100 {
        let (hub, tx, mut rx) = bus::<I, u32, u32>();
        crew.scope(|s| {
            let waiter = crew.spawn(s, move || rx.recv());
            jitter(2_000);
            drop(tx);
            drop(hub);
            assert_eq!(waiter.join().unwrap().err(), Some(RecvError));
        });
    }
}

pub fn rule7_receiver_close_drops_pending_and_deregisters<I: Conflate>() {
    let (token, hub, tx) = token_bus::<I>();
    let mut closing = hub.receiver();
    let mut other = hub.receiver();
    send_each(&tx, 0..4, &token);
    // `other` takes its copies: what stays pending is `closing`'s alone (a
    // receiver may share its pending values with the others, so only values
    // no one else has pending can be seen dropped).
    assert_eq!(keys_of(&mut other), (0..4).collect::<Vec<_>>());
    assert!(
        Arc::strong_count(&token) > 1,
        "closing still has 0..4 pending"
    );
    closing.close();
    assert_eq!(Arc::strong_count(&token), 1, "pending values not dropped");
    assert_fully_closed(&mut closing);
    closing.close(); // idempotent

    // Deregistered: new sends do not visit it.
    send_each(&tx, 4..8, &token);
    assert_eq!(closing.len(), 0);
    // Nobody else is affected.
    assert!(!tx.is_closed());
    assert_eq!(keys_of(&mut other), (4..8).collect::<Vec<_>>());
    assert_eq!(Arc::strong_count(&token), 1);
    send_each(&tx, 8..10, &token);
    drop(other);
    assert_eq!(Arc::strong_count(&token), 1, "dropping is closing");
    tx.send(9, token.clone()).unwrap();
    assert_eq!(Arc::strong_count(&token), 1);
}

pub fn rule7_receiver_drop_is_close<I: Conflate>() {
    let (token, hub, tx) = token_bus::<I>();
    let rx = hub.receiver();
    let mut other = hub.receiver();
    tx.send(1, token.clone()).unwrap();
    drop(rx);
    assert_eq!(Arc::strong_count(&token), 2);
    tx.send(2, token.clone()).unwrap();
    assert_eq!(Arc::strong_count(&token), 3);
    assert_eq!(keys_of(&mut other), vec![1, 2]);
    assert!(!tx.is_closed());
}

pub fn rule7_hub_close_is_hard_and_later_receivers_are_born_closed<I: Conflate>() {
    let (token, hub, tx) = token_bus::<I>();
    let mut a = hub.receiver();
    let mut b = hub.receiver_builder().key(1).build();
    send_each(&tx, 0..3, &token);
    assert!(!hub.is_closed());
    hub.close_now();
    assert!(hub.is_closed());
    assert!(tx.is_closed());
    assert_eq!(
        Arc::strong_count(&token),
        1,
        "nothing drains after Hub::close"
    );
    assert_fully_closed(&mut a);
    assert_fully_closed(&mut b);
    let (k, v) = tx.send(7, token.clone()).unwrap_err().into_inner();
    assert_eq!(k, 7);
    drop(v);
    let mut born = hub.receiver();
    let mut born_keyed = hub.receiver_builder().key(3).merge(|_, n| Some(n)).build();
    assert!(tx.send(3, token.clone()).is_err());
    assert_fully_closed(&mut born);
    assert_fully_closed(&mut born_keyed);
    assert_eq!(Arc::strong_count(&token), 1);
}

pub fn rule7_close_kinds_are_idempotent_in_any_order<I: Conflate>() {
    // Sender::close twice, then Hub::close: still hard, drops what was pending.
    let token = Arc::new(());
    let (hub, tx, mut rx) = bus::<I, u32, Arc<()>>();
    tx.send(1, token.clone()).unwrap();
    tx.close();
    tx.close();
    assert!(!rx.is_closed());
    assert_eq!(Arc::strong_count(&token), 2);
    hub.close_now();
    hub.close_now();
    assert_eq!(Arc::strong_count(&token), 1);
    assert_fully_closed(&mut rx);
    rx.close();
    rx.close();
    tx.close();
    assert_fully_closed(&mut rx);

    // Hub::close first, then Sender::close and Receiver::close are no-ops.
    let (hub, tx, mut rx) = bus::<I, u32, u32>();
    tx.send(1, 1).unwrap();
    hub.close_now();
    tx.close();
    rx.close();
    hub.close_now();
    assert!(tx.is_closed() && hub.is_closed());
    assert_fully_closed(&mut rx);
}

pub fn rule7_graceful_drain_reaches_a_terminal_closed<I: Conflate>() {
    let (hub, tx, mut rx) = bus::<I, u32, u32>();
    tx.send(1, 1).unwrap();
    tx.close();
    // Made after the send side closed: nothing can ever arrive.
    let mut late = hub.receiver();
    assert_fully_closed(&mut late);
    assert!(!rx.is_closed());
    assert_eq!(rx.recv().unwrap().key, 1);
    assert!(rx.is_closed());
    // Terminal and stable, from every form, repeatedly (the receiver
    // deregistered itself on reaching Closed).
    assert_fully_closed(&mut rx);
    assert_fully_closed(&mut rx);
    // A hard close afterwards changes nothing.
    hub.close_now();
    assert_fully_closed(&mut rx);
}

pub fn rule7_iter_and_stream_end_at_closed<I: Conflate>() {
    let hub = Hub::<I, u32, u32>::new();
    let tx = hub.sender();
    let mut it = hub.receiver();
    let mut st = hub.receiver();
    for k in [1, 2, 1, 3] {
        tx.send(k, k).unwrap();
    }
    tx.close();
    assert_eq!(it.iter().map(|e| e.key).collect::<Vec<_>>(), vec![1, 2, 3]);
    assert_eq!(it.iter().count(), 0);
    let got: Vec<u32> = futures::executor::block_on((&mut st).map(|e| e.key).collect::<Vec<_>>());
    assert_eq!(got, vec![1, 2, 3]);
    assert!(futures::executor::block_on(st.next()).is_none());

    // Across threads: a consumer iterating until Closed gets everything.
    let (hub, tx, mut rx) = bus::<I, u32, u32>();
    let mut srx = hub.receiver();
    // No closer: the test's thread owns every send handle, and a panic there
    // drops them as it unwinds, which closes the hub gracefully.
    let crew = Crew::new("rule7_iter_and_stream_end_at_closed");
    crew.scope(|s| {
        let it = crew.spawn(s, move || rx.iter().map(|e| e.sends).sum::<u64>());
        let st = crew.spawn(s, move || {
            futures::executor::block_on(
                srx.by_ref()
                    .map(|e| e.sends)
                    .fold(0, |a, b| async move { a + b }),
            )
        });
        for k in 0..2_000 {
            tx.send(k % 8, k).unwrap();
        }
        drop(tx);
        drop(hub);
        assert_eq!(it.join().unwrap(), 2_000);
        assert_eq!(st.join().unwrap(), 2_000);
    });
}
