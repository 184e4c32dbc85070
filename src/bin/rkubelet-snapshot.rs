//! `rkubelet-snapshot`: record this node's state for `rkubelet --dry-run
//! --dry-run-snapshot=FILE`. Takes rkubelet's flags (the runtime endpoint, the root
//! directory, the hostname override matter) and prints the snapshot as JSON on stdout.
//! Only read calls reach the runtime.

use std::process::ExitCode;

use rkubelet::app::{cli, planner};

const ABOUT: &str = "rkubelet-snapshot: record this node for `rkubelet --dry-run \
--dry-run-snapshot=FILE`. Takes rkubelet's flags and prints, as JSON on stdout, what the \
planner reads: the machine, the cgroup version, the node's stats and the pods the runtime \
holds. Only read calls reach the runtime.";

fn main() -> ExitCode {
    let args: Vec<_> = std::env::args_os().collect();
    // rkubelet's flags under this binary's own name and description, so that --help,
    // --version and errors speak for it; the flags are then read as rkubelet reads them.
    let own = cli::command()
        .name("rkubelet-snapshot")
        .bin_name("rkubelet-snapshot")
        .about(ABOUT)
        .try_get_matches_from(cli::normalize_args(args.iter().cloned()));
    let given = match own.and_then(|_| cli::parse(args)) {
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
    let Some(runtime) = rkubelet::app::compose::async_runtime() else {
        return ExitCode::FAILURE;
    };
    match runtime.block_on(planner::gather::record_snapshot(given)) {
        Ok(snapshot) => match serde_json::to_string_pretty(&snapshot) {
            Ok(text) => {
                println!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("E cannot encode the snapshot: {e}");
                ExitCode::FAILURE
            }
        },
        Err(problems) => {
            for problem in problems {
                eprintln!("E {problem}");
            }
            ExitCode::FAILURE
        }
    }
}
