//! [`ConflateImpl`]: the adapter the lockstep runner drives, and its three
//! implementations (lock-free, baseline, reference model).

use super::*;

/// An adapter over one implementation of the `keybus::conflate` API.
pub trait ConflateImpl {
    const NAME: &'static str;
    type Hub;
    type Sender;
    type Receiver;

    fn hub(merge: Option<MergeFn>, retain: bool) -> Self::Hub;
    fn latest(hub: &Self::Hub, key: K) -> Option<N>;
    fn table(hub: &Self::Hub) -> Vec<(K, N)>;
    fn hub_stats(hub: &Self::Hub) -> HubSt;
    fn stats(rx: &Self::Receiver) -> St;
    fn clone_hub(hub: &Self::Hub) -> Self::Hub;
    fn sender(hub: &Self::Hub) -> Self::Sender;
    fn clone_sender(tx: &Self::Sender) -> Self::Sender;
    /// `retain`: the hub keeps a table, so `spec.snapshot` applies.
    fn receiver(hub: &Self::Hub, spec: &RxSpec, retain: bool) -> Self::Receiver;
    fn hub_close(hub: &Self::Hub);
    fn hub_is_closed(hub: &Self::Hub) -> bool;

    fn send(tx: &Self::Sender, key: K, value: V) -> Result<(), (K, N)>;
    fn sender_close(tx: &Self::Sender);
    fn sender_is_closed(tx: &Self::Sender) -> bool;

    fn try_recv(rx: &mut Self::Receiver) -> Result<Ev, TryRecvError>;
    fn try_recv_all(rx: &mut Self::Receiver) -> Result<Vec<Ev>, TryRecvError>;
    fn peek(rx: &mut Self::Receiver) -> Result<Ev, TryRecvError>;
    fn recv_timeout(rx: &mut Self::Receiver, timeout: Duration) -> Result<Ev, RecvTimeoutError>;
    fn try_iter(rx: &mut Self::Receiver) -> Vec<Ev>;
    /// `recv_async()` polled once, then dropped.
    fn recv_async_once(rx: &mut Self::Receiver) -> Option<Result<Ev, RecvError>>;
    /// `Stream::poll_next` once.
    fn poll_next_once(rx: &mut Self::Receiver) -> Option<Option<Ev>>;
    fn recv(rx: &mut Self::Receiver) -> Result<Ev, RecvError>;
    fn recv_deadline(rx: &mut Self::Receiver, deadline: Instant) -> Result<Ev, RecvTimeoutError>;
    fn iter_next(rx: &mut Self::Receiver) -> Option<Ev>;
    fn close(rx: &Self::Receiver);
    fn is_closed(rx: &Self::Receiver) -> bool;
    fn len(rx: &Self::Receiver) -> usize;
    fn is_empty(rx: &Self::Receiver) -> bool;
}

