use super::*;
use crate::domain::pod::fixtures::{container, list, q};
use crate::domain::pod::{
    Affinity, ContainerPort, NodeAffinity, NodeSelector, NodeSelectorTerm, PodOs,
    CONFIG_SOURCE_ANNOTATION,
};
use crate::domain::test_support::map;

fn node() -> NodeInfo {
    NodeInfo {
        name: "node-a".into(),
        labels: map(&[
            ("kubernetes.io/os", "linux"),
            ("disk", "ssd"),
            ("rank", "5"),
        ]),
        allocatable: [
            ("cpu", "2"),
            ("memory", "4Gi"),
            ("pods", "3"),
            ("hugepages-2Mi", "4Mi"),
            ("example.com/gpu", "1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), q(v)))
        .collect(),
        taints: Vec::new(),
    }
}

fn api_pod(name: &str, cpu: &str, memory: &str) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.name = name.into();
    pod.metadata.namespace = "default".into();
    pod.metadata
        .annotations
        .insert(CONFIG_SOURCE_ANNOTATION.into(), "api".into());
    pod.spec.node_name = "node-a".into();
    pod.spec
        .containers
        .push(container("app", list(cpu, memory), list("", "")));
    pod
}

fn rejected(pod: &Pod, admitted: &[Pod]) -> (String, String) {
    match admit_pod(pod, admitted, &node()) {
        Ok(()) => panic!("{} admitted", pod.metadata.name),
        Err(r) => (r.reason, r.message),
    }
}

#[test]
fn a_pod_that_fits_is_admitted() {
    let running = [api_pod("a", "1", "1Gi")];
    assert_eq!(
        admit_pod(&api_pod("b", "1", "3Gi"), &running, &node()),
        Ok(())
    );
}

#[test]
fn too_much_cpu_is_out_of_cpu_in_millicores_with_upstreams_message() {
    let running = [api_pod("a", "500m", "")];
    assert_eq!(
        rejected(&api_pod("big", "1600m", ""), &running),
        (
            "OutOfcpu".into(),
            "Node didn't have enough resource: cpu, requested: 1600, used: 500, capacity: 2000"
                .into()
        )
    );
}

#[test]
fn memory_counts_bytes_and_the_overhead() {
    let mut pod = api_pod("m", "", "3Gi");
    pod.spec.overhead.insert("memory".into(), q("1Gi"));
    let running = [api_pod("a", "", "1")];
    let (reason, message) = rejected(&pod, &running);
    assert_eq!(reason, "OutOfmemory");
    assert_eq!(
        message,
        "Node didn't have enough resource: memory, requested: 4294967296, used: 1, capacity: 4294967296"
    );
}

#[test]
fn the_pod_count_is_checked_first() {
    let running = [
        api_pod("a", "", ""),
        api_pod("b", "", ""),
        api_pod("c", "", ""),
    ];
    assert_eq!(
        rejected(&api_pod("d", "5", ""), &running),
        (
            "OutOfpods".into(),
            "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3".into()
        )
    );
}

#[test]
fn init_containers_count_as_their_largest_request() {
    let mut pod = api_pod("init", "100m", "");
    pod.spec
        .init_containers
        .push(container("setup", list("3", ""), list("", "")));
    assert_eq!(rejected(&pod, &[]).0, "OutOfcpu");
}

#[test]
fn hugepages_and_known_extended_resources_are_checked_unknown_ones_are_not() {
    let mut pod = api_pod("hp", "", "");
    pod.spec.containers[0]
        .resources
        .requests
        .insert("hugepages-2Mi".into(), q("6Mi"));
    assert_eq!(rejected(&pod, &[]).0, "OutOfhugepages-2Mi");

    let mut gpu = api_pod("gpu", "", "");
    gpu.spec.containers[0]
        .resources
        .requests
        .insert("example.com/gpu".into(), q("2"));
    assert_eq!(rejected(&gpu, &[]).0, "OutOfexample.com/gpu");

    let mut other = api_pod("fpga", "", "");
    other.spec.containers[0]
        .resources
        .requests
        .insert("vendor.io/fpga".into(), q("1"));
    assert_eq!(admit_pod(&other, &[], &node()), Ok(()));
}

#[test]
fn a_node_selector_that_does_not_match_is_node_affinity() {
    let mut pod = api_pod("sel", "", "");
    pod.spec.node_selector = map(&[("disk", "hdd")]);
    assert_eq!(
        rejected(&pod, &[]),
        (
            "NodeAffinity".into(),
            "Predicate NodeAffinity failed".into()
        )
    );
    pod.spec.node_selector = map(&[("disk", "ssd")]);
    assert_eq!(admit_pod(&pod, &[], &node()), Ok(()));
}

fn with_terms(terms: Vec<Vec<(&str, &str, &[&str])>>) -> Pod {
    let mut pod = api_pod("aff", "", "");
    let node_selector_terms = terms
        .into_iter()
        .map(|reqs| NodeSelectorTerm {
            match_expressions: reqs
                .into_iter()
                .map(|(key, operator, values)| NodeSelectorRequirement {
                    key: key.into(),
                    operator: operator.into(),
                    values: values.iter().map(|v| (*v).to_owned()).collect(),
                })
                .collect(),
            match_fields: Vec::new(),
        })
        .collect();
    pod.spec.affinity = Some(Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms,
            }),
        }),
    });
    pod
}

