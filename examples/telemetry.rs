//! In-process telemetry on keybus and on the mutex baseline, side by side.
//!
//! ```text
//! cargo run --release --example telemetry
//! cargo run --release --example telemetry -- --impl keybus --keys 50000 --zipf 0.9
//! ```
//!
//! # The scenario
//!
//! A metrics pipeline inside one process. `--keys` metrics (interned to `u32` ids,
//! named like `disk.host-0042`) belong to four families: `cpu.*`, `mem.*`, `disk.*`
//! and `net.*`. `--producers` threads publish `Sample { value, ts_ns }` updates for
//! `--duration-ms`, as fast as the bus takes them. Which metric is updated follows
//! a Zipf law with exponent `--zipf`: a few metrics are very hot, most are cold, as
//! in real fleets. Four consumers subscribe before the first send, a fifth later:
//!
//! - **dashboard** — renders every update it receives (`recv` loop);
//! - **indexer** — every 5 ms takes the whole backlog as one cut (`try_recv_all`)
//!   and spends those 5 ms "writing" it (a sleep), like a batched storage write;
//! - **disk.\* filter** — an alerting rule that only cares about one family
//!   (`key_filter`, applied at send, so other families never take a slot there);
//! - **key watcher** — follows the single hottest metric (`key`);
//! - **late dashboard** — connects halfway through as a snapshot receiver
//!   (`receiver_builder().snapshot()` on a `retain_latest` hub): it is born with the
//!   current value of every metric pending (`sends == 0`), then follows live.
//!
//! Then the producers stop, the send side closes gracefully (`Sender::close`) and
//! every consumer drains what is pending before it sees `Closed`.
//!
//! The sending time is split into `--rounds` rounds; each round runs every
//! implementation on a fresh hub, alternating which goes first, and the report
//! sums the rounds. Alternating cancels the drift of background load and the
//! advantage of running second (warm allocator, warm caches). Both
//! implementations replay exactly the same pre-sampled key sequence.
//!
//! The scenario is written once, as the macro `run_scenario!`; each
//! implementation is one line expanding it for its module path.
//!
//! # Reading the numbers
//!
//! - **events** — deliveries a receiver handled. Each is the latest value of one
//!   metric; it never holds more than one pending value per metric.
//! - **sends folded** — the sum of `Event::sends`: how many sends those events stand
//!   for. Coalescing skips values, but never silently: every send is counted in
//!   exactly one delivered event.
//! - **sends/event** — the coalescing ratio. 1.0 means the receiver kept up with
//!   every single send; higher means it was slower than the producers and got the
//!   latest value instead of a backlog. The indexer reads only every 5 ms, so
//!   between two reads a hot metric is sent many times and it sees one event for
//!   all of them: far fewer events, same information, memory bounded by the key set.
//! - **events/s** — deliveries per second over the receiver's life (start to
//!   `Closed`).
//! - **check** — conservation after the graceful close, read from the bus's own
//!   accounting (`Hub::stats`, `Receiver::stats`): the hub accepted exactly the
//!   sends the producers counted; at each receiver everything that reached it is
//!   settled (`received == folded + annihilated + overflowed + dropped +
//!   pending_sends`), its events stand for exactly the `folded` sends, and with the
//!   sends its filter rejected it accounts for every accepted send. A mismatch
//!   makes the program exit with status 1.
//! - **sends/s** — what the producers pushed through the bus; the headline number.
//!   The side-by-side table divides keybus by the baseline.
//!
//! - **max age** — the oldest sample a receiver was handed (now minus `ts_ns`):
//!   how stale conflation let its view get, and how long a slow reader waits.
//!
//! On a machine with fewer cores than threads (2 producers + 4 consumers), the
//! consumers compete with the producers for CPU, and the numbers say as much about
//! the scheduler as about the bus: expect tens of percent between runs. Compare
//! the two implementations within one run, and look at the per-round lines.
//!
//! # Flags
//!
//! | flag | default | meaning |
//! |---|---|---|
//! | `--impl baseline\|keybus\|both` | `both` | which implementation(s) to run |
//! | `--keys N` | 10000 | number of distinct metrics |
//! | `--producers N` | 2 | producer threads |
//! | `--duration-ms N` | 1500 | how long the producers send, per implementation |
//! | `--rounds N` | 4 | alternating rounds that time is split into |
//! | `--zipf S` | 1.1 | Zipf exponent of update rates (0 = uniform) |
//! | `--help` | | this summary |
//!
//! A bad flag prints a message and exits with status 2.

