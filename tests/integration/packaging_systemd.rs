//! `packaging/rkubelet.service` under a real systemd manager (a private one from
//! scripts/test-env/systemd-up.sh): the unit starts rkubelet, stays `activating` until
//! rkubelet sends READY=1 (after it serves /healthz), is `active` after, and
//! `systemctl stop` ends it cleanly. Needs root and systemd; fails, saying which is
//! missing, without them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use zbus::zvariant::{OwnedObjectPath, OwnedValue};

use crate::common;

use common::systemd::Systemd;
use common::{free_port, http_get, BIN};

const INSTALLED: &str = "/usr/local/bin/rkubelet";

/// The folder of runtime user units (`$XDG_RUNTIME_DIR/systemd/user`), which is in
/// a user manager's unit search path and gone with the manager.
fn unit_dir(peer: &Systemd) -> PathBuf {
    Path::new(&peer.var("XDG_RUNTIME_DIR")).join("systemd/user")
}

struct Manager {
    conn: zbus::Connection,
}

impl Manager {
    async fn connect(peer: &Systemd) -> Manager {
        let conn = zbus::connection::Builder::address(peer.var("DBUS_SYSTEM_BUS_ADDRESS").as_str())
            .expect("bus address")
            .build()
            .await
            .expect("connects to the private manager's bus");
        Manager { conn }
    }

    async fn call<B>(&self, method: &str, body: &B) -> zbus::Message
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
    {
        self.conn
            .call_method(
                Some("org.freedesktop.systemd1"),
                "/org/freedesktop/systemd1",
                Some("org.freedesktop.systemd1.Manager"),
                method,
                body,
            )
            .await
            .unwrap_or_else(|e| panic!("{method}: {e}"))
    }

    /// `systemctl daemon-reload`: returns once the manager has read the unit folders.
    async fn reload(&self) {
        self.call("Reload", &()).await;
    }

    async fn unit(&self, name: &str) -> Unit {
        let path: OwnedObjectPath = self
            .call("LoadUnit", &(name,))
            .await
            .body()
            .deserialize()
            .expect("unit path");
        let unit = Unit {
            conn: self.conn.clone(),
            path,
        };
        // Pin it while this connection lives: an inactive unit nobody references is
        // garbage-collected, and its exit status with it.
        unit.call("Ref", &()).await;
        unit
    }
}

struct Unit {
    conn: zbus::Connection,
    path: OwnedObjectPath,
}

impl Unit {
    /// A property read fresh from the manager each time (a proxy would cache it).
    async fn get<T>(&self, interface: &str, name: &str) -> T
    where
        T: TryFrom<OwnedValue>,
        T::Error: std::fmt::Debug,
    {
        let reply = self
            .conn
            .call_method(
                Some("org.freedesktop.systemd1"),
                self.path.as_ref(),
                Some("org.freedesktop.DBus.Properties"),
                "Get",
                &(interface, name),
            )
            .await
            .unwrap_or_else(|e| panic!("{interface}.{name}: {e}"));
        let value: OwnedValue = reply
            .body()
            .deserialize()
            .unwrap_or_else(|e| panic!("{interface}.{name}: {e}"));
        T::try_from(value).unwrap_or_else(|e| panic!("{interface}.{name}: {e:?}"))
    }

    /// ActiveState and SubState from one `GetAll`: two `Get` calls can straddle a
    /// transition and pair an old ActiveState with a new SubState.
    async fn state(&self) -> (String, String) {
        let interface = "org.freedesktop.systemd1.Unit";
        let reply = self
            .conn
            .call_method(
                Some("org.freedesktop.systemd1"),
                self.path.as_ref(),
                Some("org.freedesktop.DBus.Properties"),
                "GetAll",
                &(interface,),
            )
            .await
            .unwrap_or_else(|e| panic!("{interface} GetAll: {e}"));
        let mut all: HashMap<String, OwnedValue> = reply
            .body()
            .deserialize()
            .unwrap_or_else(|e| panic!("{interface} GetAll: {e}"));
        let mut take = |name: &str| -> String {
            all.remove(name)
                .and_then(|v| String::try_from(v).ok())
                .unwrap_or_else(|| panic!("{interface}.{name} missing"))
        };
        (take("ActiveState"), take("SubState"))
    }

    async fn main_pid(&self) -> u32 {
        self.get("org.freedesktop.systemd1.Service", "MainPID")
            .await
    }

