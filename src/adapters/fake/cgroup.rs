//! An in-memory cgroup tree behind the `CgroupManager` port: for unit tests, the
//! planner and the simulated node (`fake://`), where no real cgroup may be touched.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;

use crate::domain::cgroup::{CgroupDriver, CgroupName, ResourceConfig};
use crate::ports::cgroup::{CgroupError, CgroupManager};

#[derive(Debug, Default)]
struct State {
    cgroups: BTreeMap<CgroupName, ResourceConfig>,
    /// Processes put in a cgroup by a test (`add_process`), until killed.
    processes: BTreeMap<CgroupName, Vec<u32>>,
    journal: Vec<String>,
}

#[derive(Debug)]
pub struct FakeCgroupManager {
    driver: CgroupDriver,
    state: Mutex<State>,
    /// The simulated node keeps no journal: it would grow with every pod churned.
    no_journal: bool,
}

impl FakeCgroupManager {
    pub fn new(driver: CgroupDriver) -> Self {
        Self {
            driver,
            state: Mutex::new(State::default()),
            no_journal: false,
        }
    }

    /// Without the journal of changes (the simulated node, which runs for months).
    pub fn without_journal(mut self) -> Self {
        self.no_journal = true;
        self
    }

    fn record(&self, state: &mut State, change: String) {
        if !self.no_journal {
            state.journal.push(change);
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every create, update and destroy, in order (`create /kubepods/burstable`).
    pub fn journal(&self) -> Vec<String> {
        self.state().journal.clone()
    }

    /// The settings of an existing cgroup.
    pub fn get(&self, name: &CgroupName) -> Option<ResourceConfig> {
        self.state().cgroups.get(name).copied()
    }

    /// A process in the cgroup, as one the runtime lost track of would be.
    pub fn add_process(&self, name: &CgroupName, pid: u32) {
        self.state()
            .processes
            .entry(name.clone())
            .or_default()
            .push(pid);
    }

    /// Every cgroup that exists, in name order.
    pub fn names(&self) -> Vec<CgroupName> {
        self.state().cgroups.keys().cloned().collect()
    }
}

/// Only set values replace the old ones, as a real driver leaves unset files alone.
fn merge(old: &mut ResourceConfig, new: &ResourceConfig) {
    old.cpu_shares = new.cpu_shares.or(old.cpu_shares);
    old.cpu_quota = new.cpu_quota.or(old.cpu_quota);
    old.cpu_period = new.cpu_period.or(old.cpu_period);
    old.memory_limit = new.memory_limit.or(old.memory_limit);
    old.pids_limit = new.pids_limit.or(old.pids_limit);
}

#[async_trait]
impl CgroupManager for FakeCgroupManager {
    fn driver(&self) -> CgroupDriver {
        self.driver
    }

    fn driver_name(&self, name: &CgroupName) -> String {
        name.to_driver(self.driver)
    }

    fn is_simulated(&self) -> bool {
        true
    }

    async fn create(
        &self,
        name: &CgroupName,
        resources: &ResourceConfig,
    ) -> Result<(), CgroupError> {
        let mut s = self.state();
        self.record(&mut s, format!("create {name}"));
        // Parents come into being with their child, as mkdir -p and slices do.
        let mut ancestor = name.parent();
        while !ancestor.is_root() {
            s.cgroups.entry(ancestor.clone()).or_default();
            ancestor = ancestor.parent();
        }
        merge(s.cgroups.entry(name.clone()).or_default(), resources);
        Ok(())
    }

    async fn update(
        &self,
        name: &CgroupName,
        resources: &ResourceConfig,
    ) -> Result<(), CgroupError> {
        let mut s = self.state();
        self.record(&mut s, format!("update {name}"));
        match s.cgroups.get_mut(name) {
            Some(old) => {
                merge(old, resources);
                Ok(())
            }
            None => Err(CgroupError::NotFound(name.to_string())),
        }
    }

    async fn destroy(&self, name: &CgroupName) -> Result<(), CgroupError> {
        let mut s = self.state();
        self.record(&mut s, format!("destroy {name}"));
        let prefix = name.components().to_vec();
        s.cgroups
            .retain(|n, _| !n.components().starts_with(&prefix));
        Ok(())
    }

    async fn exists(&self, name: &CgroupName) -> Result<bool, CgroupError> {
        Ok(name.is_root() || self.state().cgroups.contains_key(name))
    }

    async fn pids(&self, name: &CgroupName) -> Result<Vec<u32>, CgroupError> {
        let prefix = name.components().to_vec();
        Ok(self
            .state()
            .processes
            .iter()
            .filter(|(n, _)| n.components().starts_with(&prefix))
            .flat_map(|(_, pids)| pids.iter().copied())
            .collect())
    }

    async fn kill_processes(&self, name: &CgroupName) -> Result<usize, CgroupError> {
        let pids = self.pids(name).await?;
        let mut s = self.state();
        for pid in &pids {
            self.record(&mut s, format!("kill {pid} in {name}"));
        }
        let prefix = name.components().to_vec();
        s.processes
            .retain(|n, _| !n.components().starts_with(&prefix));
        Ok(pids.len())
    }

    async fn children(&self, name: &CgroupName) -> Result<Vec<CgroupName>, CgroupError> {
        let depth = name.components().len() + 1;
        Ok(self
            .state()
            .cgroups
            .keys()
            .filter(|n| {
                n.components().len() == depth && n.components().starts_with(name.components())
            })
            .cloned()
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(parts: &[&str]) -> CgroupName {
        CgroupName::new(&CgroupName::root(), parts).unwrap_or_default()
    }

    #[tokio::test]
    async fn a_tree_with_parents_children_and_merged_updates() -> Result<(), CgroupError> {
        let m = FakeCgroupManager::new(CgroupDriver::Systemd);
        let pod = name(&["kubepods", "burstable", "pod1"]);
        let shares = ResourceConfig {
            cpu_shares: Some(256),
            ..Default::default()
        };
        m.create(&pod, &shares).await?;
        assert!(m.exists(&name(&["kubepods", "burstable"])).await?);
        assert_eq!(
            m.children(&name(&["kubepods", "burstable"])).await?,
            std::slice::from_ref(&pod)
        );
        let memory = ResourceConfig {
            memory_limit: Some(1 << 20),
            ..Default::default()
        };
        m.update(&pod, &memory).await?;
        let now = m.get(&pod).unwrap_or_default();
        assert_eq!(
            (now.cpu_shares, now.memory_limit),
            (Some(256), Some(1 << 20))
        );
        assert_eq!(
            m.driver_name(&pod),
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice"
        );
        m.destroy(&name(&["kubepods"])).await?;
        assert!(!m.exists(&pod).await?);
        assert_eq!(m.journal().len(), 3);
        assert!(m.update(&pod, &memory).await.is_err());
        Ok(())
    }
}
