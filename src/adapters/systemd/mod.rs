//! The `systemd` cgroup driver: the kubelet's cgroups are transient slice units that the
//! systemd manager creates, limits and removes, asked over D-Bus (zbus, on tokio).
//!
//! Names: a [`CgroupName`] `kubepods/burstable/pod<uid>` is the slice
//! `kubepods-burstable-pod<uid_with_underscores>.slice`; systemd nests it as
//! `/kubepods.slice/kubepods-burstable.slice/...` below the manager's own root cgroup
//! (its `ControlGroup`, read at connect: "/" for PID 1, a sub-cgroup for a user manager).

mod proxy;

use std::collections::BTreeSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use zbus::proxy::CacheProperties;
use zbus::zvariant::{OwnedObjectPath, Value};
use zbus::Connection;

use crate::domain::cgroup::{
    resource_properties, slice_properties, CgroupDriver, CgroupName, CgroupVersion, PropValue,
    Property, ResourceConfig, WeightCurve,
};
use crate::ports::cgroup::{CgroupError, CgroupManager};
use proxy::{ManagerProxy, SliceProxy, UnitProxy};

/// How long a start or stop job may take before the call is reported as failed.
const JOB_TIMEOUT: Duration = Duration::from_secs(30);
const NO_SUCH_UNIT: &str = "org.freedesktop.systemd1.NoSuchUnit";
const UNIT_EXISTS: &str = "org.freedesktop.systemd1.UnitExists";

/// A connection to one systemd manager, implementing [`CgroupManager`] with slices.
pub struct SystemdManager {
    conn: Connection,
    manager: ManagerProxy<'static>,
    control_group: String,
    version: CgroupVersion,
    cgroup_root: PathBuf,
    weight_curve: WeightCurve,
}

/// Why a job-running call failed.
enum JobError {
    /// The method call itself was refused.
    Call(zbus::Error),
    /// The job ran and ended with this result ("failed", "canceled", "timeout", ...).
    Result(String),
    Timeout,
}

fn reason(e: &zbus::Error) -> String {
    match e {
        zbus::Error::MethodError(name, message, _) => {
            format!("{}: {}", name.as_str(), message.as_deref().unwrap_or(""))
        }
        other => other.to_string(),
    }
}

fn is_error(e: &zbus::Error, name: &str) -> bool {
    matches!(e, zbus::Error::MethodError(n, _, _) if n.as_str() == name)
}

fn bus_error(call: &'static str, unit: &str, e: &zbus::Error) -> CgroupError {
    CgroupError::Systemd {
        call,
        unit: unit.to_owned(),
        source: reason(e).into(),
    }
}

fn job_error(call: &'static str, unit: &str, e: JobError) -> CgroupError {
    let reason = match e {
        JobError::Call(e) => reason(&e),
        JobError::Result(result) => format!("job finished with result {result:?}"),
        JobError::Timeout => format!("job did not finish within {JOB_TIMEOUT:?}"),
    };
    CgroupError::Systemd {
        call,
        unit: unit.to_owned(),
        source: reason.into(),
    }
}

fn to_value(value: &PropValue) -> Value<'static> {
    match value {
        PropValue::Bool(b) => Value::from(*b),
        PropValue::U64(n) => Value::from(*n),
        PropValue::Str(s) => Value::from(s.clone()),
        PropValue::StrList(l) => Value::from(l.clone()),
    }
}

fn to_values(props: &[Property]) -> Vec<(&'static str, Value<'static>)> {
    props.iter().map(|(n, v)| (*n, to_value(v))).collect()
}

/// The pids in every `cgroup.procs` at or below `dir`.
fn collect_pids(dir: &Path, pids: &mut BTreeSet<u32>) -> Result<(), CgroupError> {
    let io = |op: &'static str, path: &Path, source: std::io::Error| CgroupError::Io {
        op,
        path: path.to_path_buf(),
        source,
    };
    let procs = dir.join("cgroup.procs");
    match std::fs::read_to_string(&procs) {
        Ok(text) => pids.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok())),
        // the cgroup went away meanwhile
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io("read", &procs, e)),
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io("read dir", dir, e)),
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            collect_pids(&entry.path(), pids)?;
        }
    }
    Ok(())
}

