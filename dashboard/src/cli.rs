//! The command line: flags, their defaults, `--help`.

use std::net::IpAddr;
use std::time::Duration;

/// The fastest pace a connection may ask for (`?pace_ms=`): one batch per 20 ms
/// is already faster than a screen refreshes, and a floor keeps one page from
/// costing the server a batch per send.
pub const MIN_PACE_MS: u64 = 20;
/// The slowest pace a connection may ask for: a minute.
pub const MAX_PACE_MS: u64 = 60_000;

/// Everything the server is configured with.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Address to listen on (loopback unless told otherwise).
    pub addr: IpAddr,
    /// Port; 0 picks a free one (the printed address says which).
    pub port: u16,
    /// Distinct metrics in the workload.
    pub keys: u32,
    /// Producer threads.
    pub producers: usize,
    /// Zipf exponent of the update rates (0 = uniform).
    pub zipf: f64,
    /// Target sends per second per producer; 0 = as fast as the hub takes them.
    pub rate: u64,
    /// How long the producers run; `None` = until the server stops.
    pub duration: Option<Duration>,
    /// A connection's pace when its request does not ask for one.
    pub pace: Duration,
    /// Connections served at once; more are answered 503.
    pub max_connections: usize,
    /// Serve `POST /workload/stop` (tests stop the producers with it).
    pub allow_stop: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            addr: IpAddr::from([127, 0, 0, 1]),
            port: 7878,
            keys: 400,
            producers: 1,
            zipf: 1.1,
            rate: 0,
            duration: None,
            pace: Duration::from_millis(100),
            max_connections: 1000,
            allow_stop: false,
        }
    }
}

/// What the command line asked for.
#[derive(Debug, PartialEq)]
pub enum Command {
    /// Run the server.
    Run(Config),
    /// Print [`HELP`] and exit.
    Help,
}

/// The `--help` text.
pub const HELP: &str = "\
keybus-dashboard: a live dashboard of a Zipf telemetry workload on keybus::conflate

Every browser connection (Server-Sent Events on /events) is its own snapshot
receiver of one retain_latest hub: it starts with the whole table, then gets
what changed, at most one batch per pace; a slow one coalesces instead of queueing.

USAGE: keybus-dashboard [FLAGS]

FLAGS:
  --addr IP              address to listen on              [default: 127.0.0.1]
  --port N               port, 0 = any free one            [default: 7878]
  --keys N               distinct metrics                  [default: 400]
  --producers N          producer threads                  [default: 1]
  --zipf S               Zipf exponent of update rates     [default: 1.1]
  --rate N               sends/s per producer, 0 = no cap  [default: 0]
  --duration-ms N        stop producing after N ms, 0 = never [default: 0]
  --pace-ms N            a connection's default pace (one batch per N ms;
                         a page may ask ?pace_ms= from 20 to 60000) [default: 100]
  --max-connections N    connections at once; more get 503 [default: 1000]
  --allow-stop           serve POST /workload/stop (for tests)
  -h, --help             this text

ENDPOINTS:
  /                      the page        /events[?pace_ms=N&prefix=P]  the SSE stream
  /stats                 JSON: hub and every connection's stats()
  /snapshot              JSON: the hub's state table
";

