//! Rule 4: a receiver starts empty and sees only the sends made after it was
//! created; sending with no live receiver is `Ok`. (Snapshot receivers, born
//! with the table pending, are `state_table.rs`.)

use crate::conflate_api::*;
use crate::conformance::support::*;
use keybus::TryRecvError;
use std::sync::Arc;

pub fn rule4_receiver_starts_empty<I: Conflate>() {
    let hub = Hub::<I, u32, u32>::new();
    let tx = hub.sender();
    tx.send(1, 1).unwrap();
    let mut early = hub.receiver();
    assert_eq!(early.len(), 0);
    assert_eq!(early.try_recv().err(), Some(TryRecvError::Empty));
    tx.send(2, 2).unwrap();
    let mut late = hub.receiver();
    assert_eq!(late.try_recv().err(), Some(TryRecvError::Empty));
    tx.send(2, 3).unwrap();
    tx.send(3, 3).unwrap();
    assert_eq!(drain(&mut early), vec![(2, 3, 2), (3, 3, 1)]);
    // `late` saw only what came after it, not the pending slot's past.
    assert_eq!(drain(&mut late), vec![(2, 3, 1), (3, 3, 1)]);
}

pub fn rule4_send_with_no_live_receiver_is_ok<I: Conflate>() {
    let (token, hub, tx) = token_bus::<I>();
    send_each(&tx, 0..1_000, &token);
    let rx = hub.receiver();
    rx.close();
    let gone = hub.receiver();
    drop(gone);
    send_each(&tx, 0..1_000, &token);
    // Nothing was kept anywhere.
    assert_eq!(Arc::strong_count(&token), 1);
    tx.close();
    let (k, v) = tx.send(5, token.clone()).unwrap_err().into_inner();
    assert_eq!(k, 5);
    assert!(Arc::ptr_eq(&v, &token));
    drop(v);
    assert_eq!(Arc::strong_count(&token), 1);
}