/// Where the cgroup hierarchies are mounted, and their version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMount {
    pub root: PathBuf,
    pub version: CgroupVersion,
}

impl SystemdManager {
    /// Connects to the manager on `address` (a D-Bus address such as
    /// `unix:path=/run/dbus/system_bus_socket`), else on `$DBUS_SYSTEM_BUS_ADDRESS`, else on
    /// the system bus, and reads its root cgroup. `mount` is where the cgroup hierarchies
    /// are mounted, and its version decides which property names units get.
    pub async fn connect(address: Option<&str>, mount: CgroupMount) -> Result<Self, CgroupError> {
        let address = address
            .map(str::to_owned)
            .or_else(|| std::env::var("DBUS_SYSTEM_BUS_ADDRESS").ok())
            .filter(|a| !a.is_empty());
        let target = address.clone().unwrap_or_else(|| "system bus".to_owned());
        let conn = match &address {
            Some(a) => match zbus::connection::Builder::address(a.as_str()) {
                Ok(builder) => builder.build().await,
                Err(e) => Err(e),
            },
            None => Connection::system().await,
        }
        .map_err(|e| bus_error("connect", &target, &e))?;
        let manager = ManagerProxy::builder(&conn)
            .cache_properties(CacheProperties::No)
            .build()
            .await
            .map_err(|e| bus_error("connect", &target, &e))?;
        manager
            .subscribe()
            .await
            .map_err(|e| bus_error("Subscribe", &target, &e))?;
        let control_group = manager
            .control_group()
            .await
            .map_err(|e| bus_error("Get ControlGroup", &target, &e))?;
        let control_group = if control_group.is_empty() {
            "/".to_owned()
        } else {
            control_group
        };
        Ok(Self {
            conn,
            manager,
            control_group,
            version: mount.version,
            cgroup_root: mount.root,
            weight_curve: WeightCurve::default(),
        })
    }

    /// How v2 `CPUWeight` is derived from cpu shares (default: the quadratic curve).
    pub fn with_weight_curve(mut self, curve: WeightCurve) -> Self {
        self.weight_curve = curve;
        self
    }

    /// The manager's root cgroup, as systemd reports it (`/` for PID 1).
    pub fn control_group(&self) -> &str {
        &self.control_group
    }

    /// Which property names this manager's units get.
    pub fn cgroup_version(&self) -> CgroupVersion {
        self.version
    }

    /// The cgroup path (from the hierarchy's root) where systemd puts `name`'s slice.
    pub fn cgroup_path(&self, name: &CgroupName) -> String {
        let own = name.to_systemd();
        match self.control_group.trim_end_matches('/') {
            "" => own,
            base if own == "/" => base.to_owned(),
            base => format!("{base}{own}"),
        }
    }

    /// Runs a job-creating call and waits for its `JobRemoved`. The signal stream is opened
    /// before the call: a short job can finish before the reply arrives.
    async fn run_job<F, Fut>(&self, start: F) -> Result<(), JobError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = zbus::Result<OwnedObjectPath>>,
    {
        let mut removed = self
            .manager
            .receive_job_removed()
            .await
            .map_err(JobError::Call)?;
        let job = start().await.map_err(JobError::Call)?;
        let wait = async {
            while let Some(signal) = removed.next().await {
                if let Ok(args) = signal.args() {
                    if args.job.as_str() == job.as_str() {
                        return Some(args.result.clone());
                    }
                }
            }
            None
        };
        match tokio::time::timeout(JOB_TIMEOUT, wait).await {
            Ok(Some(result)) if result == "done" => Ok(()),
            Ok(Some(result)) => Err(JobError::Result(result)),
            // the stream ends only when the connection does
            Ok(None) => Err(JobError::Call(zbus::Error::InputOutput(
                std::io::Error::from(std::io::ErrorKind::ConnectionAborted).into(),
            ))),
            Err(_) => Err(JobError::Timeout),
        }
    }