use keybus::{Event, HubStats, ReceiverStats, RecvError, SendError, TryRecvError};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_distr::{Distribution, Zipf};
use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------
// The scenario, written once per implementation by macro expansion.
// ---------------------------------------------------------------------------

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
struct Ports<S> {
    send: S,
    close: Box<dyn FnOnce()>,
    dashboard: Port,
    indexer: Port,
    filtered: Port,
    watcher: Port,
    /// Registers the late dashboard (a snapshot receiver).
    late: Box<dyn FnOnce() -> Port + Send>,
    hub_stats: Box<dyn Fn() -> HubStats>,
}

type Ev = Event<MetricId, Sample>;
type Port = Box<dyn Consumer>;

/// What a consumer needs of a receiver; both implementations' `Receiver` have
/// these methods, and the crate-root `Event`, error and stats types make the
/// signatures the same.
trait Consumer: Send {
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
fn run_on<S>(
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

fn spawn_consumer(
    role: Role,
    body: impl FnOnce() -> RxTally + Send + 'static,
) -> JoinHandle<RxTally> {
    thread::Builder::new()
        .name(role.label().to_owned())
        .spawn(body)
        .expect("spawning a consumer thread")
}

// ---------------------------------------------------------------------------
// The metric model.
// ---------------------------------------------------------------------------

/// A metric, interned to a dense id as a real pipeline would do at registration:
/// cheap to hash, copy and compare on every send; the name is only for display.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct MetricId(u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    Cpu,
    Mem,
    Disk,
    Net,
}

/// The family the filtered consumer subscribes to.
const FILTERED_FAMILY: Family = Family::Disk;

impl Family {
    const ALL: [Family; 4] = [Family::Cpu, Family::Mem, Family::Disk, Family::Net];

    fn name(self) -> &'static str {
        match self {
            Family::Cpu => "cpu",
            Family::Mem => "mem",
            Family::Disk => "disk",
            Family::Net => "net",
        }
    }
}

impl MetricId {
    /// Ids are assigned round-robin over the families at registration.
    fn family(self) -> Family {
        Family::ALL[self.0 as usize % Family::ALL.len()]
    }

    fn name(self) -> String {
        let host = self.0 as usize / Family::ALL.len();
        format!("{}.host-{host:04}", self.family().name())
    }
}

/// One reading. `Copy` and 16 bytes, so a merge is a plain overwrite.
#[derive(Clone, Copy, Debug)]
struct Sample {
    value: f64,
    ts_ns: u64,
}

// ---------------------------------------------------------------------------
// The workload: which metric each send updates.
// ---------------------------------------------------------------------------

/// Sends per producer sampled ahead of time; the producers cycle through them.
/// Sampling outside the timed loop keeps the sampler's cost out of the bus
/// comparison, and both implementations replay exactly the same sequence.
const STREAM_LEN: usize = 1 << 18;

/// Fixed seed: runs are comparable with each other.
const SEED: u64 = 0x6b65_7962_7573;

struct Workload {
    keys: u32,
    /// The hottest metric, followed by the key watcher.
    watched: MetricId,
    /// Share of all sends that go to `watched`, for display.
    watched_share: f64,
    /// One key sequence per producer.
    streams: Vec<Arc<[MetricId]>>,
}

