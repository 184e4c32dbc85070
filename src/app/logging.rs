//! Structured logs through `tracing`, at the configured verbosity and format.

use tracing_subscriber::EnvFilter;

use crate::domain::config::{LogFormat, LoggingSettings};

/// `-v` levels as the upstream kubelet uses them: 0-1 info, 2-4 debug, 5+ trace.
pub fn level_for(verbosity: u32) -> &'static str {
    match verbosity {
        0 | 1 => "info",
        2..=4 => "debug",
        _ => "trace",
    }
}

/// Install the global subscriber; `RUST_LOG` overrides the verbosity when set.
pub fn init(logging: &LoggingSettings) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("rkubelet={}", level_for(logging.verbosity))));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only help a terminal; in files and journals they are noise.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let _ = if logging.format == LogFormat::Json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
