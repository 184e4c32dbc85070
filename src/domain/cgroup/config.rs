//! Which cgroup each pod and QoS class lives in and what limits it gets, as
//! upstream's container manager decides them (`ResourceConfigForPod`,
//! `setCPUCgroupConfig`, `createNodeAllocatableCgroups`, `GetPodContainerName`).

use crate::domain::cgroup::cfs::{
    milli_cpu_to_quota, milli_cpu_to_shares, DEFAULT_QUOTA_PERIOD_US, MAX_SHARES, MIN_SHARES,
};
use crate::domain::node::allocatable::node_allocatable;
use crate::domain::node::reserved::ResourceList;
use crate::domain::pod::{qos_class, Container, Pod, QosClass, RestartPolicy};
use crate::domain::units::quantity::{Format, Quantity};

use super::{CgroupName, CgroupNameError, ResourceConfig};

/// A pod's cgroup is `pod<uid>`.
pub const POD_CGROUP_PREFIX: &str = "pod";
/// The cgroup holding every pod, below `--cgroup-root`.
pub const KUBEPODS: &str = "kubepods";
pub const BURSTABLE: &str = "burstable";
pub const BESTEFFORT: &str = "besteffort";

/// cgroup v2 `cpu.weight` bounds.
pub const MIN_WEIGHT: u64 = 1;
pub const MAX_WEIGHT: u64 = 10_000;

/// `kubepods` under `--cgroup-root` (""/"/" = the root), given as a cgroupfs
/// path. Err on a bad component (one holding `_`).
pub fn kubepods_name(cgroup_root: &str) -> Result<CgroupName, CgroupNameError> {
    let parts: Vec<&str> = cgroup_root.split('/').filter(|c| !c.is_empty()).collect();
    let root = CgroupName::new(&CgroupName::root(), &parts)?;
    CgroupName::new(&root, &[KUBEPODS])
}

/// kubepods/burstable, kubepods/besteffort; Guaranteed pods sit in kubepods itself.
pub fn qos_cgroup_name(kubepods: &CgroupName, qos: QosClass) -> CgroupName {
    let leaf = match qos {
        QosClass::Guaranteed => return kubepods.clone(),
        QosClass::Burstable => BURSTABLE,
        QosClass::BestEffort => BESTEFFORT,
    };
    let mut name = kubepods.clone();
    // Constant, valid components: cannot fail.
    let _ = name.push(leaf.to_owned());
    name
}

/// Guaranteed: kubepods/pod<uid>; the others under their QoS cgroup.
///
/// API and static pod UIDs (UUIDs, hex hashes) are always valid components; a
/// UID holding `/` or `_` (never seen from either source) has those mapped to
/// `-` rather than failing, since a pod must always get a cgroup.
pub fn pod_cgroup_name(kubepods: &CgroupName, pod: &Pod) -> CgroupName {
    let parent = qos_cgroup_name(kubepods, qos_class(&pod.spec));
    let uid = &pod.metadata.uid;
    let mut leaf = String::with_capacity(POD_CGROUP_PREFIX.len() + uid.len());
    leaf.push_str(POD_CGROUP_PREFIX);
    if uid.contains(['/', '_']) {
        leaf.extend(
            uid.chars()
                .map(|c| if c == '/' || c == '_' { '-' } else { c }),
        );
    } else {
        leaf.push_str(uid);
    }
    let mut name = parent;
    // `pod` + a uid cleared of '/' and '_' is always a valid component.
    let _ = name.push(leaf);
    name
}

/// The uid of a `pod<uid>` leaf, for start-up cleanup of stale pod cgroups.
pub fn pod_uid_of(name: &CgroupName) -> Option<&str> {
    name.components()
        .last()?
        .strip_prefix(POD_CGROUP_PREFIX)
        .filter(|uid| !uid.is_empty())
}

/// The kubelet settings that shape pod cgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CgroupSettings {
    /// `--cpu-cfs-quota`: enforce CPU limits with CFS quota.
    pub cpu_cfs_quota: bool,
    /// `--cpu-cfs-quota-period` in microseconds.
    pub cpu_cfs_quota_period_us: u64,
    /// `--pod-max-pids`; <= 0 leaves pods unlimited.
    pub pod_pids_limit: i64,
}

impl Default for CgroupSettings {
    fn default() -> Self {
        Self {
            cpu_cfs_quota: true,
            cpu_cfs_quota_period_us: DEFAULT_QUOTA_PERIOD_US,
            pod_pids_limit: -1,
        }
    }
}

