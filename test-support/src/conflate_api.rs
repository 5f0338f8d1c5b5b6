//! The public `conflate` API as traits, so that a test is written once as a
//! generic function and run against every implementation.
//!
//! [`Conflate`] names one implementation (a module that exposes the
//! `keybus::conflate` API); its handles implement [`HubApi`], [`HubBuilderApi`],
//! [`SenderApi`], [`ReceiverApi`] and [`ReceiverBuilderApi`], whose methods carry
//! the real API's names and signatures and forward to it. With the traits in
//! scope (`use keybus_test_support::conflate_api::*`), a test body reads like
//! user code:
//!
//! ```
//! use keybus_test_support::conflate_api::*;
//!
//! fn coalesces<I: Conflate>() {
//!     let hub: Hub<I, &str, u32> = Hub::<I, _, _>::new();
//!     let tx = hub.sender();
//!     let mut rx = hub.receiver();
//!     tx.send("a", 1).unwrap();
//!     tx.send("a", 2).unwrap();
//!     let e = rx.try_recv().unwrap();
//!     assert_eq!((e.key, e.value, e.sends), ("a", 2, 2));
//! }
//! coalesces::<Lockfree>();
//! coalesces::<Baseline>();
//! ```
//!
//! The error types, [`Event`](keybus::Event) and the stats are shared by both
//! implementations at the crate root, so they need no abstraction.
//!
//! The bounds on the handle traits (`Send`, `Sync`, `Clone`, `Debug` without
//! `K: Debug`, `Unpin`, `UnwindSafe` and `RefUnwindSafe`, a `Send` receive
//! future) are part of the API: an
//! implementation that lost one would no longer implement these traits, and every
//! suite written against them would stop compiling.

use futures_core::Stream;
use keybus::{
    Event, HubStats, ReceiverInfo, ReceiverStats, RecvError, RecvTimeoutError, SendError,
    TryRecvError,
};
use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::time::{Duration, Instant};

/// What a conflate key must be (the bound on `Hub<K, V>`'s methods).
pub trait Key: Hash + Eq + Clone + Send + Sync + 'static {}
impl<T: Hash + Eq + Clone + Send + Sync + 'static> Key for T {}

/// What a conflate value must be (the bound on `Hub<K, V>`'s methods).
pub trait Value: Clone + Send + 'static {}
impl<T: Clone + Send + 'static> Value for T {}

/// One implementation of the conflate API: [`Lockfree`] (`keybus::conflate`) or
/// [`Baseline`] (`keybus::baseline::conflate`).
pub trait Conflate: Sized + Send + Sync + 'static {
    /// The module path, for messages.
    const NAME: &'static str;
    /// The implementation's `Hub<K, V>`; every other handle type is reached
    /// from it (see the aliases [`Sender`], [`Receiver`], ...).
    type Hub<K: Key, V: Value>: HubApi<K, V>;
}

/// `I`'s `Hub<K, V>`.
pub type Hub<I, K, V> = <I as Conflate>::Hub<K, V>;
/// `I`'s `HubBuilder<K, V>`.
pub type HubBuilder<I, K, V> = <Hub<I, K, V> as HubApi<K, V>>::Builder;
/// `I`'s `Sender<K, V>`.
pub type Sender<I, K, V> = <Hub<I, K, V> as HubApi<K, V>>::Sender;
/// `I`'s `Receiver<K, V>`.
pub type Receiver<I, K, V> = <Hub<I, K, V> as HubApi<K, V>>::Receiver;
/// `I`'s `ReceiverBuilder<K, V>`.
pub type ReceiverBuilder<I, K, V> = <Hub<I, K, V> as HubApi<K, V>>::ReceiverBuilder;
/// `I`'s `ReceiverWatch<K, V>`.
pub type ReceiverWatch<I, K, V> = <Receiver<I, K, V> as ReceiverApi<K, V>>::Watch;