    async fn call<B>(&self, method: &str, body: &B)
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
    {
        self.conn
            .call_method(
                Some("org.freedesktop.systemd1"),
                self.path.as_ref(),
                Some("org.freedesktop.systemd1.Unit"),
                method,
                body,
            )
            .await
            .unwrap_or_else(|e| panic!("{method}: {e}"));
    }

    /// `systemctl stop`, then every state seen until the unit is inactive or failed.
    async fn stop(&self) -> Vec<(String, String)> {
        self.job("Stop").await;
        self.watch(Duration::from_secs(30), |s| {
            s.0 == "inactive" || s.0 == "failed"
        })
        .await
    }

    /// `systemctl start` or `stop` (`Start`, `Stop`), queued in "replace" mode.
    async fn job(&self, method: &str) {
        self.call(method, &("replace",)).await;
    }

    /// Polls until `until` holds for the state, returning every distinct state seen on
    /// the way (consecutive repeats dropped), or panics after `limit`.
    async fn watch(
        &self,
        limit: Duration,
        mut until: impl FnMut(&(String, String)) -> bool,
    ) -> Vec<(String, String)> {
        let deadline = Instant::now() + limit;
        let mut seen: Vec<(String, String)> = Vec::new();
        loop {
            let state = self.state().await;
            if seen.last() != Some(&state) {
                seen.push(state.clone());
            }
            if until(&state) {
                return seen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out; states seen: {seen:?}"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

fn state(active: &str, sub: &str) -> (String, String) {
    (active.to_string(), sub.to_string())
}

/// The product unit with only ExecStart changed: `exec` (this binary and its test
/// arguments, on the simulated runtime), and a drop-in sending its output to `log`
/// (the private manager has no journal).
fn install(dir: &Path, unit: &str, exec: &str, log: &Path) {
    let product = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/rkubelet.service"),
    )
    .expect("packaging/rkubelet.service");
    let line = format!("ExecStart={INSTALLED}\n");
    assert_eq!(product.matches(&line).count(), 1, "one ExecStart line");
    std::fs::create_dir_all(dir.join(format!("{unit}.d"))).expect("unit dirs");
    std::fs::write(
        dir.join(unit),
        product.replace(&line, &format!("ExecStart={exec}\n")),
    )
    .expect("write unit");
    std::fs::write(
        dir.join(format!("{unit}.d/log.conf")),
        format!(
            "[Service]\nStandardOutput=append:{0}\nStandardError=append:{0}\n",
            log.display()
        ),
    )
    .expect("write drop-in");
}

/// rkubelet's arguments for a run with no side effects on the host: the simulated
/// runtime (and its in-memory cgroup tree), folders under `dir`, healthz on `port`.
fn args(dir: &Path, port: u16) -> String {
    format!(
        "{BIN} --container-runtime-endpoint=fake:// --root-dir={} --pod-logs-dir={} \
         --healthz-bind-address=127.0.0.1 --healthz-port={port} --port={} --cert-dir={}",
        dir.join("root").display(),
        dir.join("logs").display(),
        free_port(),
        dir.join("pki").display()
    )
}

/// A private manager with the product unit `rkubelet.service` installed (see
/// [`install`]) and loaded.
/// Fields drop in order: the manager goes last.
struct Loaded {
    unit: Unit,
    log: PathBuf,
    port: u16,
    _dir: tempfile::TempDir,
    _peer: Systemd,
}

impl Loaded {
    /// Panics when this machine cannot run a private manager (saying what is
    /// missing). The unit runs `exec(args)`, given rkubelet's [`args`] for a temporary
    /// folder and a free port.
    async fn start(name: &str, exec: impl FnOnce(String) -> String) -> Loaded {
        let peer = Systemd::start(name);
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("rkubelet.log");
        let port = free_port();
        install(
            &unit_dir(&peer),
            "rkubelet.service",
            &exec(args(dir.path(), port)),
            &log,
        );
        let manager = Manager::connect(&peer).await;
        manager.reload().await;
        let unit = manager.unit("rkubelet.service").await;
        Loaded {
            unit,
            log,
            port,
            _dir: dir,
            _peer: peer,
        }
    }
}

fn log_of(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[tokio::test]
#[ignore = "needs root and systemd: run by scripts/test.sh"]
async fn the_unit_is_active_only_after_ready_and_stops_cleanly() {
    // rkubelet sends READY=1 about a millisecond after it starts, faster than the state
    // can be polled; a short wait before it (the same process: `exec` keeps the pid)
    // makes the activating phase observable without changing the product.
    let loaded = Loaded::start("unit", |args| {
        format!("/bin/sh -c 'sleep 0.3; exec {args}'")
    })
    .await;
    let (unit, log, port) = (&loaded.unit, &loaded.log, loaded.port);
    let load: String = unit.get("org.freedesktop.systemd1.Unit", "LoadState").await;
    assert_eq!(load, "loaded");
    assert_eq!(unit.state().await, state("inactive", "dead"));

    // StartUnit returns once the job is queued; a Type=notify start job ends only with
    // READY=1, so the state is watched from here.
    unit.job("Start").await;
    let mut pid_while_activating = 0;
    let mut seen = Vec::new();
    let deadline = Instant::now() + crate::common::patience(30);
    loop {
        let now = unit.state().await;
        if now == state("activating", "start") && pid_while_activating == 0 {
            pid_while_activating = unit.main_pid().await;
        }
        if seen.last() != Some(&now) {
            seen.push(now.clone());
        }
        // Until the queued job runs, the unit may still read inactive.
        let queued = now == state("inactive", "dead") && seen.len() == 1;
        if now.0 != "activating" && !queued {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still activating; log:\n{}",
            log_of(log)
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let log_text = log_of(log);
    if seen.first() == Some(&state("inactive", "dead")) {
        seen.remove(0);
    }
    assert_eq!(
        seen,
        [state("activating", "start"), state("active", "running")],
        "log:\n{log_text}"
    );
    // While activating, rkubelet was already the unit's main process: the unit waited
    // for it, not for it to be started.
    let pid = unit.main_pid().await;
    assert!(pid != 0, "no main pid; log:\n{log_text}");
    assert_eq!(pid_while_activating, pid, "main pid while activating, then");
    assert_eq!(
        http_get(port, "/healthz"),
        Some((200, "ok".to_string())),
        "log:\n{log_text}"
    );
    // rkubelet's own account: /healthz served first, then READY=1 sent.
    let serving = log_text.find("serving /healthz");
    let ready = log_text.find("notified systemd: READY=1");
    assert!(
        matches!((serving, ready), (Some(s), Some(r)) if s < r),
        "log:\n{log_text}"
    );

    // `systemctl stop`: SIGTERM, rkubelet exits 0, the unit is inactive and not restarted.
    let seen = unit.stop().await;
    assert_eq!(
        seen.last(),
        Some(&state("inactive", "dead")),
        "{seen:?}; log:\n{}",
        log_of(log)
    );
    let service = "org.freedesktop.systemd1.Service";
    let result: String = unit.get(service, "Result").await;
    let code: i32 = unit.get(service, "ExecMainCode").await;
    let status: i32 = unit.get(service, "ExecMainStatus").await;
    // CLD_EXITED (1) with status 0: a normal exit, not a signal death.
    assert_eq!((result.as_str(), code, status), ("success", 1, 0));
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "rkubelet {pid} is still running"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(unit.state().await, state("inactive", "dead"), "restarted");
}

/// The control: the same unit whose rkubelet cannot reach the notify socket serves
/// /healthz yet stays `activating`, so `active` above came from READY=1 and not from
/// the process starting or serving.
#[tokio::test]
#[ignore = "needs root and systemd: run by scripts/test.sh"]
async fn without_ready_the_unit_stays_activating() {
    // env execs rkubelet, so it is still the unit's main process, just without
    // NOTIFY_SOCKET.
    let loaded = Loaded::start("noready", |args| {
        format!("/usr/bin/env -u NOTIFY_SOCKET {args}")
    })
    .await;
    let (unit, log, port) = (&loaded.unit, &loaded.log, loaded.port);
    unit.job("Start").await;
    let deadline = Instant::now() + crate::common::patience(30);
    while http_get(port, "/healthz").is_none() {
        assert!(
            Instant::now() < deadline,
            "rkubelet never served; log:\n{}",
            log_of(log)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // rkubelet sends READY=1 right after it serves; a second is ample for it to arrive.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        unit.state().await,
        state("activating", "start"),
        "log:\n{}",
        log_of(log)
    );
    assert!(!log_of(log).contains("READY=1"), "{}", log_of(log));
    let seen = unit.stop().await;
    assert_eq!(seen.last(), Some(&state("inactive", "dead")), "{seen:?}");
}
