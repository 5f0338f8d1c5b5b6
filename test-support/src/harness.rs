//! Plumbing shared by the differential tests and the fuzz targets: where op
//! sequences come from, how expected panics are caught quietly, and how a failing
//! sequence is shrunk.
//!
//! Ops are *generated* from a [`Source`] of bytes, not derived with `arbitrary`, so
//! a seeded RNG (tests) and a fuzzer's input (fuzz targets) go through one decoder
//! and produce the same op distribution: a sequence found by either replays in the
//! other.

use std::any::Any;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Once};
use std::task::{Context, Poll, Wake, Waker};

/// Where generated ops take their choices from.
pub trait Source {
    /// The next byte of choice.
    fn byte(&mut self) -> u8;

    /// Whether the source has run dry (a fuzzer input is finite; an RNG never is).
    fn is_exhausted(&self) -> bool;

    /// A number in `0..n` (`n` <= 256). Modulo keeps every byte meaningful for the
    /// fuzzer; its small bias does not matter for test generation.
    fn below(&mut self, n: u32) -> u32 {
        debug_assert!((1..=256).contains(&n));
        u32::from(self.byte()) % n
    }

    /// Picks an index by weight: `weights[i]` out of their sum.
    fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u32 = weights.iter().sum();
        // Two bytes so that weights summing past 256 stay reachable.
        let roll = ((u32::from(self.byte()) << 8) | u32::from(self.byte())) % total;
        let mut acc = 0;
        for (i, w) in weights.iter().enumerate() {
            acc += w;
            if roll < acc {
                return i;
            }
        }
        unreachable!("roll < total")
    }
}

/// The most ops a fuzz input decodes to: long enough to reach deep states, short
/// enough to keep executions fast. The corpus replay test uses the same bound.
pub const FUZZ_MAX_OPS: usize = 1000;

/// A fuzzer's input as a [`Source`]: zeros once it runs out, so decoding always
/// terminates with a valid sequence.
pub struct Bytes<'a> {
    data: &'a [u8],
}

impl<'a> Bytes<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Bytes { data }
    }
}

impl Source for Bytes<'_> {
    fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    fn is_exhausted(&self) -> bool {
        self.data.is_empty()
    }
}

/// A seeded RNG as a [`Source`].
pub struct Rng(pub fastrand::Rng);

impl Source for Rng {
    fn byte(&mut self) -> u8 {
        self.0.u8(..)
    }

    fn is_exhausted(&self) -> bool {
        false
    }
}

/// How often each outcome kind came up: evidence that the sequences reach the
/// interesting states (panics, annihilation, closes), printed by the tests.
pub type Tally = BTreeMap<&'static str, usize>;

/// Adds `more` into `into`.
pub fn merge_tally(into: &mut Tally, more: Tally) {
    for (k, n) in more {
        *into.entry(k).or_default() += n;
    }
}

/// Resolves an op's handle index against a list of `len` handles; `None` when
/// there is no handle (the op is then skipped, identically on both sides).
pub fn pick(len: usize, index: u8) -> Option<usize> {
    (len > 0).then(|| usize::from(index) % len)
}

/// The two plain outcomes an op model's `Outcome` has: the op did something,
/// or it had no handle to act on.
pub trait Answer: Sized {
    /// The op did something.
    const DONE: Self;
    /// The op had no handle to act on.
    const SKIPPED: Self;

    /// [`DONE`](Self::DONE) if the op did something (as [`drop_picked`] and
    /// [`clone_picked`] report), else [`SKIPPED`](Self::SKIPPED).
    fn done(did: bool) -> Self {
        if did {
            Self::DONE
        } else {
            Self::SKIPPED
        }
    }
}

/// Drops the handle `index` picks (see [`pick`]); `false` when there is none.
pub fn drop_picked<H>(handles: &mut Vec<H>, index: u8) -> bool {
    pick(handles.len(), index)
        .map(|n| drop(handles.remove(n)))
        .is_some()
}

/// Pushes a clone of the handle `index` picks, unless `handles` already holds
/// `max`; `false` when it does or there is none to clone.
pub fn clone_picked<H>(
    handles: &mut Vec<H>,
    index: u8,
    max: usize,
    clone: impl FnOnce(&H) -> H,
) -> bool {
    match pick(handles.len(), index) {
        Some(n) if handles.len() < max => {
            let made = clone(&handles[n]);
            handles.push(made);
            true
        }
        _ => false,
    }
}

/// The payload of a panic raised on purpose by a user callback (a merge or key
/// filter) under test. Distinct from any message an implementation could panic
/// with, so "the user's panic came through" is told apart from "the bus panicked".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserPanic(pub &'static str);

