//! A histogram's folded samples: exact count, sum, min and max, and a mergeable
//! quantile sketch (`metrics_util::Summary`, a DDSketch).

use std::fmt;

/// The relative error of [`Summary::quantile`]: an estimate `e` of a true
/// quantile value `v` satisfies `|e - v| <= QUANTILE_RELATIVE_ERROR * |v|`.
///
/// 1 %, the DDSketch paper's and `sketches-ddsketch`'s default. It sets the sketch's
/// bin width: samples spanning a ratio `r` between the smallest and largest
/// magnitude take about `ln(r) / 0.02` bins of 8 bytes (1 µs to 10 s: ~810
/// bins, ~6.5 KiB), grown in chunks of 128.
pub const QUANTILE_RELATIVE_ERROR: f64 = 0.01;

/// At most this many bins per sign in one sketch (16 KiB each). Past it the
/// sketch collapses its lowest bins into one, so the lowest quantiles lose the
/// relative-error guarantee (`min` stays exact); with 1 % bins that takes samples
/// spanning a ratio of about 10^17.
pub const SKETCH_MAX_BINS: u32 = 2048;

/// Magnitudes below this count as zero in the sketch (not in `sum`, `min`, `max`).
const SKETCH_MIN_VALUE: f64 = 1.0e-9;

/// A histogram's samples since the receiver last took it: count, sum, min and
/// max, exactly, and their quantiles ([`quantile`](Self::quantile)) within
/// [`QUANTILE_RELATIVE_ERROR`].
///
/// `min` and `max` ignore NaN samples (a summary of only NaN samples has the
/// infinities as `min` and `max`); `sum` does not. Quantiles are over the finite
/// samples only: the sketch keeps neither NaN nor the infinities.
///
/// Folding ([`then`](Self::then)) merges the sketches, so the summary of a whole
/// run is the fold of the summaries of its parts, whatever was coalesced on the
/// way. A summary made by [`of`](Self::of) (one `record` or `record_many`: every
/// sample one value) carries no sketch and allocates nothing; the first fold that
/// joins finite samples allocates one (about 1 KiB, growing with the range of
/// values, up to [`SKETCH_MAX_BINS`] per sign), and later folds into it allocate
/// only when a sample falls outside the bins it has.
///
/// ```
/// use keybus::metrics::Summary;
///
/// let s = (1..=1000).fold(Summary::of(0.0, 0), |s, v| s.then(Summary::of(v as f64, 1)));
/// assert_eq!((s.count, s.sum, s.min, s.max), (1000, 500_500.0, 1.0, 1000.0));
/// let p99 = s.quantile(0.99).unwrap(); // the true one is 990
/// assert!((p99 - 990.0).abs() <= 990.0 * keybus::metrics::QUANTILE_RELATIVE_ERROR);
/// ```
#[derive(Clone)]
pub struct Summary {
    /// Samples recorded.
    pub count: u64,
    /// Their sum.
    pub sum: f64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
    /// `None`: the summary is one [`Summary::of`] (or empty, or the fold of
    /// summaries with no finite sample), so its finite samples are `count` copies
    /// of `min` when `min` is finite and equals `max`, and there are none
    /// otherwise. `Some`: every finite sample is in the sketch.
    sketch: Option<Box<metrics_util::storage::Summary>>,
}

/// Samples added one by one into a sketch before [`add_copies`] switches to
/// doubling: below it a loop of `add` is cheaper than building a side sketch.
const COPIES_BY_LOOP: u64 = 64;

fn new_sketch() -> Box<metrics_util::storage::Summary> {
    Box::new(metrics_util::storage::Summary::new(
        QUANTILE_RELATIVE_ERROR,
        SKETCH_MAX_BINS,
        SKETCH_MIN_VALUE,
    ))
}

/// Adds `n` samples of the finite `value` to `sketch`. The sketch has no weighted
/// add, so a large `n` (`record_many`) is built by doubling a side sketch:
/// `O(log n)` merges instead of `n` adds.
fn add_copies(sketch: &mut metrics_util::storage::Summary, value: f64, n: u64) {
    if n <= COPIES_BY_LOOP {
        for _ in 0..n {
            sketch.add(value);
        }
        return;
    }
    let mut power = new_sketch();
    power.add(value);
    let mut rest = n;
    loop {
        if rest & 1 == 1 {
            merge_sketch(sketch, &power);
        }
        rest >>= 1;
        if rest == 0 {
            return;
        }
        let copy = power.clone();
        merge_sketch(&mut power, &copy);
    }
}

/// Every sketch here is made by [`new_sketch`], so their configurations match and
/// the merge cannot fail.
fn merge_sketch(into: &mut metrics_util::storage::Summary, from: &metrics_util::storage::Summary) {
    into.merge(from)
        .expect("keybus::metrics: every sketch has the same configuration");
}

