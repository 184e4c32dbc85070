//! Gathering the planner's inputs through read-only means: the configuration files,
//! the pod sources read once, the machine, and the runtime behind [`ReadOnlyRuntime`]
//! (or a snapshot file instead of the machine and the runtime).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::app::bootstrap::{node_facts, read_config_inputs, Deps, StartupError};
use crate::app::compose;
use crate::app::eviction::observe::{Observation, Observer};
use crate::app::node::startup::agent_settings;
use crate::app::node::{status_inputs, RuntimeFacts};
use crate::app::pods::runtime_state::image_presence;
use crate::domain::config::layers::GivenFlags;
use crate::domain::config::ClusterConfig;
use crate::domain::config::{self, NodeFacts, ResolvedConfig};
use crate::domain::kuberuntime::dns::ResolvConf;
use crate::domain::kuberuntime::plan::{ImageFacts, ImagePresence};
use crate::domain::kuberuntime::requests::RequestContext;
use crate::domain::kuberuntime::runtime::ImageUser;
use crate::domain::kuberuntime::runtime::PodRuntimeStatus;
use crate::domain::pod::Pod;
use crate::domain::volumes::PodObjects;
use crate::ports::api::nodes::NodesError;
use crate::ports::error::Chain;
use crate::ports::runtime::RuntimeService;

use super::cluster::ClusterObservation;
use super::readonly::{ReadOnlyRuntime, ReadOnlyStats};
use super::render::render_text;
use super::snapshot::{load_snapshot, observe_pods, Snapshot, SnapshotImage, SNAPSHOT_VERSION};
use super::{compute_plan, images_wanted, Plan, PlanInputs, EXIT_INVALID};

fn problems(e: StartupError) -> Vec<String> {
    match e {
        StartupError::Invalid(problems) => problems,
        other => other.lines(),
    }
}

/// `rkubelet --dry-run`: prints the plan (text or JSON) to stdout and returns the exit
/// status (0 nothing to do, 2 actions, 1 invalid).
pub fn run(given: GivenFlags) -> u8 {
    let format = config::flag_options(&given)
        .map(|o| o.dry_run_output)
        .unwrap_or_else(|_| "text".into());
    let Some(runtime) = crate::app::compose::async_runtime() else {
        return EXIT_INVALID;
    };
    let plan = runtime.block_on(plan_from_flags(given));
    let text = if format == "json" {
        match serde_json::to_string_pretty(&plan) {
            Ok(text) => text + "\n",
            Err(e) => {
                eprintln!("cannot encode the plan as JSON: {e}");
                return EXIT_INVALID;
            }
        }
    } else {
        render_text(&plan)
    };
    // A closed stdout (`| head`) is the reader's choice, not a failure of the plan.
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
    plan.exit_code()
}

/// The plan for the command line `given` on this machine.
pub async fn plan_from_flags(given: GivenFlags) -> Plan {
    let options = config::flag_options(&given).unwrap_or_default();
    let deps = compose::production_deps(&options);
    plan_with(given, &deps).await
}

/// The plan for the command line `given` in the world `deps` gives.
pub async fn plan_with(given: GivenFlags, deps: &Deps) -> Plan {
    match gather_inputs(given, deps).await {
        Ok(inputs) => compute_plan(&inputs),
        Err(problems) => Plan::invalid(problems),
    }
}

/// The node facts: from the snapshot when one is given, else from this machine (its
/// runtime's pods are then read later, once the configuration names the runtime).
fn facts(snapshot_path: Option<&std::path::Path>, deps: &Deps) -> Result<Snapshot, Vec<String>> {
    if let Some(path) = snapshot_path {
        return load_snapshot(deps.host.as_ref(), path).map_err(|e| vec![e.to_string()]);
    }
    let NodeFacts { hostname, machine } = node_facts(deps).map_err(problems)?;
    Ok(Snapshot {
        version: SNAPSHOT_VERSION,
        hostname,
        machine,
        cgroup_version: (deps.cgroup_version)(),
        node_stats: Default::default(),
        pods: Vec::new(),
        images: Default::default(),
        image_facts: Default::default(),
        recorded_at_unix_nanos: None,
        eviction: None,
    })
}

