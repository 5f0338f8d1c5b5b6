//! Rule 5: `try_recv_all` is one cut, every key pending as of one instant, in
//! queue order, and its error comes with nothing.

use crate::conflate_api::*;
use crate::conformance::support::*;
use crate::threads::Crew;
use keybus::TryRecvError;
use std::collections::HashSet;
use std::sync::Arc;
use std::thread;

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