thread_local! {
    /// Set while [`catch`] runs: panics there are expected outcomes, not failures.
    static CATCHING: Cell<bool> = const { Cell::new(false) };
}

static HOOK: Once = Once::new();

/// Installs (once per process) a panic hook that stays silent for panics inside
/// [`catch`] and defers to the previous hook otherwise. Without it every expected
/// panic would print a message, and under libFuzzer (whose hook aborts) it would
/// end the run.
pub fn quiet_expected_panics() {
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !CATCHING.with(Cell::get) {
                previous(info);
            }
        }));
    });
}

/// Runs `f`, turning a panic into `Err`.
pub fn catch<R>(f: impl FnOnce() -> R) -> Result<R, Panic> {
    quiet_expected_panics();
    let was = CATCHING.with(|c| c.replace(true));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    CATCHING.with(|c| c.set(was));
    result.map_err(|payload| Panic::from_payload(&*payload))
}

/// A caught panic, as an op outcome.
///
/// Equality looks only at *whose* panic it was: a [`UserPanic`] (and which
/// callback) must come through identically from both implementations, but the
/// wording of an implementation's own panic (say, "limit must be at least 1") is
/// not part of the contract, so two panics of the implementations' own compare
/// equal whatever they say. The message is kept for reports.
#[derive(Debug, Clone)]
pub struct Panic {
    /// `Some(callback)` for a [`UserPanic`], `None` for the implementation's own.
    pub user: Option<&'static str>,
    pub message: String,
}

impl PartialEq for Panic {
    fn eq(&self, other: &Self) -> bool {
        self.user == other.user
    }
}

impl Eq for Panic {}

impl Panic {
    pub fn from_payload(payload: &(dyn Any + Send)) -> Panic {
        let user = payload.downcast_ref::<UserPanic>().map(|p| p.0);
        let message = if let Some(p) = user {
            format!("user panic: {p}")
        } else if let Some(s) = payload.downcast_ref::<&str>() {
            (*s).to_owned()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "<non-string payload>".to_owned()
        };
        Panic { user, message }
    }
}

/// A generated sequence: what the buses are built with (`setup`), then the ops.
/// The unit a differential test runs, a fuzzer finds and the shrinker cuts down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario<S, Op> {
    pub setup: S,
    pub ops: Vec<Op>,
}

impl<S: Clone, Op: Clone> Scenario<S, Op> {
    /// `setup` and the `first` ops, then ops drawn by `op` until there are
    /// `max_ops` or the source runs dry.
    pub fn fill<Src: Source>(
        setup: S,
        first: Vec<Op>,
        src: &mut Src,
        max_ops: usize,
        mut op: impl FnMut(&mut Src) -> Op,
    ) -> Self {
        let mut ops = first;
        while ops.len() < max_ops && !src.is_exhausted() {
            ops.push(op(src));
        }
        Scenario { setup, ops }
    }

    /// The shortest sub-sequence (by chunk deletion, the setup kept) on which
    /// `fails` still holds.
    pub fn shrink(&self, mut fails: impl FnMut(&Self) -> bool) -> Self {
        let ops = shrink(self.ops.clone(), |ops| {
            fails(&Scenario {
                setup: self.setup.clone(),
                ops: ops.to_vec(),
            })
        });
        Scenario {
            setup: self.setup.clone(),
            ops,
        }
    }
}

impl<S: fmt::Debug, Op: fmt::Debug> fmt::Display for Scenario<S, Op> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "setup: {:?}", self.setup)?;
        for (i, op) in self.ops.iter().enumerate() {
            writeln!(f, "{i:>4}: {op:?}")?;
        }
        Ok(())
    }
}

/// Shrinks a failing op sequence by deleting chunks (halving the chunk size down to
/// single ops) while `fails` still holds. Ops refer to handles by index modulo the
/// live count, so every subsequence is a valid sequence.
pub fn shrink<T: Clone>(mut ops: Vec<T>, mut fails: impl FnMut(&[T]) -> bool) -> Vec<T> {
    let mut chunk = ops.len().div_ceil(2).max(1);
    loop {
        let mut removed_any = false;
        let mut start = 0;
        while start < ops.len() {
            let end = (start + chunk).min(ops.len());
            let mut candidate = Vec::with_capacity(ops.len() - (end - start));
            candidate.extend_from_slice(&ops[..start]);
            candidate.extend_from_slice(&ops[end..]);
            if fails(&candidate) {
                ops = candidate;
                removed_any = true;
            } else {
                start += chunk;
            }
        }
        if chunk == 1 && !removed_any {
            return ops;
        }
        if !removed_any || chunk > 1 {
            chunk = (chunk / 2).max(1);
        }
    }
}