impl Summary {
    /// `count` samples of `value` (`record_many`), or one (`record`). With
    /// `count == 0`, the empty summary (`sum` 0, `min` +inf, `max` -inf).
    pub fn of(value: f64, count: u64) -> Summary {
        if count == 0 {
            return Summary {
                count: 0,
                sum: 0.0,
                min: f64::INFINITY,
                max: f64::NEG_INFINITY,
                sketch: None,
            };
        }
        Summary {
            count,
            sum: value * count as f64,
            min: if value.is_nan() { f64::INFINITY } else { value },
            max: if value.is_nan() {
                f64::NEG_INFINITY
            } else {
                value
            },
            sketch: None,
        }
    }

    /// The mean sample, or NaN with no samples.
    pub fn mean(&self) -> f64 {
        self.sum / self.count as f64
    }

    /// The `q`-quantile of the finite samples (`q = 0.5` the median, `0.99` the
    /// p99), within [`QUANTILE_RELATIVE_ERROR`] of the true one: the sample of rank
    /// `floor(q * (n - 1))` among the `n` finite samples in increasing order.
    /// `quantile(0.0)` and `quantile(1.0)` are the exact smallest and largest
    /// finite samples. `None` when there is no finite sample or `q` is outside
    /// `0.0..=1.0` (or NaN).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if !(0.0..=1.0).contains(&q) {
            return None;
        }
        match &self.sketch {
            Some(sketch) => sketch.quantile(q),
            None => self.uniform_value().map(|(value, _)| value),
        }
    }

    /// How many finite samples the quantiles are over.
    pub fn quantile_count(&self) -> u64 {
        match &self.sketch {
            Some(sketch) => sketch.count() as u64,
            None => self.uniform_value().map_or(0, |(_, n)| n),
        }
    }

    /// Without a sketch: the one finite value and how many samples have it.
    fn uniform_value(&self) -> Option<(f64, u64)> {
        debug_assert!(self.sketch.is_none());
        (self.count > 0 && self.min.is_finite() && self.min == self.max)
            .then_some((self.min, self.count))
    }

    /// `self` followed by `later`: the summary of both sample sets.
    #[inline]
    pub fn then(mut self, mut later: Summary) -> Summary {
        let (a, b) = (self.sketch.take(), later.sketch.take());
        // A side's uniform value stands for its samples only when it has no sketch.
        let a_uniform = a.is_none().then(|| self.uniform_value()).flatten();
        let b_uniform = b.is_none().then(|| later.uniform_value()).flatten();
        // Only a fold that involves finite samples touches a sketch; that work is
        // out of line, so that the hub's fold of counters and gauges, which
        // shares `Update::merge` with this, stays small enough to inline.
        let sketch = if a.is_none() && b.is_none() && a_uniform.is_none() && b_uniform.is_none() {
            None
        } else {
            Some(join_sketches(a, a_uniform, b, b_uniform))
        };
        Summary {
            count: self.count + later.count,
            sum: self.sum + later.sum,
            min: self.min.min(later.min),
            max: self.max.max(later.max),
            sketch,
        }
    }
}

/// The sketch of two summaries' finite samples: each side is its sketch, or
/// (without one) its uniform value and how many samples have it. Reuses one of
/// the sketches when there is one; allocates one otherwise.
#[inline(never)]
fn join_sketches(
    a: Option<Box<metrics_util::storage::Summary>>,
    a_uniform: Option<(f64, u64)>,
    b: Option<Box<metrics_util::storage::Summary>>,
    b_uniform: Option<(f64, u64)>,
) -> Box<metrics_util::storage::Summary> {
    match (a, b) {
        (Some(mut a), Some(b)) => {
            merge_sketch(&mut a, &b);
            a
        }
        (Some(mut sketch), None) | (None, Some(mut sketch)) => {
            if let Some((value, n)) = a_uniform.or(b_uniform) {
                add_copies(&mut sketch, value, n);
            }
            sketch
        }
        (None, None) => {
            let mut sketch = new_sketch();
            for (value, n) in [a_uniform, b_uniform].into_iter().flatten() {
                add_copies(&mut sketch, value, n);
            }
            sketch
        }
    }
}

/// The quantiles [`Summary`]'s equality and `Debug` compare and show.
const COMPARED_QUANTILES: usize = 100;

