//! What keybus's integration tests and fuzz targets share: the op models and
//! lockstep runners (`conflate_ops`, `broadcast_ops`), the plumbing they run on
//! (`harness`: byte sources, quiet expected panics, shrinking), the threads of
//! threaded tests, which fail instead of hanging when one panics (`threads`), the counting
//! allocator (`counting`), the two buses' APIs as traits (`conflate_api`,
//! `broadcast_api`) and the suites written once over them (`conformance`,
//! `bad_input`, `soak`).
//!
//! # One way to run a test against both implementations
//!
//! Every test that runs against both implementations of a bus is written once,
//! as a generic function over the bus's API traits ([`conflate_api::Conflate`],
//! [`broadcast_api::Broadcast`]), and instantiated by [`tests_for!`]: one line
//! per implementation, a module each (`lockfree`, `baseline`), in it one
//! `#[test]` per listed function, calling it. The body is one hop from its
//! `#[test]`:
//!
//! - a suite shared by several files (conformance, bad input, soak) lives here,
//!   one file per topic, and the file in `tests/` names it:
//!   `tests_for! { keybus_test_support::conformance::conflate for … }`;
//! - a suite of one file (allocation, re-entrance, unwind safety, `len` tearing,
//!   …) keeps its generic functions in that file: `tests_for! { crate for … }`,
//!   or `crate::conflate for …` where the file holds a module per bus.
//!
//! A test that compares the implementations within one run (`tests/memory.rs`'s
//! table, `tests/alloc.rs`'s first coalescing pass) calls the same generic
//! functions once per implementation itself. The differential tests are pairs
//! (`keybus` against the baseline, each against the model), not one function per
//! implementation: `tests/differential.rs` lists its pairs and seeds in a table.
//!
//! Names: `tests/<file>.rs` → `lockfree::<function>` and `baseline::<function>`,
//! so `cargo test --test <file> <function>` runs it on both, and
//! `lockfree::<function>` on one.
//!
//! Not published: a dev-dependency of `keybus` (an integration test links this
//! crate and the library it depends on, which is the same `keybus`) and a
//! dependency of the fuzz package.

pub mod bad_input;
pub mod broadcast_api;
pub mod broadcast_ops;
pub mod conflate_api;
pub mod conflate_ops;
pub mod conformance;
pub mod counting;
pub mod harness;
pub mod soak;
pub mod threads;

/// Turns generic test bodies into `#[test]` functions: a module per
/// implementation, in it one test per entry.
///
/// ```ignore
/// use keybus_test_support::broadcast_api::{Baseline, Lockfree};
/// use keybus_test_support::conformance::broadcast as suite;
///
/// // `suite` is any path to a module of generic functions: a suite of this
/// // crate, or `crate` (or `crate::some_module`) for bodies in the test file.
/// keybus_test_support::tests_for! {
///     suite for baseline = Baseline, lockfree = Lockfree => {
///         rule1_revisions_start_at_one_and_rise_by_one,
///         #[should_panic] capacity_zero_panics,
///         constant_hash_keys_are_correct = colliding_keys_are_correct::<Collide>(),
///         key_hash_panicking_mid_send = survives_panicking_trait(Which::Hash, false),
///     }
/// }
/// ```
///
/// expands to `mod baseline { #[test] fn rule1_…() { suite::rule1_…::<Baseline>() } … }`
/// and the same for `lockfree`. An entry `name` runs the body of that name; an
/// entry `name = body::<T…>(args…)` runs `body::<Baseline, T…>(args…)`. Each
/// module sees the file's imports.
#[macro_export]
macro_rules! tests_for {
    ($($suite:ident)::+ for $($module:ident = $imp:ty),+ => { $($tests:tt)* }) => {
        $crate::tests_for!(@each [$($suite)::+] [$($tests)*] $($module = $imp),+);
    };
    (@each $suite:tt $tests:tt $module:ident = $imp:ty $(, $($rest:tt)*)?) => {
        $crate::tests_for!(@module $suite $tests $module $imp);
        $($crate::tests_for!(@each $suite $tests $($rest)*);)?
    };
    (@module [$($suite:ident)::+] [$($tests:tt)*] $module:ident $imp:ty) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            use $($suite)::+ as bodies;
            $crate::tests_for!(@tests $imp; $($tests)*);
        }
    };
    (@tests $imp:ty;) => {};
    (
        @tests $imp:ty;
        $(#[$attr:meta])*
        $test:ident = $body:ident $(::<$($targ:ty),+>)? ($($arg:expr),* $(,)?)
        $(, $($rest:tt)*)?
    ) => {
        #[test]
        $(#[$attr])*
        fn $test() {
            bodies::$body::<$imp $($(, $targ)+)?>($($arg),*);
        }
        $crate::tests_for!(@tests $imp; $($($rest)*)?);
    };
    (@tests $imp:ty; $(#[$attr:meta])* $test:ident $(, $($rest:tt)*)?) => {
        #[test]
        $(#[$attr])*
        fn $test() {
            bodies::$test::<$imp>();
        }
        $crate::tests_for!(@tests $imp; $($($rest)*)?);
    };
}