/// A pod's limits and whether every container declared a non-zero cpu and
/// memory one.
#[derive(Debug, Clone, Copy)]
struct PodLimits {
    total: Amounts,
    every_cpu: bool,
    every_memory: bool,
}

/// cpu and memory as quantities: summed exactly and converted once at the
/// end, as upstream sums a ResourceList before MilliValue()/Value().
#[derive(Debug, Clone, Copy)]
struct Amounts {
    cpu: Quantity,
    memory: Quantity,
}

fn zero() -> Quantity {
    Quantity::new(0, Format::DecimalSI)
}

impl Amounts {
    fn zero() -> Amounts {
        Amounts {
            cpu: zero(),
            memory: zero(),
        }
    }
    fn add(self, o: Amounts) -> Amounts {
        // `+` saturates (about 1e29 units): far beyond any node.
        Amounts {
            cpu: self.cpu + o.cpu,
            memory: self.memory + o.memory,
        }
    }
    fn max(self, o: Amounts) -> Amounts {
        Amounts {
            cpu: self.cpu.max(o.cpu),
            memory: self.memory.max(o.memory),
        }
    }
}

fn requests_of(c: &Container) -> Amounts {
    // A request missing but limited counts as the limit: API defaulting would
    // have set it, and static pods that skipped defaulting must agree with qos_class.
    let get = |name: &str| {
        c.resources
            .requests
            .get(name)
            .or_else(|| c.resources.limits.get(name))
            .copied()
            .unwrap_or_else(zero)
    };
    Amounts {
        cpu: get("cpu"),
        memory: get("memory"),
    }
}

fn limits_of(c: &Container) -> Amounts {
    let l = &c.resources.limits;
    Amounts {
        cpu: l.get("cpu").copied().unwrap_or_else(zero),
        memory: l.get("memory").copied().unwrap_or_else(zero),
    }
}

fn is_sidecar(c: &Container) -> bool {
    c.restart_policy == Some(RestartPolicy::Always)
}

/// Upstream's PodRequests/PodLimits aggregation: regular containers and
/// sidecars add up; each plain init container runs alone beside the sidecars
/// started before it, so the pod needs the max of that and the sum. `seen` is
/// called with what each container counts as (upstream's ContainerFn).
fn aggregate(pod: &Pod, of: fn(&Container) -> Amounts, mut seen: impl FnMut(Amounts)) -> Amounts {
    let mut sum = Amounts::zero();
    for c in &pod.spec.containers {
        let a = of(c);
        seen(a);
        sum = sum.add(a);
    }
    let mut sidecars = Amounts::zero();
    let mut init_max = Amounts::zero();
    for c in &pod.spec.init_containers {
        let a = of(c);
        let counted = if is_sidecar(c) {
            sum = sum.add(a);
            sidecars = sidecars.add(a);
            sidecars
        } else {
            a.add(sidecars)
        };
        seen(counted);
        init_max = init_max.max(counted);
    }
    sum.max(init_max)
}

fn pod_requests(pod: &Pod) -> Amounts {
    aggregate(pod, requests_of, |_| {})
}

fn overhead_of(pod: &Pod) -> Amounts {
    let get = |name: &str| pod.spec.overhead.get(name).copied().unwrap_or_else(zero);
    Amounts {
        cpu: get("cpu"),
        memory: get("memory"),
    }
}

/// Upstream's `PodRequestsAndLimits`, what the pod's cgroup is sized by: the pod's
/// overhead (its RuntimeClass's, `spec.overhead`) added to its requests, and to each of
/// its limits that is set.
fn pod_requests_and_limits(pod: &Pod) -> (Amounts, PodLimits) {
    let overhead = overhead_of(pod);
    let requests = pod_requests(pod).add(overhead);
    let mut limits = pod_limits(pod);
    if !limits.total.cpu.is_zero() {
        limits.total.cpu = limits.total.cpu + overhead.cpu;
    }
    if !limits.total.memory.is_zero() {
        limits.total.memory = limits.total.memory + overhead.memory;
    }
    (requests, limits)
}

fn pod_limits(pod: &Pod) -> PodLimits {
    let mut every_cpu = true;
    let mut every_memory = true;
    let total = aggregate(pod, limits_of, |a| {
        every_cpu &= !a.cpu.is_zero();
        every_memory &= !a.memory.is_zero();
    });
    PodLimits {
        total,
        every_cpu,
        every_memory,
    }
}