/// `Hub<K, V>`: construction, state table, handles, hard close.
pub trait HubApi<K: Key, V: Value>:
    Clone + Default + Debug + Send + Sync + UnwindSafe + RefUnwindSafe + Sized + 'static
{
    /// `HubBuilder<K, V>`.
    type Builder: HubBuilderApi<K, V, Hub = Self>;
    /// `Sender<K, V>`.
    type Sender: SenderApi<K, V>;
    /// `Receiver<K, V>`.
    type Receiver: ReceiverApi<K, V>;
    /// `ReceiverBuilder<K, V>`.
    type ReceiverBuilder: ReceiverBuilderApi<K, V, Receiver = Self::Receiver>;

    /// `Hub::new`.
    fn new() -> Self;
    /// `Hub::with_merge`.
    fn with_merge<F>(merge: F) -> Self
    where
        F: Fn(V, V) -> Option<V> + Send + Sync + 'static;
    /// `Hub::builder`.
    fn builder() -> Self::Builder;
    /// `Hub::latest`.
    fn latest(&self, key: &K) -> Option<V>;
    /// `Hub::snapshot`.
    fn snapshot(&self) -> Vec<(K, V)>;
    /// `Hub::stats`.
    fn stats(&self) -> HubStats;
    /// `Hub::sender`.
    fn sender(&self) -> Self::Sender;
    /// `Hub::receiver`.
    fn receiver(&self) -> Self::Receiver;
    /// `Hub::receiver_builder`.
    fn receiver_builder(&self) -> Self::ReceiverBuilder;
    /// `Hub::close`, the deprecated name of [`HubApi::close_now`].
    #[deprecated(note = "`Hub::close` is deprecated: call `close_now` or `close_graceful`")]
    fn close(&self);
    /// `Hub::close_now`.
    fn close_now(&self);
    /// `Hub::close_graceful`.
    fn close_graceful(&self);
    /// `Hub::receivers`.
    fn receivers(&self) -> Vec<ReceiverInfo>;
    /// `Hub::is_closed`.
    fn is_closed(&self) -> bool;
}

/// `HubBuilder<K, V>`.
pub trait HubBuilderApi<K: Key, V: Value>: Debug + UnwindSafe + RefUnwindSafe + Sized {
    /// The hub it builds.
    type Hub: HubApi<K, V>;
    /// `HubBuilder::merge`.
    fn merge<F>(self, merge: F) -> Self
    where
        F: Fn(V, V) -> Option<V> + Send + Sync + 'static;
    /// `HubBuilder::retain_latest`.
    fn retain_latest(self) -> Self;
    /// `HubBuilder::tombstones`.
    fn tombstones<F>(self, is_tombstone: F) -> Self
    where
        F: Fn(&V) -> bool + Send + Sync + 'static;
    /// `HubBuilder::build`.
    fn build(self) -> Self::Hub;
}

/// `Sender<K, V>`.
pub trait SenderApi<K: Key, V: Value>:
    Clone + Debug + Send + Sync + UnwindSafe + RefUnwindSafe + 'static
{
    /// `Sender::send`.
    fn send(&self, key: K, value: V) -> Result<(), SendError<K, V>>;
    /// `Sender::close`.
    fn close(&self);
    /// `Sender::is_closed`.
    fn is_closed(&self) -> bool;
}

/// `ReceiverBuilder<K, V>`.
pub trait ReceiverBuilderApi<K: Key, V: Value>: Debug + UnwindSafe + RefUnwindSafe + Sized {
    /// The receiver it builds.
    type Receiver: ReceiverApi<K, V>;
    /// `ReceiverBuilder::key`.
    fn key(self, key: K) -> Self;
    /// `ReceiverBuilder::key_filter`.
    fn key_filter<F>(self, keep: F) -> Self
    where
        F: Fn(&K) -> bool + Send + Sync + 'static;
    /// `ReceiverBuilder::merge`.
    fn merge<F>(self, merge: F) -> Self
    where
        F: Fn(V, V) -> Option<V> + Send + Sync + 'static;
    /// `ReceiverBuilder::snapshot`.
    fn snapshot(self) -> Self;
    /// `ReceiverBuilder::max_pending`.
    fn max_pending(self, n: usize) -> Self;
    /// `ReceiverBuilder::name`.
    fn name(self, name: impl Into<std::sync::Arc<str>>) -> Self;
    /// `ReceiverBuilder::build`.
    fn build(self) -> Self::Receiver;
}