/// Reads a `usize` knob from the environment.
pub fn env_usize(name: &str) -> Option<usize> {
    let raw = std::env::var(name).ok()?;
    Some(
        raw.trim()
            .replace('_', "")
            .parse()
            .unwrap_or_else(|_| panic!("{name}={raw:?} is not a number")),
    )
}

/// Reads a `u64` knob from the environment (decimal or `0x` hex).
pub fn env_u64(name: &str) -> Option<u64> {
    let raw = std::env::var(name).ok()?;
    let s = raw.trim().replace('_', "");
    let parsed = match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    Some(parsed.unwrap_or_else(|_| panic!("{name}={raw:?} is not a number")))
}

/// Polls `future` once with a waker that does nothing, then drops it: `Some` if it
/// was ready. Single-threaded sequences use it to compare the async receive forms,
/// and dropping a pending future checks that it consumed nothing.
pub fn poll_once<F: Future>(future: F) -> Option<F::Output> {
    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    let waker = Waker::from(Arc::new(Noop));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    match future.as_mut().poll(&mut cx) {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}

/// One side of a differential run: an implementation driven op by op.
pub trait Lockstep {
    type Op: Clone + fmt::Debug;
    type Outcome: PartialEq + fmt::Debug;
    type Snapshot: PartialEq + fmt::Debug;
    fn apply(&mut self, op: &Self::Op) -> Self::Outcome;
    /// The outcome's kind, for coverage tallies.
    fn label(outcome: &Self::Outcome) -> &'static str;
    /// Every non-consuming query, compared after each op.
    fn snapshot(&self) -> Self::Snapshot;
    /// The ops appended to every sequence (drain, close, drain).
    fn epilogue(&self) -> Vec<Self::Op>;
    /// A check of this side alone after each op (`Some(why)` when it fails): two
    /// implementations that agree can still both be wrong, e.g. hold values they
    /// should have dropped.
    fn check_alone(&self) -> Option<String> {
        None
    }
}

/// The first difference between two implementations on one sequence.
#[derive(Debug, Clone)]
pub struct Mismatch<Op> {
    /// Index into the sequence's ops, or into the epilogue.
    pub step: usize,
    /// Whether `step` is in the epilogue the runner appends to every sequence.
    pub epilogue: bool,
    pub op: Op,
    /// What differed: the op's result, the snapshot after it, or a panic.
    pub what: &'static str,
    pub a: String,
    pub b: String,
}

impl<Op: fmt::Debug> fmt::Display for Mismatch<Op> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at {} step {} ({:?}):\n  a: {}\n  b: {}",
            self.what,
            if self.epilogue { "epilogue" } else { "op" },
            self.step,
            self.op,
            self.a,
            self.b
        )
    }
}

/// Applies `ops` to `a` and `b` in lockstep, comparing every op's result, the
/// snapshot after it and each side's own check; then runs `a`'s epilogue the same
/// way. Returns a tally of outcome kinds.
pub fn lockstep<A, B>(a: &mut A, b: &mut B, ops: &[A::Op]) -> Result<Tally, Mismatch<A::Op>>
where
    A: Lockstep,
    B: Lockstep<Op = A::Op, Outcome = A::Outcome, Snapshot = A::Snapshot>,
{
    let mut tally = Tally::new();
    let mut step = |(i, epilogue): (usize, bool), op: &A::Op, a: &mut A, b: &mut B| {
        let mismatch = |what, x: String, y: String| Mismatch {
            step: i,
            epilogue,
            op: op.clone(),
            what,
            a: x,
            b: y,
        };
        match (catch(|| a.apply(op)), catch(|| b.apply(op))) {
            (Ok(ra), Ok(rb)) if ra == rb => *tally.entry(A::label(&ra)).or_default() += 1,
            (Ok(ra), Ok(rb)) => {
                return Err(mismatch(
                    "result differs",
                    format!("{ra:?}"),
                    format!("{rb:?}"),
                ))
            }
            (ra, rb) => {
                return Err(mismatch(
                    "unexpected panic",
                    format!("{ra:?}"),
                    format!("{rb:?}"),
                ))
            }
        }
        let (sa, sb) = (a.snapshot(), b.snapshot());
        if sa != sb {
            return Err(mismatch(
                "snapshot differs",
                format!("{sa:?}"),
                format!("{sb:?}"),
            ));
        }
        let (xa, xb) = (a.check_alone(), b.check_alone());
        if xa.is_some() || xb.is_some() {
            return Err(mismatch(
                "a side's own check failed",
                format!("{xa:?}"),
                format!("{xb:?}"),
            ));
        }
        Ok(())
    };
    for (i, op) in ops.iter().enumerate() {
        step((i, false), op, a, b)?;
    }
    for (i, op) in a.epilogue().iter().enumerate() {
        step((i, true), op, a, b)?;
    }
    Ok(tally)
}
