//! The `keybus::metrics` scenarios (`--features metrics`).

use super::{timed, Entry, Scenario};
use crate::common::Role;
use crate::metrics_support;

/// One counter update through `keybus::metrics` against the floor (`metrics-util`'s
/// atomic registry, reported as the baseline) and the no-op recorder, per update
/// path (`benches/support/metrics_scenarios.rs`). Run with
/// `--features metrics -- --only metrics`.
pub fn scenarios(scale: u64) -> Vec<Scenario> {
    use metrics_support::{Path as UpdatePath, Role as MetricsRole, METRICS_IMPLS};
    let n = 1_000_000 * scale;
    UpdatePath::ALL
        .iter()
        .map(|&path| {
            let entries = METRICS_IMPLS
                .iter()
                .map(|imp| {
                    let run = imp.run;
                    let role = match imp.role {
                        MetricsRole::Keybus => Role::Keybus,
                        MetricsRole::Floor => Role::Baseline,
                        MetricsRole::Other => Role::Peer,
                    };
                    Entry::new(imp.name, role, timed(move || run(path, n)))
                        .not_comparable((role == Role::Peer).then_some("stores nothing"))
                })
                .collect();
            Scenario::new(format!("metrics/{}", path.name()), n, entries)
        })
        .collect()
}