#[test]
fn required_node_affinity_operators_and_ored_terms() {
    let admitted = |pod: Pod| admit_pod(&pod, &[], &node()).is_ok();
    assert!(admitted(with_terms(vec![vec![(
        "disk",
        "In",
        &["ssd", "nvme"]
    )]])));
    assert!(!admitted(with_terms(vec![vec![(
        "disk",
        "NotIn",
        &["ssd"]
    )]])));
    assert!(admitted(with_terms(vec![vec![("zone", "NotIn", &["a"])]])));
    assert!(admitted(with_terms(vec![vec![("disk", "Exists", &[])]])));
    assert!(!admitted(with_terms(vec![vec![(
        "disk",
        "DoesNotExist",
        &[]
    )]])));
    assert!(admitted(with_terms(vec![vec![("rank", "Gt", &["4"])]])));
    assert!(!admitted(with_terms(vec![vec![("rank", "Lt", &["5"])]])));
    assert!(!admitted(with_terms(vec![vec![
        ("disk", "In", &["ssd"]),
        ("zone", "Exists", &[])
    ]])));
    assert!(admitted(with_terms(vec![
        vec![("zone", "Exists", &[])],
        vec![("disk", "In", &["ssd"])]
    ])));
    assert!(!admitted(with_terms(vec![vec![]])));
}

#[test]
fn match_fields_name_the_node() {
    let mut pod = with_terms(vec![]);
    let term = NodeSelectorTerm {
        match_expressions: Vec::new(),
        match_fields: vec![NodeSelectorRequirement {
            key: "metadata.name".into(),
            operator: "In".into(),
            values: vec!["node-a".into()],
        }],
    };
    if let Some(required) = pod
        .spec
        .affinity
        .as_mut()
        .and_then(|a| a.node_affinity.as_mut())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_mut()
        })
    {
        required.node_selector_terms = vec![term];
    }
    assert_eq!(admit_pod(&pod, &[], &node()), Ok(()));
}

#[test]
fn another_nodes_name_is_node_name() {
    let mut pod = api_pod("elsewhere", "", "");
    pod.spec.node_name = "node-b".into();
    assert_eq!(rejected(&pod, &[]).0, "NodeName");
}

fn with_host_port(name: &str, port: i32, ip: &str, protocol: &str) -> Pod {
    let mut pod = api_pod(name, "", "");
    pod.spec.containers[0].ports.push(ContainerPort {
        container_port: 80,
        host_port: port,
        host_ip: ip.into(),
        protocol: protocol.into(),
        ..ContainerPort::default()
    });
    pod
}

#[test]
fn host_ports_clash_on_the_same_port_protocol_and_address() {
    let running = [with_host_port("a", 8080, "", "")];
    assert_eq!(
        rejected(&with_host_port("b", 8080, "10.0.0.1", "TCP"), &running),
        ("NodePorts".into(), "Predicate NodePorts failed".into())
    );
    let admitted = |pod: Pod, running: &[Pod]| admit_pod(&pod, running, &node()).is_ok();
    assert!(admitted(with_host_port("c", 8080, "", "UDP"), &running));
    assert!(admitted(with_host_port("d", 8081, "", ""), &running));
    let bound = [with_host_port("e", 9090, "10.0.0.1", "TCP")];
    assert!(admitted(
        with_host_port("f", 9090, "10.0.0.2", "TCP"),
        &bound
    ));
    assert!(!admitted(
        with_host_port("g", 9090, "0.0.0.0", "TCP"),
        &bound
    ));
}

fn taint(key: &str, value: &str, effect: &str) -> Taint {
    Taint {
        key: key.into(),
        value: value.into(),
        effect: effect.into(),
        time_added: None,
    }
}