/// The configuration resolved against the facts, with the facts.
fn resolve(given: GivenFlags, deps: &Deps) -> Result<(ResolvedConfig, Snapshot), Vec<String>> {
    let inputs = read_config_inputs(given, deps.host.as_ref());
    let snapshot_path = inputs
        .options
        .as_ref()
        .ok()
        .and_then(|o| o.dry_run_snapshot.clone());
    let facts_of = facts(snapshot_path.as_deref(), deps)?;
    let node = NodeFacts {
        hostname: facts_of.hostname.clone(),
        machine: facts_of.machine.clone(),
    };
    let resolved = config::resolve(&inputs, &node)
        .map_err(|errors| errors.iter().map(ToString::to_string).collect::<Vec<_>>())?;
    Ok((resolved, facts_of))
}

/// Everything [`compute_plan`] needs; `Err` with every problem when the configuration
/// is invalid on this node or the node facts cannot be had.
pub async fn gather_inputs(given: GivenFlags, deps: &Deps) -> Result<PlanInputs, Vec<String>> {
    let (resolved, facts) = resolve(given, deps)?;
    let mut warnings = Vec::new();
    let mut skipped_manifests = Vec::new();
    let mut desired = Vec::new();
    let mut sources_complete = true;
    let node_config = &resolved.node;
    if node_config.static_pod_path.is_none()
        && node_config.static_pod_url.is_none()
        && node_config.cluster.is_none()
    {
        warnings.push(
            "no pod source: neither --pod-manifest-path (staticPodPath), --manifest-url (staticPodURL) nor --kubeconfig is set, so no pod is planned".into(),
        );
    }
    let sources = (deps.sources_for)(&resolved.node, Arc::clone(&deps.clock))
        .map_err(|e| vec![Chain(&e).to_string()])?;
    for source in sources {
        match source.read_once().await {
            Ok(update) => {
                desired.extend(update.pods);
                // A URL's bad body stops the pod loop from judging pods unwanted; a
                // folder's bad file does not (its other files still speak).
                if update.source != "file" && !update.errors.is_empty() {
                    sources_complete = false;
                }
                skipped_manifests.extend(update.errors.iter().map(ToString::to_string));
            }
            Err(e) => {
                sources_complete = false;
                warnings.push(Chain(&e).to_string());
            }
        }
    }
    let live = resolved.options.dry_run_snapshot.is_none();
    let (observed, images, now_unix_nanos) = if !live {
        let images = facts
            .images
            .iter()
            .map(|(image, &present)| {
                (
                    image.clone(),
                    presence(present, facts.image_facts.get(image)),
                )
            })
            .collect();
        let now = facts
            .recorded_at_unix_nanos
            .unwrap_or_else(|| deps.clock.now_unix_nanos());
        (facts.pods.clone(), images, now)
    } else {
        let now = deps.clock.now_unix_nanos();
        let (observed, runtime) = observe_live(&resolved, deps, &mut warnings).await;
        let images = match runtime {
            Some(runtime) => {
                image_presence(&runtime, &images_wanted(&desired, &observed, now)).await
            }
            None => Default::default(),
        };
        (observed, images, now)
    };
    let cluster = match &resolved.node.cluster {
        Some(cluster) => Some(observe_cluster(&resolved, cluster, deps, now_unix_nanos).await),
        None => None,
    };
    let eviction = if live {
        observe_for_eviction(&resolved, deps, &desired, now_unix_nanos, &mut warnings).await
    } else {
        facts.eviction.clone()
    };
    let cpu_manager = cpu_manager_inputs(&resolved, deps, &mut warnings);
    let devices = device_manager_state(&resolved, deps, &mut warnings);
    Ok(PlanInputs {
        cpu_manager,
        devices,
        resolved,
        cgroup_version: facts.cgroup_version,
        node_stats: facts.node_stats,
        desired,
        sources_complete,
        warnings,
        skipped_manifests,
        observed,
        images,
        now_unix_nanos,
        cluster,
        eviction,
    })
}

/// With the static CPU manager: the machine's CPU topology and the state file, read
/// through the same ports as the kubelet; a read that fails is a warning.
fn cpu_manager_inputs(
    resolved: &ResolvedConfig,
    deps: &Deps,
    warnings: &mut Vec<String>,
) -> Option<super::CpuManagerInputs> {
    if !resolved.node.cpu_manager.is_static() {
        return None;
    }
    let topology = match deps.machine.cpu_topology() {
        Ok(t) => t,
        Err(e) => {
            warnings.push(format!("the CPU topology cannot be read: {}", Chain(&e)));
            return None;
        }
    };
    let path = resolved
        .options
        .root_dir
        .join(crate::domain::resource_managers::state::CPU_MANAGER_STATE_FILE_NAME);
    let state = match deps.device_plugins.read_checkpoint(&path) {
        Ok(state) => state,
        Err(e) => {
            warnings.push(format!("{}", Chain(&e)));
            None
        }
    };
    Some(super::CpuManagerInputs {
        topology,
        state,
        state_path: path.display().to_string(),
    })
}

