//! Rules 5–7: `try_recv_all` is one cut, the precedence of `Closed` over a value
//! over `Empty` (and over `Timeout`), and the three kinds of close.

use crate::conflate_api::*;
use crate::conformance::support::*;
use crate::threads::Crew;
use futures::StreamExt as _;
use keybus::{RecvError, RecvTimeoutError, TryRecvError};
use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::thread;
use std::time::Duration;

// rule 5: try_recv_all is one cut

pub fn rule5_try_recv_all_takes_everything_in_queue_order<I: Conflate>() {
    let (_hub, tx, mut rx) = bus::<I, u32, u32>();
    assert_eq!(rx.try_recv_all().err(), Some(TryRecvError::Empty));
    for k in [5, 1, 4, 1, 5, 9, 2, 6, 5] {
        tx.send(k, k * 10).unwrap();
    }
    let all = rx.try_recv_all().unwrap();
    let keys: Vec<u32> = all.iter().map(|e| e.key).collect();
    assert_eq!(keys, vec![5, 1, 4, 9, 2, 6]);
    let distinct: HashSet<u32> = keys.iter().copied().collect();
    assert_eq!(distinct.len(), keys.len(), "one entry per key");
    assert_eq!(all.iter().map(|e| e.sends).sum::<u64>(), 9);
    assert_eq!(rx.len(), 0);
    assert_eq!(rx.try_recv_all().err(), Some(TryRecvError::Empty));
}

pub fn rule5_try_recv_all_error_comes_with_nothing<I: Conflate>() {
    let (token, hub, tx) = token_bus::<I>();
    let mut rx_closed = hub.receiver();
    let mut rx_torn = hub.receiver();
    send_each(&tx, 0..3, &token);
    rx_closed.close();
    assert_eq!(rx_closed.try_recv_all().err(), Some(TryRecvError::Closed));
    hub.close_now();
    assert_eq!(rx_torn.try_recv_all().err(), Some(TryRecvError::Closed));
    assert_eq!(Arc::strong_count(&token), 1);
}

pub fn rule5_try_recv_all_after_graceful_close_returns_all_then_closed<I: Conflate>() {
    let (_hub, tx, mut rx) = bus::<I, u32, u32>();
    for k in [3, 1, 2, 1] {
        tx.send(k, k).unwrap();
    }
    tx.close();
    let all = rx.try_recv_all().unwrap();
    assert_eq!(all.iter().map(|e| e.key).collect::<Vec<_>>(), vec![3, 1, 2]);
    assert_eq!(rx.try_recv_all().err(), Some(TryRecvError::Closed));
    assert_eq!(rx.try_recv_all().err(), Some(TryRecvError::Closed));
}

/// Distinct keys 0, 1, 2, … sent in order: the queue is always one
/// contiguous run, so every cut must continue exactly where the
/// previous one ended — no key skipped and seen later, none twice.
pub fn rule5_race_try_recv_all_cuts_are_contiguous<I: Conflate>() {
    const N: u32 = 20_000;
    let (hub, tx, mut rx) = bus::<I, u32, u32>();
    let crew = Crew::new("rule5_race_cuts");
    // A sender that panics never closes: the loop below would see Empty
    // forever.
    crew.on_panic(|| hub.close_now());
    crew.scope(|s| {
        crew.spawn(s, || {
            for k in 0..N {
                tx.send(k, k).unwrap();
            }
            tx.close();
        });
        let mut next = 0u32;
        loop {
            match rx.try_recv_all() {
                Ok(batch) => {
                    assert!(!batch.is_empty(), "Ok with an empty batch");
                    for (i, e) in batch.iter().enumerate() {
                        assert_eq!(e.key, next + i as u32, "cut is not contiguous");
                        assert_eq!((e.value, e.sends), (e.key, 1));
                    }
                    next += batch.len() as u32;
                }
                Err(TryRecvError::Empty) => thread::yield_now(),
                Err(TryRecvError::Closed) => break,
            }
        }
        assert_eq!(next, N);
    });
}

// rule 6: precedence

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

// rule 7: close kinds

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
