//! The container manager: the kubelet's cgroup tree under `--cgroup-root`. At start-up
//! `kubepods` (node allocatable enforced on it) and its `burstable` and `besteffort`
//! children; for each pod a `pod<uid>` cgroup created before its sandbox and removed
//! once its containers are gone; the QoS cgroups' shares follow the pods.
//!
//! With `--cgroups-per-qos=false` there is no tree: pods get the runtime's default
//! cgroup parent and every method here does nothing.

use crate::ports::error::Chain;
use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::Mutex;
use tracing::{debug, info, warn};

use crate::domain::cgroup::tree::{CgroupTree, PlannedCgroup};
use crate::domain::cgroup::{pod_uid_of, ResourceConfig};
use crate::domain::node::NodeSettings;
use crate::domain::pod::Pod;
use crate::ports::cgroup::{CgroupError, CgroupManager};

pub struct ContainerManager {
    cgroups: Arc<dyn CgroupManager>,
    /// `None` without `--cgroups-per-qos`.
    tree: Option<CgroupTree>,
    node: NodeSettings,
    /// The burstable and besteffort settings last written, so unchanged pod sets
    /// cost no write (and no D-Bus call).
    last_qos: Mutex<Option<[ResourceConfig; 2]>>,
}

#[derive(Debug, thiserror::Error)]
pub enum ContainerManagerError {
    #[error("invalid configuration: cgroup-root {root:?} doesn't exist")]
    MissingRoot { root: String },
    #[error("cannot check that the cgroup root {root} exists")]
    CheckRoot {
        root: String,
        #[source]
        source: CgroupError,
    },
    #[error("failed to create the {role} cgroup {name}")]
    Setup {
        role: &'static str,
        name: String,
        #[source]
        source: CgroupError,
    },
}

impl ContainerManager {
    /// The manager of `tree` (none without `--cgroups-per-qos`) on a node with `node`'s
    /// allocatable; changes nothing yet.
    pub fn new(
        cgroups: Arc<dyn CgroupManager>,
        tree: Option<CgroupTree>,
        node: NodeSettings,
    ) -> Self {
        Self {
            cgroups,
            tree,
            node,
            last_qos: Mutex::new(None),
        }
    }

    pub fn cgroups(&self) -> &Arc<dyn CgroupManager> {
        &self.cgroups
    }

    async fn create(&self, planned: &PlannedCgroup) -> Result<(), ContainerManagerError> {
        self.cgroups
            .create(&planned.name, &planned.resources)
            .await
            .map_err(|source| ContainerManagerError::Setup {
                role: planned.role.as_str(),
                name: self.cgroups.driver_name(&planned.name),
                source,
            })
    }

    /// Start-up: checks the root exists (as upstream) and creates `kubepods` with the
    /// node's allocatable (as limits when `enforceNodeAllocatable` has `pods`) and the
    /// QoS cgroups.
    pub async fn setup(&self) -> Result<(), ContainerManagerError> {
        let Some(tree) = &self.tree else {
            info!("cgroupsPerQOS is off: pods get the runtime's default cgroup parent");
            return Ok(());
        };
        let root = tree.kubepods.parent();
        let root_name = self.cgroups.driver_name(&root);
        let root_exists = self.cgroups.exists(&root).await.map_err(|source| {
            ContainerManagerError::CheckRoot {
                root: root_name.clone(),
                source,
            }
        })?;
        if !root_exists {
            return Err(ContainerManagerError::MissingRoot { root: root_name });
        }
        let node_level = tree.node_level(&self.node, []);
        for planned in &node_level {
            self.create(planned).await?;
        }
        let kubepods = &node_level[0].resources;
        let what = if self.cgroups.is_simulated() {
            "simulated node: the pods' top-level cgroup and its QoS children are kept in memory only"
        } else {
            "set up the pods' top-level cgroup and its QoS children"
        };
        info!(
            cgroup = %self.cgroups.driver_name(&tree.kubepods),
            driver = %self.cgroups.driver(),
            enforce_pods = tree.enforce_pods,
            memory_limit = kubepods.memory_limit.unwrap_or(-1),
            cpu_shares = kubepods.cpu_shares.unwrap_or_default(),
            pids_limit = kubepods.pids_limit.unwrap_or(-1),
            "{what}"
        );
        *self.last_qos.lock().await = Some([node_level[1].resources, node_level[2].resources]);
        Ok(())
    }