/// Two summaries are equal when their count, sum, min and max are equal and they
/// answer [`quantile`](Summary::quantile) alike at every percentile, from 0.0 to
/// 1.0 in steps of 0.01, and in [`quantile_count`](Summary::quantile_count). The
/// sketch offers no exact comparison of its bins; two sketches of the same
/// samples, folded in any order, compare equal.
impl PartialEq for Summary {
    fn eq(&self, other: &Summary) -> bool {
        (self.count, self.sum, self.min, self.max) == (other.count, other.sum, other.min, other.max)
            && self.quantile_count() == other.quantile_count()
            && (0..=COMPARED_QUANTILES).all(|p| {
                let q = p as f64 / COMPARED_QUANTILES as f64;
                self.quantile(q) == other.quantile(q)
            })
    }
}

impl fmt::Debug for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Summary")
            .field("count", &self.count)
            .field("sum", &self.sum)
            .field("min", &self.min)
            .field("max", &self.max)
            .field("p50", &self.quantile(0.5))
            .field("p90", &self.quantile(0.9))
            .field("p99", &self.quantile(0.99))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_fold() {
        let s = Summary::of(2.0, 1)
            .then(Summary::of(5.0, 3))
            .then(Summary::of(-1.0, 1))
            .then(Summary::of(f64::NAN, 0))
            .then(Summary::of(7.0, 0));
        assert_eq!((s.count, s.sum, s.min, s.max), (5, 16.0, -1.0, 5.0));
        assert_eq!(s.mean(), 3.2);
        assert_eq!(s.quantile_count(), 5);
        assert_eq!(s.quantile(0.0), Some(-1.0));
        assert_eq!(s.quantile(1.0), Some(5.0));
    }

    /// One value, however many times: exact quantiles, no sketch.
    #[test]
    fn one_value_needs_no_sketch() {
        let s = Summary::of(4.0, 3);
        assert!(s.sketch.is_none());
        assert_eq!(s.quantile(0.5), Some(4.0));
        assert_eq!(s.quantile_count(), 3);
        assert_eq!(Summary::of(0.0, 0).quantile(0.5), None);
        assert_eq!(s.quantile(1.5), None);
        assert_eq!(s.quantile(f64::NAN), None);
    }

    /// NaN and the infinities count in `count` and `sum` but not in quantiles.
    #[test]
    fn non_finite_samples_are_not_quantiles() {
        let s = Summary::of(f64::NAN, 2)
            .then(Summary::of(f64::INFINITY, 1))
            .then(Summary::of(f64::NEG_INFINITY, 1));
        assert!(s.sketch.is_none());
        assert_eq!((s.count, s.quantile_count()), (4, 0));
        assert_eq!(s.quantile(0.5), None);
        let s = s.then(Summary::of(3.0, 2));
        assert_eq!(
            (s.count, s.min, s.max),
            (6, f64::NEG_INFINITY, f64::INFINITY)
        );
        // The infinities in min and max leave no room for the one value: a sketch.
        let p50 = s.quantile(0.5).unwrap();
        assert_eq!(s.quantile_count(), 2);
        assert!((p50 - 3.0).abs() <= 3.0 * QUANTILE_RELATIVE_ERROR, "{p50}");
    }

    /// `record_many` with a large count goes by doubling, and counts exactly.
    #[test]
    fn many_copies_count_exactly() {
        for n in [2, 63, 64, 65, 1000, (1 << 20) + 3] {
            let s = Summary::of(1.0, 1).then(Summary::of(10.0, n));
            assert_eq!(s.quantile_count(), n + 1, "n = {n}");
            let p = s.quantile(0.5).unwrap();
            assert!(
                (p - 10.0).abs() <= 10.0 * QUANTILE_RELATIVE_ERROR,
                "n = {n}: {p}"
            );
        }
    }

    /// A sketch whose samples are all one value is not taken for a sketch-less
    /// summary of that value (its samples would count twice).
    #[test]
    fn a_sketch_of_one_value_counts_once() {
        let two = Summary::of(5.0, 1).then(Summary::of(5.0, 1));
        assert!(two.sketch.is_some());
        assert_eq!(two.clone().then(Summary::of(7.0, 1)).quantile_count(), 3);
        assert_eq!(Summary::of(7.0, 1).then(two.clone()).quantile_count(), 3);
        assert_eq!(two.clone().then(two).quantile_count(), 4);
    }

    /// The fold's order does not change the quantiles.
    #[test]
    fn fold_order_does_not_matter() {
        let parts: Vec<Summary> = (1..=50).map(|v| Summary::of(v as f64, v % 3 + 1)).collect();
        let forward = parts.iter().cloned().reduce(Summary::then).unwrap();
        let backward = parts.iter().rev().cloned().reduce(Summary::then).unwrap();
        let halves = parts[..25]
            .iter()
            .cloned()
            .reduce(Summary::then)
            .unwrap()
            .then(parts[25..].iter().cloned().reduce(Summary::then).unwrap());
        assert_eq!(forward, backward);
        assert_eq!(forward, halves);
        assert_ne!(forward, parts[0].clone());
    }
}
