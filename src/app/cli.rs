//! The command line, built from the flag table in `domain::config::flags`.

use std::ffi::OsString;

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, Command};
use serde_json::Value;
use tracing::{info, warn};

use crate::domain::config::ResolvedConfig;
use crate::domain::version::{parse_version_flag, VersionRequest};

use crate::domain::config::flags::{FlagKind, FlagSpec, State, Target, FLAGS};
use crate::domain::config::layers::GivenFlags;
use crate::domain::config::model::KubeletConfiguration;

const ABOUT: &str = "rkubelet: a Kubernetes node agent. It takes the upstream kubelet's flags and \
KubeletConfiguration file; flags given on the command line override the file.";

/// The default shown for a flag: the configuration's default for config-backed flags.
fn default_text(spec: &FlagSpec, defaults: &Value) -> String {
    match spec.target {
        Target::FlagOnly => spec.flag_default.to_string(),
        Target::Config(path) => {
            let value = path.iter().try_fold(defaults, |v, key| v.get(*key));
            match value {
                Some(Value::String(s)) => s.clone(),
                // In the flag's own syntax, so the default shown parses back
                // (`--eviction-hard=memory.available<100Mi,...`).
                Some(Value::Object(map)) => map
                    .iter()
                    .map(|(k, v)| {
                        let separator = if spec.kind == FlagKind::LessThanMap {
                            "<"
                        } else {
                            "="
                        };
                        format!(
                            "{k}{separator}{}",
                            v.as_str().map_or_else(|| v.to_string(), str::to_string)
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(","),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                    .collect::<Vec<_>>()
                    .join(","),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            }
        }
    }
}

/// `--help` groups the flags by what rkubelet does with them.
pub fn heading(state: State) -> &'static str {
    match state {
        State::Implemented => "Implemented",
        State::NotImplemented => "Accepted, not implemented (start-up warns when given)",
        State::Refused => "Refused when the value asks for something unsafe",
    }
}

fn arg_for(spec: &'static FlagSpec, defaults: &Value) -> Arg {
    let default = default_text(spec, defaults);
    let help = if default.is_empty() {
        spec.help.to_string()
    } else {
        format!("{} [default: {default}]", spec.help)
    };
    let mut arg = Arg::new(spec.name)
        .long(spec.name)
        .help(help)
        .action(ArgAction::Append)
        .allow_hyphen_values(true);
    if let Some(short) = spec.short {
        arg = arg.short(short);
    }
    arg = arg.help_heading(heading(spec.state));
    match spec.kind {
        // Go's pflag: `--flag` alone means true, `--flag=false` needs the `=`.
        FlagKind::Bool => arg
            .num_args(0..=1)
            .require_equals(true)
            .default_missing_value("true")
            .value_name("true|false"),
        FlagKind::Int => arg.num_args(1).value_name("int"),
        FlagKind::Duration => arg.num_args(1).value_name("duration"),
        FlagKind::LessThanMap | FlagKind::EqualsMap | FlagKind::FeatureGates | FlagKind::Taints => {
            arg.num_args(1).value_name("key=value,...")
        }
        FlagKind::List => arg.num_args(1).value_name("a,b,..."),
        FlagKind::ColonMultiMap => arg.num_args(1).value_name("key:value,..."),
        FlagKind::ReservedMemory => arg.num_args(1).value_name("node:type=quantity,...;..."),
        FlagKind::Str => arg.num_args(1).value_name("string"),
    }
}

/// This binary's build facts, for `--version=raw` and `rkubelet version`.
pub fn build() -> crate::domain::version::Build {
    use crate::domain::version::{go_arch, Build};
    Build {
        version: env!("CARGO_PKG_VERSION"),
        commit: env!("RKUBELET_COMMIT"),
        date: env!("RKUBELET_BUILD_DATE"),
        platform: format!(
            "{}/{}",
            std::env::consts::OS,
            go_arch(std::env::consts::ARCH)
        ),
    }
}

/// Upstream's `--version` (`verflag`): a boolean, or `raw`; read by [`version_request`].
const VERSION_FLAG: &str = "version";

/// The clap command with every flag of the table.
pub fn command() -> Command {
    let defaults = serde_json::to_value(KubeletConfiguration::default()).unwrap_or(Value::Null);
    let version = Arg::new(VERSION_FLAG)
        .long(VERSION_FLAG)
        .help("Print version information and quit (--version=raw: upstream's version.Info, with rkubelet's own version and commit; `rkubelet version`: rkubelet's own)")
        .num_args(0..=1)
        .require_equals(true)
        .default_missing_value("true")
        .value_name("true|raw")
        .help_heading(heading(State::Implemented));
    FLAGS.iter().fold(
        Command::new("rkubelet")
            .about(ABOUT)
            .disable_help_subcommand(true)
            .disable_version_flag(true)
            .max_term_width(110)
            .arg(version),
        |cmd, spec| cmd.arg(arg_for(spec, &defaults)),
    )
}

/// What `--version` on the command line asks (upstream prints and exits after parsing
/// every flag); [`VersionRequest::No`] without it.
///
/// # Errors
/// The command line does not parse, or upstream's message for a bad `--version` value.
pub fn version_request<I, T>(args: I) -> Result<VersionRequest, String>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let matches = command()
        .try_get_matches_from(normalize_args(args))
        .map_err(|e| e.to_string())?;
    match matches.get_one::<String>(VERSION_FLAG) {
        Some(value) => parse_version_flag(value),
        None => Ok(VersionRequest::No),
    }
}

/// `rkubelet completion SHELL`: the completion script of every flag, for `bash`, `zsh` or
/// `fish`.
///
/// # Errors
/// Another shell, named with those supported.
pub fn write_completion(shell: &str, out: &mut dyn std::io::Write) -> Result<(), String> {
    use clap_complete::Shell;
    let shell = match shell {
        "bash" => Shell::Bash,
        "zsh" => Shell::Zsh,
        "fish" => Shell::Fish,
        other => {
            return Err(format!(
                "unsupported shell {other:?}: must be one of \"bash\", \"zsh\" or \"fish\""
            ))
        }
    };
    clap_complete::generate(shell, &mut command(), "rkubelet", out);
    Ok(())
}

/// `rkubelet man`: the man page (section 8) of every flag, grouped as `--help` groups
/// them.
///
/// # Errors
/// The output cannot be written.
pub fn write_man_page(out: &mut dyn std::io::Write) -> std::io::Result<()> {
    clap_mangen::Man::new(command()).section("8").render(out)
}

/// Go's pflag treats `_` and `-` in flag names alike: normalise to `-`.
pub fn normalize_args<I, T>(args: I) -> Vec<OsString>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let mut after_terminator = false;
    args.into_iter()
        .map(Into::into)
        .map(|arg| {
            if after_terminator {
                return arg;
            }
            let Some(text) = arg.to_str() else {
                return arg;
            };
            if text == "--" {
                after_terminator = true;
                return arg;
            }
            match text.strip_prefix("--") {
                Some(rest) => {
                    let (name, value) = match rest.split_once('=') {
                        Some((n, v)) => (n, Some(v)),
                        None => (rest, None),
                    };
                    let name = name.replace('_', "-");
                    match value {
                        Some(v) => OsString::from(format!("--{name}={v}")),
                        None => OsString::from(format!("--{name}")),
                    }
                }
                None => arg,
            }
        })
        .collect()
}

