//! The topology manager without the static CPU manager (`cpuManagerPolicy: none`, the
//! default): upstream still runs it with the device manager as its hint provider, so a
//! container's devices are taken on the NUMA nodes its affinity names and a policy that
//! cannot align them refuses the pod (`TopologyAffinityError`).

use std::collections::BTreeMap;

use super::cpu_manager::{topology_manager, CpuManagerError, CpuManagerSettings};
use super::topology::MachineTopology;
use super::topology_manager::{policy, HintProvider, TopologyHint, TopologyManager};
use super::OptionGates;
use crate::domain::admission::Rejection;
use crate::domain::devices::topology_hints::DevicePlanProvider;
use crate::domain::devices::DeviceManagerState;
use crate::domain::pod::Pod;

#[derive(Debug, Clone)]
pub struct DeviceTopology {
    topology: TopologyManager,
    numa_nodes: Vec<usize>,
}

impl DeviceTopology {
    /// The topology manager over the devices alone: `None` with the static CPU manager
    /// (which runs it over both) or the `none` topology policy (nothing to align).
    ///
    /// # Errors
    /// The topology manager's refusal of its settings ([`CpuManagerError`]).
    pub fn new(
        settings: &CpuManagerSettings,
        machine: &MachineTopology,
        gates: OptionGates,
    ) -> Result<Option<DeviceTopology>, CpuManagerError> {
        let topology = topology_manager(settings, machine, gates)?;
        if settings.is_static() || settings.topology_policy == policy::POLICY_NONE {
            return Ok(None);
        }
        Ok(Some(DeviceTopology {
            topology,
            numa_nodes: machine.numa_nodes.iter().map(|n| n.id).collect(),
        }))
    }

    /// Upstream's admission with the device manager as the one hint provider: each
    /// container's affinity, the devices it would take within it planned on a copy of
    /// `devices` so the next container's hints see them taken.
    ///
    /// # Errors
    /// `TopologyAffinityError` when the policy cannot align the devices.
    pub fn admit(
        &self,
        pod: &Pod,
        devices: &DeviceManagerState,
    ) -> Result<BTreeMap<String, TopologyHint>, Rejection> {
        let mut trial = self.topology.clone();
        let mut plan = DevicePlanProvider::new(devices.clone(), self.numa_nodes.clone());
        let mut providers: Vec<&mut dyn HintProvider> = vec![&mut plan];
        trial.admit(pod, &mut providers)?;
        Ok(plan.affinities)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::devices::{Device, PluginOptions};
    use crate::domain::pod::fixtures::container;
    use crate::domain::resource_managers::topology_manager::topology_affinity_error;
    use crate::domain::units::quantity::{Format, Quantity};

    fn settings(cpu_policy: &str, topology_policy: &str) -> CpuManagerSettings {
        CpuManagerSettings {
            policy: cpu_policy.into(),
            topology_policy: topology_policy.into(),
            ..CpuManagerSettings::default()
        }
    }

    fn pod_asking(gpus: i64) -> Pod {
        let limits: BTreeMap<String, Quantity> = [(
            "example.com/gpu".to_owned(),
            Quantity::new(gpus, Format::DecimalSI),
        )]
        .into();
        let mut pod = Pod::default();
        pod.metadata.uid = "p".into();
        pod.spec
            .containers
            .push(container("c", limits.clone(), limits));
        pod
    }

    #[test]
    fn without_the_static_cpu_manager_the_devices_alone_are_aligned() {
        let gates = OptionGates::TOPOLOGY_MANAGER_DEFAULT;
        let machine = crate::domain::resource_managers::fixtures::two_numa_nodes();
        let aligned = DeviceTopology::new(&settings("none", "single-numa-node"), &machine, gates)
            .expect("valid settings")
            .expect("a topology manager");
        let mut devices = DeviceManagerState::default();
        devices.plugin_connected("example.com/gpu", PluginOptions::default());
        devices.update_devices(
            "example.com/gpu",
            vec![
                Device {
                    id: "gpu0".into(),
                    healthy: true,
                    numa_nodes: vec![0],
                },
                Device {
                    id: "gpu1".into(),
                    healthy: true,
                    numa_nodes: vec![1],
                },
            ],
        );
        let one = aligned.admit(&pod_asking(1), &devices).expect("admitted");
        assert!(one
            .get("c")
            .and_then(|h| h.numa_node_affinity)
            .is_some_and(|m| m.count() == 1));
        // Two devices, one on each node: no single node holds them.
        assert_eq!(
            aligned.admit(&pod_asking(2), &devices),
            Err(topology_affinity_error())
        );
        // Nothing to align with the `none` policy; the static CPU manager runs its own.
        for (cpu, topology) in [("none", "none"), ("static", "single-numa-node")] {
            let none = DeviceTopology::new(&settings(cpu, topology), &machine, gates);
            assert!(matches!(none, Ok(None)), "{cpu} {topology}");
        }
        assert!(DeviceTopology::new(&settings("none", "nonsense"), &machine, gates).is_err());
    }
}
