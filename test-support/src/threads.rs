//! Threads of a test that fail instead of hanging.
//!
//! A test that spawns a producer and waits for a consumer to see `Closed` hangs
//! forever when the producer panics before it closes: nobody closes, the
//! consumer waits, and the test waits for the consumer. Every test here that
//! runs threads runs them in a [`Crew`], which turns that into a failure:
//!
//! - **On the first panic** of any crew thread (or of the test's own thread
//!   inside [`Crew::scope`]) the crew runs the *closers* the test registered
//!   with [`Crew::on_panic`] (close the hub, close the buffer), so threads
//!   blocked in a receive see `Closed` and end; loops that wait on an atomic
//!   instead check [`Crew::panicked`]. Then the scope joins its threads and
//!   fails the test with the first panic's message, not with the secondary
//!   failures it caused.
//! - **A watchdog** (one thread per crew) ends the test binary, with a report on
//!   the real stderr (libtest's capture would swallow it), if the crew is still
//!   running [`grace`] after that first panic (a thread the closers could not
//!   reach), or [`hang_bound`] after the crew was made (a hang with no panic).
//!   Both are bounds on a wait that already failed or can only fail, not timing
//!   assertions: a healthy crew ends in milliseconds (the slowest threaded test
//!   takes about 2 s in a debug build), and nothing here checks how fast.
//!
//! **Planted panics** show that this works: with `KEYBUS_PLANT_PANIC=k` in the
//! environment, the `k`-th thread spawned through any crew of the process
//! (counting from 0) panics as it starts. [`audit`] re-runs tests of the current
//! test binary as child processes with a panic planted and checks that each one
//! *fails* (and does not hang: the child's own watchdog bounds it, and the
//! parent kills a child that outlives a generous bound and reports it as hung).

