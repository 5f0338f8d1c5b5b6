//! Reporting: one implementation's tallies over one round or summed over
//! rounds, the conservation check, its printout, and the side-by-side table.

use crate::cli::Config;
use crate::consumer::{Role, RxTally, ALERT_LEVEL};
use crate::format::{group, per_second, rate, ratio, rounds, secs};
use crate::producer::SentTally;
use crate::workload::Workload;
use keybus::HubStats;
use std::fmt::Write as _;
use std::time::Duration;

/// Everything one implementation measured, over one round or summed over rounds.
pub struct Report {
    pub label: &'static str,
    pub rounds: u32,
    pub sent: SentTally,
    /// Start to the last producer's exit, summed over rounds.
    pub send_time: Duration,
    /// From the end of sending to the last consumer's `Closed`; the worst round.
    pub drain: Duration,
    pub wall: Duration,
    /// Indexed like [`Role::ALL`].
    pub received: [RxTally; 5],
    /// `Hub::stats().sent`, summed over rounds.
    pub hub_sent: u64,
    /// Rounds in which the hub's count of accepted sends equals the producers'.
    pub hub_rounds: u32,
}

impl Report {
    pub fn new(
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
    pub fn absorb(&mut self, later: Report) {
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

    pub fn send_rate(&self) -> f64 {
        per_second(self.sent.total(), self.send_time)
    }

    pub fn rx(&self, role: Role) -> &RxTally {
        &self.received[role as usize]
    }

    /// In every round, every receiver accounted for every send that passed its
    /// filter, and no send was refused.
    pub fn conserved(&self) -> bool {
        self.sent.rejected == 0
            && self.hub_rounds == self.rounds
            && self.received.iter().all(|rx| rx.good_rounds == self.rounds)
    }

    pub fn print(&self, cfg: &Config, workload: &Workload) {
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
    pub fn check_line(&self, role: Role) -> String {
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

    pub fn notes(&self, workload: &Workload) -> String {
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
pub fn print_comparison(keybus: &Report, baseline: &Report) {
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
