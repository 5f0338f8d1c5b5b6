//! Loom model of `Receiver::len()` read while keys are annihilated concurrently.
//!
//! `len()` is computed lock-free from the count of live values (pushed, less
//! retired without being taken) and the consumer's own count of values taken.
//! When it was read as two counters, a key pushed and annihilated between the two
//! loads made the difference negative: `len()` wrapped to `usize::MAX` in release
//! and panicked on overflow in debug; read in the other order it could report two
//! keys where one can be pending. The model explores one poll against a push and
//! an annihilation.
#![cfg(loom)]

use keybus::conflate::Hub;
use loom::thread;

#[test]
fn len_never_tears_while_keys_annihilate() {
    loom::model(|| {
        // Every second send of a key annihilates it.
        let hub = Hub::<u32, u64>::with_merge(|_pending, _incoming| None);
        let tx = hub.sender();
        let rx = hub.receiver();
        let sender = thread::spawn(move || {
            tx.send(0, 0).unwrap(); // pending: 1
            tx.send(0, 0).unwrap(); // annihilated: 0
        });
        // Lets the sender run first too; loom then also explores its steps
        // between the two counter loads below.
        thread::yield_now();
        let polled = rx.len();
        assert!(polled <= 1, "len() = {polled} with at most one key pending");
        sender.join().unwrap();
        assert_eq!(rx.len(), 0);
        assert!(rx.is_empty());
    });
}
