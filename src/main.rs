//! The binary's edge: parse the command line, build the adapters, run the start-up flow.

use std::process::ExitCode;

use rkubelet::app::{bootstrap, cli, logging};

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
    // The dry run decides from the flag-only options alone, so even an invalid
    // configuration is reported as a plan (all problems, exit 1).
    if rkubelet::domain::config::flag_options(&given).is_ok_and(|o| o.dry_run) {
        return ExitCode::from(rkubelet::app::planner::run(given));
    }
    let resolved = match bootstrap::load_configuration(given) {
        Ok(resolved) => resolved,
        Err(e) => return report(&e),
    };
    logging::init(&resolved.config.logging);
    let Some(runtime) = rkubelet::app::compose::async_runtime() else {
        return ExitCode::FAILURE;
    };
    let deps = rkubelet::app::compose::production_deps(&resolved);
    let outcome = runtime.block_on(async {
        let stop = rkubelet::app::compose::shutdown_signal();
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

fn report(e: &bootstrap::StartupError) -> ExitCode {
    for line in e.to_string().lines() {
        eprintln!("E {line}");
    }
    ExitCode::FAILURE
}
