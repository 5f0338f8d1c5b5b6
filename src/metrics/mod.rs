//! A recorder for the [`metrics`] facade that fans every update out to any number
//! of consumers (dashboards, alerting loops, exporters), each at its own pace.
//! Enabled by the `metrics` cargo feature.
//!
//! [`KeybusRecorder`] implements [`metrics::Recorder`]. Every update recorded
//! through `counter!`, `gauge!` and `histogram!` is one send into a
//! [`conflate`](crate::conflate) hub keyed by the metric's [`metrics::Key`] (name
//! and labels). The hub's merge folds the updates of one key the way its kind
//! means (see [`Update`]), so a consumer's pending value always holds exactly what
//! it has to apply, however far behind it is, and its memory is bounded by the key
//! set, not by the update rate.
//!
//! ```
//! use keybus::metrics::{KeybusRecorder, Update};
//!
//! let recorder = KeybusRecorder::new();
//! let mut exporter = recorder.receiver();
//! metrics::with_local_recorder(&recorder, || {
//!     for _ in 0..1000 {
//!         metrics::counter!("requests", "route" => "/").increment(1);
//!     }
//!     metrics::gauge!("queue.depth").set(12.0);
//!     metrics::gauge!("queue.depth").decrement(2.0);
//! });
//! let batch = exporter.try_recv_all().unwrap();
//! assert_eq!(batch.len(), 2); // one entry per metric
//! assert_eq!(batch[0].key.name(), "requests");
//! assert_eq!(batch[0].sends, 1000); // 1000 updates folded into one...
//! assert_eq!(batch[0].value.value(), 1000.0); // ...that adds 1000
//! assert_eq!(batch[1].value.value(), 10.0); // set 12, then minus 2
//! ```
//!
//! # What a consumer receives
//!
//! An [`Event`](crate::Event) of key [`metrics::Key`] and value [`Update`]: the
//! fold of every update to that metric since this receiver last took it.
//!
//! - **Counters** ([`CounterUpdate`]): increments add; `absolute(v)` sets the
//!   counter to at least `v` (the `metrics` contract for `CounterFn::absolute`, which
//!   its atomic counters and exporters implement with `fetch_max`). A consumer
//!   holding the total `t` applies `max(t + increment, absolute)`.
//! - **Gauges** ([`GaugeUpdate`]): increments, decrements and sets apply in order;
//!   a set followed by anything folds into one set.
//! - **Histograms** ([`Summary`]): samples fold into count, sum, min and max
//!   (exact), and a DDSketch (`metrics_util`'s mergeable `Summary`) that answers
//!   [`quantile(q)`](Summary::quantile) (p50, p90, p99) within
//!   [`QUANTILE_RELATIVE_ERROR`] (1 %) of the true value.
//!
//! Folding is associative and is the same function a consumer uses to keep its
//! own running state ([`Update::merge`], or [`Totals`] which does it per key), so
//! applying every event a receiver delivers gives exactly the values the
//! application recorded, whatever was coalesced on the way.
//!
//! # Consumers
//!
//! Consumers are ordinary [`conflate::Receiver`](crate::conflate::Receiver)s, as
//! many as wanted, made from the recorder (or from its [`hub`](KeybusRecorder::hub),
//! which can outlive the recorder's installation as the global recorder):
//!
//! - an exporter takes a cut of everything pending with
//!   [`try_recv_all`](crate::conflate::Receiver::try_recv_all) on its schedule;
//! - a dashboard or alerting loop blocks in `recv`, or awaits `recv_async` (the
//!   receiver is also a `futures_core::Stream`);
//! - a key filter selects metrics at send, so others never take a slot there:
//!
//! ```
//! use keybus::metrics::KeybusRecorder;
//! use metrics::Key;
//!
//! let recorder = KeybusRecorder::new();
//! let mut http = recorder
//!     .receiver_builder()
//!     .key_filter(|k: &Key| k.name().starts_with("http."))
//!     .build();
//! metrics::with_local_recorder(&recorder, || {
//!     metrics::counter!("http.requests").increment(1);
//!     metrics::counter!("db.queries").increment(1); // not for this receiver
//! });
//! assert_eq!(http.try_recv().unwrap().key.name(), "http.requests");
//! assert!(http.try_recv().is_err());
//! ```
//!
//! A receiver starts empty: it sees the updates recorded after it was made. A
//! recorder built with [`RecorderBuilder::retain_latest`] also keeps every
//! metric's folded value since the start, and
//! [`snapshot_receiver`](KeybusRecorder::snapshot_receiver) makes a consumer that
//! starts with that whole state pending (counters' totals, gauges' values,
//! histograms' summaries) and then follows the updates, with nothing missed or
//! counted twice in between.
//!
//! Closing: [`KeybusRecorder::close`] closes the send side gracefully (consumers
//! drain what is pending, then see `Closed`; later updates go nowhere).
//!
//! # Installing it, and composing with other recorders
//!
//! As the only recorder: `metrics::set_global_recorder(recorder.clone())`
//! ([`KeybusRecorder`] is a cheap `Clone` handle; keep one to make receivers).
//! Next to an existing exporter, with `metrics-util`'s fanout, and under its
//! layers (here a filter that keeps `secret*` metrics off the bus):
//!
//! ```
//! use keybus::metrics::KeybusRecorder;
//! use metrics_util::layers::{FanoutBuilder, FilterLayer, Layer};
//!
//! let keybus = KeybusRecorder::new();
//! let mut dashboard = keybus.receiver();
//! // Your exporter, e.g. `PrometheusBuilder::new().build_recorder()`.
//! let exporter = metrics::NoopRecorder;
//! let recorder = FanoutBuilder::default()
//!     .add_recorder(exporter)
//!     .add_recorder(FilterLayer::from_patterns(["secret"]).layer(keybus.clone()))
//!     .build();
//! metrics::with_local_recorder(&recorder, || {
//!     metrics::counter!("logins").increment(1);
//!     metrics::counter!("secret.tokens").increment(1);
//! });
//! // In a real program: `metrics::set_global_recorder(recorder)`.
//! assert_eq!(dashboard.try_recv().unwrap().key.name(), "logins");
//! assert!(dashboard.try_recv().is_err());
//! ```
//!
//! # Bounding the metric set
//!
//! Every key (name and labels) is a metric the recorder keeps a handle for, and a
//! pending slot or a state-table entry wherever it goes, so labels of unbounded
//! cardinality (user ids, request paths) grow all of them.
//! [`RecorderBuilder::max_keys`] fixes a bound when the recorder is built: past
//! it, a new metric is refused, its updates are dropped and counted
//! ([`KeybusRecorder::refused_registrations`],
//! [`KeybusRecorder::refused_updates`]; export them to see the loss), and the
//! metrics already admitted are unaffected. Keys do not expire: a metric, once
//! admitted, is kept for the life of the recorder, as in the registries of the
//! usual exporters without an idle timeout.
//!
//! # Cost
//!
//! `metrics` asks the recorder for a handle on every macro call
//! (`counter!(..)` is `register_counter`), so the recorder keeps one handle per key
//! and kind, in `metrics_util`'s `Registry` (the one its exporters use): a shared
//! lock on one shard, a key comparison and an `Arc` clone, no allocation. With
//! [`max_keys`](RecorderBuilder::max_keys), only a metric's first registration
//! takes the admission lock. The handle owns the metric's key (made retained at
//! registration, so cloning it copies no string and allocates nothing) and a
//! conflate [`Sender`], so an update is exactly one send:
//! one atomic load when no consumer exists; otherwise, per consumer, one shard lock
//! and a fold, allocating nothing when the key is already pending there (a
//! histogram sample folds into the pending summary's sketch: a logarithm and a
//! bin increment, allocating only for a bin outside the range it has). Handles
//! kept out of a loop (`let c = counter!("x"); c.increment(1)`) skip the lookup.
//! (A macro call whose labels are computed at run time builds, and allocates, its
//! `Key` before any recorder sees it; keep such handles out of hot loops.)
//!
//! Per receiver an update costs a conflate send (a shard lock and a fold of the
//! 48-byte [`Update`]); a counting-only exporter (one `AtomicU64` per key) delivers
//! to nobody. So with receivers an update costs many times that floor, and a
//! histogram sample about twice a counter's (the sketch fold); with none, a
//! few nanoseconds. The measured figures (`bench-report --only metrics`), and
//! why counters got slower when the value stopped being `Copy`, are in
//! `docs/performance.md` ("`keybus::metrics` per update").
//!
//! The call site's metadata (level, target, module) is not used; filter on it
//! with `metrics-util` layers if needed. Descriptions and units given with
//! `describe_*!` are kept and listed by [`KeybusRecorder::descriptions`].

