//! `Receiver::len()` polled while a sender pushes and annihilates one key over and
//! over, against both implementations: it never reports more than the one key that
//! can be pending, and never wraps. (The loom model
//! `conflate::len_stays_within_the_pending_keys` explores every interleaving of a
//! poll with pushes and annihilations; this test runs the same on real threads,
//! with the other core kept busy so the poller gets preempted.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

const POLLS: usize = 200_000;

macro_rules! len_tear {
    ($name:ident, $($m:ident)::+) => {
        #[test]
        fn $name() {
            let hub = $($m)::+::Hub::<u32, u64>::with_merge(|_pending, _incoming| None);
            let (tx, rx) = (hub.sender(), hub.receiver());
            let stop = Arc::new(AtomicBool::new(false));
            let sender = {
                let stop = stop.clone();
                thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        tx.send(0, 0).unwrap();
                        tx.send(0, 0).unwrap();
                    }
                })
            };
            let burner = {
                let stop = stop.clone();
                thread::spawn(move || while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                })
            };
            let worst = (0..POLLS).map(|_| rx.len()).max().unwrap();
            stop.store(true, Ordering::Relaxed);
            sender.join().unwrap();
            burner.join().unwrap();
            assert!(worst <= 1, "len() reported {worst} with at most one key pending");
            assert!(rx.len() <= 1 && rx.is_empty() == (rx.len() == 0));
        }
    };
}

len_tear!(lockfree, keybus::conflate);
len_tear!(baseline, keybus::baseline::conflate);