/// The pod's summed cpu request and limit (millicores) and memory limit (bytes),
/// without its overhead: what upstream's sandbox resources are calculated from.
pub fn pod_cpu_and_memory(pod: &Pod) -> (i64, i64, i64) {
    let requests = pod_requests(pod);
    let limits = pod_limits(pod).total;
    (
        requests.cpu.milli_value(),
        limits.cpu.milli_value(),
        limits.memory.value(),
    )
}

fn shares(milli_cpu: i64) -> u64 {
    u64::try_from(milli_cpu_to_shares(milli_cpu)).unwrap_or(MIN_SHARES as u64)
}

/// Upstream ResourceConfigForPod: shares from the summed cpu requests (with the pod's
/// overhead, as the limits below); quota
/// and period from the limits only when every container has a cpu limit;
/// a memory limit only when every container has one; pids from
/// `pod_pids_limit` when > 0. BestEffort gets 2 shares (MinShares) and nothing
/// else bar the pids limit. With `cpu_cfs_quota` off the quota is -1.
pub fn pod_resource_config(pod: &Pod, s: &CgroupSettings) -> ResourceConfig {
    let pids_limit = (s.pod_pids_limit > 0).then_some(s.pod_pids_limit);
    let qos = qos_class(&pod.spec);
    if qos == QosClass::BestEffort {
        return ResourceConfig {
            cpu_shares: Some(MIN_SHARES as u64),
            pids_limit,
            ..ResourceConfig::default()
        };
    }
    let (requests, limits) = pod_requests_and_limits(pod);
    let period = i64::try_from(s.cpu_cfs_quota_period_us).unwrap_or(i64::MAX);
    let quota = if s.cpu_cfs_quota {
        milli_cpu_to_quota(limits.total.cpu.milli_value(), period)
    } else {
        -1
    };
    let guaranteed = qos == QosClass::Guaranteed;
    let cpu_limited = guaranteed || limits.every_cpu;
    let memory_limited = guaranteed || limits.every_memory;
    ResourceConfig {
        cpu_shares: Some(shares(requests.cpu.milli_value())),
        cpu_quota: cpu_limited.then_some(quota),
        cpu_period: cpu_limited.then_some(s.cpu_cfs_quota_period_us),
        memory_limit: memory_limited.then_some(limits.total.memory.value()),
        pids_limit,
    }
}

/// The QoS cgroups' cpu shares (upstream setCPUCgroupConfig): burstable gets
/// the summed cpu requests of the burstable pods (at least 2 shares),
/// besteffort always 2.
pub fn qos_resource_configs<'a>(
    pods: impl IntoIterator<Item = &'a Pod>,
) -> (ResourceConfig, ResourceConfig) {
    // Summed as millicores per pod, as upstream adds each pod's MilliValue().
    let burstable_milli = pods
        .into_iter()
        .filter(|p| qos_class(&p.spec) == QosClass::Burstable)
        .fold(0i64, |sum, p| {
            sum.saturating_add(pod_requests_and_limits(p).0.cpu.milli_value())
        });
    let burstable = ResourceConfig {
        cpu_shares: Some(shares(burstable_milli)),
        ..ResourceConfig::default()
    };
    let besteffort = ResourceConfig {
        cpu_shares: Some(MIN_SHARES as u64),
        ..ResourceConfig::default()
    };
    (burstable, besteffort)
}

/// kubepods' limits (upstream createNodeAllocatableCgroups): when `pods` is in
/// --enforce-node-allocatable, from capacity − kube-reserved − system-reserved
/// (eviction thresholds are not subtracted: upstream's
/// getNodeAllocatableInternalAbsolute), else from capacity itself. cpu gives
/// shares, memory a limit, `pid` a pids limit, each only when present.
pub fn kubepods_resource_config(
    capacity: &ResourceList,
    kube_reserved: &ResourceList,
    system_reserved: &ResourceList,
    enforce_pods: bool,
) -> ResourceConfig {
    let allocatable;
    let list = if enforce_pods {
        allocatable = node_allocatable(capacity, system_reserved, kube_reserved, &[]);
        &allocatable
    } else {
        capacity
    };
    ResourceConfig {
        cpu_shares: list.get("cpu").map(|q| shares(q.milli_value())),
        memory_limit: list.get("memory").map(|q| q.value()),
        pids_limit: list.get("pid").map(|q| q.value()),
        ..ResourceConfig::default()
    }
}