/// `Receiver<K, V>`, a `Stream` of events as the real one is.
pub trait ReceiverApi<K: Key, V: Value>:
    Stream<Item = Event<K, V>>
    + Debug
    + Send
    + Sync
    + Unpin
    + UnwindSafe
    + RefUnwindSafe
    + Sized
    + 'static
{
    /// `ReceiverWatch<K, V>`.
    type Watch: ReceiverWatchApi;
    /// `Receiver::recv`.
    fn recv(&mut self) -> Result<Event<K, V>, RecvError>;
    /// `Receiver::recv_timeout`.
    fn recv_timeout(&mut self, timeout: Duration) -> Result<Event<K, V>, RecvTimeoutError>;
    /// `Receiver::recv_deadline`.
    fn recv_deadline(&mut self, deadline: Instant) -> Result<Event<K, V>, RecvTimeoutError>;
    /// `Receiver::try_recv`.
    fn try_recv(&mut self) -> Result<Event<K, V>, TryRecvError>;
    /// `Receiver::try_recv_all`.
    fn try_recv_all(&mut self) -> Result<Vec<Event<K, V>>, TryRecvError>;
    /// `Receiver::try_recv_all_into`.
    fn try_recv_all_into(&mut self, out: &mut Vec<Event<K, V>>) -> Result<usize, TryRecvError>;
    /// `Receiver::peek`.
    fn peek(&mut self) -> Result<Event<K, V>, TryRecvError>;
    /// `Receiver::recv_async`.
    fn recv_async(&mut self) -> impl Future<Output = Result<Event<K, V>, RecvError>> + Send + '_;
    /// `Receiver::iter`.
    fn iter(&mut self) -> impl Iterator<Item = Event<K, V>> + Debug + '_;
    /// `Receiver::try_iter`.
    fn try_iter(&mut self) -> impl Iterator<Item = Event<K, V>> + Debug + '_;
    /// `Receiver::close`.
    fn close(&self);
    /// `Receiver::is_closed`.
    fn is_closed(&self) -> bool;
    /// `Receiver::len`.
    fn len(&self) -> usize;
    /// `Receiver::is_empty`.
    fn is_empty(&self) -> bool;
    /// `Receiver::stats`.
    fn stats(&self) -> ReceiverStats;
    /// `Receiver::watch`.
    fn watch(&self) -> Self::Watch;
}

/// `ReceiverWatch<K, V>`.
pub trait ReceiverWatchApi: Clone + Debug + Send + Sync + 'static {
    /// `ReceiverWatch::stats`.
    fn stats(&self) -> ReceiverStats;
    /// `ReceiverWatch::name`.
    fn name(&self) -> Option<&str>;
    /// `ReceiverWatch::id`.
    fn id(&self) -> u64;
    /// `ReceiverWatch::is_closed`.
    fn is_closed(&self) -> bool;
}

