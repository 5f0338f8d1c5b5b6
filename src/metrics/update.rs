//! The hub's value type and its fold: what a pending slot holds for each kind.

use super::summary::Summary;
use metrics::Key;
use std::collections::HashMap;

/// What a receiver is told about one metric: every update recorded under its key
/// since the receiver last took it, folded into one value.
///
/// The fold ([`Update::merge`]) is the hub's merge, so a pending value always holds
/// what a consumer should apply, however many updates it stands for
/// ([`Event::sends`](crate::Event::sends) says how many). It is also how a consumer
/// keeps its own running state: folding every event of a key, in order, into the
/// first gives the metric's current value since the consumer started (see
/// [`Totals`]).
///
/// Not `Copy`: a histogram's [`Summary`] may own a quantile sketch.
#[derive(Debug, Clone, PartialEq)]
pub enum Update {
    /// A counter's increments and absolute settings.
    Counter(CounterUpdate),
    /// A gauge's increments, decrements and settings, in order.
    Gauge(GaugeUpdate),
    /// A histogram's samples, as a summary (count, sum, min, max, quantiles).
    Histogram(Summary),
}

impl Update {
    /// Folds `later` into `self`: the one update that has the effect of `self`
    /// followed by `later`. This is the hub's merge; it never annihilates.
    ///
    /// Updates of different kinds under one key (a counter and a gauge registered
    /// with the same name and labels) do not fold: the later one replaces the
    /// earlier. `metrics` exporters treat such a clash as an error too.
    #[inline]
    pub fn merge(self, later: Update) -> Update {
        match (self, later) {
            (Update::Counter(a), Update::Counter(b)) => Update::Counter(a.then(b)),
            (Update::Gauge(a), Update::Gauge(b)) => Update::Gauge(a.then(b)),
            (Update::Histogram(a), Update::Histogram(b)) => Update::Histogram(a.then(b)),
            (_, later) => later,
        }
    }

    /// The metric's value for a consumer that had nothing for it before: a
    /// counter's total, a gauge's value (from 0), a histogram's sample sum.
    pub fn value(&self) -> f64 {
        match self {
            Update::Counter(c) => c.apply(0) as f64,
            Update::Gauge(g) => g.apply(0.0),
            Update::Histogram(h) => h.sum,
        }
    }

    /// The metric's kind, as a word (`"counter"`, `"gauge"`, `"histogram"`).
    pub fn kind(&self) -> &'static str {
        match self {
            Update::Counter(_) => "counter",
            Update::Gauge(_) => "gauge",
            Update::Histogram(_) => "histogram",
        }
    }
}

/// A counter's updates since the receiver last took it.
///
/// `increment(n)` adds `n`; `absolute(v)` sets the counter to *at least* `v`, which
/// is what `metrics`' `CounterFn::absolute` asks of a recorder (so that callers
/// mirroring an external counter out of order never move it back) and what its
/// atomic counters and exporters do (`fetch_max`). A consumer holding the total `t`
/// applies an update with [`apply`](Self::apply): `max(t + increment, absolute)`.
/// Folding two updates gives exactly the update that applies both in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CounterUpdate {
    /// The sum of the increments (wrapping, like an atomic counter).
    pub increment: u64,
    /// Present when `absolute` was called: the counter is at least this much.
    /// Increments made after that call are already added in.
    pub absolute: Option<u64>,
}

impl CounterUpdate {
    /// One `increment(n)`.
    pub const fn increment(n: u64) -> Self {
        CounterUpdate {
            increment: n,
            absolute: None,
        }
    }

    /// One `absolute(v)`.
    pub const fn absolute(v: u64) -> Self {
        CounterUpdate {
            increment: 0,
            absolute: Some(v),
        }
    }

    /// The counter's value after this update, for a consumer that had `total`.
    pub fn apply(&self, total: u64) -> u64 {
        let t = total.wrapping_add(self.increment);
        match self.absolute {
            Some(floor) => t.max(floor),
            None => t,
        }
    }

    /// `self` followed by `later`.
    ///
    /// With `f(t) = max(t + d, m)` (no floor is `m = 0`, exactly, for unsigned `t`):
    /// `later(self(t)) = max(t + d1 + d2, max(m1 + d2, m2))`.
    #[inline]
    pub fn then(self, later: CounterUpdate) -> CounterUpdate {
        let absolute = match (self.absolute, later.absolute) {
            (None, None) => None,
            (Some(m1), None) => Some(m1.wrapping_add(later.increment)),
            // `m1 = 0`: `max(d2, m2)`, and `t + d1 + d2 >= d2` makes the `d2` moot.
            (None, Some(m2)) => Some(m2),
            (Some(m1), Some(m2)) => Some(m1.wrapping_add(later.increment).max(m2)),
        };
        CounterUpdate {
            increment: self.increment.wrapping_add(later.increment),
            absolute,
        }
    }
}

/// A gauge's updates since the receiver last took it, applied in order.
///
/// `increment(d)` is `Add(d)`, `decrement(d)` is `Add(-d)`, `set(v)` is `Set(v)`.
/// A `Set` followed by adds folds into one `Set` of the value the gauge then had,
/// computed in the order the updates arrived; adds with no `Set` before them fold
/// into one `Add` of their sum. (For integer-valued amounts below 2^53 that is
/// exact; otherwise summing first can round differently than adding one by one.)
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GaugeUpdate {
    /// The gauge was set to this value (later increments and decrements included).
    Set(f64),
    /// The gauge moved by this much (increments minus decrements).
    Add(f64),
}

