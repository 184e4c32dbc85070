//! QoS classes and the OOM score policy that follows from them.

use super::*;
/// The pod's QoS class, by upstream's rules: BestEffort when no container
/// (init containers included) requests or limits CPU or memory; Guaranteed
/// when every container limits both and the summed requests equal the summed
/// limits; Burstable otherwise. A missing request counts as equal to its
/// limit, as API defaulting would have made it.
pub fn qos_class(spec: &PodSpec) -> QosClass {
    const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];
    // Fixed slots per resource rather than maps: this runs for every pod on
    // every cgroup and QoS pass, so it stays allocation-free.
    let mut requests: [Option<Quantity>; 2] = [None, None];
    let mut limits: [Option<Quantity>; 2] = [None, None];
    let mut guaranteed = true;
    let zero = Quantity::new(0, Format::DecimalSI);
    let add = |sum: &mut Option<Quantity>, q: &Quantity| {
        *sum = Some(match sum {
            // Overflow needs ~1e29 units; keeping the old sum is harmless.
            Some(old) => old.checked_add(q).unwrap_or(*old),
            None => *q,
        });
    };
    // Ephemeral containers have no resources and do not count (upstream's `GetPodQOS`):
    // a debugger added to a Guaranteed pod leaves it Guaranteed.
    for container in spec.init_containers.iter().chain(&spec.containers) {
        let res = &container.resources;
        let mut limited = 0;
        for (i, name) in QOS_RESOURCES.iter().enumerate() {
            let request = res.requests.get(*name).or_else(|| res.limits.get(*name));
            if let Some(q) = request.filter(|q| **q > zero) {
                add(&mut requests[i], q);
            }
            if let Some(q) = res.limits.get(*name).filter(|q| **q > zero) {
                add(&mut limits[i], q);
                limited += 1;
            }
        }
        if limited < QOS_RESOURCES.len() {
            guaranteed = false;
        }
    }
    let count = |slots: &[Option<Quantity>; 2]| slots.iter().filter(|s| s.is_some()).count();
    if count(&requests) == 0 && count(&limits) == 0 {
        return QosClass::BestEffort;
    }
    let requests_match = requests
        .iter()
        .zip(&limits)
        .all(|(req, lim)| req.is_none() || req == lim);
    if guaranteed && requests_match && count(&requests) == count(&limits) {
        QosClass::Guaranteed
    } else {
        QosClass::Burstable
    }
}

/// The `oom_score_adj` for a container, by upstream's policy: -997 for
/// node-critical and Guaranteed pods, 1000 for BestEffort, and for Burstable
/// `1000 - 1000 * memory request / capacity`, kept within 3..=999 so it
/// stays between the other two classes. A sidecar scores no higher than the
/// regular container with the smallest request, so it outlives them.
///
/// Only the spec is at hand, so "node critical" here means the
/// `system-node-critical` class at critical priority; with the whole pod use
/// [`pod_container_oom_score_adj`], which also knows static and mirror pods
/// are critical. Requests are read as given: pass an API-defaulted pod (the
/// static pod decoder defaults requests from limits).
pub fn container_oom_score_adj(
    spec: &PodSpec,
    container: &Container,
    memory_capacity_bytes: u64,
) -> i64 {
    let node_critical =
        priority_is_critical(spec) && spec.priority_class_name == SYSTEM_NODE_CRITICAL;
    oom_score_adj(spec, container, memory_capacity_bytes, node_critical)
}

/// [`container_oom_score_adj`] with criticality judged from the whole pod.
pub fn pod_container_oom_score_adj(
    pod: &Pod,
    container: &Container,
    memory_capacity_bytes: u64,
) -> i64 {
    oom_score_adj(
        &pod.spec,
        container,
        memory_capacity_bytes,
        is_node_critical_pod(pod),
    )
}