use std::collections::BTreeMap;
use std::fs;
use std::io::Write as _;
use std::panic::{self, AssertUnwindSafe};
use std::process::{Command, Stdio};
use std::sync::atomic::{
    AtomicBool, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::{self, Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

/// The environment variable that plants a panic: `KEYBUS_PLANT_PANIC=k` makes
/// the `k`-th crew thread of the process panic as it starts.
pub const PLANT: &str = "KEYBUS_PLANT_PANIC";

/// The message every planted panic starts with.
pub const PLANTED: &str = "planted panic";

/// What the watchdog's report starts with.
pub const WATCHDOG: &str = "keybus watchdog:";

/// Set in the children [`audit`] runs, so that their own audit tests do nothing.
const AUDIT_CHILD: &str = "KEYBUS_AUDIT_CHILD";

fn env_secs(name: &str, default: f64) -> Duration {
    std::env::var(name)
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(Duration::from_secs_f64(default), Duration::from_secs_f64)
}

/// How long a crew may run with no panic before the watchdog calls it a hang:
/// `KEYBUS_HANG_SECS`, default 60 (libtest's own "running for over 60 seconds"
/// mark, which only warns).
pub fn hang_bound() -> Duration {
    env_secs("KEYBUS_HANG_SECS", 60.0)
}

/// How long a crew may go on after its first panic before the watchdog ends the
/// binary: `KEYBUS_PANIC_GRACE_SECS`, default 5. The closers normally end a
/// failed crew at once; this bounds the case where they cannot.
pub fn grace() -> Duration {
    env_secs("KEYBUS_PANIC_GRACE_SECS", 5.0)
}

/// The planted thread index, if any (read once).
fn planted() -> Option<usize> {
    static PLANTED_AT: OnceLock<Option<usize>> = OnceLock::new();
    *PLANTED_AT.get_or_init(|| {
        let raw = std::env::var(PLANT).ok()?;
        Some(
            raw.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{PLANT}={raw:?} is not a thread index")),
        )
    })
}

/// Crew threads spawned in this process so far (what [`PLANT`] counts).
/// Only its atomicity matters (each index once): Relaxed.
static SPAWNED: AtomicUsize = AtomicUsize::new(0);

/// A panic's message, from its payload.
pub fn message_of(payload: &(dyn std::any::Any + Send)) -> String {
    crate::harness::Panic::from_payload(payload).message
}

/// The first panic of a crew.
struct Failure {
    who: String,
    message: String,
    /// The test's own thread (inside [`Crew::scope`]) rather than a crew thread.
    main: bool,
}

#[derive(Default)]
struct State {
    /// The crew was dropped: the watchdog stops.
    done: bool,
    first: Option<Failure>,
    panicked_at: Option<Instant>,
    /// Crew threads still running: index -> name.
    running: BTreeMap<usize, String>,
}

/// What the crew and its watchdog share.
struct Shared {
    what: String,
    state: Mutex<State>,
    /// Signalled when `state` changes.
    changed: Condvar,
    /// `state.first.is_some()`, readable without the lock (spin loops poll it).
    /// Set (Release) after `state.first`; read (Acquire) by loops that only
    /// stop on it, and by `Crew::scope`, which then takes the lock anyway.
    panicked: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The threads of one test; see the [module docs](self).
///
/// ```
/// use keybus_test_support::threads::Crew;
/// use std::sync::mpsc;
///
/// let (tx, rx) = mpsc::channel::<u32>();
/// let crew = Crew::new("example");
/// let sum = crew.scope(|s| {
///     let consumer = crew.spawn(s, move || rx.iter().sum::<u32>());
///     crew.spawn(s, move || (1..=4).for_each(|i| tx.send(i).unwrap()));
///     consumer.join().unwrap()
/// });
/// assert_eq!(sum, 10);
/// ```
pub struct Crew<'a> {
    shared: Arc<Shared>,
    /// Run once, on the first panic.
    closers: Mutex<Vec<Box<dyn Fn() + Send + Sync + 'a>>>,
    closed: AtomicBool,
    watchdog: Option<thread::JoinHandle<()>>,
}

impl<'a> Crew<'a> {
    /// A crew for the test (or part of a test) `what`, with its watchdog armed.
    pub fn new(what: impl Into<String>) -> Self {
        let shared = Arc::new(Shared {
            what: what.into(),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            panicked: AtomicBool::new(false),
        });
        let watched = shared.clone();
        let (hang, grace) = (hang_bound(), grace());
        let watchdog = thread::Builder::new()
            .name("keybus-watchdog".into())
            .spawn(move || watch(&watched, hang, grace))
            .expect("spawn the watchdog");
        Crew {
            shared,
            closers: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
            watchdog: Some(watchdog),
        }
    }

    /// Registers `close` to run on the crew's first panic, from the panicking
    /// thread (e.g. `|| hub.close()`): it should make every thread that waits
    /// for the panicked one stop waiting. A closer that panics is ignored.
    pub fn on_panic(&self, close: impl Fn() + Send + Sync + 'a) {
        self.closers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Box::new(close));
    }

    /// Whether a thread of the crew (or the test's own, in [`Crew::scope`])
    /// has panicked: loops that wait on an atomic another thread would have
    /// set check this and give up.
    pub fn panicked(&self) -> bool {
        self.shared.panicked.load(Acquire)
    }

    /// `std::thread::scope`, watched: a panic of the test's own thread inside
    /// `f` runs the closers like a crew thread's, and once every thread is
    /// joined the scope fails with the crew's *first* panic (a consumer that
    /// found the hub closed by a closer panics too, but second). Also fails if
    /// a crew thread panicked and `f` returned anyway.
    pub fn scope<'env, T>(
        &'env self,
        f: impl for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
    ) -> T
    where
        'a: 'env,
    {
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
            thread::scope(|s| match panic::catch_unwind(AssertUnwindSafe(|| f(s))) {
                Ok(t) => Ok(t),
                Err(payload) => {
                    self.failed("the test's own thread", &*payload, true);
                    Err(payload)
                }
            })
        }));
        let own = match outcome {
            Ok(Ok(t)) if !self.panicked() => return t,
            Ok(Ok(_)) => None,
            Ok(Err(payload)) | Err(payload) => Some(payload),
        };
        let first = self.shared.lock().first.take();
        match (first, own) {
            (Some(f), Some(payload)) if f.main => panic::resume_unwind(payload),
            (Some(f), _) => panic!(
                "{}: thread '{}' panicked first: {}",
                self.shared.what, f.who, f.message
            ),
            (None, Some(payload)) => panic::resume_unwind(payload),
            (None, None) => unreachable!("panicked() without a first panic"),
        }
    }

    /// Spawns `f` on a crew thread of scope `s` (named `what:index`). A panic
    /// in it is recorded, runs the closers, wakes the watchdog, and then goes
    /// on unwinding as usual (its join handle returns it).
    pub fn spawn<'scope, 'env, F, T>(
        &'scope self,
        s: &'scope Scope<'scope, 'env>,
        f: F,
    ) -> ScopedJoinHandle<'scope, T>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        let index = SPAWNED.fetch_add(1, Relaxed);
        let name = format!("{}:{index}", self.shared.what);
        self.shared.lock().running.insert(index, name.clone());
        let thread_name = name.clone();
        thread::Builder::new()
            .name(thread_name)
            .spawn_scoped(s, move || {
                let _running = Running { crew: self, index };
                let result = panic::catch_unwind(AssertUnwindSafe(|| {
                    if planted() == Some(index) {
                        panic!("{PLANTED} in crew thread {index} ({name}), {PLANT}={index}");
                    }
                    f()
                }));
                match result {
                    Ok(t) => t,
                    Err(payload) => {
                        self.failed(&name, &*payload, false);
                        panic::resume_unwind(payload)
                    }
                }
            })
            .expect("spawn a crew thread")
    }

    /// A barrier for `n` threads of this crew (`std::sync::Barrier`, except
    /// that a thread waiting at it gives up, with a panic, once a crew thread
    /// has panicked: one that panicked before it arrived would otherwise keep
    /// the others waiting forever).
    pub fn barrier(&self, n: usize) -> CrewBarrier<'_, 'a> {
        CrewBarrier {
            crew: self,
            n,
            state: Mutex::new((0, 0)),
            arrived: Condvar::new(),
        }
    }

    /// `rx.recv_timeout(timeout)`, except that it gives up early, with
    /// `Timeout`, once a crew thread panicked (the sender may be that thread:
    /// the wait would then last its whole `timeout`).
    pub fn recv_timeout<T>(
        &self,
        rx: &mpsc::Receiver<T>,
        timeout: Duration,
    ) -> Result<T, mpsc::RecvTimeoutError> {
        // How often the crew's panic flag is looked at: a poll period.
        const POLL: Duration = Duration::from_millis(10);
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left.min(POLL)) {
                Err(mpsc::RecvTimeoutError::Timeout) if !left.is_zero() && !self.panicked() => {}
                r => return r,
            }
        }
    }

    /// Records a panic (the first one is kept), wakes the watchdog, runs the
    /// closers once.
    fn failed(&self, who: &str, payload: &(dyn std::any::Any + Send), main: bool) {
        {
            let mut st = self.shared.lock();
            if st.first.is_none() {
                st.first = Some(Failure {
                    who: who.to_owned(),
                    message: message_of(payload),
                    main,
                });
                st.panicked_at = Some(Instant::now());
            }
        }
        self.shared.panicked.store(true, Release);
        self.shared.changed.notify_all();
        // Only its atomicity matters (one thread runs the closers): Relaxed.
        if !self.closed.swap(true, Relaxed) {
            let closers = self.closers.lock().unwrap_or_else(|e| e.into_inner());
            for close in closers.iter() {
                let _ = panic::catch_unwind(AssertUnwindSafe(close));
            }
        }
    }
}