/// How cgroup v1 `cpu.shares` become cgroup v2 `cpu.weight`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WeightCurve {
    /// The old linear map `1 + (shares-2)*9999/262142` (runc < 1.3.2, older
    /// kubelets): 1024 shares give weight 39, well below v2's default 100.
    Linear,
    /// runc >= 1.3.2 / crun >= 1.23: a quadratic in log2(shares) mapping
    /// 2→1, 1024→100, 262144→10000. The default, because it is what current
    /// runtimes write for container shares: pod and QoS weights computed the
    /// same way keep the proportions between a pod and its containers.
    #[default]
    Quadratic,
}

/// `cpu.weight` for `cpu.shares` (0 = unset stays 0), within 1..=10000.
pub fn shares_to_weight(shares: u64, curve: WeightCurve) -> u64 {
    if shares == 0 {
        return 0;
    }
    let min = MIN_SHARES as u64;
    let max = MAX_SHARES as u64;
    if shares <= min {
        return MIN_WEIGHT;
    }
    if shares >= max {
        return MAX_WEIGHT;
    }
    match curve {
        WeightCurve::Linear => 1 + ((shares - min) * 9999) / (max - min),
        WeightCurve::Quadratic => {
            let l = (shares as f64).log2();
            let exponent = (l * l + 125.0 * l) / 612.0 - 7.0 / 34.0;
            // The cast saturates; the value is within 1..=10000 by construction.
            (10f64.powf(exponent).ceil() as u64).clamp(MIN_WEIGHT, MAX_WEIGHT)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::pod::{ObjectMeta, PodSpec, ResourceRequirements};
    use crate::domain::units::quantity::Quantity;
    use std::collections::BTreeMap;

    fn list(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        pairs
            .iter()
            .map(|(k, v)| {
                (
                    (*k).to_owned(),
                    Quantity::parse(v).unwrap_or_else(|e| panic!("{v}: {e}")),
                )
            })
            .collect()
    }

    fn container(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Container {
        Container {
            name: "c".into(),
            image: "i".into(),
            resources: ResourceRequirements {
                requests: list(requests),
                limits: list(limits),
            },
            ..Container::default()
        }
    }

    fn pod(uid: &str, containers: Vec<Container>, init: Vec<Container>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                uid: uid.into(),
                ..ObjectMeta::default()
            },
            spec: PodSpec {
                containers,
                init_containers: init,
                ..PodSpec::default()
            },
        }
    }

    fn kubepods() -> CgroupName {
        kubepods_name("/").unwrap_or_default()
    }

    fn issue_pod() -> Pod {
        pod(
            "1234",
            vec![container(
                &[("cpu", "250m")],
                &[("cpu", "500m"), ("memory", "128Mi")],
            )],
            vec![],
        )
    }

    #[test]
    fn kubepods_under_cgroup_root() {
        for root in ["", "/"] {
            assert_eq!(
                kubepods_name(root).map(|n| n.to_cgroupfs()),
                Ok("/kubepods".into())
            );
        }
        assert_eq!(
            kubepods_name("/a/b").map(|n| n.to_cgroupfs()),
            Ok("/a/b/kubepods".into())
        );
        assert!(kubepods_name("/a_b").is_err());
    }

    #[test]
    fn pod_names_by_qos() {
        let kp = kubepods();
        assert_eq!(
            pod_cgroup_name(&kp, &issue_pod()).to_cgroupfs(),
            "/kubepods/burstable/pod1234"
        );
        let guaranteed = pod(
            "g-1",
            vec![container(&[], &[("cpu", "1"), ("memory", "1Gi")])],
            vec![],
        );
        assert_eq!(
            pod_cgroup_name(&kp, &guaranteed).to_cgroupfs(),
            "/kubepods/podg-1"
        );
        let best = pod("b", vec![container(&[], &[])], vec![]);
        assert_eq!(
            pod_cgroup_name(&kp, &best).to_cgroupfs(),
            "/kubepods/besteffort/podb"
        );
        assert_eq!(qos_cgroup_name(&kp, QosClass::Guaranteed), kp);
        let named = pod_cgroup_name(&kp, &best);
        assert_eq!(pod_uid_of(&named), Some("b"));
        assert_eq!(pod_uid_of(&kp), None);
        assert_eq!(
            pod_uid_of(&CgroupName::from_cgroupfs("/kubepods/pod")),
            None
        );
        let odd = pod("a_b", vec![container(&[], &[])], vec![]);
        assert_eq!(
            pod_cgroup_name(&kp, &odd).to_cgroupfs(),
            "/kubepods/besteffort/poda-b"
        );
    }

    #[test]
    fn issue_burstable_pod() {
        let rc = pod_resource_config(&issue_pod(), &CgroupSettings::default());
        assert_eq!(
            rc,
            ResourceConfig {
                cpu_shares: Some(256),
                cpu_quota: Some(50_000),
                cpu_period: Some(100_000),
                memory_limit: Some(134_217_728),
                pids_limit: None,
            }
        );
    }

    /// Upstream's `TestResourceConfigForPodWithCustomCPUCFSQuotaPeriod` overhead cases:
    /// the overhead adds to the requests and to the limits that are set.
    #[test]
    fn the_pod_overhead_adds_to_requests_and_set_limits() {
        let mut p = issue_pod();
        p.spec.overhead = list(&[("cpu", "250m"), ("memory", "32Mi")]);
        let rc = pod_resource_config(&p, &CgroupSettings::default());
        assert_eq!(
            (rc.cpu_shares, rc.cpu_quota, rc.memory_limit),
            (Some(512), Some(75_000), Some(134_217_728 + 33_554_432))
        );
        let (burstable, _) = qos_resource_configs([&p]);
        assert_eq!(burstable.cpu_shares, Some(512));
        // Without a memory limit none is made up from the overhead.
        let mut p = pod("x", vec![container(&[("cpu", "100m")], &[])], vec![]);
        p.spec.overhead = list(&[("cpu", "100m"), ("memory", "32Mi")]);
        let rc = pod_resource_config(&p, &CgroupSettings::default());
        assert_eq!((rc.cpu_shares, rc.memory_limit), (Some(204), None));
    }

    #[test]
    fn upstream_resource_config_cases() {
        let s = CgroupSettings::default();
        // Burstable without limits: shares only.
        let p = pod("x", vec![container(&[("cpu", "100m")], &[])], vec![]);
        let rc = pod_resource_config(&p, &s);
        assert_eq!(
            (rc.cpu_shares, rc.cpu_quota, rc.memory_limit),
            (Some(102), None, None)
        );
        // One container without limits: no quota or memory limit for the pod.
        let p = pod(
            "x",
            vec![
                container(&[("cpu", "100m")], &[("cpu", "200m"), ("memory", "1Mi")]),
                container(&[("cpu", "100m")], &[]),
            ],
            vec![],
        );
        let rc = pod_resource_config(&p, &s);
        assert_eq!(
            (rc.cpu_shares, rc.cpu_quota, rc.cpu_period, rc.memory_limit),
            (Some(204), None, None, None)
        );
        // Guaranteed: everything.
        let p = pod(
            "x",
            vec![container(&[], &[("cpu", "2"), ("memory", "1Gi")])],
            vec![],
        );
        let rc = pod_resource_config(&p, &s);
        assert_eq!(
            (rc.cpu_shares, rc.cpu_quota, rc.cpu_period, rc.memory_limit),
            (Some(2048), Some(200_000), Some(100_000), Some(1 << 30))
        );
        // Quota disabled: -1, period kept.
        let off = CgroupSettings {
            cpu_cfs_quota: false,
            cpu_cfs_quota_period_us: 50_000,
            pod_pids_limit: 42,
        };
        let rc = pod_resource_config(&p, &off);
        assert_eq!(
            (rc.cpu_quota, rc.cpu_period, rc.pids_limit),
            (Some(-1), Some(50_000), Some(42))
        );
        // BestEffort: 2 shares, nothing else but pids.
        let p = pod("x", vec![container(&[], &[])], vec![]);
        assert_eq!(
            pod_resource_config(&p, &off),
            ResourceConfig {
                cpu_shares: Some(2),
                pids_limit: Some(42),
                ..ResourceConfig::default()
            }
        );
        assert_eq!(
            pod_resource_config(&p, &s),
            ResourceConfig {
                cpu_shares: Some(2),
                ..ResourceConfig::default()
            }
        );
    }

    #[test]
    fn init_containers_count_as_upstream_max_rule() {
        let s = CgroupSettings::default();
        // A plain init container bigger than the sum wins.
        let p = pod(
            "x",
            vec![container(
                &[("cpu", "100m")],
                &[("cpu", "100m"), ("memory", "10Mi")],
            )],
            vec![container(
                &[("cpu", "1")],
                &[("cpu", "1"), ("memory", "20Mi")],
            )],
        );
        let rc = pod_resource_config(&p, &s);
        assert_eq!(rc.cpu_shares, Some(1024));
        assert_eq!(rc.cpu_quota, Some(100_000));
        assert_eq!(rc.memory_limit, Some(20 << 20));
        // A sidecar adds to the sum and runs beside later init containers.
        let mut sidecar = container(&[("cpu", "300m")], &[("cpu", "300m"), ("memory", "5Mi")]);
        sidecar.restart_policy = Some(RestartPolicy::Always);
        let p = pod(
            "x",
            vec![container(
                &[("cpu", "100m")],
                &[("cpu", "100m"), ("memory", "10Mi")],
            )],
            vec![
                sidecar,
                container(&[("cpu", "500m")], &[("cpu", "500m"), ("memory", "1Mi")]),
            ],
        );
        let rc = pod_resource_config(&p, &s);
        // max(100+300, 300, 500+300) = 800m.
        assert_eq!(rc.cpu_shares, Some(819));
        assert_eq!(rc.cpu_quota, Some(80_000));
        assert_eq!(rc.memory_limit, Some(15 << 20));
        // An init container without a limit drops the pod's memory limit.
        let p = pod(
            "x",
            vec![container(
                &[("cpu", "100m")],
                &[("cpu", "100m"), ("memory", "10Mi")],
            )],
            vec![container(&[("cpu", "100m")], &[("cpu", "100m")])],
        );
        let rc = pod_resource_config(&p, &s);
        assert_eq!((rc.cpu_quota, rc.memory_limit), (Some(10_000), None));
    }

    #[test]
    fn qos_shares() {
        let pods = vec![
            issue_pod(),
            pod(
                "b",
                vec![container(&[("cpu", "1"), ("memory", "1Mi")], &[])],
                vec![],
            ),
            pod(
                "g",
                vec![container(&[], &[("cpu", "4"), ("memory", "1Gi")])],
                vec![],
            ),
            pod("e", vec![container(&[], &[])], vec![]),
        ];
        let (burstable, besteffort) = qos_resource_configs(&pods);
        // 250m + 1000m; the Guaranteed and BestEffort pods do not count.
        assert_eq!(
            burstable,
            ResourceConfig {
                cpu_shares: Some(1280),
                ..ResourceConfig::default()
            }
        );
        assert_eq!(
            besteffort,
            ResourceConfig {
                cpu_shares: Some(2),
                ..ResourceConfig::default()
            }
        );
        let (burstable, _) = qos_resource_configs(&[]);
        assert_eq!(burstable.cpu_shares, Some(2));
    }

    #[test]
    fn kubepods_from_allocatable() {
        let capacity = list(&[("cpu", "4"), ("memory", "8Gi"), ("pid", "4096")]);
        let kube = list(&[("memory", "1Gi")]);
        let system = list(&[("cpu", "500m"), ("pid", "96")]);
        let rc = kubepods_resource_config(&capacity, &kube, &system, true);
        assert_eq!(
            rc,
            ResourceConfig {
                cpu_shares: Some(3584),
                memory_limit: Some(7 << 30),
                pids_limit: Some(4000),
                ..ResourceConfig::default()
            }
        );
        let rc = kubepods_resource_config(&capacity, &kube, &system, false);
        assert_eq!(
            (rc.cpu_shares, rc.memory_limit, rc.pids_limit),
            (Some(4096), Some(8 << 30), Some(4096))
        );
        let rc = kubepods_resource_config(
            &list(&[("memory", "2Gi")]),
            &kube,
            &ResourceList::new(),
            true,
        );
        assert_eq!(
            (rc.cpu_shares, rc.memory_limit, rc.pids_limit),
            (None, Some(1 << 30), None)
        );
    }

    #[test]
    fn weight_curves() {
        for (shares, linear, quadratic) in [
            (0, 0, 0),
            (1, 1, 1),
            (2, 1, 1),
            (1024, 39, 100),
            (262_144, 10_000, 10_000),
            (1_000_000, 10_000, 10_000),
        ] {
            assert_eq!(
                shares_to_weight(shares, WeightCurve::Linear),
                linear,
                "{shares}"
            );
            assert_eq!(
                shares_to_weight(shares, WeightCurve::Quadratic),
                quadratic,
                "{shares}"
            );
        }
        assert_eq!(WeightCurve::default(), WeightCurve::Quadratic);
        // Monotonic across the range.
        let mut last = 0;
        for s in (2..262_144).step_by(97) {
            let w = shares_to_weight(s, WeightCurve::Quadratic);
            assert!(w >= last && (1..=10_000).contains(&w), "{s} -> {w}");
            last = w;
        }
    }
}
