//! Admission under node pressure (upstream's eviction `Admit`): with only memory
//! pressure, every pod but a BestEffort one is admitted, and a BestEffort one that
//! tolerates the memory-pressure taint too; under any other pressure no pod is;
//! critical pods always are (see [`super::protected_from_eviction`]). The pod admission of the API pod source calls
//! [`admit`] with the eviction manager's current conditions.

use super::protected_from_eviction;
use super::thresholds::PressureCondition;
use super::EVICTED_REASON;
use crate::domain::admission::{tolerates, Taint};
use crate::domain::pod::{qos_class, Pod, QosClass};

/// Why a pod was not admitted: reason `Evicted` and upstream's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub reason: &'static str,
    pub message: String,
}

/// Upstream's message: `The node had condition: [MemoryPressure]. ` (Go's `%v` of the
/// list).
pub fn node_condition_message(conditions: &[PressureCondition]) -> String {
    let names: Vec<&str> = conditions.iter().map(|c| c.as_str()).collect();
    format!("The node had condition: [{}]. ", names.join(" "))
}

/// The taint the node lifecycle controller puts on a node under memory pressure.
pub const MEMORY_PRESSURE_TAINT: &str = "node.kubernetes.io/memory-pressure";

/// Whether `pod` tolerates the `NoSchedule` memory-pressure taint (a BestEffort pod that
/// does asked to run on a node under memory pressure).
fn tolerates_memory_pressure(pod: &Pod) -> bool {
    let taint = Taint {
        key: MEMORY_PRESSURE_TAINT.to_owned(),
        value: String::new(),
        effect: "NoSchedule".to_owned(),
        time_added: None,
    };
    pod.spec.tolerations.iter().any(|t| tolerates(t, &taint))
}

/// Whether `pod` may start on a node with `conditions`.
pub fn admit(pod: &Pod, conditions: &[PressureCondition]) -> Result<(), Rejection> {
    if conditions.is_empty() || protected_from_eviction(pod) {
        return Ok(());
    }
    let only_memory = conditions
        .iter()
        .all(|c| *c == PressureCondition::MemoryPressure);
    if only_memory
        && (qos_class(&pod.spec) != QosClass::BestEffort || tolerates_memory_pressure(pod))
    {
        return Ok(());
    }
    Err(Rejection {
        reason: EVICTED_REASON,
        message: node_condition_message(conditions),
    })
}

#[cfg(test)]
mod tests {
    use super::super::rank::tests::{container, pod, resources};
    use super::*;
    use crate::domain::pod::{CONFIG_SOURCE_ANNOTATION, SYSTEM_CRITICAL_PRIORITY};

    /// Upstream's `makeContainersByQOS`.
    fn by_qos(name: &str, qos: QosClass) -> Pod {
        let r = resources("100m", "1Gi", "");
        let c = match qos {
            QosClass::Guaranteed => container("guaranteed-container", r.clone(), r),
            QosClass::Burstable => container("burstable-container", r, resources("", "", "")),
            QosClass::BestEffort => container(
                "best-effort-container",
                resources("", "", ""),
                resources("", "", ""),
            ),
        };
        pod(name, 0, vec![c], vec![])
    }

    /// Ported from upstream TestAdmitUnderNodeConditions.
    #[test]
    fn admission_under_node_conditions() {
        use PressureCondition::*;
        let pods = [
            by_qos("guaranteed-pod", QosClass::Guaranteed),
            by_qos("burstable-pod", QosClass::Burstable),
            by_qos("best-effort-pod", QosClass::BestEffort),
        ];
        let cases: [(&[PressureCondition], [bool; 3]); 3] = [
            (&[], [true, true, true]),
            (&[MemoryPressure], [true, true, false]),
            (&[MemoryPressure, DiskPressure], [false, false, false]),
        ];
        for (conditions, want) in cases {
            for (pod, want) in pods.iter().zip(want) {
                assert_eq!(
                    admit(pod, conditions).is_ok(),
                    want,
                    "{} under {conditions:?}",
                    pod.metadata.name
                );
            }
        }
        let rejected = admit(&pods[2], &[MemoryPressure]);
        assert_eq!(
            rejected,
            Err(Rejection {
                reason: "Evicted",
                message: "The node had condition: [MemoryPressure]. ".into()
            })
        );
    }

    /// Ported from upstream TestAdmitUnderNodeConditions' tolerating case.
    #[test]
    fn a_best_effort_pod_tolerating_memory_pressure_is_admitted_under_it() {
        use crate::domain::pod::Toleration;
        let mut tolerating = by_qos("best-effort-tolerating", QosClass::BestEffort);
        tolerating.spec.tolerations = vec![Toleration {
            key: MEMORY_PRESSURE_TAINT.into(),
            operator: "Exists".into(),
            effect: "NoSchedule".into(),
            ..Toleration::default()
        }];
        assert!(admit(&tolerating, &[PressureCondition::MemoryPressure]).is_ok());
        // Not under disk pressure, nor with a toleration of another taint.
        assert!(admit(
            &tolerating,
            &[
                PressureCondition::MemoryPressure,
                PressureCondition::DiskPressure
            ]
        )
        .is_err());
        tolerating.spec.tolerations[0].key = "node.kubernetes.io/disk-pressure".into();
        assert!(admit(&tolerating, &[PressureCondition::MemoryPressure]).is_err());
    }

    #[test]
    fn critical_pods_are_always_admitted() {
        let mut critical = by_qos("critical", QosClass::BestEffort);
        critical.spec.priority = Some(SYSTEM_CRITICAL_PRIORITY);
        let mut static_pod = by_qos("static", QosClass::BestEffort);
        static_pod
            .metadata
            .annotations
            .insert(CONFIG_SOURCE_ANNOTATION.into(), "file".into());
        // Static alone protects, as upstream: it is never re-admitted once refused.
        for pod in [&critical, &static_pod] {
            assert!(admit(pod, &[PressureCondition::DiskPressure]).is_ok());
        }
        let pid = admit(
            &by_qos("g", QosClass::Guaranteed),
            &[PressureCondition::PidPressure],
        );
        assert_eq!(
            pid.map_err(|r| r.message),
            Err("The node had condition: [PIDPressure]. ".into())
        );
    }
}