/// Implements [`ConflateImpl`] as `$name` for the module at path `$m`, which must
/// expose the `keybus::conflate` API. The expansion names this module's items, so
/// invoke it here (see the list at the end of the file).
macro_rules! conflate_impl {
    ($name:ident => $($m:ident)::+) => {
        #[doc = concat!("`", stringify!($($m)::+), "` behind the `ConflateImpl` adapter.")]
        pub struct $name;

        impl ConflateImpl for $name {
            const NAME: &'static str = concat!($(stringify!($m), "::",)+ "*");
            type Hub = $($m)::+::Hub<K, V>;
            type Sender = $($m)::+::Sender<K, V>;
            type Receiver = $($m)::+::Receiver<K, V>;

            fn hub(merge: Option<MergeFn>, retain: bool) -> Self::Hub {
                match (merge, retain) {
                    (None, false) => $($m)::+::Hub::new(),
                    (Some(m), false) => $($m)::+::Hub::with_merge(m.closure()),
                    (None, true) => $($m)::+::Hub::builder().retain_latest().build(),
                    (Some(m), true) => $($m)::+::Hub::builder()
                        .merge(m.closure())
                        .retain_latest()
                        .build(),
                }
            }
            fn latest(hub: &Self::Hub, key: K) -> Option<N> {
                hub.latest(&key).map(|v| v.n)
            }
            fn table(hub: &Self::Hub) -> Vec<(K, N)> {
                hub.snapshot().into_iter().map(|(k, v)| (k, v.n)).collect()
            }
            fn hub_stats(hub: &Self::Hub) -> HubSt {
                let s = hub.stats();
                [s.sent, s.refused, s.receivers]
            }
            fn stats(rx: &Self::Receiver) -> St {
                let s = rx.stats();
                [
                    s.received,
                    s.filtered,
                    s.delivered,
                    s.folded,
                    s.annihilated,
                    s.overflowed,
                    s.dropped,
                    s.pending,
                    s.pending_sends,
                ]
            }
            fn clone_hub(hub: &Self::Hub) -> Self::Hub {
                hub.clone()
            }
            fn sender(hub: &Self::Hub) -> Self::Sender {
                hub.sender()
            }
            fn clone_sender(tx: &Self::Sender) -> Self::Sender {
                tx.clone()
            }
            fn receiver(hub: &Self::Hub, spec: &RxSpec, retain: bool) -> Self::Receiver {
                let snapshot = spec.snapshot && retain;
                if spec.keys.is_empty()
                    && spec.merge.is_none()
                    && !snapshot
                    && spec.max_pending.is_none()
                {
                    return hub.receiver();
                }
                let mut builder = hub.receiver_builder();
                for step in &spec.keys {
                    builder = match *step {
                        KeyStep::Key(k) => builder.key(k),
                        KeyStep::Filter(p) => builder.key_filter(p.closure()),
                    };
                }
                if let Some(m) = spec.merge {
                    builder = builder.merge(m.closure());
                }
                if let Some(n) = spec.max_pending {
                    builder = builder.max_pending(usize::from(n));
                }
                if snapshot {
                    builder = builder.snapshot();
                }
                builder.build()
            }
            fn hub_close(hub: &Self::Hub) {
                hub.close()
            }
            fn hub_is_closed(hub: &Self::Hub) -> bool {
                hub.is_closed()
            }
            fn send(tx: &Self::Sender, key: K, value: V) -> Result<(), (K, N)> {
                tx.send(key, value).map_err(|e| (e.key, e.value.n))
            }
            fn sender_close(tx: &Self::Sender) {
                tx.close()
            }
            fn sender_is_closed(tx: &Self::Sender) -> bool {
                tx.is_closed()
            }
            fn try_recv(rx: &mut Self::Receiver) -> Result<Ev, TryRecvError> {
                rx.try_recv()
                    .map(|e| Ev { key: e.key, value: e.value.n, sends: e.sends })
            }
            fn try_recv_all(rx: &mut Self::Receiver) -> Result<Vec<Ev>, TryRecvError> {
                rx.try_recv_all().map(|all| {
                    all.into_iter()
                        .map(|e| Ev { key: e.key, value: e.value.n, sends: e.sends })
                        .collect()
                })
            }
            fn peek(rx: &mut Self::Receiver) -> Result<Ev, TryRecvError> {
                rx.peek()
                    .map(|e| Ev { key: e.key, value: e.value.n, sends: e.sends })
            }
            fn recv_timeout(
                rx: &mut Self::Receiver,
                timeout: Duration,
            ) -> Result<Ev, RecvTimeoutError> {
                rx.recv_timeout(timeout)
                    .map(|e| Ev { key: e.key, value: e.value.n, sends: e.sends })
            }
            fn try_iter(rx: &mut Self::Receiver) -> Vec<Ev> {
                rx.try_iter()
                    .map(|e| Ev { key: e.key, value: e.value.n, sends: e.sends })
                    .collect()
            }
            fn poll_next_once(rx: &mut Self::Receiver) -> Option<Option<Ev>> {
                use futures_core::Stream;
                let next = std::future::poll_fn(|cx| std::pin::Pin::new(&mut *rx).poll_next(cx));
                harness::poll_once(next)
                    .map(|r| r.map(|e| Ev { key: e.key, value: e.value.n, sends: e.sends }))
            }
            fn recv(rx: &mut Self::Receiver) -> Result<Ev, RecvError> {
                rx.recv()
                    .map(|e| Ev { key: e.key, value: e.value.n, sends: e.sends })
            }
            fn recv_deadline(
                rx: &mut Self::Receiver,
                deadline: Instant,
            ) -> Result<Ev, RecvTimeoutError> {
                rx.recv_deadline(deadline)
                    .map(|e| Ev { key: e.key, value: e.value.n, sends: e.sends })
            }
            fn iter_next(rx: &mut Self::Receiver) -> Option<Ev> {
                rx.iter()
                    .next()
                    .map(|e| Ev { key: e.key, value: e.value.n, sends: e.sends })
            }
            fn recv_async_once(rx: &mut Self::Receiver) -> Option<Result<Ev, RecvError>> {
                harness::poll_once(rx.recv_async())
                    .map(|r| r.map(|e| Ev { key: e.key, value: e.value.n, sends: e.sends }))
            }
            fn close(rx: &Self::Receiver) {
                rx.close()
            }
            fn is_closed(rx: &Self::Receiver) -> bool {
                rx.is_closed()
            }
            fn len(rx: &Self::Receiver) -> usize {
                rx.len()
            }
            fn is_empty(rx: &Self::Receiver) -> bool {
                rx.is_empty()
            }
        }
    };
}

// The implementations under comparison, one line each.
conflate_impl!(Lockfree => keybus::conflate);
conflate_impl!(Baseline => keybus::baseline::conflate);
conflate_impl!(Model => model);