impl Workload {
    fn new(cfg: &Config) -> Self {
        let mut rng = SmallRng::seed_from_u64(SEED);
        // Shuffle which id gets which popularity rank, so hot metrics land in every
        // family instead of all being low ids.
        let mut by_rank: Vec<MetricId> = (0..cfg.keys).map(MetricId).collect();
        by_rank.shuffle(&mut rng);
        // `rand_distr`'s Zipf draws ranks 1..=n.
        let zipf = Zipf::new(by_rank.len() as f64, cfg.zipf).expect("n >= 1 and s >= 0");
        let streams = (0..cfg.producers)
            .map(|p| {
                let mut rng = SmallRng::seed_from_u64(SEED + 1 + p as u64);
                (0..STREAM_LEN)
                    .map(|_| by_rank[zipf.sample(&mut rng) as usize - 1])
                    .collect()
            })
            .collect();
        Workload {
            keys: cfg.keys,
            watched: by_rank[0],
            watched_share: top_rank_share(by_rank.len(), cfg.zipf),
            streams,
        }
    }
}

/// Share of draws that go to rank 0 under Zipf(n, s): `1 / H(n, s)`, for display.
fn top_rank_share(n: usize, s: f64) -> f64 {
    1.0 / (1..=n).map(|rank| (rank as f64).powf(-s)).sum::<f64>()
}

// ---------------------------------------------------------------------------
// Producers.
// ---------------------------------------------------------------------------

/// Sends per timestamp: a scraper reads a batch of metrics at one instant, and
/// reading the clock once per batch keeps it out of the per-send cost.
const SCRAPE_BATCH: usize = 64;

/// What the producers sent, counted so every receiver's deliveries can be checked.
#[derive(Clone, Copy, Debug, Default)]
struct SentTally {
    per_family: [u64; 4],
    watched: u64,
    /// Sends refused because the send side was closed; 0 in this scenario, since
    /// the close comes after the producers stop.
    rejected: u64,
}

impl SentTally {
    fn record(&mut self, key: MetricId, watched: MetricId) {
        self.per_family[key.family() as usize] += 1;
        self.watched += u64::from(key == watched);
    }

    fn total(&self) -> u64 {
        self.per_family.iter().sum()
    }

    fn plus(mut self, other: SentTally) -> SentTally {
        for (mine, theirs) in self.per_family.iter_mut().zip(other.per_family) {
            *mine += theirs;
        }
        self.watched += other.watched;
        self.rejected += other.rejected;
        self
    }
}

/// Replays `stream` until `deadline`, counting every accepted send.
fn produce<S>(
    send: &S,
    stream: &[MetricId],
    watched: MetricId,
    start: Instant,
    deadline: Instant,
) -> SentTally
where
    S: Fn(MetricId, Sample) -> Result<(), SendError<MetricId, Sample>>,
{
    let mut tally = SentTally::default();
    let mut reading = 0u64;
    for scrape in stream.chunks(SCRAPE_BATCH).cycle() {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        let ts_ns = u64::try_from(now.duration_since(start).as_nanos()).unwrap_or(u64::MAX);
        for &key in scrape {
            reading += 1;
            // A percentage that sweeps 0..100; its exact values do not matter.
            let sample = Sample {
                value: (reading % 1000) as f64 / 10.0,
                ts_ns,
            };
            match send(key, sample) {
                Ok(()) => tally.record(key, watched),
                Err(_) => tally.rejected += 1,
            }
        }
    }
    tally
}

// ---------------------------------------------------------------------------
// Consumers.
// ---------------------------------------------------------------------------

/// How often the indexer takes its backlog, and how long writing a batch takes.
const INDEX_EVERY: Duration = Duration::from_millis(5);

/// A reading at or above this (a percentage) counts as an alert. Coalescing keeps
/// the latest reading, so an alert that was overwritten before the receiver looked
/// is not seen; a rule that must see every peak would give its receiver a
/// `merge` that keeps the maximum.
const ALERT_LEVEL: f64 = 99.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Dashboard,
    Indexer,
    Filtered,
    Watcher,
    Late,
}