impl Drop for Crew<'_> {
    fn drop(&mut self) {
        self.shared.lock().done = true;
        self.shared.changed.notify_all();
        if let Some(w) = self.watchdog.take() {
            let _ = w.join();
        }
    }
}

/// See [`Crew::barrier`].
pub struct CrewBarrier<'c, 'a> {
    crew: &'c Crew<'a>,
    n: usize,
    /// (threads arrived in this generation, generation)
    state: Mutex<(usize, u64)>,
    arrived: Condvar,
}

impl CrewBarrier<'_, '_> {
    /// Waits until `n` threads have called `wait` (then the barrier is reset,
    /// like `std::sync::Barrier`); panics instead if a crew thread panicked.
    pub fn wait(&self) {
        // How often a waiting thread looks at the crew's panic flag: a poll
        // period, not a bound (it waits as long as the others take).
        const POLL: Duration = Duration::from_millis(10);
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let generation = st.1;
        st.0 += 1;
        if st.0 == self.n {
            *st = (0, generation + 1);
            self.arrived.notify_all();
            return;
        }
        while st.1 == generation {
            assert!(
                !self.crew.panicked(),
                "{}: a crew thread panicked; no longer waiting at the barrier",
                self.crew.shared.what
            );
            st = self
                .arrived
                .wait_timeout(st, POLL)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// Marks a crew thread finished, however it ends.
struct Running<'c, 'a> {
    crew: &'c Crew<'a>,
    index: usize,
}

impl Drop for Running<'_, '_> {
    fn drop(&mut self) {
        self.crew.shared.lock().running.remove(&self.index);
        self.crew.shared.changed.notify_all();
    }
}

/// The watchdog: waits until the crew is dropped; ends the binary if it runs
/// past `grace` after its first panic or past `hang` in all.
fn watch(shared: &Shared, hang: Duration, grace: Duration) {
    let start = Instant::now();
    let mut st = shared.lock();
    loop {
        if st.done {
            return;
        }
        let deadline = match st.panicked_at {
            Some(at) => (at + grace).min(start + hang),
            None => start + hang,
        };
        let now = Instant::now();
        if now >= deadline {
            let why = match &st.first {
                Some(f) => format!(
                    "'{}' panicked ({}) and the crew had not ended {grace:?} later",
                    f.who, f.message
                ),
                None => format!("no panic, and the crew had not ended after {hang:?} (a hang)"),
            };
            let running: Vec<&String> = st.running.values().collect();
            // The real stderr: libtest captures `eprintln!`, and its capture
            // is lost when the process exits.
            let _ = writeln!(
                std::io::stderr().lock(),
                "{WATCHDOG} {}: {why}; threads still running: {running:?}. \
                 Ending the test binary (a hang is a failure).",
                shared.what
            );
            std::process::exit(101);
        }
        st = shared
            .changed
            .wait_timeout(st, deadline - now)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

/// How a child run with a planted panic ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Planted {
    /// The test failed on its own: the closers (or the panic alone) ended it.
    Failed,
    /// The watchdog ended it, after its grace.
    Watchdog,
    /// The test spawned fewer crew threads: nothing was planted, and it passed.
    NotSpawned,
    /// A panic was planted and the test passed: a panicking thread went unseen.
    Passed,
    /// The child ran past the parent's bound and was killed.
    Hung,
    /// The child did not run exactly one test, or passed a test with no crew
    /// thread where one was expected.
    Other,
}

/// Runs test `name` of this binary in a child process with a panic planted in
/// crew thread `k`; returns how it ended and its output.
pub fn run_planted(name: &str, k: usize) -> (Planted, String) {
    // A unique log name per run: only atomicity matters, Relaxed.
    static RUN: AtomicUsize = AtomicUsize::new(0);
    let log = std::env::temp_dir().join(format!(
        "keybus-planted-{}-{}.log",
        std::process::id(),
        RUN.fetch_add(1, Relaxed)
    ));
    let file = fs::File::create(&log).expect("create the child's log");
    let mut child = Command::new(std::env::current_exe().expect("this test binary"))
        .args([name, "--exact", "--test-threads", "1", "--nocapture"])
        .env(PLANT, k.to_string())
        .env(AUDIT_CHILD, "1")
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("clone the log handle"))
        .stderr(file)
        .spawn()
        .expect("run the test binary again");
    // The child's own watchdog ends it within its grace of the planted panic
    // (or its hang bound); this bound only catches a child whose watchdog
    // failed too.
    let bound = hang_bound() + grace() + Duration::from_secs(60);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break Some(status);
        }
        if started.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(10));
    };
    let output = fs::read_to_string(&log).unwrap_or_default();
    let _ = fs::remove_file(&log);
    let fired = output.contains(PLANTED);
    let how = match status {
        None => Planted::Hung,
        Some(_) if !output.contains("running 1 test") => Planted::Other,
        Some(s) if s.success() && fired => Planted::Passed,
        Some(s) if s.success() => Planted::NotSpawned,
        Some(_) if !fired => Planted::Other,
        Some(_) if output.contains(WATCHDOG) => Planted::Watchdog,
        Some(_) => Planted::Failed,
    };
    (how, output)
}

