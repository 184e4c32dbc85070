//! `rkubelet-snapshot`: record this node's state for `rkubelet --dry-run
//! --dry-run-snapshot=FILE`. Takes rkubelet's flags (the runtime endpoint, the root
//! directory, the hostname override matter) and prints the snapshot as JSON on stdout.
//! Only read calls reach the runtime.

use std::process::ExitCode;

use rkubelet::app::{cli, planner};

fn main() -> ExitCode {
    let given = match cli::parse(std::env::args_os()) {
        Ok(given) => given,
        Err(e) => {
            let _ = e.print();
            return ExitCode::FAILURE;
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