    /// The pods' top-level cgroup (`kubepods`); `None` without `--cgroups-per-qos`.
    /// The pods' cgroup tree; `None` without `--cgroups-per-qos`.
    pub fn tree(&self) -> Option<&CgroupTree> {
        self.tree.as_ref()
    }

    pub fn kubepods(&self) -> Option<crate::domain::cgroup::CgroupName> {
        self.tree.as_ref().map(|tree| tree.kubepods.clone())
    }

    /// The pod's cgroup; `None` without `--cgroups-per-qos`.
    pub fn pod_cgroup(&self, pod: &Pod) -> Option<PlannedCgroup> {
        self.tree.as_ref().map(|tree| tree.pod(pod))
    }

    /// The sandbox's `cgroup_parent`, in the driver's spelling; empty without a tree.
    pub fn cgroup_parent(&self, pod: &Pod) -> String {
        self.pod_cgroup(pod)
            .map(|planned| self.cgroups.driver_name(&planned.name))
            .unwrap_or_default()
    }

    /// Creates the pod's cgroup with its limits when it does not exist yet (upstream
    /// `EnsureExists`).
    pub async fn ensure_pod(&self, pod: &Pod) -> Result<(), CgroupError> {
        let Some(planned) = self.pod_cgroup(pod) else {
            return Ok(());
        };
        if self.cgroups.exists(&planned.name).await? {
            return Ok(());
        }
        self.cgroups
            .create(&planned.name, &planned.resources)
            .await?;
        debug!(cgroup = %self.cgroups.driver_name(&planned.name), resources = ?planned.resources, "created pod cgroup");
        Ok(())
    }

    /// Removes the pod's cgroup (call once its containers are gone). A process still in
    /// it (one the runtime lost track of: a container task left when rkubelet or
    /// containerd died mid-start) is killed first, as upstream's pod container manager
    /// does; the cgroup then goes, or on the next try once the process is reaped.
    pub async fn remove_pod(&self, uid: &str) -> Result<(), CgroupError> {
        let Some(tree) = &self.tree else {
            return Ok(());
        };
        for name in tree.pod_candidates(uid) {
            if self.cgroups.exists(&name).await? {
                let killed = self.cgroups.kill_processes(&name).await?;
                if killed > 0 {
                    info!(cgroup = %self.cgroups.driver_name(&name), processes = killed, "killed the processes left in the pod's cgroup");
                }
                self.cgroups.destroy(&name).await?;
                debug!(cgroup = %self.cgroups.driver_name(&name), "removed pod cgroup");
            }
        }
        Ok(())
    }

    /// Sets the QoS cgroups for the pods now desired (burstable shares follow the
    /// burstable pods' requests); writes only when the values change.
    pub async fn update_qos(&self, pods: &[Pod]) -> Result<(), CgroupError> {
        let Some(tree) = &self.tree else {
            return Ok(());
        };
        let wanted = tree.qos(pods);
        let resources = [wanted[0].resources, wanted[1].resources];
        let mut last = self.last_qos.lock().await;
        if last.as_ref() == Some(&resources) {
            return Ok(());
        }
        for planned in &wanted {
            self.cgroups
                .update(&planned.name, &planned.resources)
                .await?;
        }
        debug!(
            burstable_shares = resources[0].cpu_shares.unwrap_or_default(),
            "updated the QoS cgroups"
        );
        *last = Some(resources);
        Ok(())
    }