/// The names of every test in this binary (`--list`).
fn all_tests() -> Vec<String> {
    let out = Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--list", "--format", "terse"])
        .env(AUDIT_CHILD, "1")
        .output()
        .expect("list the tests");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_owned)
        .collect()
}

/// Plants a panic into crew threads of the tests of this binary, one child
/// process per planted thread, and fails unless every planted run failed
/// (rather than passing or hanging).
///
/// By default: thread 0 of each test in `tests` (names as libtest prints them,
/// e.g. `lockfree::rule13_…`), each of which must spawn at least one crew
/// thread ([`audit_in`]: the first few threads). With `KEYBUS_PLANT_AUDIT=all`: every test of the binary (a test
/// that spawns no crew thread passes unplanted and is skipped) and, per test,
/// threads 0, 1, … up to `KEYBUS_PLANT_AUDIT_THREADS` (default 6) or the
/// first index the test does not reach. Prints a table of the outcomes.
/// Does nothing in a child it started, or under ThreadSanitizer.
pub fn audit(tests: &[&str]) {
    audit_names(tests.iter().map(|s| (*s).to_owned()).collect(), 1);
}

/// [`audit`] of `module::test` for every module (`lockfree`, `baseline`: the
/// modules [`tests_for!`](crate::tests_for) makes) and test, planting into
/// each of the first `threads` crew threads in turn (by default; at least as
/// many with `KEYBUS_PLANT_AUDIT=all`).
pub fn audit_in(modules: &[&str], tests: &[&str], threads: usize) {
    audit_names(
        modules
            .iter()
            .flat_map(|m| tests.iter().map(move |t| format!("{m}::{t}")))
            .collect(),
        threads,
    );
}

