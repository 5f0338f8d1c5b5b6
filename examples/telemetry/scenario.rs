//! The per-implementation runner: builds one implementation's hub and
//! receivers, runs the producers and the five consumers on them for one round,
//! closes gracefully and collects the tallies into a [`Report`].
//!
//! The scenario is written once, as the macro `run_scenario!`; [`run_once`] is the
//! one place that names the implementations, one line each.

use crate::cli::Impl;
use crate::consumer::{dashboard, follow, indexer, Role, RxTally};
use crate::metric::{MetricId, Sample, FILTERED_FAMILY};
use crate::producer::{produce, SentTally};
use crate::report::Report;
use crate::workload::Workload;
use keybus::{Event, HubStats, ReceiverStats, RecvError, SendError, TryRecvError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Runs the scenario on one conflate implementation, given by its module path.
///
/// Both modules have the same API but no common trait, so the macro is the only
/// place that names the implementation: it builds the hub, subscribes the four
/// consumers, and hands plain closures ([`Ports`]) to the implementation-agnostic
/// [`run_on`]. `Event` and the error types are shared crate-root types, so the
/// closures of both implementations have the same signatures.
macro_rules! run_scenario {
    ($($bus:ident)::+, $label:expr, $duration:expr, $workload:expr) => {{
        let workload: &Workload = $workload;
        // The state table (`retain_latest`) lets the late dashboard start from the
        // current value of every metric.
        let hub = $($bus)::+::Hub::<MetricId, Sample>::builder().retain_latest().build();
        // Subscribe before the first send: a receiver starts empty.
        let dashboard = hub.receiver();
        let indexer = hub.receiver();
        let filtered = hub
            .receiver_builder()
            .key_filter(|key| key.family() == FILTERED_FAMILY)
            .build();
        let watcher = hub.receiver_builder().key(workload.watched).build();
        let tx = hub.sender();
        let closer = tx.clone();
        let (late_hub, stats_hub) = (hub.clone(), hub.clone());
        // Only the senders, the late dashboard's registration and the stats
        // reader keep handles; the send side is closed explicitly.
        drop(hub);
        let ports = Ports {
            send: move |key: MetricId, sample: Sample| tx.send(key, sample),
            close: Box::new(move || closer.close()),
            dashboard: Box::new(dashboard),
            indexer: Box::new(indexer),
            filtered: Box::new(filtered),
            watcher: Box::new(watcher),
            late: Box::new(move || {
                // Joins mid-run: born with the whole state table pending.
                Box::new(late_hub.receiver_builder().snapshot().build()) as Port
            }),
            hub_stats: Box::new(move || stats_hub.stats()),
        };
        run_on($label, $duration, workload, ports)
    }};
}

/// One implementation's send side and receivers.
pub struct Ports<S> {
    pub send: S,
    pub close: Box<dyn FnOnce()>,
    pub dashboard: Port,
    pub indexer: Port,
    pub filtered: Port,
    pub watcher: Port,
    /// Registers the late dashboard (a snapshot receiver).
    pub late: Box<dyn FnOnce() -> Port + Send>,
    pub hub_stats: Box<dyn Fn() -> HubStats>,
}

pub type Ev = Event<MetricId, Sample>;
pub type Port = Box<dyn Consumer>;

/// What a consumer needs of a receiver; both implementations' `Receiver` have
/// these methods, and the crate-root `Event`, error and stats types make the
/// signatures the same.
pub trait Consumer: Send {
    fn recv(&mut self) -> Result<Ev, RecvError>;
    fn try_recv_all(&mut self) -> Result<Vec<Ev>, TryRecvError>;
    fn stats(&self) -> ReceiverStats;
}

macro_rules! consumer {
    ($($bus:ident)::+) => {
        impl Consumer for $($bus)::+::Receiver<MetricId, Sample> {
            fn recv(&mut self) -> Result<Ev, RecvError> {
                $($bus)::+::Receiver::recv(self)
            }
            fn try_recv_all(&mut self) -> Result<Vec<Ev>, TryRecvError> {
                $($bus)::+::Receiver::try_recv_all(self)
            }
            fn stats(&self) -> ReceiverStats {
                $($bus)::+::Receiver::stats(self)
            }
        }
    };
}
consumer!(keybus::conflate);
consumer!(keybus::baseline::conflate);

/// Runs producers and consumers, closes gracefully, and collects the tallies.
pub fn run_on<S>(
    label: &'static str,
    duration: Duration,
    workload: &Workload,
    ports: Ports<S>,
) -> Report
where
    S: Fn(MetricId, Sample) -> Result<(), SendError<MetricId, Sample>> + Clone + Send + 'static,
{
    let start = Instant::now();
    let keys = workload.keys;
    let deadline = start + duration;
    let join_at = start + duration / 2;
    let late = ports.late;
    let consumers = [
        spawn_consumer(Role::Dashboard, move || {
            dashboard(ports.dashboard, keys, start)
        }),
        spawn_consumer(Role::Indexer, move || indexer(ports.indexer, start)),
        spawn_consumer(Role::Filtered, move || follow(ports.filtered, start)),
        spawn_consumer(Role::Watcher, move || follow(ports.watcher, start)),
        spawn_consumer(Role::Late, move || {
            thread::sleep(join_at.saturating_duration_since(Instant::now()));
            dashboard(late(), keys, start)
        }),
    ];
    let producers: Vec<_> = workload
        .streams
        .iter()
        .map(|stream| {
            let (send, stream, watched) = (ports.send.clone(), stream.clone(), workload.watched);
            thread::spawn(move || produce(&send, &stream, watched, start, deadline))
        })
        .collect();
    let sent = producers
        .into_iter()
        .map(|p| p.join().expect("producer panicked"))
        .fold(SentTally::default(), SentTally::plus);
    let send_time = start.elapsed();
    (ports.close)();
    let received = consumers.map(|c| c.join().expect("consumer panicked"));
    let hub = (ports.hub_stats)();
    Report::new(label, sent, hub, send_time, start.elapsed(), received)
}

pub fn spawn_consumer(
    role: Role,
    body: impl FnOnce() -> RxTally + Send + 'static,
) -> JoinHandle<RxTally> {
    thread::Builder::new()
        .name(role.label().to_owned())
        .spawn(body)
        .expect("spawning a consumer thread")
}

/// The one place that names the implementations.
pub fn run_once(which: Impl, duration: Duration, workload: &Workload) -> Report {
    match which {
        Impl::Keybus => run_scenario!(keybus::conflate, "keybus", duration, workload),
        Impl::Baseline => run_scenario!(keybus::baseline::conflate, "baseline", duration, workload),
    }
}
