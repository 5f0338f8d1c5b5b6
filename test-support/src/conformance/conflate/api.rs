//! The API's shape: the handles are `Send`, `Sync`, `Clone` and `Debug` (without
//! `K: Debug`), the receiver is `Unpin`, its receive future `Send`.

use crate::conflate_api::*;

pub fn api_handles_are_send_sync_clone_debug<I: Conflate>() {
    fn send_sync<T: Send + Sync>() {}
    fn clone_debug<T: Clone + std::fmt::Debug>() {}
    send_sync::<Hub<I, String, Vec<u8>>>();
    send_sync::<Sender<I, String, Vec<u8>>>();
    send_sync::<Receiver<I, String, Vec<u8>>>();
    clone_debug::<Hub<I, String, Vec<u8>>>();
    clone_debug::<Sender<I, String, Vec<u8>>>();

    // Debug needs no K: Debug / V: Debug.
    struct Opaque;
    impl Clone for Opaque {
        fn clone(&self) -> Self {
            Opaque
        }
    }
    let hub = Hub::<I, u8, Opaque>::default();
    let mut rx = hub.receiver();
    let text = format!(
        "{:?} {:?} {:?} {:?}",
        hub,
        hub.sender(),
        hub.receiver_builder().key(1),
        rx
    );
    assert!(!text.is_empty());
    assert_eq!(rx.try_iter().count(), 0);
}

/// `Receiver: Unpin`, so `rx.next().await` (`StreamExt::next`) works
/// without pinning, as with every common channel receiver.
pub fn api_receiver_is_unpin<I: Conflate>() {
    fn unpin<T: Unpin>() {}
    unpin::<Receiver<I, String, Vec<u8>>>();
}

pub fn api_recv_async_future_is_send<I: Conflate>() {
    fn send<T: Send>(_: &T) {}
    let hub = Hub::<I, String, Vec<u8>>::new();
    let mut rx = hub.receiver();
    let fut = rx.recv_async();
    send(&fut);
}
