//! The per-key handles `metrics` asks a recorder for, the registry that keeps one
//! handle per key and kind (`metrics_util::registry::Registry`, with a storage
//! that makes keybus handles), and the bound on how many it admits.
//!
//! No atomic protocol of its own: the registry's `std` read-write locks, one mutex
//! for admitting new metrics under a bound, two statistics counters, and the
//! conflate [`Sender`] for the updates. Nothing here runs under the model checkers
//! (the `metrics` feature is not built with them).

use super::summary::Summary;
use super::update::{CounterUpdate, GaugeUpdate, Update};
use super::Kind;
use crate::conflate::Sender;
use metrics::{CounterFn, GaugeFn, HistogramFn, Key};
use metrics_util::registry::{Registry, Storage};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// What `register_counter`, `register_gauge` and `register_histogram` hand out
/// (one type serves the three kinds; each `metrics` wrapper calls only its own
/// trait). It owns everything an update needs, so an update is one send: the key
/// is cloned (retained at registration, so that clone copies no string and
/// allocates nothing: static parts are copied, owned parts are reference counted)
/// and the value needs no allocation (a histogram sample is a [`Summary`] without a
/// sketch).
pub(crate) struct Handle {
    key: Key,
    tx: Sender<Key, Update>,
}

impl Handle {
    #[inline]
    fn send(&self, update: Update) {
        // Err only once the recorder was closed: updates after that go nowhere,
        // like those recorded into a dropped exporter.
        let _ = self.tx.send(self.key.clone(), update);
    }
}

impl CounterFn for Handle {
    #[inline]
    fn increment(&self, value: u64) {
        self.send(Update::Counter(CounterUpdate::increment(value)));
    }

    #[inline]
    fn absolute(&self, value: u64) {
        self.send(Update::Counter(CounterUpdate::absolute(value)));
    }
}

impl GaugeFn for Handle {
    #[inline]
    fn increment(&self, value: f64) {
        self.send(Update::Gauge(GaugeUpdate::Add(value)));
    }

    #[inline]
    fn decrement(&self, value: f64) {
        self.send(Update::Gauge(GaugeUpdate::Add(-value)));
    }

    #[inline]
    fn set(&self, value: f64) {
        self.send(Update::Gauge(GaugeUpdate::Set(value)));
    }
}

impl HistogramFn for Handle {
    #[inline]
    fn record(&self, value: f64) {
        self.send(Update::Histogram(Summary::of(value, 1)));
    }

    fn record_many(&self, value: f64, count: usize) {
        if count > 0 {
            self.send(Update::Histogram(Summary::of(value, count as u64)));
        }
    }
}

/// The registry's storage: what it calls, under the shard's write lock, once per
/// new key and kind. The handle keeps the key retained (see [`Handle`]); the
/// registry's own copy of the key is only its map key.
pub(crate) struct HandleStorage {
    tx: Sender<Key, Update>,
}

impl HandleStorage {
    fn handle(&self, key: &Key) -> Arc<Handle> {
        Arc::new(Handle {
            key: key.to_retained(),
            tx: self.tx.clone(),
        })
    }
}

impl Storage<Key> for HandleStorage {
    type Counter = Arc<Handle>;
    type Gauge = Arc<Handle>;
    type Histogram = Arc<Handle>;

    fn counter(&self, key: &Key) -> Arc<Handle> {
        self.handle(key)
    }

    fn gauge(&self, key: &Key) -> Arc<Handle> {
        self.handle(key)
    }

    fn histogram(&self, key: &Key) -> Arc<Handle> {
        self.handle(key)
    }
}

/// The handle every refused metric gets ([`RecorderBuilder::max_keys`](super::RecorderBuilder::max_keys)):
/// its updates go nowhere and are counted.
pub(crate) struct RefusedSink {
    /// Registrations refused (a macro call registers on every call).
    registrations: AtomicU64,
    /// Updates made through refused handles, all kinds.
    updates: AtomicU64,
}

impl RefusedSink {
    // Relaxed throughout: two statistics, read on their own; no other memory is
    // published through them.
    fn update(&self) {
        self.updates.fetch_add(1, Ordering::Relaxed);
    }
}

impl CounterFn for RefusedSink {
    fn increment(&self, _: u64) {
        self.update();
    }

    fn absolute(&self, _: u64) {
        self.update();
    }
}

