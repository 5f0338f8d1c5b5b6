//! The command line: the flags and their defaults (`--help` prints the usage
//! line; a bad flag exits with status 2).

use crate::targets;
use std::path::PathBuf;

pub struct Options {
    pub full: bool,
    /// `--targets`: run the target table instead of the report.
    pub targets: bool,
    pub verbose: bool,
    pub rounds: usize,
    pub only: Option<String>,
    /// `--targets --profile SIDE`: run each selected target once, one side
    /// only, no warm-up and no table (for `valgrind --tool=callgrind`).
    pub profile: Option<String>,
    pub out: PathBuf,
}

pub fn options() -> Options {
    let mut o = Options {
        full: false,
        targets: false,
        verbose: false,
        rounds: 0,
        only: None,
        profile: None,
        out: PathBuf::from("target/keybus-report"),
    };
    // Flags via `lexopt` (`--flag value` or `--flag=value`).
    use lexopt::prelude::*;
    let usage = "bench-report [--quick | --full] [--targets] [--rounds N] [--only SUBSTRING] \
                 [--profile keybus|baseline] [--out DIR] [--verbose]";
    let fail = |message: String| -> ! {
        eprintln!("{message} (try --help)");
        std::process::exit(2);
    };
    let mut parser = lexopt::Parser::from_env();
    let value = |parser: &mut lexopt::Parser| -> String {
        let raw = parser.value().unwrap_or_else(|e| fail(e.to_string()));
        raw.string().unwrap_or_else(|e| fail(e.to_string()))
    };
    while let Some(arg) = parser.next().unwrap_or_else(|e| fail(e.to_string())) {
        match arg {
            Long("quick") => o.full = false,
            Long("full") => o.full = true,
            Long("targets") => o.targets = true,
            Long("verbose") => o.verbose = true,
            Long("rounds") => {
                let v = value(&mut parser);
                o.rounds = v
                    .parse()
                    .unwrap_or_else(|_| fail(format!("--rounds: not a number: {v}")));
            }
            Long("only") => o.only = Some(value(&mut parser)),
            Long("profile") => {
                let side = value(&mut parser);
                if side != "keybus" && side != "baseline" {
                    fail(format!("--profile: keybus or baseline, not {side}"));
                }
                o.profile = Some(side);
            }
            Long("out") => o.out = PathBuf::from(value(&mut parser)),
            Short('h') | Long("help") => {
                println!("{usage}");
                std::process::exit(0);
            }
            other => fail(other.unexpected().to_string()),
        }
    }
    if o.rounds == 0 {
        o.rounds = if o.targets {
            targets::DEFAULT_ROUNDS
        } else if o.full {
            9
        } else {
            5
        };
    }
    o
}