/// The device manager's checkpoint read back as the kubelet reads it at start, through
/// the same port: which devices containers hold. None, or a bad one, is an empty state
/// (a bad one also a warning, as the kubelet logs it and goes on).
fn device_manager_state(
    resolved: &ResolvedConfig,
    deps: &Deps,
    warnings: &mut Vec<String>,
) -> crate::domain::devices::DeviceManagerState {
    use crate::domain::devices::{checkpoint::DeviceCheckpoint, DeviceManagerState};
    let path = resolved
        .options
        .root_dir
        .join(crate::domain::devices::DEVICE_PLUGINS_DIR)
        .join(crate::domain::devices::CHECKPOINT_FILE);
    let text = match deps.device_plugins.read_checkpoint(&path) {
        Ok(Some(text)) => text,
        Ok(None) => return DeviceManagerState::default(),
        Err(e) => {
            warnings.push(Chain(&e).to_string());
            return DeviceManagerState::default();
        }
    };
    match DeviceCheckpoint::unmarshal(&text) {
        Ok(cp) => {
            let plugins = std::sync::Arc::clone(&deps.device_plugins);
            let now = std::time::Duration::from_nanos(deps.clock.monotonic_nanos());
            DeviceManagerState::restore(&cp, now, &move |b| plugins.decode_response(b))
        }
        Err(e) => {
            warnings.push(format!("{}: {e}", path.display()));
            DeviceManagerState::default()
        }
    }
}

/// The node as the eviction manager would observe it now (memory, filesystems, pids,
/// the pods' usage), through the same observer, read-only; `None` when eviction has
/// nothing to watch or the statistics cannot be had (said in a warning).
async fn observe_for_eviction(
    resolved: &ResolvedConfig,
    deps: &Deps,
    pods: &[Pod],
    now_unix_nanos: i64,
    warnings: &mut Vec<String>,
) -> Option<Observation> {
    let node = &resolved.node;
    if node.eviction_config().is_idle() {
        return None;
    }
    let ports = match (deps.eviction_for)(node) {
        Ok(ports) => ports,
        Err(e) => {
            warnings.push(format!(
                "the node's statistics cannot be read ({}); the eviction section shows the thresholds only",
                Chain(&e)
            ));
            return None;
        }
    };
    let requests = RequestContext::from_config(resolved, ResolvConf::default());
    let observer = Observer {
        stats: ports.node,
        runtime: Arc::new(ReadOnlyStats::new(ports.runtime)),
        tree: node.cgroup_tree.clone(),
        memory_capacity_bytes: requests.memory_capacity_bytes,
        requests,
    };
    Some(observer.observe(pods, now_unix_nanos).await)
}

fn presence(present: bool, recorded: Option<&SnapshotImage>) -> ImagePresence {
    if present {
        ImagePresence::Present(recorded.map_or_else(
            || ImageFacts {
                id: String::new(),
                user: ImageUser::root(),
            },
            |r| ImageFacts {
                id: r.id.clone(),
                user: r.user.clone(),
            },
        ))
    } else {
        ImagePresence::Absent
    }
}

/// What the runtime holds, read through [`ReadOnlyRuntime`] (returned, with the image
/// service, for the image questions); an unreachable runtime is a warning and an empty
/// runtime.
async fn observe_live(
    resolved: &ResolvedConfig,
    deps: &Deps,
    warnings: &mut Vec<String>,
) -> (Vec<PodRuntimeStatus>, Option<ReadOnlyRuntime>) {
    let node = &resolved.node;
    let endpoint = &node.runtime_endpoint;
    let unreachable = |reason: String| {
        format!("the container runtime at {endpoint} did not answer ({reason}); planned as if it held nothing")
    };
    let inner = match (deps.runtime_for)(endpoint, node.runtime_request_timeout) {
        Ok(inner) => inner,
        Err(e) => {
            warnings.push(unreachable(Chain(&e).to_string()));
            return (Vec::new(), None);
        }
    };
    let mut runtime = ReadOnlyRuntime::new(inner);
    let images_at = &node.image_service_endpoint;
    match (deps.images_for)(images_at, node.runtime_request_timeout) {
        Ok(images) => runtime = runtime.with_images(images),
        Err(e) => warnings.push(format!(
            "the image service at {images_at} did not answer ({}); image presence is not known",
            Chain(&e)
        )),
    }
    let observed = async {
        runtime.version().await?;
        observe_pods(&runtime, &[]).await
    }
    .await;
    match observed {
        Ok(pods) => (pods, Some(runtime)),
        Err(e) => {
            warnings.push(unreachable(Chain(&e).to_string()));
            (Vec::new(), None)
        }
    }
}