impl GaugeFn for RefusedSink {
    fn increment(&self, _: f64) {
        self.update();
    }

    fn decrement(&self, _: f64) {
        self.update();
    }

    fn set(&self, _: f64) {
        self.update();
    }
}

impl HistogramFn for RefusedSink {
    fn record(&self, _: f64) {
        self.update();
    }

    fn record_many(&self, _: f64, count: usize) {
        if count > 0 {
            self.update();
        }
    }
}

/// What a registration hands back.
pub(crate) enum Registered {
    /// The metric's own handle.
    Admitted(Arc<Handle>),
    /// The metric is past the bound.
    Refused(Arc<RefusedSink>),
}

/// One handle per key and kind, for the life of the recorder (the key set, or
/// the bound, limits them), like the registries of `metrics` exporters: the same
/// `metrics_util` registry they use, so a lookup costs what theirs does (a shared
/// lock on one shard, a key comparison, an `Arc` clone, no allocation).
pub(crate) struct Handles {
    registry: Registry<Key, HandleStorage>,
    /// With a bound: how many metrics were admitted. Every metric created under a
    /// bound is created with this lock held, so the count is exact and a new
    /// metric is refused only when `max` are registered. New metrics are rare
    /// (once per key and kind), so one lock for them all costs nothing on the
    /// update path.
    bound: Option<(usize, Mutex<usize>)>,
    refused: Arc<RefusedSink>,
}

impl Handles {
    pub(crate) fn new(tx: Sender<Key, Update>, max_keys: Option<usize>) -> Self {
        Handles {
            registry: Registry::new(HandleStorage { tx }),
            bound: max_keys.map(|max| (max, Mutex::new(0))),
            refused: Arc::new(RefusedSink {
                registrations: AtomicU64::new(0),
                updates: AtomicU64::new(0),
            }),
        }
    }

    /// The handle of `key` as a `kind`, made on first use if the bound allows.
    /// `Key`'s hash is computed once, when the key is built (at compile time for
    /// the macros' static keys), and used as is by the registry.
    #[inline]
    pub(crate) fn register(&self, kind: Kind, key: &Key) -> Registered {
        let Some((max, admitted)) = &self.bound else {
            return Registered::Admitted(self.get_or_create(kind, key));
        };
        if let Some(handle) = self.get(kind, key) {
            return Registered::Admitted(handle);
        }
        self.admit(kind, key, *max, admitted)
    }

    #[cold]
    fn admit(&self, kind: Kind, key: &Key, max: usize, admitted: &Mutex<usize>) -> Registered {
        let mut admitted = admitted.lock().unwrap_or_else(PoisonError::into_inner);
        // Made by another thread since the lookup above.
        if let Some(handle) = self.get(kind, key) {
            return Registered::Admitted(handle);
        }
        if *admitted >= max {
            drop(admitted);
            self.refused.registrations.fetch_add(1, Ordering::Relaxed);
            return Registered::Refused(self.refused.clone());
        }
        *admitted += 1;
        Registered::Admitted(self.get_or_create(kind, key))
    }

    fn get(&self, kind: Kind, key: &Key) -> Option<Arc<Handle>> {
        match kind {
            Kind::Counter => self.registry.get_counter(key),
            Kind::Gauge => self.registry.get_gauge(key),
            Kind::Histogram => self.registry.get_histogram(key),
        }
    }

    #[inline]
    fn get_or_create(&self, kind: Kind, key: &Key) -> Arc<Handle> {
        match kind {
            Kind::Counter => self.registry.get_or_create_counter(key, Arc::clone),
            Kind::Gauge => self.registry.get_or_create_gauge(key, Arc::clone),
            Kind::Histogram => self.registry.get_or_create_histogram(key, Arc::clone),
        }
    }

    /// Metrics registered so far, all kinds together.
    pub(crate) fn len(&self) -> usize {
        let mut n = 0;
        self.registry.visit_counters(|_, _| n += 1);
        self.registry.visit_gauges(|_, _| n += 1);
        self.registry.visit_histograms(|_, _| n += 1);
        n
    }

    /// Registrations refused by the bound.
    pub(crate) fn refused_registrations(&self) -> u64 {
        self.refused.registrations.load(Ordering::Relaxed)
    }

    /// Updates made through refused handles.
    pub(crate) fn refused_updates(&self) -> u64 {
        self.refused.updates.load(Ordering::Relaxed)
    }
}