/// Parse the command line into the flags given on it, in table order. Map and list
/// flags given several times accumulate; other flags keep the last value, as pflag does.
pub fn parse<I, T>(args: I) -> Result<GivenFlags, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let matches = command().try_get_matches_from(normalize_args(args))?;
    let mut given = GivenFlags::new();
    for spec in FLAGS {
        if matches.value_source(spec.name) != Some(ValueSource::CommandLine) {
            continue;
        }
        let values: Vec<String> = matches
            .get_many::<String>(spec.name)
            .map(|v| v.cloned().collect())
            .unwrap_or_default();
        let accumulates = matches!(
            spec.kind,
            FlagKind::LessThanMap
                | FlagKind::EqualsMap
                | FlagKind::FeatureGates
                | FlagKind::Taints
                | FlagKind::List
                | FlagKind::ColonMultiMap
        );
        let text = if spec.kind == FlagKind::ReservedMemory {
            values.join(";")
        } else if accumulates {
            values.join(",")
        } else {
            values.last().cloned().unwrap_or_default()
        };
        given.push((spec, text));
    }
    Ok(given)
}

/// Start-up step: upstream's notice for each deprecated flag given, then one warning naming every
/// accepted-but-not-implemented flag and field given, with its value.
pub fn warn_compatibility(resolved: &ResolvedConfig) {
    use crate::domain::config::states;
    // Upstream's flag parser writes these as plain lines, whatever the log format.
    for notice in states::deprecation_notices(&resolved.options.given) {
        eprintln!("{notice}");
    }
    for note in states::start_up_notes(&resolved.options.given) {
        info!("{note}");
    }
    let given = states::not_implemented_given(resolved);
    if let Some(message) = states::not_implemented_warning(&given) {
        warn!("{message}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(given: &GivenFlags) -> Vec<(&str, &str)> {
        given.iter().map(|(s, v)| (s.name, v.as_str())).collect()
    }

    #[test]
    fn the_command_is_well_formed() {
        command().debug_assert();
    }

    /// What `--help` shows as a map flag's default is in the flag's syntax and parses
    /// back to the configuration's default.
    #[test]
    fn map_defaults_shown_parse_back() {
        use crate::domain::config::flags::{flag, flag_value};
        let defaults = serde_json::to_value(KubeletConfiguration::default()).unwrap_or(Value::Null);
        for name in [
            "eviction-hard",
            "eviction-soft",
            "kube-reserved",
            "system-reserved",
        ] {
            let spec = flag(name).expect("a known flag");
            let shown = default_text(spec, &defaults);
            let Target::Config(path) = spec.target else {
                panic!("{name} is a config flag");
            };
            let default = path
                .iter()
                .try_fold(&defaults, |v, key| v.get(*key))
                .cloned()
                .unwrap_or(Value::Null);
            if shown.is_empty() {
                continue;
            }
            let parsed =
                flag_value(spec, &shown).unwrap_or_else(|e| panic!("{name}: {shown}: {e}"));
            assert_eq!(parsed, default, "{name}: {shown}");
        }
        let shown = default_text(flag("eviction-hard").expect("known"), &defaults);
        assert!(shown.contains("memory.available<100Mi"), "{shown}");
    }

    #[test]
    fn underscores_and_dashes_are_the_same() {
        let given = parse([
            "rkubelet",
            "--healthz_port=1234",
            "--cgroup_driver",
            "systemd",
        ])
        .expect("parses");
        assert_eq!(
            names(&given),
            [("cgroup-driver", "systemd"), ("healthz-port", "1234")]
        );
    }

    #[test]
    fn booleans_follow_pflag() {
        let given =
            parse(["rkubelet", "--cgroups-per-qos", "--fail-swap-on=false"]).expect("parses");
        assert_eq!(
            names(&given),
            [("cgroups-per-qos", "true"), ("fail-swap-on", "false")]
        );
    }

    #[test]
    fn map_flags_accumulate_and_scalars_keep_the_last() {
        let given = parse([
            "rkubelet",
            "--eviction-hard=memory.available<1Gi",
            "--eviction-hard=nodefs.available<5%",
            "--max-pods=3",
            "--max-pods=4",
            "-v=4",
        ])
        .expect("parses");
        assert_eq!(
            names(&given),
            [
                ("eviction-hard", "memory.available<1Gi,nodefs.available<5%"),
                ("max-pods", "4"),
                ("v", "4")
            ]
        );
    }

    #[test]
    fn a_stray_argument_or_unknown_flag_is_an_error() {
        assert!(parse(["rkubelet", "stray"]).is_err());
        assert!(parse(["rkubelet", "--no-such-flag=1"]).is_err());
    }
}
