//! Small pods and resource lists the pod module's tests build from.

use std::collections::BTreeMap;

use super::*;

pub fn q(s: &str) -> Quantity {
    Quantity::parse(s).expect("quantity")
}

pub fn list(cpu: &str, memory: &str) -> BTreeMap<String, Quantity> {
    let mut m = BTreeMap::new();
    if !cpu.is_empty() {
        m.insert("cpu".to_string(), q(cpu));
    }
    if !memory.is_empty() {
        m.insert("memory".to_string(), q(memory));
    }
    m
}

pub fn container(
    name: &str,
    requests: BTreeMap<String, Quantity>,
    limits: BTreeMap<String, Quantity>,
) -> Container {
    Container {
        name: name.to_string(),
        resources: ResourceRequirements { limits, requests },
        ..Container::default()
    }
}

pub fn spec_of(containers: Vec<Container>) -> PodSpec {
    PodSpec {
        containers,
        ..PodSpec::default()
    }
}

// Cases from upstream pkg/apis/core/v1/helper/qos/qos_test.go
// (TestComputePodQOS, without the pod-level-resources ones).
