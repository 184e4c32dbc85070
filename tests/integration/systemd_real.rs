//! The systemd cgroup driver against a real, private systemd manager (one per test, from
//! scripts/test-env/systemd-up.sh, so tests run in parallel). Needs root and systemd;
//! fails, saying which is missing, without them.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common;

use common::cgroups::pod_limits;
use common::systemd::Systemd;
use rkubelet::adapters::systemd::{CgroupMount, SystemdManager};
use rkubelet::domain::cgroup::CgroupVersion;
use rkubelet::domain::cgroup::{CgroupName, ResourceConfig};
use rkubelet::ports::cgroup::{CgroupError, CgroupManager};

/// This machine's cgroup mount.
fn mount() -> CgroupMount {
    let root = std::path::PathBuf::from("/sys/fs/cgroup");
    let version = rkubelet::adapters::cgroupfs::detect_version(&root);
    CgroupMount { root, version }
}

async fn connect(peer: &Systemd) -> SystemdManager {
    SystemdManager::connect(Some(&peer.var("DBUS_SYSTEM_BUS_ADDRESS")), mount())
        .await
        .expect("connects to the private manager")
}

fn name(parts: &[&str]) -> CgroupName {
    CgroupName::new(&CgroupName::root(), parts).expect("valid name")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        .trim()
        .to_string()
}

/// The file holding `v1_file` (v1 name, in `controller`'s hierarchy) or `v2_file` for
/// the cgroup at `cgroup`.
fn file(version: CgroupVersion, controller: &str, cgroup: &str, v1: &str, v2: &str) -> PathBuf {
    let rel = cgroup.trim_start_matches('/');
    match version {
        CgroupVersion::V1 => Path::new("/sys/fs/cgroup")
            .join(controller)
            .join(rel)
            .join(v1),
        CgroupVersion::V2 => Path::new("/sys/fs/cgroup").join(rel).join(v2),
    }
}

const POD_UID: &str = "5f2b7c3e-1a2b-4c3d-8e9f-0123456789ab";

#[tokio::test]
#[ignore = "needs root and systemd: run by scripts/test.sh"]
async fn pod_slices_carry_their_limits_into_the_real_cgroup_files() {
    let peer = Systemd::start("limits");
    let sd = connect(&peer).await;
    assert_eq!(
        sd.control_group(),
        peer.var("RKUBELET_SYSTEMD_CONTROL_GROUP")
    );
    let v = sd.cgroup_version();

    let kubepods = name(&["kubepods"]);
    let burstable = name(&["kubepods", "burstable"]);
    let pod = name(&["kubepods", "burstable", &format!("pod{POD_UID}")]);
    let pod_unit = format!("kubepods-burstable-pod{}.slice", POD_UID.replace('-', "_"));
    assert_eq!(pod.to_systemd_unit(), pod_unit);
    assert_eq!(
        sd.driver_name(&pod),
        format!("/kubepods.slice/kubepods-burstable.slice/{pod_unit}")
    );

    assert!(!sd.exists(&kubepods).await.expect("exists"));
    let none = ResourceConfig::default();
    sd.create(&kubepods, &none).await.expect("kubepods.slice");
    sd.create(&burstable, &none)
        .await
        .expect("kubepods-burstable.slice");
    let limits = pod_limits();
    sd.create(&pod, &limits).await.expect("pod slice");
    for n in [&kubepods, &burstable, &pod] {
        assert!(sd.exists(n).await.expect("exists"), "{n} exists");
    }

    // the slices are where systemd says, below the manager's own cgroup
    let cg = format!("{}{}", sd.control_group(), pod.to_systemd());
    assert_eq!(sd.cgroup_path(&pod), cg);
    let shares = file(v, "cpu", &cg, "cpu.shares", "cpu.weight");
    let quota = file(v, "cpu", &cg, "cpu.cfs_quota_us", "cpu.max");
    let memory = file(v, "memory", &cg, "memory.limit_in_bytes", "memory.max");
    let pids = file(v, "pids", &cg, "pids.max", "pids.max");
    match v {
        CgroupVersion::V1 => {
            assert_eq!(read(&shares), "256");
            assert_eq!(read(&quota), "50000");
        }
        CgroupVersion::V2 => {
            // The default curve, as --cpu-weight-curve leaves it.
            let weight = rkubelet::domain::cgroup::shares_to_weight(
                256,
                rkubelet::domain::cgroup::WeightCurve::default(),
            );
            assert_eq!(read(&shares), weight.to_string());
            assert_eq!(read(&quota), "50000 100000");
        }
    }
    assert_eq!(read(&memory), "134217728");
    assert_eq!(read(&pids), "1024");

    // update changes a value in place
    let bigger = ResourceConfig {
        memory_limit: Some(268_435_456),
        ..ResourceConfig::default()
    };
    sd.update(&pod, &bigger).await.expect("update");
    assert_eq!(read(&memory), "268435456");
    assert_eq!(read(&pids), "1024", "values not given are kept");

    // creating an existing slice updates it
    let more_pids = ResourceConfig {
        pids_limit: Some(2048),
        ..ResourceConfig::default()
    };
    sd.create(&pod, &more_pids).await.expect("create again");
    assert_eq!(read(&pids), "2048");

    assert_eq!(
        sd.children(&burstable).await.expect("children"),
        vec![pod.clone()]
    );
    assert_eq!(
        sd.children(&kubepods).await.expect("children"),
        vec![burstable.clone()]
    );
    assert!(sd
        .children(&CgroupName::root())
        .await
        .expect("children")
        .contains(&kubepods));

    // a process placed in the pod's cgroup is found from the pod and from its ancestors
    assert_eq!(sd.pids(&pod).await.expect("pids"), Vec::<u32>::new());
    let procs_dir = match v {
        CgroupVersion::V1 => Path::new("/sys/fs/cgroup/pids").join(cg.trim_start_matches('/')),
        CgroupVersion::V2 => Path::new("/sys/fs/cgroup").join(cg.trim_start_matches('/')),
    };
    let mut sleeper = Command::new("sleep").arg("60").spawn().expect("sleep");
    std::fs::write(procs_dir.join("cgroup.procs"), sleeper.id().to_string()).expect("attach");
    assert_eq!(sd.pids(&pod).await.expect("pids"), vec![sleeper.id()]);
    assert!(sd
        .pids(&kubepods)
        .await
        .expect("pids")
        .contains(&sleeper.id()));
    let _ = sleeper.kill();
    let _ = sleeper.wait();

    // destroy stops the slice and systemd removes its cgroup
    sd.destroy(&pod).await.expect("destroy");
    assert!(!sd.exists(&pod).await.expect("exists"));
    assert!(
        !shares.parent().expect("dir").exists(),
        "pod cgroup removed"
    );
    assert!(sd.children(&burstable).await.expect("children").is_empty());
    sd.destroy(&pod)
        .await
        .expect("destroying an absent slice is fine");
    assert_eq!(sd.pids(&pod).await.expect("pids"), Vec::<u32>::new());
    assert!(sd.exists(&burstable).await.expect("exists"), "parent kept");

    // the harness leaves nothing behind
    let cg_name = peer.var("RKUBELET_SYSTEMD_CGROUP_NAME");
    let base = peer.base.clone();
    drop(peer);
    assert!(!base.exists(), "{} removed", base.display());
    for h in ["cpu", "memory", "pids", "systemd"] {
        let d = Path::new("/sys/fs/cgroup").join(h).join(&cg_name);
        assert!(!d.exists(), "{} removed", d.display());
    }
}