mod handles;
mod summary;
mod update;

pub use summary::{Summary, QUANTILE_RELATIVE_ERROR, SKETCH_MAX_BINS};
pub use update::{CounterUpdate, GaugeUpdate, Totals, Update};

use crate::conflate::{Hub, Receiver, ReceiverBuilder, Sender};
use handles::{Handles, Registered};
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, SharedString, Unit};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

/// The kind of a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `counter!`.
    Counter,
    /// `gauge!`.
    Gauge,
    /// `histogram!`.
    Histogram,
}

/// A metric's description and unit, as given by `describe_counter!` and friends.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Description {
    /// Which kind it was described as.
    pub kind: Kind,
    /// The metric's name.
    pub name: KeyName,
    /// Its unit, if one was given.
    pub unit: Option<Unit>,
    /// The text.
    pub text: SharedString,
}

/// Descriptions by kind and name: unit and text.
type Descriptions = HashMap<(Kind, KeyName), (Option<Unit>, SharedString)>;

/// A [`metrics::Recorder`] that sends every update into a conflate hub keyed by
/// [`metrics::Key`]; see the [module docs](self).
///
/// A cheap `Clone` handle (`Send + Sync`): clones share one hub and one set of
/// handles, so one can be installed (globally, locally, inside a fanout or a
/// layer) while another makes receivers.
#[derive(Clone)]
pub struct KeybusRecorder {
    inner: Arc<Inner>,
}

