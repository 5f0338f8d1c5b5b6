//! The two iterators every conflate `Receiver` hands out, written once for both
//! implementations: `Iter` (blocking, one `recv` per item) and `TryIter` (one
//! `try_recv` per item). Each ends at the first error, so `Iter` ends when the
//! receiver closes and `TryIter` also when nothing is pending.
//!
//! The argument: `docs/design.md`, "Parking without lost wake-ups".

/// Defines `Iter` and `TryIter` next to the `Receiver<K, V>` in scope, which
/// must have `recv` and `try_recv` returning `Result<Event<K, V>, _>`.
macro_rules! receiver_iterators {
    () => {
        /// Blocking iterator from [`Receiver::iter`]: one [`Receiver::recv`] per
        /// item; ends at `Closed`.
        #[must_use = "iterators are lazy: nothing is received until it is consumed"]
        pub struct Iter<'a, K, V> {
            rx: &'a mut Receiver<K, V>,
        }

        /// Non-blocking iterator from [`Receiver::try_iter`]: one
        /// [`Receiver::try_recv`] per item; ends at `Empty` or `Closed`.
        #[must_use = "iterators are lazy: nothing is received until it is consumed"]
        pub struct TryIter<'a, K, V> {
            rx: &'a mut Receiver<K, V>,
        }

        $crate::conflate::common::receiver_iter::receiver_iterators!(@one Iter, recv);
        $crate::conflate::common::receiver_iter::receiver_iterators!(@one TryIter, try_recv);
    };
    (@one $iter:ident, $step:ident) => {
        impl<K, V> Iterator for $iter<'_, K, V>
        where
            K: std::hash::Hash + Eq + Clone + Send + Sync + 'static,
            V: Clone + Send + 'static,
        {
            type Item = $crate::Event<K, V>;

            fn next(&mut self) -> Option<Self::Item> {
                self.rx.$step().ok()
            }
        }

        impl<K, V> std::fmt::Debug for $iter<'_, K, V> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($iter)).finish_non_exhaustive()
            }
        }
    };
}

pub(crate) use receiver_iterators;
