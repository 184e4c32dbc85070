//! The container manager: the kubelet's cgroup tree under `--cgroup-root`. At start-up
//! `kubepods` (node allocatable enforced on it) and its `burstable` and `besteffort`
//! children; for each pod a `pod<uid>` cgroup created before its sandbox and removed
//! once its containers are gone; the QoS cgroups' shares follow the pods.
//!
//! With `--cgroups-per-qos=false` there is no tree: pods get the runtime's default
//! cgroup parent and every method here does nothing.

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::Mutex;
use tracing::{debug, info, warn};

use crate::domain::cgroup::{
    kubepods_name, kubepods_resource_config, pod_cgroup_name, pod_resource_config, pod_uid_of,
    qos_cgroup_name, qos_resource_configs, CgroupName, CgroupSettings, ResourceConfig,
};
use crate::domain::config::ResolvedConfig;
use crate::domain::node::NodeSettings;
use crate::domain::pod::{Pod, QosClass};
use crate::ports::cgroup::{CgroupError, CgroupManager};

pub struct ContainerManager {
    cgroups: Arc<dyn CgroupManager>,
    /// `None` without `--cgroups-per-qos`.
    kubepods: Option<CgroupName>,
    settings: CgroupSettings,
    /// The burstable and besteffort settings last written, so unchanged pod sets
    /// cost no write (and no D-Bus call).
    last_qos: Mutex<Option<(ResourceConfig, ResourceConfig)>>,
}

#[derive(Debug, thiserror::Error)]
pub enum ContainerManagerError {
    #[error("invalid configuration: cgroupRoot (--cgroup-root) {root:?}: {reason}")]
    InvalidRoot { root: String, reason: String },
    #[error("invalid configuration: cgroup-root {root:?} doesn't exist")]
    MissingRoot { root: String },
    #[error("failed to create the {what} cgroup {name}: {source}")]
    Setup {
        what: &'static str,
        name: String,
        #[source]
        source: CgroupError,
    },
}

impl ContainerManager {
    /// The manager for the configuration; checks `--cgroup-root` but changes nothing.
    pub fn new(
        cgroups: Arc<dyn CgroupManager>,
        resolved: &ResolvedConfig,
    ) -> Result<Self, ContainerManagerError> {
        let config = &resolved.config;
        let kubepods = if config.cgroups_per_qos {
            Some(kubepods_name(&config.cgroup_root).map_err(|e| {
                ContainerManagerError::InvalidRoot {
                    root: config.cgroup_root.clone(),
                    reason: e.to_string(),
                }
            })?)
        } else {
            None
        };
        let period_us = config
            .cpu_cfs_quota_period
            .to_std()
            .map_or(100_000, |d| u64::try_from(d.as_micros()).unwrap_or(100_000));
        Ok(Self {
            cgroups,
            kubepods,
            settings: CgroupSettings {
                cpu_cfs_quota: config.cpu_cfs_quota,
                cpu_cfs_quota_period_us: period_us,
                pod_pids_limit: config.pod_pids_limit,
            },
            last_qos: Mutex::new(None),
        })
    }

    pub fn cgroups(&self) -> &Arc<dyn CgroupManager> {
        &self.cgroups
    }