fn oom_score_adj(
    spec: &PodSpec,
    container: &Container,
    memory_capacity_bytes: u64,
    node_critical: bool,
) -> i64 {
    if node_critical {
        return GUARANTEED_OOM_SCORE_ADJ;
    }
    match qos_class(spec) {
        QosClass::Guaranteed => return GUARANTEED_OOM_SCORE_ADJ,
        QosClass::BestEffort => return BEST_EFFORT_OOM_SCORE_ADJ,
        QosClass::Burstable => {}
    }
    // A zero capacity is a caller bug; one byte avoids dividing by zero and
    // yields the most protective Burstable score.
    let capacity = i128::from(memory_capacity_bytes.max(1));
    let score_for = |request: i64| 1000 - (1000 * i128::from(request)) / capacity;

    let mut score = score_for(memory_request(container));
    if is_sidecar(spec, container) {
        if let Some(min_request) = spec.containers.iter().map(memory_request).min() {
            score = score.min(score_for(min_request));
        }
    }
    let floor = i128::from(1000 + GUARANTEED_OOM_SCORE_ADJ);
    if score < floor {
        return 1000 + GUARANTEED_OOM_SCORE_ADJ;
    }
    if score == i128::from(BEST_EFFORT_OOM_SCORE_ADJ) {
        return BEST_EFFORT_OOM_SCORE_ADJ - 1;
    }
    // In range now: floor <= score < 1000.
    i64::try_from(score).unwrap_or(BEST_EFFORT_OOM_SCORE_ADJ - 1)
}

fn memory_request(container: &Container) -> i64 {
    container
        .resources
        .requests
        .get("memory")
        .map_or(0, Quantity::value)
}

