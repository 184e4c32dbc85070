use std::path::PathBuf;
use std::sync::Mutex;

use crate::domain::node::machine::{HugePagePool, MachineInfo};
use crate::domain::resource_managers::topology::{MachineCore, MachineNumaNode, MachineTopology};
use crate::ports::machine::{MachineInfoError, MachineInfoProvider};

/// Returns a given [`MachineInfo`], or a parse error when told to fail.
#[derive(Debug)]
pub struct FakeMachine {
    answer: Mutex<Result<MachineInfo, String>>,
}

impl FakeMachine {
    pub fn new(info: MachineInfo) -> Self {
        Self {
            answer: Mutex::new(Ok(info)),
        }
    }

    /// A plausible 2-CPU, 4 GiB node.
    pub fn sample_info() -> MachineInfo {
        MachineInfo {
            num_cores: 2,
            online_cpus: crate::domain::units::cpuset::CpuSet::new([0, 1]),
            memory_capacity_bytes: 4 << 30,
            root_fs_capacity_bytes: 20 << 30,
            pid_max: 32_768,
            boot_id: "4f1a2b3c-0000-4000-8000-000000000001".to_owned(),
            machine_id: "0123456789abcdef0123456789abcdef".to_owned(),
            system_uuid: String::new(),
            hugepages: vec![
                HugePagePool {
                    page_size_bytes: 1 << 30,
                    pages: 0,
                },
                HugePagePool {
                    page_size_bytes: 2 << 20,
                    pages: 0,
                },
            ],
            apparmor_enabled: false,
        }
    }

    /// Replaces the answer.
    pub fn set(&self, info: MachineInfo) {
        *self.lock() = Ok(info);
    }

    /// Makes every later call fail with [`MachineInfoError::Parse`] carrying `detail`.
    pub fn fail(&self, detail: impl Into<String>) {
        *self.lock() = Err(detail.into());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Result<MachineInfo, String>> {
        // A panicking test thread must not hide the state from the rest of the test.
        self.answer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Default for FakeMachine {
    fn default() -> Self {
        Self::new(Self::sample_info())
    }
}

impl MachineInfoProvider for FakeMachine {
    fn machine_info(&self) -> Result<MachineInfo, MachineInfoError> {
        self.lock()
            .clone()
            .map_err(|detail| MachineInfoError::Parse {
                path: PathBuf::from("/fake/machine"),
                detail,
            })
    }

    /// One NUMA node and one socket, each online CPU a core of its own (this VM's shape).
    fn cpu_topology(&self) -> Result<MachineTopology, MachineInfoError> {
        let info = self.machine_info()?;
        Ok(MachineTopology {
            num_cpus: info.num_cores,
            num_sockets: 1,
            numa_nodes: vec![MachineNumaNode {
                id: 0,
                cores: info
                    .online_cpus
                    .iter()
                    .map(|cpu| MachineCore {
                        id: cpu,
                        socket_id: 0,
                        threads: vec![cpu],
                    })
                    .collect(),
                distances: vec![10],
            }],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_the_given_info_then_fails_when_told() {
        let fake = FakeMachine::default();
        assert_eq!(fake.machine_info().ok(), Some(FakeMachine::sample_info()));
        fake.fail("boom");
        assert!(matches!(
            fake.machine_info(),
            Err(MachineInfoError::Parse { detail, .. }) if detail == "boom"
        ));
    }
}