    /// The uids of every pod cgroup in the tree.
    pub async fn pod_cgroup_uids(&self) -> Result<BTreeSet<String>, CgroupError> {
        let Some(tree) = &self.tree else {
            return Ok(BTreeSet::new());
        };
        let mut uids = BTreeSet::new();
        for parent in tree.pod_parents() {
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
                warn!(error = %Chain(&error), "cannot list pod cgroups");
                return;
            }
        };
        for uid in uids.difference(keep) {
            info!(%uid, "removing the cgroup of a pod that no longer exists");
            if let Err(error) = self.remove_pod(uid).await {
                warn!(%uid, error = %Chain(&error), "failed to remove a stale pod cgroup");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::fake::FakeCgroupManager;
    use crate::app::test_support::resolved;
    use crate::domain::cgroup::{CgroupDriver, CgroupName};

    /// The manager the configuration `args` asks for, with a node of no capacity.
    fn manager(cgroups: Arc<FakeCgroupManager>, args: &[&str]) -> ContainerManager {
        ContainerManager::new(
            cgroups,
            resolved(args).node.cgroup_tree,
            NodeSettings::default(),
        )
    }

    fn name(parts: &[&str]) -> CgroupName {
        CgroupName::new(&CgroupName::root(), parts).unwrap_or_default()
    }

    #[tokio::test]
    async fn without_a_root_cgroup_setup_refuses_like_upstream() {
        let fake = Arc::new(FakeCgroupManager::new(CgroupDriver::Cgroupfs));
        let cm = manager(fake, &["--cgroup-root=/missing"]);
        let err = cm.setup().await.err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("invalid configuration: cgroup-root \"/missing\" doesn't exist")
        );
    }

    #[tokio::test]
    async fn setup_creates_the_qos_tree_and_pod_cgroups_come_and_go() -> Result<(), CgroupError> {
        let fake = Arc::new(FakeCgroupManager::new(CgroupDriver::Systemd));
        let cm = manager(fake.clone(), &[]);
        cm.setup().await.unwrap_or_else(|e| panic!("{e}"));
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

    /// A process left in a pod's cgroup (the runtime lost track of it) is killed before
    /// the cgroup goes, as upstream's `tryKillingCgroupProcesses`; otherwise the removal
    /// would fail for good and the pod never leave the node.
    #[tokio::test]
    async fn processes_left_in_a_pod_cgroup_are_killed_before_it_goes() -> Result<(), CgroupError> {
        let fake = Arc::new(FakeCgroupManager::new(CgroupDriver::Cgroupfs));
        let cm = manager(fake.clone(), &[]);
        cm.setup().await.unwrap_or_else(|e| panic!("{e}"));
        let mut pod = Pod::default();
        pod.metadata.uid = "left".into();
        pod.spec.containers = vec![serde_json::from_value(serde_json::json!({"name": "a"}))
            .unwrap_or_else(|e| panic!("{e}"))];
        cm.ensure_pod(&pod).await?;
        let pod_cgroup = name(&["kubepods", "besteffort", "podleft"]);
        fake.add_process(&name(&["kubepods", "besteffort", "podleft", "c1"]), 4242);
        cm.remove_pod("left").await?;
        let journal = fake.journal();
        let tail: Vec<&str> = journal
            .iter()
            .rev()
            .take(2)
            .rev()
            .map(String::as_str)
            .collect();
        assert_eq!(
            tail,
            [
                "kill 4242 in /kubepods/besteffort/podleft",
                "destroy /kubepods/besteffort/podleft"
            ]
        );
        assert!(fake.get(&pod_cgroup).is_none());
        assert_eq!(fake.pids(&pod_cgroup).await?, Vec::<u32>::new());
        Ok(())
    }

    /// `--pod-max-pids` reaches each pod cgroup's pids.max (the drivers write
    /// `pids_limit` as pids.max or TasksMax), whatever the pod's QoS class.
    #[tokio::test]
    async fn pod_max_pids_limits_every_pod_cgroup() -> Result<(), CgroupError> {
        let fake = Arc::new(FakeCgroupManager::new(CgroupDriver::Cgroupfs));
        let cm = manager(fake.clone(), &["--pod-max-pids=321"]);
        cm.setup().await.unwrap_or_else(|e| panic!("{e}"));
        let mut pod = Pod::default();
        pod.metadata.uid = "abc".into();
        pod.spec.containers = vec![serde_json::from_value(serde_json::json!({"name": "a"}))
            .unwrap_or_else(|e| panic!("{e}"))];
        cm.ensure_pod(&pod).await?;
        let limits = fake.get(&name(&["kubepods", "besteffort", "podabc"]));
        assert_eq!(limits.and_then(|r| r.pids_limit), Some(321));
        // The default, -1, leaves pids.max alone.
        let fake = Arc::new(FakeCgroupManager::new(CgroupDriver::Cgroupfs));
        let cm = manager(fake.clone(), &[]);
        cm.setup().await.unwrap_or_else(|e| panic!("{e}"));
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
        let cm = manager(
            fake.clone(),
            &["--cgroups-per-qos=false", "--enforce-node-allocatable="],
        );
        cm.setup().await.unwrap_or_else(|e| panic!("{e}"));
        let pod = Pod::default();
        cm.ensure_pod(&pod).await?;
        assert_eq!(cm.cgroup_parent(&pod), "");
        assert!(fake.journal().is_empty());
        Ok(())
    }
}