impl Role {
    const ALL: [Role; 5] = [
        Role::Dashboard,
        Role::Indexer,
        Role::Filtered,
        Role::Watcher,
        Role::Late,
    ];

    fn label(self) -> &'static str {
        match self {
            Role::Dashboard => "dashboard",
            Role::Indexer => "indexer",
            Role::Filtered => "disk.* filter",
            Role::Watcher => "key watcher",
            Role::Late => "late dashboard",
        }
    }
}

/// What one receiver handled.
#[derive(Clone, Copy, Debug, Default)]
struct RxTally {
    events: u64,
    /// Σ `Event::sends`.
    sends: u64,
    /// `try_recv_all` cuts that returned something (indexer only).
    batches: u64,
    /// Distinct metrics with a value on screen at the end (dashboard only).
    keys_shown: u64,
    /// Readings at or above [`ALERT_LEVEL`] (filter only).
    alerts: u64,
    /// The oldest sample delivered: how stale coalescing let this receiver get.
    max_age: Duration,
    /// From the scenario's start to this receiver's `Closed`.
    active: Duration,
    /// Snapshot entries delivered (`sends == 0`; late dashboard only).
    from_snapshot: u64,
    /// The receiver's own accounting (`Receiver::stats`) after its `Closed`.
    received: u64,
    filtered: u64,
    folded: u64,
    /// folded + annihilated + overflowed + dropped + pending_sends.
    settled: u64,
    /// Rounds in which the receiver's stats kept the conservation law, agreed
    /// with the sends its events stand for, and (with `filtered`) account for
    /// every send the hub accepted while it was registered.
    good_rounds: u32,
}

impl RxTally {
    /// `now_ns` is on the producers' clock (nanoseconds since the start).
    fn count(&mut self, event: &Ev, now_ns: u64) {
        self.events += 1;
        self.sends += event.sends;
        let age = Duration::from_nanos(now_ns.saturating_sub(event.value.ts_ns));
        self.max_age = self.max_age.max(age);
    }

    fn finish(mut self, start: Instant, stats: ReceiverStats) -> Self {
        self.active = start.elapsed();
        self.received = stats.received;
        self.filtered = stats.filtered;
        self.folded = stats.folded;
        self.settled = stats.folded
            + stats.annihilated
            + stats.overflowed
            + stats.dropped
            + stats.pending_sends;
        self
    }

    /// This round's verdict, given what the hub accepted while the receiver was
    /// registered (`None` for one that joined late: that count is not kept).
    fn judge(&mut self, accepted: Option<u64>) {
        let law = self.received == self.settled;
        let events = self.sends == self.folded;
        let everything = accepted.map_or(true, |sent| self.received + self.filtered == sent);
        self.good_rounds = u32::from(law && events && everything);
    }

    /// Adds a later round's tally: counts and times add up, extremes take the max.
    fn absorb(&mut self, later: &RxTally) {
        self.events += later.events;
        self.sends += later.sends;
        self.batches += later.batches;
        self.keys_shown = self.keys_shown.max(later.keys_shown);
        self.alerts += later.alerts;
        self.max_age = self.max_age.max(later.max_age);
        self.active += later.active;
        self.from_snapshot += later.from_snapshot;
        self.received += later.received;
        self.filtered += later.filtered;
        self.folded += later.folded;
        self.settled += later.settled;
        self.good_rounds += later.good_rounds;
    }
}

/// Keeps the latest sample of every metric, as a dashboard's screen would.
fn dashboard(mut rx: Port, keys: u32, start: Instant) -> RxTally {
    let mut screen: Vec<Option<Sample>> = vec![None; keys as usize];
    let mut tally = RxTally::default();
    while let Ok(event) = rx.recv() {
        // A snapshot entry (late dashboard) stands for no send: `sends == 0`.
        tally.from_snapshot += u64::from(event.sends == 0);
        tally.count(&event, nanos_since(start));
        screen[event.key.0 as usize] = Some(event.value);
    }
    tally.keys_shown = screen.iter().flatten().count() as u64;
    tally.finish(start, rx.stats())
}

