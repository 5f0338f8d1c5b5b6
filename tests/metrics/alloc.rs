//! Updates that allocate nothing: one that coalesces into a pending slot, and
//! one with no receiver.

use super::*;

/// An update that coalesces into a pending slot allocates nothing, through the
/// macros (a handle looked up per call) and through a kept handle, for every kind,
/// with static and with owned (dynamic) labels.
#[test]
fn a_coalescing_update_allocates_nothing() {
    let recorder = KeybusRecorder::new();
    let rxs: Vec<_> = (0..2).map(|_| recorder.receiver()).collect();
    let host = String::from("host-1");
    with_local_recorder(&recorder, || {
        let owned = counter!("owned.labels", "host" => host.clone());
        let run = || {
            counter!("c").increment(1);
            counter!("c", "route" => "/").increment(1);
            gauge!("g").increment(1.0);
            gauge!("g").set(2.0);
            histogram!("h").record(3.0);
            // Varied samples: once the pending sketch has their bins, folding
            // more of them allocates nothing either.
            for v in [0.5, 2.0, 40.0, 900.0] {
                histogram!("h.varied").record(v);
            }
            owned.increment(1);
        };
        // Warm up: registration, first sends, every table at its size.
        for _ in 0..4 {
            run();
        }
        let n = counting::allocations_in(|| {
            for _ in 0..1_000 {
                run();
            }
        });
        assert_eq!(n, 0, "coalescing updates allocated {n} times");
    });
    assert!(rxs.iter().all(|rx| rx.len() == 6));
}

/// With no receiver an update is one atomic load, and allocates nothing either.
#[test]
fn an_update_with_no_receiver_allocates_nothing() {
    let recorder = KeybusRecorder::new();
    with_local_recorder(&recorder, || {
        counter!("c").increment(1);
        let n = counting::allocations_in(|| {
            for _ in 0..1_000 {
                counter!("c").increment(1);
            }
        });
        assert_eq!(n, 0);
    });
}