fn audit_names(tests: Vec<String>, threads: usize) {
    if std::env::var_os(AUDIT_CHILD).is_some() {
        return;
    }
    if std::env::var_os("KEYBUS_TSAN").is_some() {
        // Under ThreadSanitizer (`.ci/tsan`) the children would each start an
        // instrumented binary to check the harness, not the buses: skipped.
        println!("planted-panic audit skipped under ThreadSanitizer");
        return;
    }
    let all = std::env::var("KEYBUS_PLANT_AUDIT").is_ok_and(|v| v == "all");
    let me = thread::current().name().map(str::to_owned);
    let (names, per): (Vec<String>, usize) = if all {
        let sweep = crate::harness::env_usize("KEYBUS_PLANT_AUDIT_THREADS").unwrap_or(6);
        let names = all_tests()
            .into_iter()
            .filter(|n| Some(n) != me.as_ref())
            .collect();
        (names, sweep.max(threads))
    } else {
        (tests, threads)
    };
    let mut bad = Vec::new();
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    for name in &names {
        for k in 0..per {
            let (how, output) = run_planted(name, k);
            println!("planted panic in crew thread {k} of {name}: {how:?}");
            *tally.entry(format!("{how:?}")).or_default() += 1;
            match how {
                Planted::Failed | Planted::Watchdog => {}
                Planted::NotSpawned if all || k > 0 => break,
                _ => {
                    let tail: String = {
                        let lines: Vec<&str> = output.lines().collect();
                        lines[lines.len().saturating_sub(15)..].join("\n")
                    };
                    bad.push(format!("{name}, thread {k}: {how:?}\n{tail}"));
                    break;
                }
            }
        }
    }
    println!("planted-panic audit: {tally:?}");
    assert!(
        bad.is_empty(),
        "planted panics that did not make their test fail:\n{}",
        bad.join("\n\n")
    );
}
