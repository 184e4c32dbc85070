//! The binary's edge: parse the command line, build the adapters, run the start-up flow.

use std::process::ExitCode;

use rkubelet::app::bootstrap::{self, StartupError};
use rkubelet::app::{cli, compose, logging, planner};
use rkubelet::domain::config;

fn main() -> ExitCode {
    let given = match cli::parse(std::env::args_os()) {
        Ok(given) => given,
        Err(e) => {
            use clap::error::ErrorKind;
            let _ = e.print();
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => ExitCode::SUCCESS,
                _ => ExitCode::FAILURE,
            };
        }
    };
    // The flag-only options find the files and the root directory; their problems are
    // reported with every other one by the configuration's resolve step.
    let options = config::flag_options(&given).unwrap_or_default();
    // The dry run decides from the flag-only options alone, so even an invalid
    // configuration is reported as a plan (all problems, exit 1).
    if options.dry_run {
        return ExitCode::from(planner::run(given));
    }
    let deps = compose::production_deps(&options);
    let resolved = match bootstrap::load_configuration(given, &deps) {
        Ok(resolved) => resolved,
        Err(e) => return report(&e),
    };
    logging::init(&resolved.node.logging);
    let Some(runtime) = compose::async_runtime() else {
        return ExitCode::FAILURE;
    };
    let outcome = runtime.block_on(async {
        let stop = compose::shutdown_signal();
        let started = bootstrap::start(resolved, &deps).await?;
        bootstrap::run(started, &deps, stop).await
    });
    match outcome {
        Ok(reason) => {
            tracing::info!(?reason, "rkubelet stopped");
            ExitCode::SUCCESS
        }
        Err(e) => report(&e),
    }
}

fn report(e: &StartupError) -> ExitCode {
    for line in e.lines() {
        eprintln!("E {line}");
    }
    ExitCode::FAILURE
}