    async fn unit_path(&self, unit: &str) -> Result<Option<OwnedObjectPath>, CgroupError> {
        match self.manager.get_unit(unit).await {
            Ok(path) => Ok(Some(path)),
            Err(e) if is_error(&e, NO_SUCH_UNIT) => Ok(None),
            Err(e) => Err(bus_error("GetUnit", unit, &e)),
        }
    }

    async fn set_properties(&self, unit: &str, props: &[Property]) -> Result<(), CgroupError> {
        if props.is_empty() {
            return Ok(());
        }
        let values = to_values(props);
        self.manager
            .set_unit_properties(unit, true, &values)
            .await
            .map_err(|e| bus_error("SetUnitProperties", unit, &e))
    }

    /// The hierarchy directory whose `cgroup.procs` list a unit's processes: cgroup2 on a
    /// v2 host; on v1 the first hierarchy that has the cgroup (pids and memory get one
    /// because the slices have accounting on; name=systemd always has one).
    fn procs_dir(&self, cgroup: &str) -> Option<PathBuf> {
        let rel = cgroup.trim_start_matches('/');
        let candidates: &[&str] = match self.version {
            CgroupVersion::V2 => &[""],
            CgroupVersion::V1 => &["pids", "memory", "systemd", "unified"],
        };
        candidates
            .iter()
            .map(|h| self.cgroup_root.join(h).join(rel))
            .find(|d| d.is_dir())
    }
}

#[async_trait]
impl CgroupManager for SystemdManager {
    fn driver(&self) -> CgroupDriver {
        CgroupDriver::Systemd
    }

    /// Upstream's `cgroupCommon.Name` with the systemd driver: `name.ToSystemd()`, the
    /// expanded slice path (`/kubepods.slice/kubepods-burstable.slice/...`). That is what
    /// the kubelet passes as a sandbox's `cgroup_parent`; the runtime takes its last
    /// element as the slice to put the pod's containers in.
    fn driver_name(&self, name: &CgroupName) -> String {
        name.to_systemd()
    }