impl GaugeUpdate {
    /// The gauge's value after this update, for a consumer that had `value`.
    pub fn apply(&self, value: f64) -> f64 {
        match *self {
            GaugeUpdate::Set(v) => v,
            GaugeUpdate::Add(d) => value + d,
        }
    }

    /// `self` followed by `later`.
    #[inline]
    pub fn then(self, later: GaugeUpdate) -> GaugeUpdate {
        match (self, later) {
            (_, GaugeUpdate::Set(v)) => GaugeUpdate::Set(v),
            (GaugeUpdate::Set(v), GaugeUpdate::Add(d)) => GaugeUpdate::Set(v + d),
            (GaugeUpdate::Add(a), GaugeUpdate::Add(b)) => GaugeUpdate::Add(a + b),
        }
    }
}

/// A consumer's running state: every metric's folded [`Update`] since the
/// consumer started, fed one event (or one batch) at a time.
///
/// Folding is [`Update::merge`], the same as the hub's, so after applying every
/// event a receiver delivered, a counter's [`Update::value`] is its total, a
/// gauge's is its value, and a histogram's [`Summary`] covers every sample.
///
/// ```
/// use keybus::metrics::{KeybusRecorder, Totals};
/// use metrics::Key;
///
/// let recorder = KeybusRecorder::new();
/// let mut rx = recorder.receiver();
/// let mut totals = Totals::new();
/// metrics::with_local_recorder(&recorder, || {
///     metrics::counter!("requests").increment(2);
///     metrics::gauge!("queue").set(7.0);
/// });
/// totals.apply_all(rx.try_recv_all().unwrap());
/// metrics::with_local_recorder(&recorder, || metrics::counter!("requests").increment(3));
/// totals.apply_all(rx.try_recv_all().unwrap());
/// assert_eq!(totals.value(&Key::from_name("requests")), Some(5.0));
/// assert_eq!(totals.value(&Key::from_name("queue")), Some(7.0));
/// ```
#[derive(Debug, Clone, Default)]
pub struct Totals {
    map: HashMap<Key, Update>,
}

impl Totals {
    /// Empty.
    pub fn new() -> Self {
        Totals::default()
    }

    /// Folds one delivered event in.
    pub fn apply(&mut self, event: crate::Event<Key, Update>) {
        self.fold(event.key, event.value);
    }

    /// Folds `update` into what `key` has (a reference tally can be kept this way).
    pub fn fold(&mut self, key: Key, update: Update) {
        match self.map.get_mut(&key) {
            Some(now) => {
                // `merge` takes both by value (a summary's sketch moves, not copies).
                let earlier = std::mem::replace(now, Update::Counter(CounterUpdate::default()));
                *now = earlier.merge(update);
            }
            None => {
                self.map.insert(key, update);
            }
        }
    }

    /// Folds a batch in, in order (a [`try_recv_all`](crate::conflate::Receiver::try_recv_all) cut).
    pub fn apply_all(&mut self, events: impl IntoIterator<Item = crate::Event<Key, Update>>) {
        for e in events {
            self.apply(e);
        }
    }

    /// The folded update of `key`, if any event for it was applied.
    pub fn get(&self, key: &Key) -> Option<&Update> {
        self.map.get(key)
    }

    /// [`Update::value`] of `key`.
    pub fn value(&self, key: &Key) -> Option<f64> {
        self.get(key).map(Update::value)
    }

    /// Every metric seen, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&Key, &Update)> + '_ {
        self.map.iter()
    }

    /// How many metrics were seen.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no event was applied.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Applying the fold of two counter updates equals applying both in order,
    /// over every combination of small values.
    #[test]
    fn counter_fold_is_exact() {
        let ups = [
            CounterUpdate::increment(0),
            CounterUpdate::increment(3),
            CounterUpdate::absolute(0),
            CounterUpdate::absolute(2),
            CounterUpdate::absolute(9),
            CounterUpdate::increment(2).then(CounterUpdate::absolute(4)),
            CounterUpdate::absolute(4).then(CounterUpdate::increment(2)),
        ];
        for a in ups {
            for b in ups {
                for c in ups {
                    for t in 0..12 {
                        let seq = c.apply(b.apply(a.apply(t)));
                        assert_eq!(a.then(b).then(c).apply(t), seq, "{a:?} {b:?} {c:?} at {t}");
                        assert_eq!(a.then(b.then(c)).apply(t), seq, "{a:?} {b:?} {c:?} at {t}");
                    }
                }
            }
        }
    }

    #[test]
    fn gauge_fold_applies_in_order() {
        let ups = [
            GaugeUpdate::Add(1.0),
            GaugeUpdate::Add(-4.0),
            GaugeUpdate::Set(10.0),
            GaugeUpdate::Set(-2.0),
        ];
        for a in ups {
            for b in ups {
                for c in ups {
                    for t in [-3.0, 0.0, 5.0] {
                        let seq = c.apply(b.apply(a.apply(t)));
                        assert_eq!(a.then(b).then(c).apply(t), seq);
                        assert_eq!(a.then(b.then(c)).apply(t), seq);
                    }
                }
            }
        }
    }

    /// The size docs/design.md and the module docs quote.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn an_update_is_48_bytes() {
        assert_eq!(std::mem::size_of::<Update>(), 48);
    }

    #[test]
    fn kinds_do_not_fold_across() {
        let c = Update::Counter(CounterUpdate::increment(1));
        let g = Update::Gauge(GaugeUpdate::Set(2.0));
        assert_eq!(c.clone().merge(g.clone()), g);
        assert_eq!(g.merge(c.clone()), c);
    }
}