/// Connected mode, read-only: the Node this node's kubeconfig finds on the API server, and
/// what the node agent would report (the runtime's version and images, the host's facts).
async fn observe_cluster(
    resolved: &ResolvedConfig,
    cluster: &ClusterConfig,
    deps: &Deps,
    now_unix_nanos: i64,
) -> ClusterObservation {
    let node = &resolved.node;
    let settings = agent_settings(resolved, cluster);
    let bootstrap_first = cluster.bootstrap_kubeconfig.is_some() && !cluster.kubeconfig.exists();
    let mut observation = ClusterObservation {
        server: String::new(),
        bootstrap_first,
        registration: settings.registration.clone(),
        status_inputs: Default::default(),
        existing: Ok(None),
        api_pods: Err("not read".into()),
        volume_objects: BTreeMap::new(),
    };
    let runtime = match (deps.runtime_for)(&node.runtime_endpoint, node.runtime_request_timeout) {
        Ok(runtime) => Arc::new(ReadOnlyRuntime::new(runtime)),
        Err(e) => {
            observation.existing = Err(format!("the container runtime: {}", Chain(&e)));
            return observation;
        }
    };
    let agent = match (deps.node_agent_for)(node, runtime.clone(), Arc::clone(&deps.clock)) {
        Ok(agent) => agent,
        Err(e) => {
            observation.existing = Err(format!("the container runtime: {}", Chain(&e)));
            return observation;
        }
    };
    let version = runtime
        .version()
        .await
        .ok()
        .map(|v| format!("{}://{}", v.runtime_name, v.runtime_version));
    let images = agent.runtime_status.list_images().await.ok();
    observation.status_inputs = status_inputs(
        &settings,
        agent.host_facts.as_ref(),
        RuntimeFacts {
            version,
            images,
            not_ready: Vec::new(),
        },
        now_unix_nanos,
    );
    // Before TLS bootstrap there is no node identity to read the Node with.
    let kubeconfig = if bootstrap_first {
        cluster.bootstrap_kubeconfig.clone().unwrap_or_default()
    } else {
        cluster.kubeconfig.clone()
    };
    if let Ok(summary) = agent.connector.inspect(&kubeconfig) {
        observation.server = summary.server;
    }
    if bootstrap_first {
        observation.existing = Err(
            "not read: the bootstrap identity may not read Nodes; the Node is registered (or adopted) once the client certificate is issued".into(),
        );
        return observation;
    }
    let clients = match agent.connector.connect(&kubeconfig).await {
        Ok(clients) => clients,
        Err(e) => {
            observation.existing = Err(Chain(&e).to_string());
            return observation;
        }
    };
    observation.existing = match clients.nodes.get_node(&node.node_name).await {
        Ok(existing) => Ok(Some(existing)),
        Err(NodesError::NotFound { .. }) => Ok(None),
        Err(e) => Err(Chain(&e).to_string()),
    };
    // Read-only: the pods bound to the node, as the API pod source would list them.
    observation.api_pods = clients
        .pods
        .list_pods(&format!("spec.nodeName={}", node.node_name))
        .await
        .map(|list| list.items)
        .map_err(|e| Chain(&e).to_string());
    if let Ok(pods) = &observation.api_pods {
        observation.volume_objects =
            read_volume_objects(clients.objects.as_ref(), &node.node_name, pods).await;
    }
    observation
}

