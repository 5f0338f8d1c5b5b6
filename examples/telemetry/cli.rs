//! The command line: the flags, their defaults, and the usage text.

use std::time::Duration;

pub const USAGE: &str = "\
usage: telemetry [--impl baseline|keybus|both] [--keys N] [--producers N]
                 [--duration-ms N] [--rounds N] [--zipf S] [--help]

  --impl         which implementation(s) to run (default both)
  --keys         distinct metrics (default 10000)
  --producers    producer threads (default 2)
  --duration-ms  how long producers send, per implementation (default 1500)
  --rounds       split that time into N alternating rounds (default 4)
  --zipf         Zipf exponent of update rates, >= 0; 0 is uniform (default 1.1)";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Impl {
    Keybus,
    Baseline,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub impls: Vec<Impl>,
    pub keys: u32,
    pub producers: usize,
    /// Sending time per implementation, all rounds together.
    pub duration: Duration,
    pub rounds: u32,
    pub zipf: f64,
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

pub enum Command {
    Run(Config),
    Help,
}

/// Parses the flags (`--flag value` or `--flag=value`, via `lexopt`); the error
/// is the message to print.
pub fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Command, String> {
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

pub fn parse_impl(value: &str) -> Result<Vec<Impl>, String> {
    match value {
        "keybus" => Ok(vec![Impl::Keybus]),
        "baseline" => Ok(vec![Impl::Baseline]),
        "both" => Ok(vec![Impl::Keybus, Impl::Baseline]),
        _ => Err(format!(
            "`--impl` expects baseline, keybus or both, got `{value}`"
        )),
    }
}

pub fn positive<T>(flag: &str, value: &str) -> Result<T, String>
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

pub fn exponent(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Ok(s),
        _ => Err(format!(
            "`--zipf` expects a finite number >= 0, got `{value}`"
        )),
    }
}