/// Parses the flags after the program name. A bad flag is an `Err` with a
/// message for the user.
pub fn parse<I>(args: I) -> Result<Command, String>
where
    I: IntoIterator,
    I::Item: Into<std::ffi::OsString>,
{
    use lexopt::prelude::*;
    let mut cfg = Config::default();
    let mut parser = lexopt::Parser::from_args(args);
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Short('h') | Long("help") => return Ok(Command::Help),
            Long("addr") => cfg.addr = value(&mut parser, "--addr")?,
            Long("port") => cfg.port = value(&mut parser, "--port")?,
            Long("keys") => cfg.keys = at_least(value(&mut parser, "--keys")?, 1, "--keys")?,
            Long("producers") => {
                cfg.producers = at_least(value(&mut parser, "--producers")?, 1, "--producers")?
            }
            Long("zipf") => {
                let s: f64 = value(&mut parser, "--zipf")?;
                if !(s.is_finite() && s >= 0.0) {
                    return Err(format!("--zipf must be a finite number >= 0, got {s}"));
                }
                cfg.zipf = s;
            }
            Long("rate") => cfg.rate = value(&mut parser, "--rate")?,
            Long("duration-ms") => {
                let ms: u64 = value(&mut parser, "--duration-ms")?;
                cfg.duration = (ms > 0).then(|| Duration::from_millis(ms));
            }
            Long("pace-ms") => {
                let ms: u64 = value(&mut parser, "--pace-ms")?;
                if !(MIN_PACE_MS..=MAX_PACE_MS).contains(&ms) {
                    return Err(format!(
                        "--pace-ms must be between {MIN_PACE_MS} and {MAX_PACE_MS}, got {ms}"
                    ));
                }
                cfg.pace = Duration::from_millis(ms);
            }
            Long("max-connections") => {
                cfg.max_connections = at_least(
                    value(&mut parser, "--max-connections")?,
                    1,
                    "--max-connections",
                )?
            }
            Long("allow-stop") => cfg.allow_stop = true,
            _ => return Err(format!("{} (see --help)", arg.unexpected())),
        }
    }
    Ok(Command::Run(cfg))
}

/// The flag's value, parsed, or a message naming the flag.
fn value<T>(parser: &mut lexopt::Parser, flag: &str) -> Result<T, String>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    let raw = parser
        .value()
        .map_err(|e| format!("{flag}: {e}"))?
        .into_string()
        .map_err(|_| format!("{flag}: not valid UTF-8"))?;
    raw.parse()
        .map_err(|e| format!("{flag}: cannot parse {raw:?}: {e}"))
}

fn at_least<T: PartialOrd + std::fmt::Display>(v: T, min: T, flag: &str) -> Result<T, String> {
    if v < min {
        Err(format!("{flag} must be at least {min}, got {v}"))
    } else {
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Config, String> {
        match parse(args.iter().copied())? {
            Command::Run(cfg) => Ok(cfg),
            Command::Help => panic!("unexpected help"),
        }
    }

    #[test]
    fn defaults_and_flags() {
        assert_eq!(run(&[]).unwrap(), Config::default());
        let cfg = run(&[
            "--port",
            "0",
            "--keys",
            "50",
            "--pace-ms",
            "250",
            "--duration-ms",
            "1500",
            "--allow-stop",
        ])
        .unwrap();
        assert_eq!(cfg.port, 0);
        assert_eq!(cfg.keys, 50);
        assert_eq!(cfg.pace, Duration::from_millis(250));
        assert_eq!(cfg.duration, Some(Duration::from_millis(1500)));
        assert!(cfg.allow_stop);
        assert_eq!(run(&["--duration-ms", "0"]).unwrap().duration, None);
    }

    #[test]
    fn help_lists_every_flag() {
        assert_eq!(parse(["--help"]).unwrap(), Command::Help);
        assert_eq!(parse(["-h"]).unwrap(), Command::Help);
        for flag in [
            "--addr",
            "--port",
            "--keys",
            "--producers",
            "--zipf",
            "--rate",
            "--duration-ms",
            "--pace-ms",
            "--max-connections",
            "--allow-stop",
        ] {
            assert!(HELP.contains(flag), "--help misses {flag}");
        }
    }

    #[test]
    fn bad_flags_are_messages() {
        let cases: [(&[&str], &str); 6] = [
            (&["--keys", "0"], "--keys must be at least 1"),
            (&["--keys", "many"], "--keys: cannot parse"),
            (&["--pace-ms", "5"], "between 20 and 60000"),
            (&["--zipf", "-1"], "--zipf must be"),
            (&["--port"], "--port"),
            (&["--bogus"], "--bogus"),
        ];
        for (args, want) in cases {
            let err = run(args).unwrap_err();
            assert!(err.contains(want), "{args:?}: {err:?} lacks {want:?}");
        }
    }
}
