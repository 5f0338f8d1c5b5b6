//! What every fuzz target does with its input, written once: decode it into an
//! op sequence (the generator the differential tests use), run that on two
//! implementations in lockstep, and panic on the first difference.

use keybus_test_support::harness::{self, Bytes, Tally};

/// Runs one fuzz input: `generate` decodes `data` into a scenario of at most
/// `harness::FUZZ_MAX_OPS` ops; `check` runs it on two implementations in
/// lockstep and describes the first difference, which panics with the scenario.
pub fn lockstep<'a, S: std::fmt::Display>(
    data: &'a [u8],
    generate: impl FnOnce(&mut Bytes<'a>, usize) -> S,
    check: fn(&S) -> Result<Tally, String>,
) {
    // libFuzzer's hook aborts on any panic; let the expected ones (user merges,
    // key filters, a read with `limit == 0`) unwind to the runner's `catch_unwind`.
    harness::quiet_expected_panics();
    let scenario = generate(&mut Bytes::new(data), harness::FUZZ_MAX_OPS);
    if let Err(report) = check(&scenario) {
        panic!("{report}\n{scenario}");
    }
}