struct Inner {
    hub: Hub<Key, Update>,
    tx: Sender<Key, Update>,
    handles: Handles,
    descriptions: Mutex<Descriptions>,
    retain_latest: bool,
    max_keys: Option<usize>,
}

/// Configures a [`KeybusRecorder`]; from [`KeybusRecorder::builder`].
#[derive(Debug, Clone, Default)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct RecorderBuilder {
    retain_latest: bool,
    max_keys: Option<usize>,
}

impl RecorderBuilder {
    /// Keeps every metric's folded value since the start (the hub's state
    /// table), so that [`KeybusRecorder::snapshot_receiver`] can hand a late
    /// consumer the whole current state. Costs one table entry per metric.
    #[must_use = "builder methods return the changed builder; dropping it drops the setting"]
    pub fn retain_latest(self) -> Self {
        RecorderBuilder {
            retain_latest: true,
            ..self
        }
    }

    /// Admits at most `n` metrics (a key counts once per kind it is registered
    /// as), so that label cardinality cannot grow the recorder, the hub's state
    /// table or a receiver's pending set without bound.
    ///
    /// The first `n` metrics registered are admitted and kept for the life of the
    /// recorder. A registration of any other metric once `n` are admitted is
    /// refused: the handle it gets drops its updates, and the recorder counts
    /// both ([`refused_registrations`](KeybusRecorder::refused_registrations),
    /// [`refused_updates`](KeybusRecorder::refused_updates)), so a loss is never
    /// silent. Metrics already admitted are unaffected. `n == 0` refuses every
    /// metric. The count is exact under concurrent registration: new metrics are
    /// admitted under one lock (their first registration only; known metrics are
    /// looked up without it).
    ///
    /// ```
    /// use keybus::metrics::KeybusRecorder;
    ///
    /// let recorder = KeybusRecorder::builder().max_keys(2).build();
    /// let mut rx = recorder.receiver();
    /// metrics::with_local_recorder(&recorder, || {
    ///     for user in ["ann", "bob", "cy", "di"] {
    ///         metrics::counter!("logins", "user" => user).increment(1);
    ///     }
    ///     metrics::counter!("logins", "user" => "ann").increment(1); // admitted
    /// });
    /// assert_eq!(rx.try_recv_all().unwrap().len(), 2); // ann, bob
    /// assert_eq!(recorder.registered(), 2);
    /// assert_eq!(recorder.refused_registrations(), 2); // cy, di
    /// assert_eq!(recorder.refused_updates(), 2);
    /// ```
    pub fn max_keys(self, n: usize) -> Self {
        RecorderBuilder {
            max_keys: Some(n),
            ..self
        }
    }

