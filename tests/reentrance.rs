//! User code on the send path that calls back into its own hub — a merge, a key
//! filter or a value's `Drop` that makes, drops or closes a receiver, closes the
//! hub or the send side, or sends — panics with a message naming the call, instead
//! of waiting forever for the send it runs inside. Against both implementations.
//!
//! Every case runs the send on a helper thread and waits for its outcome with a
//! deadline, so a regression fails the test instead of hanging it.

use keybus_test_support::conflate_api::*;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// How long a send that should panic at once may take before the test calls it a
/// hang. Generous: this is a deadlock detector, not a timing assertion.
const HANG: Duration = Duration::from_secs(30);

/// Runs `send` on its own thread and returns its panic message, or fails the test
/// if it returned normally or did not finish before [`HANG`].
fn panic_message_of(send: impl FnOnce() + Send + 'static) -> String {
    let (done, outcome) = mpsc::channel();
    thread::spawn(move || {
        let result = catch_unwind(AssertUnwindSafe(send));
        let _ = done.send(result.err().map(|p| {
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        }));
    });
    match outcome.recv_timeout(HANG) {
        Ok(Some(message)) => message,
        Ok(None) => panic!("the re-entrant send returned without panicking"),
        Err(_) => {
            // Not a panic: unwinding would drop this test's hub and receivers,
            // whose drop waits for the hung send too. End the test binary instead,
            // saying why on the real stderr (libtest captures `eprintln!`, and
            // the capture is lost when the process exits).
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr().lock(),
                "FAILED: the re-entrant send hung (no answer in {HANG:?})"
            );
            std::process::exit(101);
        }
    }
}

type Slot<I> = Arc<Mutex<Option<Hub<I, u32, u32>>>>;

/// A hub whose merge runs `call` on (a clone of) the hub itself.
fn hub_calling_back<I: Conflate>(
    call: impl Fn(&Hub<I, u32, u32>) + Send + Sync + 'static,
) -> Hub<I, u32, u32> {
    let slot: Slot<I> = Arc::default();
    let inner = slot.clone();
    let hub = Hub::<I, u32, u32>::with_merge(move |_pending, incoming| {
        if let Some(h) = inner.lock().unwrap().as_ref() {
            call(h);
        }
        Some(incoming)
    });
    *slot.lock().unwrap() = Some(hub.clone());
    hub
}

/// Sends twice to one key (the second send runs the merge) and
/// returns the panic message; then checks the hub is still usable.
fn reentrant_message<I: Conflate>(
    call: impl Fn(&Hub<I, u32, u32>) + Send + Sync + 'static,
) -> String {
    let hub = hub_calling_back::<I>(call);
    let tx = hub.sender();
    let mut rx = hub.receiver();
    tx.send(1, 1).unwrap();
    let tx2 = tx.clone();
    let message = panic_message_of(move || {
        let _ = tx2.send(1, 2);
    });
    // The bus stays usable: a send to another key reaches the receiver.
    tx.send(2, 3).unwrap();
    let keys: Vec<u32> = rx.try_iter().map(|e| e.key).collect();
    assert!(
        keys.contains(&2),
        "later sends still delivered, got {keys:?}"
    );
    message
}

fn making_a_receiver_from_a_merge_panics_with_the_call<I: Conflate>() {
    let msg = reentrant_message::<I>(|h| drop(h.receiver()));
    assert!(msg.contains("Hub::receiver"), "{msg}");
    assert!(msg.contains("inside Sender::send"), "{msg}");
}

fn the_issue_reproduction_panics_instead_of_hanging<I: Conflate>() {
    let msg = reentrant_message::<I>(|h| {
        drop(h.receiver());
        drop(h.receiver());
    });
    assert!(msg.contains("keybus: Hub::receiver"), "{msg}");
}

fn closing_the_hub_from_a_merge_panics_with_the_call<I: Conflate>() {
    let msg = reentrant_message::<I>(|h| h.close_now());
    assert!(msg.contains("Hub::close_now"), "{msg}");
}