/// What the pods' claims and CSI volumes lead to, read (never written) as the volume
/// manager reads them for a sync: the claims, their PersistentVolumes, the drivers'
/// CSIDrivers, the Secrets the volumes name, the VolumeAttachments they need.
async fn read_volume_objects(
    api: &dyn crate::ports::api::objects::PodObjectsApi,
    node_name: &str,
    pods: &[serde_json::Value],
) -> BTreeMap<String, PodObjects> {
    use crate::app::pods::volume_manager::fetched;
    use crate::domain::csi::volume::attachment;
    use crate::domain::volumes::claim::{
        bound_volume_names, claim_names, volume_secret_refs, PersistentVolumeSource,
    };
    use crate::domain::volumes::Fetched;
    let mut all = BTreeMap::new();
    for value in pods {
        let Ok(pod) = serde_json::from_value::<Pod>(value.clone()) else {
            continue;
        };
        let claims: BTreeSet<String> = claim_names(&pod).collect();
        let inline: BTreeSet<&str> = pod
            .spec
            .volumes
            .iter()
            .filter_map(|v| v.csi.as_ref().map(|c| c.driver.as_str()))
            .collect();
        if claims.is_empty() && inline.is_empty() {
            continue;
        }
        let ns = pod.metadata.namespace.as_str();
        let mut objects = PodObjects::default();
        for name in claims {
            let claim = fetched(api.get_persistent_volume_claim(ns, &name).await);
            objects.claims.insert(name, claim);
        }
        for name in bound_volume_names(&objects) {
            let pv = fetched(api.get_persistent_volume(&name).await);
            objects.persistent_volumes.insert(name, pv);
        }
        let sources: Vec<_> = objects
            .persistent_volumes
            .values()
            .filter_map(|pv| match pv {
                Fetched::Found(pv) => match &pv.source {
                    PersistentVolumeSource::Csi(source) => Some(source.as_ref().clone()),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        let drivers: BTreeSet<String> = sources
            .iter()
            .map(|s| s.driver.clone())
            .chain(inline.into_iter().map(str::to_owned))
            .collect();
        for driver in drivers {
            let data = fetched(api.get_csi_driver(&driver).await);
            objects.csi_drivers.insert(driver, data);
        }
        for reference in volume_secret_refs(&objects) {
            let secret = fetched(api.get_secret(&reference.namespace, &reference.name).await);
            objects.volume_secrets.insert(reference, secret);
        }
        for source in &sources {
            if let Some(needed) = attachment(source, node_name, &objects) {
                let state = fetched(api.get_volume_attachment(&needed.id).await);
                objects.volume_attachments.insert(needed.id, state);
            }
        }
        all.insert(pod.metadata.uid.clone(), objects);
    }
    all
}

/// `rkubelet-snapshot`: this node's state now (machine, hostname, cgroup version, the
/// runtime's pods through read-only calls, whether the images the desired pods name are
/// present, the time), for `--dry-run-snapshot`.
pub async fn record_snapshot(given: GivenFlags) -> Result<Snapshot, Vec<String>> {
    let options = config::flag_options(&given).unwrap_or_default();
    let deps = compose::production_deps(&options);
    let inputs = gather_inputs(given.clone(), &deps).await?;
    let node = &inputs.resolved.node;
    let NodeFacts { hostname, machine } = node_facts(&deps).map_err(problems)?;
    let mut facts = Snapshot {
        version: SNAPSHOT_VERSION,
        hostname,
        machine,
        cgroup_version: inputs.cgroup_version,
        node_stats: inputs.node_stats.clone(),
        pods: Vec::new(),
        images: Default::default(),
        image_facts: Default::default(),
        recorded_at_unix_nanos: Some(deps.clock.now_unix_nanos()),
        eviction: inputs.eviction.clone(),
    };
    let endpoint = &node.runtime_endpoint;
    let inner = (deps.runtime_for)(endpoint, node.runtime_request_timeout).map_err(|e| {
        vec![format!(
            "the container runtime at {endpoint}: {}",
            Chain(&e)
        )]
    })?;
    let images_at = &node.image_service_endpoint;
    let images = (deps.images_for)(images_at, node.runtime_request_timeout)
        .map_err(|e| vec![format!("the image service at {images_at}: {}", Chain(&e))])?;
    let runtime = ReadOnlyRuntime::new(inner).with_images(images);
    facts.pods = observe_pods(&runtime, &[]).await.map_err(|e| {
        vec![format!(
            "the container runtime at {endpoint}: {}",
            Chain(&e)
        )]
    })?;
    for (image, presence) in image_presence(&runtime, &pod_images(&inputs.desired)).await {
        match presence {
            ImagePresence::Present(found) => {
                facts.image_facts.insert(
                    image.clone(),
                    SnapshotImage {
                        id: found.id,
                        user: found.user,
                    },
                );
                facts.images.insert(image, true)
            }
            ImagePresence::Absent => facts.images.insert(image, false),
            ImagePresence::Unknown(reason) => {
                return Err(vec![format!(
                    "the image service: image {image:?}: {reason}"
                )])
            }
        };
    }
    Ok(facts)
}

/// Every image the pods name (init containers too), each once.
fn pod_images(pods: &[Pod]) -> Vec<String> {
    let mut images: Vec<String> = Vec::new();
    for c in pods
        .iter()
        .flat_map(|p| p.spec.init_containers.iter().chain(&p.spec.containers))
    {
        if !images.contains(&c.image) {
            images.push(c.image.clone());
        }
    }
    images
}