    /// The recorder. Nothing is registered until the first update.
    pub fn build(self) -> KeybusRecorder {
        let hub = state_table::new_hub(self.retain_latest);
        let tx = hub.sender();
        let handles = Handles::new(tx.clone(), self.max_keys);
        KeybusRecorder {
            inner: Arc::new(Inner {
                hub,
                tx,
                handles,
                descriptions: Mutex::new(HashMap::new()),
                retain_latest: self.retain_latest,
                max_keys: self.max_keys,
            }),
        }
    }
}

impl KeybusRecorder {
    /// A recorder whose consumers start empty (see [`builder`](Self::builder) for
    /// one that keeps the state for late consumers).
    pub fn new() -> Self {
        RecorderBuilder::default().build()
    }

    /// Configures a recorder.
    pub fn builder() -> RecorderBuilder {
        RecorderBuilder::default()
    }

    /// The hub the updates go into. Clone it to make receivers after the
    /// recorder was moved into `metrics::set_global_recorder` (holding a hub keeps
    /// the send side open).
    pub fn hub(&self) -> &Hub<Key, Update> {
        &self.inner.hub
    }

    /// A receiver of every metric. It starts empty. Same as `hub().receiver()`.
    pub fn receiver(&self) -> Receiver<Key, Update> {
        self.inner.hub.receiver()
    }

    /// Configures a receiver: a key filter (for example by name prefix), or its
    /// own merge. Same as `hub().receiver_builder()`.
    pub fn receiver_builder(&self) -> ReceiverBuilder<Key, Update> {
        self.inner.hub.receiver_builder()
    }

    /// Closes the send side gracefully: every receiver delivers what is pending,
    /// then reports closed; updates recorded afterwards go nowhere. Idempotent.
    pub fn close(&self) {
        self.inner.tx.close();
    }

    /// Whether the send side is closed.
    pub fn is_closed(&self) -> bool {
        self.inner.tx.is_closed()
    }

    /// Whether the recorder keeps the state for late consumers
    /// ([`RecorderBuilder::retain_latest`]).
    pub fn retains_latest(&self) -> bool {
        self.inner.retain_latest
    }

    /// Metrics registered so far (handles kept), all kinds together; at most
    /// [`max_keys`](Self::max_keys).
    pub fn registered(&self) -> usize {
        self.inner.handles.len()
    }

    /// The bound set with [`RecorderBuilder::max_keys`], if any.
    pub fn max_keys(&self) -> Option<usize> {
        self.inner.max_keys
    }

    /// How many registrations the [`max_keys`](RecorderBuilder::max_keys) bound
    /// refused. Each call of a macro on a refused metric registers it again, so
    /// this counts calls, not distinct metrics (keeping those would be the growth
    /// the bound prevents).
    pub fn refused_registrations(&self) -> u64 {
        self.inner.handles.refused_registrations()
    }

    /// How many updates were dropped because their metric was refused by the
    /// [`max_keys`](RecorderBuilder::max_keys) bound: every `increment`,
    /// `absolute`, `set`, `record` and `record_many` call on a refused handle,
    /// whether made through a macro or a kept handle.
    pub fn refused_updates(&self) -> u64 {
        self.inner.handles.refused_updates()
    }