/// A sidecar is an init container that restarts always.
fn is_sidecar(spec: &PodSpec, container: &Container) -> bool {
    container.restart_policy == Some(RestartPolicy::Always)
        && spec
            .init_containers
            .iter()
            .any(|init| init.name == container.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::pod::fixtures::{container, list, q, spec_of};

    #[test]
    fn an_ephemeral_container_leaves_the_class_as_it_was() {
        let mut spec = PodSpec {
            containers: vec![container("app", list("1", "1Gi"), list("1", "1Gi"))],
            ..PodSpec::default()
        };
        assert_eq!(qos_class(&spec), QosClass::Guaranteed);
        spec.ephemeral_containers
            .push(crate::domain::pod::EphemeralContainer {
                container: Container {
                    name: "debugger".into(),
                    ..Container::default()
                },
                target_container_name: "app".into(),
            });
        assert_eq!(qos_class(&spec), QosClass::Guaranteed);
    }
    #[test]
    fn qos_class_table() {
        let g = |n| container(n, list("100m", "100Mi"), list("100m", "100Mi"));
        let be = |n| container(n, list("", ""), list("", ""));
        let cases: Vec<(&str, PodSpec, QosClass)> = vec![
            (
                "guaranteed",
                spec_of(vec![g("guaranteed")]),
                QosClass::Guaranteed,
            ),
            (
                "guaranteed-guaranteed",
                spec_of(vec![g("a"), g("b")]),
                QosClass::Guaranteed,
            ),
            (
                "best-effort-best-effort",
                spec_of(vec![be("a"), be("b")]),
                QosClass::BestEffort,
            ),
            ("best-effort", spec_of(vec![be("a")]), QosClass::BestEffort),
            (
                "best-effort-burstable",
                spec_of(vec![be("a"), container("b", list("1", ""), list("2", ""))]),
                QosClass::Burstable,
            ),
            (
                "best-effort-guaranteed",
                spec_of(vec![
                    be("a"),
                    container("b", list("10m", "100Mi"), list("10m", "100Mi")),
                ]),
                QosClass::Burstable,
            ),
            (
                "burstable-cpu-guaranteed-memory",
                spec_of(vec![container("a", list("", "100Mi"), list("", "100Mi"))]),
                QosClass::Burstable,
            ),
            (
                "burstable-no-limits",
                spec_of(vec![container("a", list("100m", "100Mi"), list("", ""))]),
                QosClass::Burstable,
            ),
            (
                "burstable-guaranteed",
                spec_of(vec![
                    container("a", list("1", "100Mi"), list("2", "100Mi")),
                    g("b"),
                ]),
                QosClass::Burstable,
            ),
            (
                "burstable-unbounded-but-requests-match-limits",
                spec_of(vec![
                    container("a", list("100m", "100Mi"), list("200m", "200Mi")),
                    container("b", list("100m", "100Mi"), list("", "")),
                ]),
                QosClass::Burstable,
            ),
            (
                "burstable-1",
                spec_of(vec![container(
                    "a",
                    list("10m", "100Mi"),
                    list("100m", "200Mi"),
                )]),
                QosClass::Burstable,
            ),
            (
                "burstable-2",
                spec_of(vec![container("a", list("0", "0"), list("100m", "200Mi"))]),
                QosClass::Burstable,
            ),
            (
                "best-effort-hugepages",
                {
                    let mut r = list("0", "0");
                    r.insert("hugepages-2Mi".into(), q("1Gi"));
                    spec_of(vec![container("a", r.clone(), r)])
                },
                QosClass::BestEffort,
            ),
            (
                "init-container",
                PodSpec {
                    init_containers: vec![container(
                        "init",
                        list("10m", "100Mi"),
                        list("100m", "200Mi"),
                    )],
                    ..spec_of(vec![be("a")])
                },
                QosClass::Burstable,
            ),
        ];
        for (name, spec, want) in cases {
            assert_eq!(qos_class(&spec), want, "case {name}");
        }
    }

    #[test]
    fn qos_requests_default_from_limits() {
        // Limits alone: API defaulting copies them to requests, so Guaranteed.
        let spec = spec_of(vec![container("a", list("", ""), list("1", "1Gi"))]);
        assert_eq!(qos_class(&spec), QosClass::Guaranteed);
        // Equal values in different units still match.
        let spec = spec_of(vec![container(
            "a",
            list("1000m", "1024Mi"),
            list("1", "1Gi"),
        )]);
        assert_eq!(qos_class(&spec), QosClass::Guaranteed);
    }

    #[test]
    fn qos_display() {
        assert_eq!(QosClass::Guaranteed.to_string(), "Guaranteed");
        assert_eq!(QosClass::Burstable.to_string(), "Burstable");
        assert_eq!(QosClass::BestEffort.to_string(), "BestEffort");
    }

    const STANDARD_MEMORY: u64 = 8_000_000_000;

    fn mem(bytes: u64) -> BTreeMap<String, Quantity> {
        let mut m = BTreeMap::new();
        m.insert("memory".to_string(), q(&bytes.to_string()));
        m
    }

    /// (case, spec, memory capacity, [(container, lowest, highest score)])
    type OomCase = (&'static str, PodSpec, u64, Vec<(&'static str, i64, i64)>);

    // Cases from upstream pkg/kubelet/qos/policy_test.go
    // (TestGetContainerOOMScoreAdjust, without the pod-level-resources ones).
    #[test]
    fn oom_score_adj_table() {
        let mut cpu_req_zero = BTreeMap::new();
        cpu_req_zero.insert("cpu".to_string(), q("0"));
        let mut cpu_unlimited_req = mem(STANDARD_MEMORY / 2);
        cpu_unlimited_req.insert("cpu".into(), q("5m"));
        let mut request_no_limit = mem(STANDARD_MEMORY - 1);
        request_no_limit.insert("cpu".into(), q("5m"));

        let single = |c: Container| spec_of(vec![c]);
        let critical = |class: &str, priority: i32| PodSpec {
            priority_class_name: class.to_string(),
            priority: Some(priority),
            ..single(container("c", list("", ""), list("", "")))
        };

        let default_req = mem(STANDARD_MEMORY / 8);
        let default_lim = mem(1000 + STANDARD_MEMORY / 8);
        let main = container("main-1", default_req.clone(), default_lim.clone());
        let init = container("init-container", default_req.clone(), default_lim.clone());
        let sidecar = |name: &str, req: BTreeMap<String, Quantity>| Container {
            restart_policy: Some(RestartPolicy::Always),
            ..container(name, req, default_lim.clone())
        };
        let with_inits = |inits: Vec<Container>| PodSpec {
            init_containers: inits,
            ..spec_of(vec![main.clone()])
        };

        // (case, spec, capacity, [(container, low, high)])
        let cases: Vec<OomCase> = vec![
            (
                "cpu-limit",
                single(container("c", list("", ""), list("10", ""))),
                4_000_000_000,
                vec![("c", 999, 999)],
            ),
            (
                "memory-limit-cpu-request",
                single(container("c", cpu_req_zero, list("", "10G"))),
                8_000_000_000,
                vec![("c", 999, 999)],
            ),
            (
                "zero-memory-limit",
                single(container("c", list("", ""), list("", "0"))),
                7_230_457_451,
                vec![("c", 1000, 1000)],
            ),
            (
                "no-request-limit",
                single(container("c", list("", ""), list("", ""))),
                4_000_000_000,
                vec![("c", 1000, 1000)],
            ),
            (
                "equal-request-limit-cpu-memory",
                single(container("c", list("5m", "10G"), list("5m", "10G"))),
                123_456_789,
                vec![("c", -997, -997)],
            ),
            (
                "cpu-unlimited-memory-limited-with-requests",
                single(container("c", cpu_unlimited_req, list("", "10G"))),
                STANDARD_MEMORY,
                vec![("c", 495, 505)],
            ),
            (
                "request-no-limit",
                single(container("c", request_no_limit, list("", ""))),
                STANDARD_MEMORY,
                vec![("c", 3, 3)],
            ),
            (
                "cluster-critical",
                critical("system-cluster-critical", SYSTEM_CRITICAL_PRIORITY),
                4_000_000_000,
                vec![("c", 1000, 1000)],
            ),
            (
                "node-critical",
                critical(SYSTEM_NODE_CRITICAL, SYSTEM_CRITICAL_PRIORITY + 1000),
                4_000_000_000,
                vec![("c", -997, -997)],
            ),
            (
                "burstable-unique-container-pod",
                single(container("c", default_req.clone(), default_lim.clone())),
                STANDARD_MEMORY,
                vec![("c", 875, 880)],
            ),
            (
                "burstable-mixed-unique-main-container-pod",
                with_inits(vec![init.clone()]),
                STANDARD_MEMORY,
                vec![("init-container", 875, 880), ("main-1", 875, 880)],
            ),
            (
                "burstable-mixed-multi-container-small-sidecar-pod",
                with_inits(vec![
                    init.clone(),
                    sidecar("sidecar-small-container", mem(STANDARD_MEMORY / 20)),
                ]),
                STANDARD_MEMORY,
                vec![
                    ("init-container", 875, 880),
                    ("sidecar-small-container", 875, 875),
                    ("main-1", 875, 875),
                ],
            ),
            (
                "burstable-mixed-multi-container-same-request-pod",
                with_inits(vec![
                    init.clone(),
                    sidecar("sidecar-container", default_req.clone()),
                ]),
                STANDARD_MEMORY,
                vec![
                    ("init-container", 875, 880),
                    ("sidecar-container", 875, 875),
                    ("main-1", 875, 875),
                ],
            ),
            (
                "burstable-mixed-multi-container-big-sidecar-container-pod",
                with_inits(vec![
                    init.clone(),
                    sidecar("sidecar-big-container", mem(STANDARD_MEMORY / 2)),
                ]),
                STANDARD_MEMORY,
                vec![
                    ("init-container", 875, 880),
                    ("sidecar-big-container", 500, 500),
                    ("main-1", 875, 875),
                ],
            ),
        ];
        for (name, spec, capacity, expect) in cases {
            for (cname, low, high) in expect {
                let c = spec
                    .all_containers()
                    .find(|c| c.name == cname)
                    .expect("container in case");
                let got = container_oom_score_adj(&spec, c, capacity);
                assert!(
                    (low..=high).contains(&got),
                    "case {name}, container {cname}: got {got}, want {low}..={high}"
                );
            }
        }
    }

    #[test]
    fn static_node_critical_pod_is_protected_without_priority() {
        let mut pod = Pod {
            spec: PodSpec {
                priority_class_name: SYSTEM_NODE_CRITICAL.into(),
                ..spec_of(vec![container("c", list("", ""), list("", ""))])
            },
            ..Pod::default()
        };
        let c = pod.spec.containers[0].clone();
        // Not static yet, no priority: plain BestEffort.
        assert_eq!(pod_container_oom_score_adj(&pod, &c, 1 << 30), 1000);
        pod.metadata
            .annotations
            .insert(CONFIG_SOURCE_ANNOTATION.into(), "file".into());
        assert!(is_critical_pod(&pod));
        assert_eq!(pod_container_oom_score_adj(&pod, &c, 1 << 30), -997);
        assert_eq!(container_oom_score_adj(&pod.spec, &c, 1 << 30), 1000);
    }

    #[test]
    fn oom_score_zero_capacity_does_not_panic() {
        let spec = spec_of(vec![container("c", list("", "1"), list("", ""))]);
        assert_eq!(container_oom_score_adj(&spec, &spec.containers[0], 0), 3);
    }
}
