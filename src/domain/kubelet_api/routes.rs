//! Which handler answers a path on the kubelet API, as upstream's `NewServer` installs
//! them: the default handlers on every port; the debugging handlers (logs, exec, attach,
//! port-forward, run, running pods, `/configz`) only on the secure port with
//! `enableDebuggingHandlers`, where turning them off answers upstream's "Debug endpoints
//! are disabled."; the read-only port never has them (404, as upstream's read-only
//! server, built without a configuration, installs neither set).

/// The port a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Port {
    /// `port` (10250), with `enableDebuggingHandlers`.
    Secure { debugging: bool },
    /// `readOnlyPort`: no authentication, default handlers only.
    ReadOnly,
}

/// What answers a request; the `&str` is the path after the handler's prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    Healthz,
    /// `/healthz/<name>`: one check on its own (the name).
    HealthzCheck(&'a str),
    Pods,
    Configz,
    RunningPods,
    ContainerLogs(&'a str),
    Exec(&'a str),
    Attach(&'a str),
    PortForward(&'a str),
    Run(&'a str),
    /// A debugging path with the handlers turned off: 405, upstream's text.
    DebuggingDisabled,
    /// Not served here (404), including what another part of rkubelet serves (stats,
    /// metrics) when it is not wired.
    NotFound,
}

/// Upstream's answer on a debugging path when the handlers are off (`http.Error` adds the
/// newline), with status 405.
pub const DEBUGGING_DISABLED: &str = "Debug endpoints are disabled.\n";

/// The paths upstream's `InstallDebuggingDisabledHandlers` answers with 405 (Go's
/// `ServeMux` patterns: a trailing slash matches the subtree).
const DEBUGGING_PATHS: &[&str] = &[
    "/run/",
    "/exec/",
    "/attach/",
    "/portForward/",
    "/containerLogs/",
    "/runningpods/",
    "/debug/pprof/",
    "/logs/",
];

fn under(path: &str, prefix: &str) -> bool {
    path.starts_with(prefix) || path == prefix.trim_end_matches('/')
}

/// Builds the route of a prefixed handler from the rest of the path.
type Handler<'a> = fn(&'a str) -> Route<'a>;

/// The handler for `path` on `port`.
pub fn route<'a>(path: &'a str, port: Port) -> Route<'a> {
    match path {
        "/healthz" => return Route::Healthz,
        "/pods" | "/pods/" => return Route::Pods,
        _ => {}
    }
    if let Some(check) = path.strip_prefix("/healthz/") {
        return Route::HealthzCheck(check);
    }
    let debugging = match port {
        Port::ReadOnly => return Route::NotFound,
        Port::Secure { debugging } => debugging,
    };
    if !debugging {
        return if DEBUGGING_PATHS.iter().any(|p| under(path, p)) {
            Route::DebuggingDisabled
        } else {
            Route::NotFound
        };
    }
    if path == "/configz" {
        return Route::Configz;
    }
    if path == "/runningpods/" {
        return Route::RunningPods;
    }
    let prefixed: [(&str, Handler<'a>); 5] = [
        ("/containerLogs/", Route::ContainerLogs),
        ("/exec/", Route::Exec),
        ("/attach/", Route::Attach),
        ("/portForward/", Route::PortForward),
        ("/run/", Route::Run),
    ];
    for (prefix, to) in prefixed {
        if let Some(rest) = path.strip_prefix(prefix) {
            return to(rest);
        }
    }
    Route::NotFound
}

/// `/run`'s command: upstream splits the `cmd` query value on single spaces.
pub fn run_command(cmd: &str) -> Vec<String> {
    cmd.split(' ').map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ON: Port = Port::Secure { debugging: true };
    const OFF: Port = Port::Secure { debugging: false };

    #[test]
    fn debugging_handlers_on_the_secure_port() {
        assert_eq!(route("/healthz", ON), Route::Healthz);
        assert_eq!(route("/healthz/ping", ON), Route::HealthzCheck("ping"));
        assert_eq!(
            route("/healthz/syncloop", OFF),
            Route::HealthzCheck("syncloop")
        );
        assert_eq!(route("/pods", ON), Route::Pods);
        assert_eq!(route("/configz", ON), Route::Configz);
        assert_eq!(route("/runningpods/", ON), Route::RunningPods);
        assert_eq!(
            route("/containerLogs/ns/p/c", ON),
            Route::ContainerLogs("ns/p/c")
        );
        assert_eq!(route("/exec/ns/p/c", ON), Route::Exec("ns/p/c"));
        assert_eq!(route("/attach/ns/p/c", ON), Route::Attach("ns/p/c"));
        assert_eq!(route("/portForward/ns/p", ON), Route::PortForward("ns/p"));
        assert_eq!(route("/run/ns/p/c", ON), Route::Run("ns/p/c"));
        assert_eq!(route("/nope", ON), Route::NotFound);
    }

    #[test]
    fn debugging_handlers_off_answer_disabled() {
        for path in [
            "/run/ns/p/c",
            "/exec/ns/p/c",
            "/attach/ns/p/c",
            "/portForward/ns/p",
            "/containerLogs/ns/p/c",
            "/runningpods/",
            "/runningpods",
            "/logs/",
            "/debug/pprof/heap",
        ] {
            assert_eq!(route(path, OFF), Route::DebuggingDisabled, "{path}");
        }
        // upstream installs /configz with the debugging handlers only.
        assert_eq!(route("/configz", OFF), Route::NotFound);
        assert_eq!(route("/healthz", OFF), Route::Healthz);
        assert_eq!(route("/pods", OFF), Route::Pods);
    }

    #[test]
    fn the_read_only_port_serves_default_handlers_only() {
        assert_eq!(route("/healthz", Port::ReadOnly), Route::Healthz);
        assert_eq!(
            route("/healthz/syncloop", Port::ReadOnly),
            Route::HealthzCheck("syncloop")
        );
        assert_eq!(route("/pods", Port::ReadOnly), Route::Pods);
        for path in [
            "/configz",
            "/exec/ns/p/c",
            "/containerLogs/ns/p/c",
            "/runningpods/",
            "/run/ns/p/c",
        ] {
            assert_eq!(route(path, Port::ReadOnly), Route::NotFound, "{path}");
        }
    }

    #[test]
    fn run_splits_on_spaces_as_upstream() {
        assert_eq!(run_command("ls -l /"), ["ls", "-l", "/"]);
        assert_eq!(run_command("a  b"), ["a", "", "b"]);
    }
}