/// Takes the whole backlog every [`INDEX_EVERY`]; the sleep stands in for writing
/// the batch. An empty cut just waits for the next tick.
fn indexer(mut rx: Port, start: Instant) -> RxTally {
    let mut tally = RxTally::default();
    loop {
        match rx.try_recv_all() {
            Ok(batch) => {
                tally.batches += 1;
                let now_ns = nanos_since(start);
                batch.iter().for_each(|event| tally.count(event, now_ns));
            }
            Err(TryRecvError::Empty) => {}
            Err(TryRecvError::Closed) => break,
        }
        thread::sleep(INDEX_EVERY);
    }
    tally.finish(start, rx.stats())
}

/// Handles each event as it comes, counting readings at alert level; which keys
/// arrive is the receiver's filter's business.
fn follow(mut rx: Port, start: Instant) -> RxTally {
    let mut tally = RxTally::default();
    while let Ok(event) = rx.recv() {
        tally.count(&event, nanos_since(start));
        tally.alerts += u64::from(event.value.value >= ALERT_LEVEL);
    }
    tally.finish(start, rx.stats())
}

/// Nanoseconds since `start`: the clock of [`Sample::ts_ns`].
fn nanos_since(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

// ---------------------------------------------------------------------------
// Reports.
// ---------------------------------------------------------------------------

/// Everything one implementation measured, over one round or summed over rounds.
struct Report {
    label: &'static str,
    rounds: u32,
    sent: SentTally,
    /// Start to the last producer's exit, summed over rounds.
    send_time: Duration,
    /// From the end of sending to the last consumer's `Closed`; the worst round.
    drain: Duration,
    wall: Duration,
    /// Indexed like [`Role::ALL`].
    received: [RxTally; 5],
    /// `Hub::stats().sent`, summed over rounds.
    hub_sent: u64,
    /// Rounds in which the hub's count of accepted sends equals the producers'.
    hub_rounds: u32,
}

impl Report {
    fn new(
        label: &'static str,
        sent: SentTally,
        hub: HubStats,
        send_time: Duration,
        wall: Duration,
        mut received: [RxTally; 5],
    ) -> Self {
        for role in Role::ALL {
            let accepted = (role != Role::Late).then_some(hub.sent);
            received[role as usize].judge(accepted);
        }
        Report {
            label,
            rounds: 1,
            sent,
            send_time,
            drain: wall.saturating_sub(send_time),
            wall,
            received,
            hub_sent: hub.sent,
            hub_rounds: u32::from(hub.sent == sent.total() && hub.refused == sent.rejected),
        }
    }

    /// Adds a later round. Conservation was judged per round, so a loss in one
    /// round cannot hide behind a surplus in another.
    fn absorb(&mut self, later: Report) {
        self.rounds += later.rounds;
        self.sent = self.sent.plus(later.sent);
        self.send_time += later.send_time;
        self.drain = self.drain.max(later.drain);
        self.wall += later.wall;
        for (mine, theirs) in self.received.iter_mut().zip(&later.received) {
            mine.absorb(theirs);
        }
        self.hub_sent += later.hub_sent;
        self.hub_rounds += later.hub_rounds;
    }

    fn send_rate(&self) -> f64 {
        per_second(self.sent.total(), self.send_time)
    }

    fn rx(&self, role: Role) -> &RxTally {
        &self.received[role as usize]
    }

    /// In every round, every receiver accounted for every send that passed its
    /// filter, and no send was refused.
    fn conserved(&self) -> bool {
        self.sent.rejected == 0
            && self.hub_rounds == self.rounds
            && self.received.iter().all(|rx| rx.good_rounds == self.rounds)
    }

    fn print(&self, cfg: &Config, workload: &Workload) {
        println!("== {} ==", self.label);
        println!(
            "sent   {} sends from {} producers in {}: {} ({} refused)",
            group(self.sent.total()),
            cfg.producers,
            secs(self.send_time),
            rate(self.send_rate()),
            self.sent.rejected,
        );
        println!(
            "close  drained at most {} after Sender::close; wall {} over {}",
            secs(self.drain),
            secs(self.wall),
            rounds(self.rounds),
        );
        println!();
        println!(
            "{:<14} {:>12} {:>14} {:>12} {:>12} {:>10}",
            "receiver", "events", "sends folded", "sends/event", "events/s", "max age"
        );
        for role in Role::ALL {
            let rx = self.rx(role);
            println!(
                "{:<14} {:>12} {:>14} {:>12.2} {:>12} {:>10}",
                role.label(),
                group(rx.events),
                group(rx.sends),
                ratio(rx.sends, rx.events),
                rate(per_second(rx.events, rx.active)),
                secs(rx.max_age),
            );
        }
        println!();
        println!(
            "check  hub            accepted {} sends, producers counted {}  ok in {}/{} rounds",
            group(self.hub_sent),
            group(self.sent.total()),
            self.hub_rounds,
            self.rounds,
        );
        for role in Role::ALL {
            println!("{}", self.check_line(role));
        }
        println!("{}", self.notes(workload));
        println!();
    }

    /// The receiver's own accounting, after its `Closed`: what reached it
    /// (`received`) is all settled (`folded` into events, or annihilated,
    /// overflowed, dropped, still pending), its events stand for exactly the
    /// `folded` sends, and with the sends its filter rejected it accounts for every
    /// send the hub accepted (all but the late dashboard, registered mid-run).
    fn check_line(&self, role: Role) -> String {
        let rx = self.rx(role);
        let good = rx.good_rounds;
        let verdict = if good == self.rounds {
            format!("ok in {good}/{} rounds", self.rounds)
        } else {
            format!("MISMATCH in {}/{} rounds", self.rounds - good, self.rounds)
        };
        format!(
            "check  {:<14} received {:>11} = settled {:>11}, events fold {:>11}, +filtered {:>11} of {:>11} sent  {verdict}",
            role.label(),
            group(rx.received),
            group(rx.settled),
            group(rx.sends),
            group(rx.filtered),
            if role == Role::Late { "-".to_owned() } else { group(self.hub_sent) },
        )
    }

    fn notes(&self, workload: &Workload) -> String {
        let (dash, index) = (self.rx(Role::Dashboard), self.rx(Role::Indexer));
        let mut notes = String::new();
        // Writing to a String cannot fail.
        let _ = writeln!(
            notes,
            "note   dashboard ends with {} of {} metrics on screen",
            group(dash.keys_shown),
            group(u64::from(workload.keys)),
        );
        let _ = writeln!(
            notes,
            "note   indexer took {} batches of {} metrics on average",
            group(index.batches),
            group(ratio(index.events, index.batches).round() as u64),
        );
        let _ = writeln!(
            notes,
            "note   disk.* filter saw {} readings >= {ALERT_LEVEL}%",
            group(self.rx(Role::Filtered).alerts),
        );
        let late = self.rx(Role::Late);
        let _ = writeln!(
            notes,
            "note   late dashboard joined halfway with {} metrics from the snapshot (per round), ends with {} on screen",
            group(late.from_snapshot / u64::from(self.rounds.max(1))),
            group(late.keys_shown),
        );
        let _ = write!(
            notes,
            "note   key watcher follows {}, the hottest metric ({:.1}% of sends)",
            workload.watched.name(),
            workload.watched_share * 100.0,
        );
        notes
    }
}

/// The final table: keybus and baseline side by side, with their ratio.
fn print_comparison(keybus: &Report, baseline: &Report) {
    println!("== side by side ==");
    println!(
        "{:<26} {:>12} {:>12} {:>16}",
        "", keybus.label, baseline.label, "keybus/baseline"
    );
    let row = |name: &str, k: f64, b: f64, shown: &dyn Fn(f64) -> String| {
        println!(
            "{name:<26} {:>12} {:>12} {:>15.2}x",
            shown(k),
            shown(b),
            k / b
        );
    };
    row("sends/s", keybus.send_rate(), baseline.send_rate(), &rate);
    row(
        "wall time (s)",
        keybus.wall.as_secs_f64(),
        baseline.wall.as_secs_f64(),
        &|s| format!("{s:.3}"),
    );
    for role in Role::ALL {
        let (k, b) = (keybus.rx(role), baseline.rx(role));
        row(
            &format!("{} events", role.label()),
            k.events as f64,
            b.events as f64,
            &|n| group(n as u64),
        );
        row(
            &format!("{} sends/event", role.label()),
            ratio(k.sends, k.events),
            ratio(b.sends, b.events),
            &|r| format!("{r:.2}"),
        );
    }
}

/// `1234567` as `1,234,567`.
fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(d);
    }
    out
}

