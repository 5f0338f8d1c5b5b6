//! Per-receiver coalescing policy shared by both `conflate` implementations: which
//! keys a receiver takes, and how a send merges into a pending slot.
//!
//! The argument: `docs/design.md`, "Conflate rules" and "Two kinds of
//! receiver".

use std::fmt;
use std::sync::Arc;

/// A user merge: `(pending, incoming) -> Some(merged)` keeps the slot, `None`
/// annihilates it.
pub(crate) type MergeFn<V> = Arc<dyn Fn(V, V) -> Option<V> + Send + Sync>;

/// A user key predicate.
pub(crate) type FilterFn<K> = Arc<dyn Fn(&K) -> bool + Send + Sync>;

/// How a pending slot absorbs a new send. `NewerWins` is a variant, not a closure, so
/// the default path makes no indirect call.
pub(crate) enum Merge<V> {
    NewerWins,
    With(MergeFn<V>),
}

impl<V> Clone for Merge<V> {
    fn clone(&self) -> Self {
        match self {
            Merge::NewerWins => Merge::NewerWins,
            Merge::With(f) => Merge::With(f.clone()),
        }
    }
}

impl<V> Merge<V> {
    /// Folds `next` into `prev`; `None` means annihilate. May run user code, which
    /// may panic: callers keep their state consistent across that.
    #[inline]
    pub(crate) fn apply(&self, prev: V, next: V) -> Option<V> {
        match self {
            Merge::NewerWins => {
                drop(prev);
                Some(next)
            }
            Merge::With(f) => f(prev, next),
        }
    }
}

impl<V> fmt::Debug for Merge<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Merge::NewerWins => f.write_str("NewerWins"),
            Merge::With(_) => f.write_str("With(..)"),
        }
    }
}

/// Which keys a receiver takes. `key` and `key_filter` are one setting: the later
/// builder call replaces the earlier one.
pub(crate) enum KeyFilter<K> {
    All,
    /// Exactly this key; compared on the send path, no user code runs.
    Key(K),
    /// A user predicate, run on the send path.
    Pred(FilterFn<K>),
}

impl<K: Clone> Clone for KeyFilter<K> {
    fn clone(&self) -> Self {
        match self {
            KeyFilter::All => KeyFilter::All,
            KeyFilter::Key(k) => KeyFilter::Key(k.clone()),
            KeyFilter::Pred(f) => KeyFilter::Pred(f.clone()),
        }
    }
}

impl<K: Eq> KeyFilter<K> {
    /// Whether a send for `key` reaches this receiver. May run user code (and panic).
    #[inline]
    pub(crate) fn accepts(&self, key: &K) -> bool {
        match self {
            KeyFilter::All => true,
            KeyFilter::Key(k) => k == key,
            KeyFilter::Pred(f) => f(key),
        }
    }
}

impl<K> fmt::Debug for KeyFilter<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyFilter::All => f.write_str("All"),
            KeyFilter::Key(_) => f.write_str("Key(..)"),
            KeyFilter::Pred(_) => f.write_str("Pred(..)"),
        }
    }
}

/// A receiver's settings, as collected by a `ReceiverBuilder`.
pub(crate) struct ReceiverConfig<K, V> {
    pub(crate) filter: KeyFilter<K>,
    /// `None`: use the hub's merge.
    pub(crate) merge: Option<Merge<V>>,
    /// Born with the hub's state table pending (`ReceiverBuilder::snapshot`).
    pub(crate) snapshot: bool,
    /// At most this many keys pending (`ReceiverBuilder::max_pending`); `None`:
    /// unbounded.
    pub(crate) max_pending: Option<usize>,
    /// `ReceiverBuilder::name`, for `Hub::receivers` and watches.
    pub(crate) name: Option<Arc<str>>,
}

impl<K, V> Default for ReceiverConfig<K, V> {
    fn default() -> Self {
        ReceiverConfig {
            filter: KeyFilter::All,
            merge: None,
            snapshot: false,
            max_pending: None,
            name: None,
        }
    }
}

impl<K, V> ReceiverConfig<K, V> {
    pub(crate) fn key(mut self, key: K) -> Self {
        self.filter = KeyFilter::Key(key);
        self
    }

    pub(crate) fn key_filter<F>(mut self, keep: F) -> Self
    where
        F: Fn(&K) -> bool + Send + Sync + 'static,
    {
        self.filter = KeyFilter::Pred(Arc::new(keep));
        self
    }

    pub(crate) fn merge<F>(mut self, merge: F) -> Self
    where
        F: Fn(V, V) -> Option<V> + Send + Sync + 'static,
    {
        self.merge = Some(Merge::With(Arc::new(merge)));
        self
    }

    pub(crate) fn name(mut self, name: Arc<str>) -> Self {
        self.name = Some(name);
        self
    }

    pub(crate) fn snapshot(mut self) -> Self {
        self.snapshot = true;
        self
    }

    /// # Panics
    /// If `n` is 0 (documented on both `ReceiverBuilder::max_pending`s).
    #[track_caller]
    pub(crate) fn max_pending(mut self, n: usize) -> Self {
        assert!(
            n >= 1,
            "keybus: ReceiverBuilder::max_pending(0): a receiver must be able to hold at \
             least one pending key; pass n >= 1, or leave max_pending out for an \
             unbounded receiver"
        );
        self.max_pending = Some(n);
        self
    }
}

/// The panic of `ReceiverBuilder::snapshot` on a hub built without
/// `retain_latest` (both implementations).
#[cold]
#[track_caller]
pub(crate) fn no_state_table() -> ! {
    panic!(
        "keybus: ReceiverBuilder::snapshot() on a hub without a state table; build \
         the hub with Hub::builder().retain_latest().build() to keep the latest \
         value per key, or drop .snapshot() for a receiver that starts empty"
    )
}