#[test]
fn untolerated_no_execute_taints_reject_api_pods_only() {
    let mut info = node();
    info.taints = vec![
        taint("dedicated", "db", "NoExecute"),
        taint("noisy", "", "NoSchedule"),
    ];
    let pod = api_pod("t", "", "");
    assert_eq!(
        admit_pod(&pod, &[], &info),
        Err(Rejection {
            reason: "TaintToleration".into(),
            message: "Predicate TaintToleration failed".into()
        })
    );
    let mut tolerant = pod.clone();
    tolerant.spec.tolerations = vec![Toleration {
        key: "dedicated".into(),
        operator: "Equal".into(),
        value: "db".into(),
        effect: "NoExecute".into(),
        toleration_seconds: None,
    }];
    assert_eq!(admit_pod(&tolerant, &[], &info), Ok(()));
    let mut everything = pod.clone();
    everything.spec.tolerations = vec![Toleration {
        operator: "Exists".into(),
        ..Toleration::default()
    }];
    assert_eq!(admit_pod(&everything, &[], &info), Ok(()));
    let mut wrong_value = tolerant.clone();
    wrong_value.spec.tolerations[0].value = "web".into();
    assert!(admit_pod(&wrong_value, &[], &info).is_err());

    let mut static_pod = pod;
    static_pod
        .metadata
        .annotations
        .insert(CONFIG_SOURCE_ANNOTATION.into(), "file".into());
    assert_eq!(admit_pod(&static_pod, &[], &info), Ok(()));
}

#[test]
fn the_os_label_and_field_must_be_linux() {
    let mut labelled = api_pod("win", "", "");
    labelled
        .metadata
        .labels
        .insert(OS_LABEL.into(), "windows".into());
    assert_eq!(
        rejected(&labelled, &[]).0,
        "PodOSSelectorNodeLabelDoesNotMatch"
    );
    let mut field = api_pod("winfield", "", "");
    field.spec.os = Some(PodOs {
        name: "windows".into(),
    });
    assert_eq!(
        rejected(&field, &[]),
        (
            "PodOSNotSupported".into(),
            "Failed to admit pod as the OS field doesn't match node OS".into()
        )
    );
}

#[test]
fn resources_are_reported_before_affinity() {
    let mut pod = api_pod("both", "3", "");
    pod.spec.node_selector = map(&[("disk", "hdd")]);
    assert_eq!(rejected(&pod, &[]).0, "OutOfcpu");
}

#[test]
fn api_pods_decode_selectors_affinity_tolerations_and_os() {
    let value = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "u"},
        "spec": {
            "containers": [{"name": "c", "image": "busybox"}],
            "nodeSelector": {"disk": "ssd"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}]
            }, "preferredDuringSchedulingIgnoredDuringExecution": []}},
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "os": {"name": "linux"}
        }
    });
    let pod = crate::domain::pod::decode::pod_from_value(&value).expect("decodes");
    assert_eq!(pod.spec.node_selector, map(&[("disk", "ssd")]));
    assert_eq!(pod.spec.tolerations[0].toleration_seconds, Some(300));
    assert_eq!(
        pod.spec.os,
        Some(PodOs {
            name: "linux".into()
        })
    );
    assert!(pod.spec.affinity.is_some());
}

#[test]
fn new_pods_are_admitted_in_creation_order_each_beside_those_admitted_before_it() {
    use crate::domain::eviction::thresholds::PressureCondition;
    let stamped = |name: &str, cpu: &str, at: &str| {
        let mut pod = api_pod(name, cpu, "1Gi");
        pod.metadata.creation_timestamp = Some(at.into());
        pod
    };
    // Listed out of order: the older `first` takes the CPU, the newer `second` is refused
    // though it comes first in the list.
    let second = stamped("second", "1500m", "2026-11-28T10:00:02Z");
    let first = stamped("first", "1500m", "2026-11-28T10:00:01Z");
    let small = stamped("small", "500m", "2026-11-28T10:00:03Z");
    let verdicts = admit_new_pods(vec![&second, &first, &small], &[], Some(&node()), &[]);
    let names: Vec<(&str, Option<&str>)> = verdicts
        .iter()
        .map(|(p, v)| {
            (
                p.metadata.name.as_str(),
                v.as_ref().err().map(|r| r.reason.as_str()),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("first", None),
            ("second", Some("OutOfcpu")),
            ("small", None)
        ]
    );
    // Under memory pressure a BestEffort pod is refused before its resources are looked
    // at (the eviction manager's admission comes first, as upstream's chain).
    let best_effort = api_pod("be", "", "");
    let verdicts = admit_new_pods(
        vec![&best_effort],
        &[],
        None,
        &[PressureCondition::MemoryPressure],
    );
    assert_eq!(
        verdicts[0].1.as_ref().err().map(|r| r.reason.as_str()),
        Some("Evicted")
    );
}