fn rate(per_s: f64) -> String {
    match per_s {
        r if r >= 1e6 => format!("{:.2} M/s", r / 1e6),
        r if r >= 1e3 => format!("{:.1} k/s", r / 1e3),
        r => format!("{r:.0} /s"),
    }
}

fn secs(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{:.3} s", d.as_secs_f64())
    } else {
        format!("{:.1} ms", d.as_secs_f64() * 1e3)
    }
}

/// `n` as "1 round" or "n rounds".
fn rounds(n: u32) -> String {
    format!("{n} round{}", if n == 1 { "" } else { "s" })
}

/// `count` per second over `time`, or 0 for an empty interval.
fn per_second(count: u64, time: Duration) -> f64 {
    let secs = time.as_secs_f64();
    if secs > 0.0 {
        count as f64 / secs
    } else {
        0.0
    }
}

/// `num / den`, or 0 when nothing was counted.
fn ratio(num: u64, den: u64) -> f64 {
    if den == 0 {
        0.0
    } else {
        num as f64 / den as f64
    }
}

// ---------------------------------------------------------------------------
// Command line.
// ---------------------------------------------------------------------------

const USAGE: &str = "\
usage: telemetry [--impl baseline|keybus|both] [--keys N] [--producers N]
                 [--duration-ms N] [--rounds N] [--zipf S] [--help]

  --impl         which implementation(s) to run (default both)
  --keys         distinct metrics (default 10000)
  --producers    producer threads (default 2)
  --duration-ms  how long producers send, per implementation (default 1500)
  --rounds       split that time into N alternating rounds (default 4)
  --zipf         Zipf exponent of update rates, >= 0; 0 is uniform (default 1.1)";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Impl {
    Keybus,
    Baseline,
}

