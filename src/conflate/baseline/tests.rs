//! White-box checks that need the crate's internals.

use super::*;
use crate::sync::Ordering;

fn locks(hub: &Hub<u32, u32>) -> u64 {
    hub.side_shared().locks.load(Ordering::Relaxed)
}

#[test]
fn send_without_receiver_never_takes_the_hub_mutex() {
    let hub: Hub<u32, u32> = Hub::new();
    let tx = hub.sender();
    assert_eq!(locks(&hub), 0);
    for i in 0..10_000 {
        assert!(tx.send(i, i).is_ok());
    }
    assert_eq!(locks(&hub), 0, "a send with no receiver locked the hub");

    // After a receiver came and went, the count is back to zero: still no lock.
    let rx = hub.receiver();
    tx.send(1, 1).unwrap();
    drop(rx);
    let before = locks(&hub);
    for i in 0..10_000 {
        assert!(tx.send(i, i).is_ok());
    }
    assert_eq!(
        locks(&hub),
        before,
        "a send with no receiver locked the hub"
    );

    // A closed send side answers Err on the same lock-free path.
    tx.close();
    let before = locks(&hub);
    for i in 0..1_000 {
        assert_eq!(tx.send(i, i).unwrap_err().into_inner(), (i, i));
    }
    assert!(tx.is_closed());
    assert_eq!(locks(&hub), before, "a send on a closed hub locked it");
}

#[test]
fn send_after_hard_close_never_takes_the_hub_mutex() {
    let hub: Hub<u32, u32> = Hub::new();
    let tx = hub.sender();
    let _rx = hub.receiver();
    hub.close_now();
    let before = locks(&hub);
    for i in 0..1_000 {
        assert!(tx.send(i, i).is_err());
    }
    assert_eq!(locks(&hub), before, "a send on a closed hub locked it");
}
