//! The binary's edge: parse the command line, build the adapters, run the start-up flow.

use std::process::ExitCode;

use rkubelet::app::bootstrap::{self, StartupError};
use rkubelet::app::{cli, compose, logging, planner};
use rkubelet::domain::{config, version};

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // rkubelet's own commands beside upstream's flags.
    let words: Vec<&str> = args.iter().skip(1).filter_map(|a| a.to_str()).collect();
    match words.as_slice() {
        ["version"] => {
            println!("{}", version::own_line(&cli::build()));
            return ExitCode::SUCCESS;
        }
        ["completion", shell] => {
            return match cli::write_completion(shell, &mut std::io::stdout()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(message) => {
                    eprintln!("error: {message}");
                    ExitCode::FAILURE
                }
            };
        }
        ["man"] => {
            return match cli::write_man_page(&mut std::io::stdout()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("error: cannot write the man page: {error}");
                    ExitCode::FAILURE
                }
            };
        }
        _ => {}
    }
    let given = match cli::parse(args.iter().cloned()) {
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
    // Upstream prints the version once every flag has parsed, and quits.
    match cli::version_request(args) {
        Ok(version::VersionRequest::No) => {}
        Ok(version::VersionRequest::Line) => {
            println!("{}", version::version_line());
            return ExitCode::SUCCESS;
        }
        Ok(version::VersionRequest::Raw) => {
            println!("{}", version::raw(&cli::build()));
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            command_failed(line!(), &format!("failed to parse kubelet flag: {message}"));
            return ExitCode::FAILURE;
        }
    }
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
    // Blocking work still running (a manifest's decode) is not waited for: it changes
    // nothing a next start needs.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match outcome {
        Ok(reason) => {
            tracing::info!(?reason, "rkubelet stopped");
            ExitCode::SUCCESS
        }
        Err(e) => report(&e),
    }
}

/// Upstream's last line of a kubelet that cannot start, in klog's format (logging is
/// not set up yet).
fn command_failed(line: u32, error: &str) {
    use rkubelet::domain::log_format::{klog_text, LogRecord, LogValue, Severity};
    let unix_nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    let pairs = [("err".to_owned(), LogValue::Text(error.to_owned()))];
    eprintln!(
        "{}",
        klog_text(&LogRecord {
            severity: Severity::Error,
            verbosity: 0,
            unix_nanos,
            pid: std::process::id(),
            file: file!(),
            line,
            message: "command failed",
            pairs: &pairs,
        })
    );
}

fn report(e: &StartupError) -> ExitCode {
    for line in e.lines() {
        eprintln!("E {line}");
    }
    ExitCode::FAILURE
}