#[tokio::test]
#[ignore = "needs root and systemd: run by scripts/test.sh"]
async fn refusals_name_the_call_the_unit_and_the_bus_error() {
    let peer = Systemd::start("errors");
    let sd = connect(&peer).await;
    // a name systemd refuses as a unit name: the bus error comes back with the call and unit
    let bad = name(&["bad name"]);
    let Err(err) = sd.create(&bad, &ResourceConfig::default()).await else {
        panic!("systemd accepted the unit \"bad name.slice\"");
    };
    match err {
        CgroupError::Systemd { call, unit, source } => {
            assert_eq!(call, "StartTransientUnit");
            assert_eq!(unit, "bad name.slice");
            let reason = source.to_string();
            assert!(reason.starts_with("org.freedesktop."), "{reason}");
        }
        other => panic!("unexpected error {other:?}"),
    }
    assert!(!sd.exists(&bad).await.expect("exists"));
    let Err(err) = SystemdManager::connect(Some("unix:path=/nonexistent/bus"), mount()).await
    else {
        panic!("connect to nothing succeeded");
    };
    assert!(
        matches!(&err, CgroupError::Systemd { call: "connect", unit, .. } if unit == "unix:path=/nonexistent/bus"),
        "{err:?}"
    );
}

#[tokio::test]
#[ignore = "needs root and systemd: run by scripts/test.sh"]
async fn missing_parents_come_with_a_child_and_go_with_the_parent() {
    let peer = Systemd::start("parents");
    let sd = connect(&peer).await;
    let kubepods = name(&["kubepods"]);
    let pod = name(&["kubepods", &format!("pod{POD_UID}")]);
    sd.create(&pod, &ResourceConfig::default())
        .await
        .expect("pod slice without its parent");
    assert!(
        sd.exists(&kubepods).await.expect("exists"),
        "systemd made the parent"
    );
    assert_eq!(
        sd.children(&kubepods).await.expect("children"),
        vec![pod.clone()]
    );
    // systemd stops a slice's children with it
    sd.destroy(&kubepods).await.expect("destroy parent");
    assert!(!sd.exists(&pod).await.expect("exists"));
    assert!(!sd.exists(&kubepods).await.expect("exists"));
}

