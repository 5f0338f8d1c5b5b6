//! Unit tests of the lock-free conflate internals, small enough for miri (which
//! checks the crates underneath too: hashbrown, event-listener).

use super::Hub;
use crate::TryRecvError;
use std::thread;

#[test]
fn coalesce_pop_and_cut_single_thread() {
    let hub: Hub<u32, u32> = Hub::with_merge(|a, b| Some(a + b));
    let tx = hub.sender();
    let mut rx = hub.receiver();
    for k in [1, 2, 1, 3, 2, 1] {
        tx.send(k, 1).unwrap();
    }
    assert_eq!(rx.len(), 3);
    let head = rx.peek().unwrap();
    assert_eq!((head.key, head.value, head.sends), (1, 3, 3));
    let first = rx.try_recv().unwrap();
    assert_eq!(first, head);
    let rest: Vec<_> = rx
        .try_recv_all()
        .unwrap()
        .into_iter()
        .map(|e| e.key)
        .collect();
    assert_eq!(rest, vec![2, 3]);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
}

#[test]
fn annihilation_unlinks_from_shared_and_private_lists() {
    let hub: Hub<u32, i32> = Hub::with_merge(|a, b| Some(a + b).filter(|s| *s != 0));
    let tx = hub.sender();
    let mut rx = hub.receiver();
    tx.send(1, 1).unwrap();
    tx.send(2, 1).unwrap();
    tx.send(3, 1).unwrap();
    // Move the tickets into the private list, then annihilate the middle one.
    assert_eq!(rx.try_recv().unwrap().key, 1);
    tx.send(2, -1).unwrap();
    assert_eq!(rx.len(), 1);
    // Annihilate a key still in the shared list.
    tx.send(4, 1).unwrap();
    tx.send(4, -1).unwrap();
    assert_eq!(rx.len(), 1);
    let keys: Vec<_> = rx.try_iter().map(|e| e.key).collect();
    assert_eq!(keys, vec![3]);
}

#[test]
fn two_threads_conserve_sends() {
    let hub: Hub<u32, u64> = Hub::with_merge(|a, b| Some(a + b));
    let mut rx = hub.receiver();
    let tx = hub.sender();
    drop(hub);
    let sender = thread::spawn(move || {
        for i in 0..200u64 {
            tx.send((i % 5) as u32, 1).unwrap();
        }
    });
    let (mut sum, mut sends) = (0, 0);
    let mut cut = false;
    loop {
        cut = !cut;
        let got = if cut {
            rx.try_recv_all()
        } else {
            rx.try_recv().map(|e| vec![e])
        };
        match got {
            Ok(batch) => {
                for e in batch {
                    sum += e.value;
                    sends += e.sends;
                }
            }
            Err(TryRecvError::Empty) => thread::yield_now(),
            Err(TryRecvError::Closed) => break,
        }
    }
    sender.join().unwrap();
    assert_eq!((sum, sends), (200, 200));
}

#[test]
fn hard_close_during_sends_frees_everything() {
    let token = std::sync::Arc::new(());
    let hub: Hub<u32, std::sync::Arc<()>> = Hub::new();
    let mut rx = hub.receiver();
    let tx = hub.sender();
    let t = token.clone();
    let sender = thread::spawn(move || {
        for k in 0..100 {
            let _ = tx.send(k, t.clone());
        }
    });
    hub.close();
    sender.join().unwrap();
    assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
    drop((rx, hub));
    assert_eq!(std::sync::Arc::strong_count(&token), 1);
}

#[test]
fn large_cut_grouped_by_shard_is_one_instant() {
    // A backlog above GROUPED_CLAIM_MIN, cut while a sender keeps adding keys in
    // order and re-sending old ones (OR-merged bits): every batch must hold a
    // prefix of the sends, in queue order.
    let n: u64 = if cfg!(miri) { 600 } else { 5_000 };
    let hub: Hub<u64, u64> = Hub::with_merge(|a, b| Some(a | b));
    let mut rx = hub.receiver();
    let tx = hub.sender();
    drop(hub);
    for k in 0..n {
        tx.send(k, 1).unwrap();
    }
    let sender = thread::spawn(move || {
        for k in n..2 * n {
            tx.send(k, 1).unwrap();
            tx.send(k - n, 2).unwrap(); // re-send an old key: second bit
        }
    });
    let mut next_new = 0u64;
    let mut seen_second = 0u64;
    loop {
        match rx.try_recv_all() {
            Ok(batch) => {
                for e in batch {
                    if e.value & 1 == 1 {
                        assert_eq!(e.key, next_new, "first touches in order, no hole");
                        next_new += 1;
                    }
                    if e.value & 2 == 2 {
                        seen_second += 1;
                    }
                }
            }
            Err(TryRecvError::Empty) => thread::yield_now(),
            Err(TryRecvError::Closed) => break,
        }
    }
    sender.join().unwrap();
    assert_eq!(next_new, 2 * n);
    assert_eq!(seen_second, n);
}

#[test]
fn send_without_receiver_takes_no_lock_and_a_closed_hub_still_refuses() {
    use super::shared::WRITER_LOCKS;
    let hub: Hub<u32, u32> = Hub::new();
    let tx = hub.sender();
    let before = WRITER_LOCKS.with(|n| n.get());
    for k in 0..1_000 {
        tx.send(k, k).unwrap();
    }
    // No receiver exists, so there is no shard or queue lock to take either: the
    // hub's writer lock is the only lock a send could reach.
    assert_eq!(
        WRITER_LOCKS.with(|n| n.get()),
        before,
        "a send took the hub lock"
    );
    tx.close();
    let closed = WRITER_LOCKS.with(|n| n.get());
    assert_eq!(tx.send(1, 1).unwrap_err().into_inner(), (1, 1));
    assert_eq!(
        WRITER_LOCKS.with(|n| n.get()),
        closed,
        "a refused send took the hub lock"
    );
}

#[test]
fn receiver_churn_during_sends_frees_lists_only_after_their_grace_period() {
    // Registry writers rewrite the receiver list while sends read it and deliver
    // into every listed receiver; under miri a list rewritten, or a dropped
    // receiver's core freed, before the last send that could read it left is a
    // data race or use-after-free report.
    let rounds = if cfg!(miri) { 20 } else { 2_000 };
    let hub: Hub<u32, u32> = Hub::new();
    let mut stays = hub.receiver();
    let tx = hub.sender();
    let churn_hub = hub.clone();
    let churn = thread::spawn(move || {
        for _ in 0..rounds {
            let rx = churn_hub.receiver();
            drop(rx);
        }
    });
    for k in 0..rounds * 2 {
        tx.send(k as u32, 1).unwrap();
    }
    churn.join().unwrap();
    drop((hub, tx));
    let delivered = stays.iter().count();
    assert_eq!(delivered, rounds * 2, "the stable receiver got every send");
}