#[derive(Clone, Debug)]
struct Config {
    impls: Vec<Impl>,
    keys: u32,
    producers: usize,
    /// Sending time per implementation, all rounds together.
    duration: Duration,
    rounds: u32,
    zipf: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            impls: vec![Impl::Keybus, Impl::Baseline],
            keys: 10_000,
            producers: 2,
            duration: Duration::from_millis(1500),
            rounds: 4,
            zipf: 1.1,
        }
    }
}

enum Command {
    Run(Config),
    Help,
}

/// Parses the flags (`--flag value` or `--flag=value`, via `lexopt`); the error
/// is the message to print.
fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Command, String> {
    use lexopt::prelude::*;
    let mut cfg = Config::default();
    let mut parser = lexopt::Parser::from_args(args);
    fn value(parser: &mut lexopt::Parser) -> Result<String, String> {
        let raw = parser.value().map_err(|e| e.to_string())?;
        raw.string().map_err(|e| e.to_string())
    }
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Short('h') | Long("help") => return Ok(Command::Help),
            Long("impl") => cfg.impls = parse_impl(&value(&mut parser)?)?,
            Long("keys") => cfg.keys = positive("--keys", &value(&mut parser)?)?,
            Long("producers") => cfg.producers = positive("--producers", &value(&mut parser)?)?,
            Long("duration-ms") => {
                cfg.duration =
                    Duration::from_millis(positive("--duration-ms", &value(&mut parser)?)?)
            }
            Long("rounds") => cfg.rounds = positive("--rounds", &value(&mut parser)?)?,
            Long("zipf") => cfg.zipf = exponent(&value(&mut parser)?)?,
            _ => return Err(arg.unexpected().to_string()),
        }
    }
    if cfg.duration < Duration::from_millis(cfg.rounds.into()) {
        return Err("`--rounds` must not exceed `--duration-ms`".to_owned());
    }
    Ok(Command::Run(cfg))
}