    /// Every description given with `describe_*!`, sorted by kind and name. A
    /// later description of the same kind and name replaces an earlier one.
    pub fn descriptions(&self) -> Vec<Description> {
        let map = self
            .inner
            .descriptions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut all: Vec<Description> = map
            .iter()
            .map(|((kind, name), (unit, text))| Description {
                kind: *kind,
                name: name.clone(),
                unit: *unit,
                text: text.clone(),
            })
            .collect();
        all.sort_by(|a, b| (a.kind, a.name.as_str()).cmp(&(b.kind, b.name.as_str())));
        all
    }

    fn describe(&self, kind: Kind, name: KeyName, unit: Option<Unit>, text: SharedString) {
        self.inner
            .descriptions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((kind, name), (unit, text));
    }
}

impl Default for KeybusRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for KeybusRecorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeybusRecorder")
            .field("hub", &self.inner.hub)
            .field("registered", &self.registered())
            .field("retain_latest", &self.inner.retain_latest)
            .field("max_keys", &self.inner.max_keys)
            .finish()
    }
}

impl metrics::Recorder for KeybusRecorder {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.describe(Kind::Counter, key, unit, description);
    }

    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.describe(Kind::Gauge, key, unit, description);
    }

    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.describe(Kind::Histogram, key, unit, description);
    }

    #[inline]
    fn register_counter(&self, key: &Key, _metadata: &Metadata<'_>) -> Counter {
        match self.inner.handles.register(Kind::Counter, key) {
            Registered::Admitted(h) => Counter::from_arc(h),
            Registered::Refused(sink) => Counter::from_arc(sink),
        }
    }

    #[inline]
    fn register_gauge(&self, key: &Key, _metadata: &Metadata<'_>) -> Gauge {
        match self.inner.handles.register(Kind::Gauge, key) {
            Registered::Admitted(h) => Gauge::from_arc(h),
            Registered::Refused(sink) => Gauge::from_arc(sink),
        }
    }

    #[inline]
    fn register_histogram(&self, key: &Key, _metadata: &Metadata<'_>) -> Histogram {
        match self.inner.handles.register(Kind::Histogram, key) {
            Registered::Admitted(h) => Histogram::from_arc(h),
            Registered::Refused(sink) => Histogram::from_arc(sink),
        }
    }
}

// ---------------------------------------------------------------------------
// The state table (`retain_latest`): everything that depends on conflate's
// state table and snapshot receivers is in this block and in `state_table`.
// ---------------------------------------------------------------------------

impl KeybusRecorder {
    /// A receiver born with the whole current state pending: every metric's value
    /// folded since the start (a counter's total, a gauge's value, a histogram's
    /// summary; `sends == 0`), then every later update, nothing missed or counted
    /// twice in between. For a filtered one:
    /// `hub().receiver_builder().snapshot().key_filter(..).build()`.
    ///
    /// # Panics
    /// If the recorder was built without [`RecorderBuilder::retain_latest`]: it
    /// keeps no state to start from.
    pub fn snapshot_receiver(&self) -> Receiver<Key, Update> {
        assert!(
            self.inner.retain_latest,
            "keybus::metrics: snapshot_receiver needs a recorder built with retain_latest()"
        );
        state_table::snapshot_receiver(&self.inner.hub)
    }
}

/// The one place that builds the hub and snapshot receivers.
mod state_table {
    use super::{Hub, Key, Receiver, Update};

    /// The hub's merge: [`Update::merge`], which never annihilates.
    fn fold(pending: Update, later: Update) -> Option<Update> {
        Some(pending.merge(later))
    }

    pub(super) fn new_hub(retain_latest: bool) -> Hub<Key, Update> {
        if retain_latest {
            Hub::builder().merge(fold).retain_latest().build()
        } else {
            Hub::with_merge(fold)
        }
    }

    pub(super) fn snapshot_receiver(hub: &Hub<Key, Update>) -> Receiver<Key, Update> {
        hub.receiver_builder().snapshot().build()
    }
}
