//! Wake-ups: blocking and async receives parked on another thread, woken by a
//! send or by every kind of close.

use crate::conflate_api::*;
use crate::conformance::support::*;
use crate::threads::Crew;
use keybus::{Event, RecvError, RecvTimeoutError};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

// These catch a wake-up that is never sent (and fail, through the watchdog,
// instead of hanging). A wake-up lost in a window a few instructions wide (a
// receiver that registers its listener after its last look) mostly survives
// real threads; loom `park_vs_wake_send` and shuttle
// `recv_woken_by_data_without_close` carry that guarantee
// (docs/verification.md, "Mutation audit").

/// The receive a `wake_*_woken_by_send` test parks in.
type Take<I> = fn(&mut Receiver<I, u32, u32>) -> Result<Event<u32, u32>, RecvError>;

/// `rounds` rounds of one send to a receiver on another thread, which takes it
/// with `take`, parked on an empty queue unless the send already landed; the
/// sender waits until the receiver is about to take, then `pause(round)`s
/// before it sends. After the last round the send side closes and `take`
/// answers `RecvError`. Under the stall watchdog, named `what`.
fn woken_by_send_rounds<I: Conflate>(
    what: &'static str,
    rounds: u32,
    take: Take<I>,
    pause: fn(u32),
) {
    with_stall_watchdog(what, move |beat| {
        let (hub, tx, mut rx) = bus::<I, u32, u32>();
        let (ready_tx, ready_rx) = mpsc::channel::<()>();
        let crew = Crew::new(what);
        crew.on_panic(|| hub.close_now());
        crew.scope(|s| {
            crew.spawn(s, move || {
                for round in 0..rounds {
                    ready_tx.send(()).unwrap();
                    let e = take(&mut rx).unwrap();
                    assert_eq!((e.key, e.sends), (round, 1));
                }
                assert_eq!(take(&mut rx).err(), Some(RecvError));
            });
            for round in 0..rounds {
                ready_rx.recv().unwrap();
                beat(round);
                pause(round);
                tx.send(round, round).unwrap();
            }
            tx.close();
        });
    });
}

pub fn wake_blocking_recv_woken_by_send_from_another_thread<I: Conflate>() {
    woken_by_send_rounds::<I>(
        "wake_blocking_recv_woken_by_send_from_another_thread",
        2_000,
        |rx| rx.recv(),
        |round| {
            if round % 16 == 0 {
                // Long enough for the receiver's backoff (a few microseconds)
                // to run out, so it parks and only the send's wake-up can end
                // its wait. Not synchronization: any delay is correct.
                thread::sleep(Duration::from_millis(1));
            } else {
                jitter(500);
            }
        },
    );
}

pub fn wake_recv_async_on_block_on_woken_by_send_from_another_thread<I: Conflate>() {
    woken_by_send_rounds::<I>(
        "wake_recv_async_on_block_on_woken_by_send_from_another_thread",
        1_000,
        |rx| futures::executor::block_on(rx.recv_async()),
        |_| jitter(500),
    );
}

pub fn wake_parked_receivers_woken_by_every_close_kind<I: Conflate>() {
    with_stall_watchdog(
        "wake_parked_receivers_woken_by_every_close_kind",
        move |beat| {
            for round in 0..300u32 {
                beat(round);
                let hub = Hub::<I, u32, u32>::new();
                let tx = hub.sender();
                let mut blocking = hub.receiver();
                let mut asynchronous = hub.receiver();
                let mut timed = hub.receiver();
                // A panic in the test's thread before the close: the
                // receivers would wait for it forever.
                let crew = Crew::new("wake_parked_receivers_woken_by_every_close_kind");
                crew.on_panic(|| hub.close_now());
                crew.scope(|s| {
                    let a = crew.spawn(s, move || blocking.recv());
                    let b = crew.spawn(s, move || {
                        futures::executor::block_on(asynchronous.recv_async())
                    });
                    let c = crew.spawn(s, move || timed.recv_timeout(Duration::MAX));
                    jitter(2_000);
                    if round % 2 == 0 {
                        tx.close();
                    } else {
                        hub.close_now();
                    }
                    assert_eq!(a.join().unwrap().err(), Some(RecvError));
                    assert_eq!(b.join().unwrap().err(), Some(RecvError));
                    assert_eq!(c.join().unwrap().err(), Some(RecvTimeoutError::Closed));
                });
            }
        },
    );
}
