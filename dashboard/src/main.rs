//! `keybus-dashboard`: prints its address, then serves the page, the SSE
//! stream and the stats (see `--help`).

use keybus_dashboard::app::App;
use keybus_dashboard::cli::{self, Command};
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let config = match cli::parse(std::env::args_os().skip(1)) {
        Ok(Command::Run(config)) => config,
        Ok(Command::Help) => {
            print!("{}", cli::HELP);
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("keybus-dashboard: {message}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("keybus-dashboard: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let listener = match tokio::net::TcpListener::bind((config.addr, config.port)).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!(
                    "keybus-dashboard: cannot listen on {}:{}: {e}",
                    config.addr, config.port
                );
                return ExitCode::FAILURE;
            }
        };
        let addr = listener
            .local_addr()
            .expect("a bound listener has an address");
        let (keys, pace) = (config.keys, config.pace.as_millis());
        let app = App::start(config);
        // The first line is the address, for people and for the tests.
        println!("keybus-dashboard: serving http://{addr}/ ({keys} metrics, pace {pace} ms)");
        let _ = std::io::stdout().flush();
        match keybus_dashboard::serve(listener, app).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("keybus-dashboard: {e}");
                ExitCode::FAILURE
            }
        }
    })
}