fn listing_the_receivers_from_a_merge_panics_with_the_call<I: Conflate>() {
    let msg = reentrant_message::<I>(|h| drop(h.receivers()));
    assert!(msg.contains("Hub::receivers"), "{msg}");
}

fn closing_the_send_side_from_a_merge_panics_with_the_call<I: Conflate>() {
    let msg = reentrant_message::<I>(|h| h.sender().close());
    assert!(msg.contains("Sender::close"), "{msg}");
}

fn sending_from_a_merge_panics_with_the_call<I: Conflate>() {
    let msg = reentrant_message::<I>(|h| {
        let _ = h.sender().send(1, 9);
    });
    assert!(msg.contains("Sender::send"), "{msg}");
}

fn closing_a_receiver_from_a_filter_panics_with_the_call<I: Conflate>() {
    let victim: Arc<Mutex<Option<Receiver<I, u32, u32>>>> = Arc::default();
    let hub = Hub::<I, u32, u32>::new();
    let inner = victim.clone();
    let mut _rx = hub
        .receiver_builder()
        .key_filter(move |_| {
            if let Some(rx) = inner.lock().unwrap().as_ref() {
                rx.close();
            }
            true
        })
        .build();
    *victim.lock().unwrap() = Some(hub.receiver());
    let tx = hub.sender();
    let msg = panic_message_of(move || {
        let _ = tx.send(1, 1);
    });
    assert!(msg.contains("Receiver::close"), "{msg}");
    // The receiver was left as it was, and closes normally outside.
    // (The panic unwound through the test's mutex guard.)
    let rx = victim
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .unwrap();
    rx.close();
    drop(rx);
}

fn dropping_a_receiver_from_a_merge_panics_with_the_call<I: Conflate>() {
    let victim: Arc<Mutex<Option<Receiver<I, u32, u32>>>> = Arc::default();
    let inner = victim.clone();
    let hub = Hub::<I, u32, u32>::with_merge(move |_p: u32, n: u32| {
        drop(inner.lock().unwrap().take());
        Some(n)
    });
    let tx = hub.sender();
    let _rx = hub.receiver();
    *victim.lock().unwrap() = Some(hub.receiver());
    tx.send(1, 1).unwrap();
    let tx2 = tx.clone();
    let msg = panic_message_of(move || {
        let _ = tx2.send(1, 2);
    });
    assert!(msg.contains("dropping a Receiver"), "{msg}");
    tx.send(2, 2).unwrap();
}

fn another_hub_may_be_used_from_a_merge<I: Conflate>() {
    let other = Hub::<I, u32, u32>::new();
    let mut seen = other.receiver();
    let forward = other.sender();
    let hub = Hub::<I, u32, u32>::with_merge(move |_p: u32, n: u32| {
        forward.send(7, n).unwrap();
        drop(forward.clone());
        Some(n)
    });
    let (tx, mut rx) = (hub.sender(), hub.receiver());
    tx.send(1, 1).unwrap();
    tx.send(1, 2).unwrap();
    assert_eq!(rx.try_recv().unwrap().value, 2);
    assert_eq!(seen.try_recv().unwrap().value, 2);
}

keybus_test_support::tests_for! {
    crate for lockfree = Lockfree, baseline = Baseline => {
        making_a_receiver_from_a_merge_panics_with_the_call,
        the_issue_reproduction_panics_instead_of_hanging,
        closing_the_hub_from_a_merge_panics_with_the_call,
        listing_the_receivers_from_a_merge_panics_with_the_call,
        closing_the_send_side_from_a_merge_panics_with_the_call,
        sending_from_a_merge_panics_with_the_call,
        closing_a_receiver_from_a_filter_panics_with_the_call,
        dropping_a_receiver_from_a_merge_panics_with_the_call,
        another_hub_may_be_used_from_a_merge,
    }
}