    /// Start-up: checks the root exists (as upstream) and creates `kubepods` with the
    /// node's allocatable (when `enforceNodeAllocatable` has `pods`) and the QoS cgroups.
    pub async fn setup(
        &self,
        node: &NodeSettings,
        enforce_pods: bool,
    ) -> Result<(), ContainerManagerError> {
        let Some(kubepods) = &self.kubepods else {
            info!("cgroupsPerQOS is off: pods get the runtime's default cgroup parent");
            return Ok(());
        };
        let root = kubepods.parent();
        let root_exists = self.cgroups.exists(&root).await.unwrap_or(false);
        if !root_exists {
            return Err(ContainerManagerError::MissingRoot {
                root: root.to_driver(self.cgroups.driver()),
            });
        }
        let config = kubepods_resource_config(
            &node.capacity,
            &node.kube_reserved,
            &node.system_reserved,
            enforce_pods,
        );
        let setup = |what: &'static str, name: &CgroupName| {
            let name = self.cgroups.driver_name(name);
            move |source| ContainerManagerError::Setup { what, name, source }
        };
        self.cgroups
            .create(kubepods, &config)
            .await
            .map_err(setup("kubepods", kubepods))?;
        info!(
            cgroup = %self.cgroups.driver_name(kubepods),
            driver = %self.cgroups.driver(),
            enforce_pods,
            memory_limit = ?config.memory_limit,
            cpu_shares = ?config.cpu_shares,
            pids_limit = ?config.pids_limit,
            "created the pods' top-level cgroup"
        );
        let (burstable, besteffort) = qos_resource_configs(&[]);
        for (what, qos, resources) in [
            ("burstable", QosClass::Burstable, burstable),
            ("besteffort", QosClass::BestEffort, besteffort),
        ] {
            let name = qos_cgroup_name(kubepods, qos);
            self.cgroups
                .create(&name, &resources)
                .await
                .map_err(setup(what, &name))?;
        }
        *self.last_qos.lock().await = Some((burstable, besteffort));
        Ok(())
    }

    /// The pod's cgroup; `None` without `--cgroups-per-qos`.
    pub fn pod_cgroup(&self, pod: &Pod) -> Option<CgroupName> {
        self.kubepods
            .as_ref()
            .map(|kubepods| pod_cgroup_name(kubepods, pod))
    }

    /// The sandbox's `cgroup_parent`, in the driver's spelling; empty without a tree.
    pub fn cgroup_parent(&self, pod: &Pod) -> String {
        self.pod_cgroup(pod)
            .map(|name| self.cgroups.driver_name(&name))
            .unwrap_or_default()
    }

    /// Creates the pod's cgroup with its limits when it does not exist yet (upstream
    /// `EnsureExists`).
    pub async fn ensure_pod(&self, pod: &Pod) -> Result<(), CgroupError> {
        let Some(name) = self.pod_cgroup(pod) else {
            return Ok(());
        };
        if self.cgroups.exists(&name).await? {
            return Ok(());
        }
        let resources = pod_resource_config(pod, &self.settings);
        self.cgroups.create(&name, &resources).await?;
        debug!(cgroup = %self.cgroups.driver_name(&name), ?resources, "created pod cgroup");
        Ok(())
    }

    /// Every place a pod with `uid` may have its cgroup (its QoS class is unknown
    /// when only the uid is).
    fn candidates(&self, uid: &str) -> Vec<CgroupName> {
        let Some(kubepods) = &self.kubepods else {
            return Vec::new();
        };
        let component = format!("pod{uid}");
        [
            kubepods.clone(),
            qos_cgroup_name(kubepods, QosClass::Burstable),
            qos_cgroup_name(kubepods, QosClass::BestEffort),
        ]
        .iter()
        .filter_map(|parent| CgroupName::new(parent, &[component.as_str()]).ok())
        .collect()
    }

    /// Removes the pod's cgroup (call once its containers are gone).
    pub async fn remove_pod(&self, uid: &str) -> Result<(), CgroupError> {
        for name in self.candidates(uid) {
            if self.cgroups.exists(&name).await? {
                self.cgroups.destroy(&name).await?;
                debug!(cgroup = %self.cgroups.driver_name(&name), "removed pod cgroup");
            }
        }
        Ok(())
    }

    /// Sets the QoS cgroups for the pods now desired (burstable shares follow the
    /// burstable pods' requests); writes only when the values change.
    pub async fn update_qos(&self, pods: &[Pod]) -> Result<(), CgroupError> {
        let Some(kubepods) = &self.kubepods else {
            return Ok(());
        };
        let wanted = qos_resource_configs(pods);
        let mut last = self.last_qos.lock().await;
        if last.as_ref() == Some(&wanted) {
            return Ok(());
        }
        self.cgroups
            .update(&qos_cgroup_name(kubepods, QosClass::Burstable), &wanted.0)
            .await?;
        self.cgroups
            .update(&qos_cgroup_name(kubepods, QosClass::BestEffort), &wanted.1)
            .await?;
        debug!(burstable_shares = ?wanted.0.cpu_shares, "updated the QoS cgroups");
        *last = Some(wanted);
        Ok(())
    }

    /// The uids of every pod cgroup in the tree.
    pub async fn pod_cgroup_uids(&self) -> Result<BTreeSet<String>, CgroupError> {
        let Some(kubepods) = &self.kubepods else {
            return Ok(BTreeSet::new());
        };
        let mut uids = BTreeSet::new();
        for parent in [
            kubepods.clone(),
            qos_cgroup_name(kubepods, QosClass::Burstable),
            qos_cgroup_name(kubepods, QosClass::BestEffort),
        ] {
            for child in self.cgroups.children(&parent).await? {
                if let Some(uid) = pod_uid_of(&child) {
                    uids.insert(uid.to_owned());
                }
            }
        }
        Ok(uids)
    }

    /// Removes the cgroups of pods that are neither wanted nor in the runtime any more
    /// (left behind by a kubelet that was killed). Failures only warn.
    pub async fn remove_stale_pods(&self, keep: &BTreeSet<String>) {
        let uids = match self.pod_cgroup_uids().await {
            Ok(uids) => uids,
            Err(error) => {
                warn!(%error, "cannot list pod cgroups");
                return;
            }
        };
        for uid in uids.difference(keep) {
            info!(%uid, "removing the cgroup of a pod that no longer exists");
            if let Err(error) = self.remove_pod(uid).await {
                warn!(%uid, %error, "failed to remove a stale pod cgroup");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::fake::FakeCgroupManager;
    use crate::app::cli;
    use crate::domain::cgroup::CgroupDriver;

    fn resolved(args: &[&str]) -> ResolvedConfig {
        let mut argv = vec!["rkubelet", "--container-runtime-endpoint=fake://"];
        argv.extend_from_slice(args);
        let given = cli::parse(argv).unwrap_or_else(|e| panic!("flags: {e}"));
        crate::app::bootstrap::load_configuration(given).unwrap_or_else(|e| panic!("config: {e}"))
    }

    fn name(parts: &[&str]) -> CgroupName {
        CgroupName::new(&CgroupName::root(), parts).unwrap_or_default()
    }

    #[tokio::test]
    async fn without_a_root_cgroup_setup_refuses_like_upstream() {
        let fake = Arc::new(FakeCgroupManager::new(CgroupDriver::Cgroupfs));
        let cm = ContainerManager::new(fake, &resolved(&["--cgroup-root=/missing"]))
            .unwrap_or_else(|e| panic!("{e}"));
        let node = NodeSettings::default();
        let err = cm.setup(&node, true).await.err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("invalid configuration: cgroup-root \"/missing\" doesn't exist")
        );
    }

    #[tokio::test]
    async fn setup_creates_the_qos_tree_and_pod_cgroups_come_and_go() -> Result<(), CgroupError> {
        let fake = Arc::new(FakeCgroupManager::new(CgroupDriver::Systemd));
        let cm =
            ContainerManager::new(fake.clone(), &resolved(&[])).unwrap_or_else(|e| panic!("{e}"));
        cm.setup(&NodeSettings::default(), true)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            fake.names(),
            [
                name(&["kubepods"]),
                name(&["kubepods", "besteffort"]),
                name(&["kubepods", "burstable"])
            ]
        );
        let mut pod = Pod::default();
        pod.metadata.uid = "1234-5678".into();
        pod.spec.containers = vec![serde_json::from_value(serde_json::json!({"name": "a"}))
            .unwrap_or_else(|e| panic!("{e}"))];
        assert_eq!(
            cm.cgroup_parent(&pod),
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1234_5678.slice"
        );
        cm.ensure_pod(&pod).await?;
        assert!(fake
            .get(&name(&["kubepods", "besteffort", "pod1234-5678"]))
            .is_some());
        assert_eq!(
            cm.pod_cgroup_uids().await?,
            BTreeSet::from(["1234-5678".to_owned()])
        );
        cm.remove_stale_pods(&BTreeSet::new()).await;
        assert!(cm.pod_cgroup_uids().await?.is_empty());
        // Unchanged QoS values are not written again.
        let writes = fake.journal().len();
        cm.update_qos(&[pod]).await?;
        assert_eq!(fake.journal().len(), writes);
        Ok(())
    }

    /// `--pod-max-pids` reaches each pod cgroup's pids.max (the drivers write
    /// `pids_limit` as pids.max or TasksMax), whatever the pod's QoS class.
    #[tokio::test]
    async fn pod_max_pids_limits_every_pod_cgroup() -> Result<(), CgroupError> {
        let fake = Arc::new(FakeCgroupManager::new(CgroupDriver::Cgroupfs));
        let cm = ContainerManager::new(fake.clone(), &resolved(&["--pod-max-pids=321"]))
            .unwrap_or_else(|e| panic!("{e}"));
        cm.setup(&NodeSettings::default(), true)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let mut pod = Pod::default();
        pod.metadata.uid = "abc".into();
        pod.spec.containers = vec![serde_json::from_value(serde_json::json!({"name": "a"}))
            .unwrap_or_else(|e| panic!("{e}"))];
        cm.ensure_pod(&pod).await?;
        let limits = fake.get(&name(&["kubepods", "besteffort", "podabc"]));
        assert_eq!(limits.and_then(|r| r.pids_limit), Some(321));
        // The default, -1, leaves pids.max alone.
        let fake = Arc::new(FakeCgroupManager::new(CgroupDriver::Cgroupfs));
        let cm =
            ContainerManager::new(fake.clone(), &resolved(&[])).unwrap_or_else(|e| panic!("{e}"));
        cm.setup(&NodeSettings::default(), true)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        cm.ensure_pod(&pod).await?;
        let limits = fake.get(&name(&["kubepods", "besteffort", "podabc"]));
        assert_eq!(limits.map(|r| r.pids_limit), Some(None));
        Ok(())
    }

    /// Repeated `--manifest-url-header` flags accumulate values per key.
    #[test]
    fn manifest_url_headers_reach_the_configuration() {
        let config = resolved(&[
            "--manifest-url-header=Authorization:Bearer x,X-A:1",
            "--manifest-url-header=X-A:2",
        ])
        .config;
        assert_eq!(
            config.static_pod_url_header,
            std::collections::BTreeMap::from([
                ("Authorization".to_string(), vec!["Bearer x".to_string()]),
                ("X-A".to_string(), vec!["1".to_string(), "2".to_string()]),
            ])
        );
    }

    #[tokio::test]
    async fn without_cgroups_per_qos_nothing_is_created() -> Result<(), CgroupError> {
        let fake = Arc::new(FakeCgroupManager::new(CgroupDriver::Cgroupfs));
        let cm = ContainerManager::new(
            fake.clone(),
            &resolved(&["--cgroups-per-qos=false", "--enforce-node-allocatable="]),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        cm.setup(&NodeSettings::default(), false)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let pod = Pod::default();
        cm.ensure_pod(&pod).await?;
        assert_eq!(cm.cgroup_parent(&pod), "");
        assert!(fake.journal().is_empty());
        Ok(())
    }
}