fn parse_impl(value: &str) -> Result<Vec<Impl>, String> {
    match value {
        "keybus" => Ok(vec![Impl::Keybus]),
        "baseline" => Ok(vec![Impl::Baseline]),
        "both" => Ok(vec![Impl::Keybus, Impl::Baseline]),
        _ => Err(format!(
            "`--impl` expects baseline, keybus or both, got `{value}`"
        )),
    }
}

fn positive<T>(flag: &str, value: &str) -> Result<T, String>
where
    T: std::str::FromStr + Default + PartialEq,
{
    match value.parse::<T>() {
        Ok(n) if n != T::default() => Ok(n),
        _ => Err(format!(
            "`{flag}` expects a positive integer, got `{value}`"
        )),
    }
}

fn exponent(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Ok(s),
        _ => Err(format!(
            "`--zipf` expects a finite number >= 0, got `{value}`"
        )),
    }
}

/// The one place that names the implementations.
fn run_once(which: Impl, duration: Duration, workload: &Workload) -> Report {
    match which {
        Impl::Keybus => run_scenario!(keybus::conflate, "keybus", duration, workload),
        Impl::Baseline => run_scenario!(keybus::baseline::conflate, "baseline", duration, workload),
    }
}

/// Runs every implementation in each round, alternating which goes first: the
/// load from other processes drifts over seconds, and whichever runs first in a
/// round warms the allocator and caches for the other. Returns one summed report
/// per implementation, in `cfg.impls` order.
fn run_rounds(cfg: &Config, workload: &Workload) -> Vec<Report> {
    let per_round = cfg.duration / cfg.rounds;
    let mut totals: Vec<Option<Report>> = cfg.impls.iter().map(|_| None).collect();
    for round in 0..cfg.rounds {
        let mut order: Vec<usize> = (0..cfg.impls.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        let mut line = format!("round {}/{}", round + 1, cfg.rounds);
        for i in order {
            let report = run_once(cfg.impls[i], per_round, workload);
            let _ = write!(line, "   {} {}", report.label, rate(report.send_rate()));
            match &mut totals[i] {
                Some(total) => total.absorb(report),
                slot => *slot = Some(report),
            }
        }
        println!("{line}");
    }
    totals.into_iter().flatten().collect()
}

fn main() -> ExitCode {
    let cfg = match parse_args(std::env::args().skip(1)) {
        Ok(Command::Run(cfg)) => cfg,
        Ok(Command::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("error: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    println!(
        "telemetry: {} metrics (cpu/mem/disk/net), Zipf s={}, {} producers, \
         {} per implementation in {}\n",
        group(u64::from(cfg.keys)),
        cfg.zipf,
        cfg.producers,
        secs(cfg.duration),
        rounds(cfg.rounds),
    );
    let workload = Workload::new(&cfg);
    let reports = run_rounds(&cfg, &workload);
    println!();
    for report in &reports {
        report.print(&cfg, &workload);
    }
    if let [keybus, baseline] = &reports[..] {
        print_comparison(keybus, baseline);
    }
    if reports.iter().all(Report::conserved) {
        ExitCode::SUCCESS
    } else {
        eprintln!("error: a receiver's deliveries do not account for every send");
        ExitCode::FAILURE
    }
}