/// The container manager rkubelet runs, on this driver: the QoS tree as slices with node
/// allocatable on `kubepods.slice`, a pod slice with upstream's values, the burstable
/// shares following the pods, and the pod's slice stopped when the pod goes.
#[tokio::test]
#[ignore = "needs root and systemd: run by scripts/test.sh"]
async fn the_container_manager_builds_its_tree_as_slices() {
    use rkubelet::app::container_manager::ContainerManager;
    use rkubelet::domain::node::NodeSettings;
    use rkubelet::domain::pod::Pod;
    use rkubelet::domain::units::quantity::Quantity;
    use std::sync::Arc;

    let peer = Systemd::start("manager");
    let sd = Arc::new(connect(&peer).await);
    let v = sd.cgroup_version();
    let given = rkubelet::app::cli::parse([
        "rkubelet",
        "--container-runtime-endpoint=fake://",
        "--cgroup-driver=systemd",
    ])
    .expect("flags");
    let resolved = rkubelet::domain::config::resolve(
        &rkubelet::domain::config::ConfigInputs::from_flags(given),
        &rkubelet::domain::config::NodeFacts {
            hostname: "node-a".into(),
            machine: rkubelet::adapters::fake::FakeMachine::sample_info(),
        },
    )
    .expect("config");
    let quantity = |s: &str| Quantity::parse(s).expect("quantity");
    let node = NodeSettings {
        capacity: [("cpu", "2"), ("memory", "8Gi"), ("pods", "110")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), quantity(v)))
            .collect(),
        kube_reserved: [("memory".to_string(), quantity("1Gi"))].into(),
        ..NodeSettings::default()
    };
    let cm = ContainerManager::new(sd.clone(), resolved.node.cgroup_tree, node);
    cm.setup().await.expect("the QoS tree");
    for unit in ["kubepods", "kubepods/burstable", "kubepods/besteffort"] {
        let n = CgroupName::from_cgroupfs(unit);
        assert!(sd.exists(&n).await.expect("exists"), "{unit} as a slice");
    }
    let kubepods_cg = sd.cgroup_path(&name(&["kubepods"]));
    let memory = file(
        v,
        "memory",
        &kubepods_cg,
        "memory.limit_in_bytes",
        "memory.max",
    );
    assert_eq!(
        read(&memory),
        (7u64 << 30).to_string(),
        "capacity - kube-reserved"
    );

    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": "default", "uid": POD_UID},
        "spec": {"containers": [{"name": "app", "image": "busybox",
            "resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "500m", "memory": "128Mi"}}}]}
    }))
    .expect("pod");
    let unit = format!("kubepods-burstable-pod{}.slice", POD_UID.replace('-', "_"));
    assert_eq!(
        cm.cgroup_parent(&pod),
        format!("/kubepods.slice/kubepods-burstable.slice/{unit}")
    );
    cm.ensure_pod(&pod).await.expect("pod slice");
    cm.update_qos(std::slice::from_ref(&pod))
        .await
        .expect("QoS update");
    let pod_name = name(&["kubepods", "burstable", &format!("pod{POD_UID}")]);
    let pod_cg = sd.cgroup_path(&pod_name);
    assert!(pod_cg.ends_with(&unit), "{pod_cg}");
    assert_eq!(
        read(&file(
            v,
            "memory",
            &pod_cg,
            "memory.limit_in_bytes",
            "memory.max"
        )),
        "134217728"
    );
    if v == CgroupVersion::V1 {
        assert_eq!(read(&file(v, "cpu", &pod_cg, "cpu.shares", "")), "256");
        assert_eq!(
            read(&file(v, "cpu", &pod_cg, "cpu.cfs_quota_us", "")),
            "50000"
        );
        let burstable_cg = sd.cgroup_path(&name(&["kubepods", "burstable"]));
        assert_eq!(
            read(&file(v, "cpu", &burstable_cg, "cpu.shares", "")),
            "256"
        );
    }
    assert_eq!(
        cm.pod_cgroup_uids().await.expect("pod cgroups"),
        [POD_UID.to_string()].into()
    );
    // A process left in the pod's slice is killed before the slice goes, as upstream's
    // `tryKillingCgroupProcesses`.
    let rel = pod_cg.trim_start_matches('/');
    let hierarchies: Vec<PathBuf> = match v {
        CgroupVersion::V1 => std::fs::read_dir("/sys/fs/cgroup")
            .expect("/sys/fs/cgroup")
            .flatten()
            .map(|e| e.path().join(rel))
            .filter(|d| d.is_dir())
            .collect(),
        CgroupVersion::V2 => vec![Path::new("/sys/fs/cgroup").join(rel)],
    };
    let mut stray = common::cgroups::StrayProcess::into_cgroups(hierarchies);
    assert_eq!(
        sd.pids(&pod_name).await.expect("pids"),
        [stray.pid()],
        "the stray process in the pod's slice"
    );
    cm.remove_pod(POD_UID).await.expect("pod slice stopped");
    assert_eq!(
        stray.ending_signal(common::patience(10)),
        Some(9),
        "the process left in the pod's slice was not killed"
    );
    assert!(!sd.exists(&pod_name).await.expect("exists"));
    assert!(!Path::new(&file(v, "memory", &pod_cg, "", "")).exists());
    assert!(cm.pod_cgroup_uids().await.expect("pod cgroups").is_empty());
}
