//! Rule 6: the receive side's precedence, `Closed` over a value over `Empty`
//! (and over `Timeout`), for every receiving form.

use crate::conflate_api::*;
use crate::conformance::support::*;
use keybus::{RecvError, RecvTimeoutError, TryRecvError};
use std::future::Future;
use std::task::{Context, Poll};
use std::time::Duration;

pub fn rule6_try_recv_closed_beats_empty_beats_value<I: Conflate>() {
    let (hub, tx, mut rx) = bus::<I, u32, u32>();
    assert_eq!(rx.try_recv().err(), Some(TryRecvError::Empty));
    tx.send(1, 1).unwrap();
    assert_eq!(rx.try_recv().unwrap().key, 1);
    assert_eq!(rx.try_recv().err(), Some(TryRecvError::Empty));

    // Receiver closed with a value pending: Closed.
    tx.send(2, 2).unwrap();
    rx.close();
    assert_eq!(rx.try_recv().err(), Some(TryRecvError::Closed));

    // Hub closed with a value pending: Closed.
    let mut rx = hub.receiver();
    tx.send(3, 3).unwrap();
    hub.close_now();
    assert_eq!(rx.try_recv().err(), Some(TryRecvError::Closed));

    // Send side closed: value first, then Closed, never Empty.
    let (_hub, tx, mut rx) = bus::<I, u32, u32>();
    tx.send(4, 4).unwrap();
    tx.close();
    assert_eq!(rx.try_recv().unwrap().key, 4);
    assert_eq!(rx.try_recv().err(), Some(TryRecvError::Closed));
}

pub fn rule6_peek_returns_head_without_removing_it<I: Conflate>() {
    let (_hub, tx, mut rx) = open(Hub::<I, &'static str, i64>::with_merge(annihilating));
    assert_eq!(rx.peek().err(), Some(TryRecvError::Empty));
    tx.send("a", 1).unwrap();
    tx.send("b", 2).unwrap();
    let p = rx.peek().unwrap();
    assert_eq!((p.key, p.value, p.sends), ("a", 1, 1));
    assert_eq!(rx.len(), 2);
    // Coalescing changes value and sends, not the head.
    tx.send("a", 5).unwrap();
    let p = rx.peek().unwrap();
    assert_eq!((p.key, p.value, p.sends), ("a", 5, 2));
    let p2 = rx.peek().unwrap();
    assert_eq!((p2.key, p2.value, p2.sends), (p.key, p.value, p.sends));
    // The peeked event is what the next receive takes.
    let t = rx.try_recv().unwrap();
    assert_eq!((t.key, t.value, t.sends), ("a", 5, 2));
    // Annihilating the head moves it on.
    tx.send("c", 3).unwrap();
    tx.send("b", -1).unwrap();
    assert_eq!(rx.peek().unwrap().key, "c");
    // Graceful close: value while pending, then Closed.
    tx.close();
    assert_eq!(rx.peek().unwrap().key, "c");
    rx.try_recv().unwrap();
    assert_eq!(rx.peek().err(), Some(TryRecvError::Closed));
    // A closed receiver answers Closed even with a value pending.
    let (_hub, tx, mut rx) = bus::<I, u8, u8>();
    tx.send(1, 1).unwrap();
    rx.close();
    assert_eq!(rx.peek().err(), Some(TryRecvError::Closed));
}

pub fn rule6_zero_or_past_deadline_returns_ready_value<I: Conflate>() {
    let (_hub, tx, mut rx) = bus::<I, u32, u32>();
    tx.send(1, 1).unwrap();
    tx.send(2, 2).unwrap();
    assert_eq!(rx.recv_timeout(Duration::ZERO).unwrap().key, 1);
    assert_eq!(rx.recv_deadline(past()).unwrap().key, 2);
    // Nothing ready: the timeout forms time out (not terminal).
    assert_timed_receives(&mut rx, RecvTimeoutError::Timeout);
    tx.send(3, 3).unwrap();
    assert_eq!(rx.recv_timeout(Duration::MAX).unwrap().key, 3);
}

pub fn rule6_closed_beats_timeout<I: Conflate>() {
    let hub = Hub::<I, u32, u32>::new();
    let tx = hub.sender();
    let mut closed = hub.receiver();
    let mut drained = hub.receiver();
    tx.send(1, 1).unwrap();
    closed.close();
    assert_timed_receives(&mut closed, RecvTimeoutError::Closed);
    tx.close();
    assert_eq!(drained.recv_timeout(Duration::ZERO).unwrap().key, 1);
    let closed = Some(RecvTimeoutError::Closed);
    assert_eq!(drained.recv_timeout(Duration::ZERO).err(), closed);
    assert_eq!(drained.recv_deadline(past()).err(), closed);
    let hub = Hub::<I, u32, u32>::new();
    let tx = hub.sender();
    let mut torn = hub.receiver();
    tx.send(1, 1).unwrap();
    hub.close_now();
    assert_eq!(
        torn.recv_timeout(Duration::ZERO).err(),
        Some(RecvTimeoutError::Closed)
    );
    assert_eq!(torn.recv().err(), Some(RecvError));
}

pub fn rule6_dropped_recv_async_future_consumes_nothing<I: Conflate>() {
    let (_hub, tx, mut rx) = bus::<I, u32, u32>();
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    {
        let mut fut = Box::pin(rx.recv_async());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        tx.send(1, 10).unwrap();
        drop(fut);
    }
    assert_eq!(rx.len(), 1);
    {
        // Created while a value is ready, dropped unpolled.
        let fut = rx.recv_async();
        drop(fut);
    }
    let e = rx.peek().unwrap();
    assert_eq!((e.key, e.value, e.sends), (1, 10, 1));
    // A poll that completes is what takes it.
    let mut fut = Box::pin(rx.recv_async());
    match fut.as_mut().poll(&mut cx) {
        Poll::Ready(Ok(e)) => assert_eq!((e.key, e.value), (1, 10)),
        other => panic!(
            "expected the ready value, got {:?}",
            other.map(|r| r.map(|e| e.key))
        ),
    }
    drop(fut);
    assert_eq!(rx.try_recv().err(), Some(TryRecvError::Empty));
}

pub fn rule6_try_iter_ends_at_empty_or_closed<I: Conflate>() {
    let (_hub, tx, mut rx) = bus::<I, u32, u32>();
    assert_eq!(rx.try_iter().count(), 0);
    for k in 0..3 {
        tx.send(k, k).unwrap();
    }
    assert_eq!(
        rx.try_iter().map(|e| e.key).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    // Ended at Empty, not terminal.
    tx.send(7, 7).unwrap();
    assert_eq!(rx.try_iter().map(|e| e.key).collect::<Vec<_>>(), vec![7]);
    tx.send(8, 8).unwrap();
    tx.close();
    assert_eq!(rx.try_iter().map(|e| e.key).collect::<Vec<_>>(), vec![8]);
    assert_eq!(rx.try_recv().err(), Some(TryRecvError::Closed));
}