/// Implements the traits above for the module at path `$m`, which must expose
/// the `keybus::conflate` API, and names that implementation `$name`. Each
/// method forwards to the inherent method of the same name (inherent methods
/// win method resolution, so none of these calls itself).
macro_rules! conflate_api_impl {
    ($name:ident => $($m:ident)::+) => {
        #[doc = concat!("`", stringify!($($m)::+), "`, behind the [`Conflate`] traits.")]
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct $name;

        impl Conflate for $name {
            const NAME: &'static str = stringify!($($m)::+);
            type Hub<K: Key, V: Value> = $($m)::+::Hub<K, V>;
        }

        impl<K: Key, V: Value> HubApi<K, V> for $($m)::+::Hub<K, V> {
            type Builder = $($m)::+::HubBuilder<K, V>;
            type Sender = $($m)::+::Sender<K, V>;
            type Receiver = $($m)::+::Receiver<K, V>;
            type ReceiverBuilder = $($m)::+::ReceiverBuilder<K, V>;

            fn new() -> Self { Self::new() }
            fn with_merge<F>(merge: F) -> Self
            where
                F: Fn(V, V) -> Option<V> + Send + Sync + 'static,
            {
                Self::with_merge(merge)
            }
            fn builder() -> Self::Builder { Self::builder() }
            fn latest(&self, key: &K) -> Option<V> { self.latest(key) }
            fn snapshot(&self) -> Vec<(K, V)> { self.snapshot() }
            fn stats(&self) -> HubStats { self.stats() }
            fn sender(&self) -> Self::Sender { self.sender() }
            fn receiver(&self) -> Self::Receiver { self.receiver() }
            fn receiver_builder(&self) -> Self::ReceiverBuilder { self.receiver_builder() }
            #[allow(deprecated)]
            fn close(&self) { self.close() }
            fn close_now(&self) { self.close_now() }
            fn close_graceful(&self) { self.close_graceful() }
            fn receivers(&self) -> Vec<ReceiverInfo> { self.receivers() }
            fn is_closed(&self) -> bool { self.is_closed() }
        }

        impl<K: Key, V: Value> HubBuilderApi<K, V> for $($m)::+::HubBuilder<K, V> {
            type Hub = $($m)::+::Hub<K, V>;

            fn merge<F>(self, merge: F) -> Self
            where
                F: Fn(V, V) -> Option<V> + Send + Sync + 'static,
            {
                self.merge(merge)
            }
            fn retain_latest(self) -> Self { self.retain_latest() }
            fn tombstones<F>(self, is_tombstone: F) -> Self
            where
                F: Fn(&V) -> bool + Send + Sync + 'static,
            {
                self.tombstones(is_tombstone)
            }
            fn build(self) -> Self::Hub { self.build() }
        }

        impl<K: Key, V: Value> SenderApi<K, V> for $($m)::+::Sender<K, V> {
            fn send(&self, key: K, value: V) -> Result<(), SendError<K, V>> { self.send(key, value) }
            fn close(&self) { self.close() }
            fn is_closed(&self) -> bool { self.is_closed() }
        }

        impl<K: Key, V: Value> ReceiverBuilderApi<K, V> for $($m)::+::ReceiverBuilder<K, V> {
            type Receiver = $($m)::+::Receiver<K, V>;

            fn key(self, key: K) -> Self { self.key(key) }
            fn key_filter<F>(self, keep: F) -> Self
            where
                F: Fn(&K) -> bool + Send + Sync + 'static,
            {
                self.key_filter(keep)
            }
            fn merge<F>(self, merge: F) -> Self
            where
                F: Fn(V, V) -> Option<V> + Send + Sync + 'static,
            {
                self.merge(merge)
            }
            fn snapshot(self) -> Self { self.snapshot() }
            fn max_pending(self, n: usize) -> Self { self.max_pending(n) }
            fn name(self, name: impl Into<std::sync::Arc<str>>) -> Self { self.name(name) }
            fn build(self) -> Self::Receiver { self.build() }
        }

        impl<K: Key, V: Value> ReceiverApi<K, V> for $($m)::+::Receiver<K, V> {
            type Watch = $($m)::+::ReceiverWatch<K, V>;

            fn recv(&mut self) -> Result<Event<K, V>, RecvError> { self.recv() }
            fn recv_timeout(&mut self, timeout: Duration) -> Result<Event<K, V>, RecvTimeoutError> {
                self.recv_timeout(timeout)
            }
            fn recv_deadline(&mut self, deadline: Instant) -> Result<Event<K, V>, RecvTimeoutError> {
                self.recv_deadline(deadline)
            }
            fn try_recv(&mut self) -> Result<Event<K, V>, TryRecvError> { self.try_recv() }
            fn try_recv_all(&mut self) -> Result<Vec<Event<K, V>>, TryRecvError> { self.try_recv_all() }
            fn try_recv_all_into(&mut self, out: &mut Vec<Event<K, V>>) -> Result<usize, TryRecvError> {
                self.try_recv_all_into(out)
            }
            fn peek(&mut self) -> Result<Event<K, V>, TryRecvError> { self.peek() }
            fn recv_async(
                &mut self,
            ) -> impl Future<Output = Result<Event<K, V>, RecvError>> + Send + '_ {
                self.recv_async()
            }
            fn iter(&mut self) -> impl Iterator<Item = Event<K, V>> + Debug + '_ { self.iter() }
            fn try_iter(&mut self) -> impl Iterator<Item = Event<K, V>> + Debug + '_ { self.try_iter() }
            fn close(&self) { self.close() }
            fn is_closed(&self) -> bool { self.is_closed() }
            fn len(&self) -> usize { self.len() }
            fn is_empty(&self) -> bool { self.is_empty() }
            fn stats(&self) -> ReceiverStats { self.stats() }
            fn watch(&self) -> Self::Watch { self.watch() }
        }

        impl<K: Key, V: Value> ReceiverWatchApi for $($m)::+::ReceiverWatch<K, V> {
            fn stats(&self) -> ReceiverStats { self.stats() }
            fn name(&self) -> Option<&str> { self.name() }
            fn id(&self) -> u64 { self.id() }
            fn is_closed(&self) -> bool { self.is_closed() }
        }
    };
}

conflate_api_impl!(Lockfree => keybus::conflate);
conflate_api_impl!(Baseline => keybus::baseline::conflate);