    async fn create(
        &self,
        name: &CgroupName,
        resources: &ResourceConfig,
    ) -> Result<(), CgroupError> {
        if name.is_root() {
            // "-.slice" always exists and cannot be started: only its limits can change
            return self.update(name, resources).await;
        }
        let unit = name.to_systemd_unit();
        let values = to_values(&slice_properties(
            name,
            resources,
            self.version,
            self.weight_curve,
        ));
        let aux: &[(&str, &[(&str, Value<'_>)])] = &[];
        let started = self
            .run_job(|| {
                self.manager
                    .start_transient_unit(&unit, "replace", &values, aux)
            })
            .await;
        match started {
            Ok(()) => Ok(()),
            // created before (or still loaded after a stop): apply the values, make it run
            Err(JobError::Call(e)) if is_error(&e, UNIT_EXISTS) => {
                self.set_properties(
                    &unit,
                    &resource_properties(resources, self.version, self.weight_curve),
                )
                .await?;
                self.run_job(|| self.manager.start_unit(&unit, "replace"))
                    .await
                    .map_err(|e| job_error("StartUnit", &unit, e))
            }
            Err(e) => Err(job_error("StartTransientUnit", &unit, e)),
        }
    }

    async fn update(
        &self,
        name: &CgroupName,
        resources: &ResourceConfig,
    ) -> Result<(), CgroupError> {
        let unit = name.to_systemd_unit();
        self.set_properties(
            &unit,
            &resource_properties(resources, self.version, self.weight_curve),
        )
        .await
    }

    async fn destroy(&self, name: &CgroupName) -> Result<(), CgroupError> {
        if name.is_root() {
            return Ok(());
        }
        let unit = name.to_systemd_unit();
        match self
            .run_job(|| self.manager.stop_unit(&unit, "replace"))
            .await
        {
            Ok(()) => Ok(()),
            Err(JobError::Call(e)) if is_error(&e, NO_SUCH_UNIT) => Ok(()),
            Err(e) => Err(job_error("StopUnit", &unit, e)),
        }
    }

    /// Loaded and running (a stopped unit can stay loaded for a moment; its cgroup is gone).
    async fn exists(&self, name: &CgroupName) -> Result<bool, CgroupError> {
        let unit = name.to_systemd_unit();
        let Some(path) = self.unit_path(&unit).await? else {
            return Ok(false);
        };
        let state = async {
            UnitProxy::builder(&self.conn)
                .path(path)?
                .cache_properties(CacheProperties::No)
                .build()
                .await?
                .active_state()
                .await
        }
        .await;
        match state {
            Ok(state) => Ok(matches!(
                state.as_str(),
                "active" | "activating" | "reloading"
            )),
            // unloaded between the two calls
            Err(e) if is_error(&e, NO_SUCH_UNIT) => Ok(false),
            Err(e) => Err(bus_error("Get ActiveState", &unit, &e)),
        }
    }

    async fn pids(&self, name: &CgroupName) -> Result<Vec<u32>, CgroupError> {
        let unit = name.to_systemd_unit();
        let cgroup = if name.is_root() {
            self.control_group.clone()
        } else {
            let Some(path) = self.unit_path(&unit).await? else {
                return Ok(Vec::new());
            };
            let cgroup = async {
                SliceProxy::builder(&self.conn)
                    .path(path)?
                    .cache_properties(CacheProperties::No)
                    .build()
                    .await?
                    .control_group()
                    .await
            }
            .await
            .map_err(|e| bus_error("Get ControlGroup", &unit, &e))?;
            if cgroup.is_empty() {
                // loaded but not running: no cgroup, no processes
                return Ok(Vec::new());
            }
            cgroup
        };
        let mut pids = BTreeSet::new();
        if let Some(dir) = self.procs_dir(&cgroup) {
            collect_pids(&dir, &mut pids)?;
        }
        Ok(pids.into_iter().collect())
    }

    async fn kill_processes(&self, name: &CgroupName) -> Result<usize, CgroupError> {
        let pids = self.pids(name).await?;
        for &pid in &pids {
            kill_process(pid, name)?;
        }
        Ok(pids.len())
    }

    async fn children(&self, name: &CgroupName) -> Result<Vec<CgroupName>, CgroupError> {
        let unit = name.to_systemd_unit();
        let prefix = if name.is_root() {
            String::new()
        } else {
            format!("{}-", unit.trim_end_matches(".slice"))
        };
        let pattern = format!("{prefix}*.slice");
        let rows = self
            .manager
            .list_units_by_patterns(&[], &[pattern.as_str()])
            .await
            .map_err(|e| bus_error("ListUnitsByPatterns", &unit, &e))?;
        let mut children: Vec<CgroupName> = rows
            .iter()
            .filter(|row| matches!(row.3.as_str(), "active" | "activating" | "reloading"))
            .filter_map(|row| {
                let rest = row.0.strip_prefix(&prefix)?.strip_suffix(".slice")?;
                // direct children only: one more component, and never the root slice
                (!rest.is_empty() && !rest.contains('-')).then(|| CgroupName::from_systemd(&row.0))
            })
            .collect();
        children.sort();
        Ok(children)
    }
}

/// SIGKILL to `pid`, a process of the cgroup `name`; one gone meanwhile is no error.
fn kill_process(pid: u32, name: &CgroupName) -> Result<(), CgroupError> {
    let error = |source: std::io::Error| CgroupError::Kill {
        pid,
        cgroup: name.to_string(),
        source,
    };
    let raw = i32::try_from(pid).map_err(|_| error(std::io::ErrorKind::InvalidInput.into()))?;
    match nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(raw),
        nix::sys::signal::Signal::SIGKILL,
    ) {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => Ok(()),
        Err(errno) => Err(error(errno.into())),
    }
}
