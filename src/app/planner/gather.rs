//! Gathering the planner's inputs through read-only means: the configuration files,
//! the manifest path and URL read once, the machine, and the runtime behind
//! [`ReadOnlyRuntime`] (or a snapshot file instead of the machine and the runtime).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::adapters::cgroupfs::detect_version;
use crate::adapters::file_source::read_manifests_once;
use crate::adapters::http_source::HttpSource;
use crate::app::bootstrap::{load_configuration, Deps, StartupError};
use crate::app::compose;
use crate::app::pods::runtime_state::image_presence;
use crate::domain::config::layers::GivenFlags;
use crate::domain::config::{self, ResolvedConfig};
use crate::domain::kuberuntime::plan::ImagePresence;
use crate::domain::kuberuntime::runtime::PodRuntimeStatus;
use crate::domain::node::resolve_node_name;
use crate::domain::pod::Pod;
use crate::domain::units::time::rfc3339_nanos;

use super::readonly::ReadOnlyRuntime;
use super::render::render_text;
use super::snapshot::{load_snapshot, observe_pods, Snapshot, SNAPSHOT_VERSION};
use super::{compute_plan, images_wanted, Plan, PlanInputs, EXIT_INVALID};

/// Where cgroups are mounted on a real node.
const CGROUP_MOUNT: &str = "/sys/fs/cgroup";

fn problems(e: StartupError) -> Vec<String> {
    match e {
        StartupError::Invalid(problems) => problems,
        other => vec![other.to_string()],
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

/// The plan for the command line `given`.
pub async fn plan_from_flags(given: GivenFlags) -> Plan {
    let resolved = match load_configuration(given) {
        Ok(resolved) => resolved,
        Err(e) => return Plan::invalid(problems(e)),
    };
    let deps = compose::production_deps(&resolved);
    match gather_inputs(&resolved, &deps).await {
        Ok(inputs) => compute_plan(&inputs),
        Err(problems) => Plan::invalid(problems),
    }
}

/// The node facts: from the snapshot when one is given, else from this machine.
fn node_facts(resolved: &ResolvedConfig, deps: &Deps) -> Result<Snapshot, Vec<String>> {
    if let Some(path) = &resolved.options.dry_run_snapshot {
        return load_snapshot(path).map_err(|e| vec![e.to_string()]);
    }
    let machine = deps
        .machine
        .machine_info()
        .map_err(|e| vec![format!("failed to read machine info: {e}")])?;
    Ok(Snapshot {
        version: SNAPSHOT_VERSION,
        hostname: deps.host.hostname().unwrap_or_default(),
        machine,
        cgroup_version: detect_version(Path::new(CGROUP_MOUNT)),
        node_stats: Default::default(),
        pods: Vec::new(),
        images: Default::default(),
        recorded_at_unix_nanos: None,
    })
}

/// Everything [`compute_plan`] needs; `Err` with the problems when the node facts
/// cannot be had (an unreadable snapshot, an empty node name).
pub async fn gather_inputs(
    resolved: &ResolvedConfig,
    deps: &Deps,
) -> Result<PlanInputs, Vec<String>> {
    let facts = node_facts(resolved, deps)?;
    let (node_name, _) = resolve_node_name(
        resolved.options.hostname_override.as_deref(),
        &facts.hostname,
    )
    .map_err(|e| vec![e.to_string()])?;
    let c = &resolved.config;
    let seen = rfc3339_nanos(deps.clock.now_unix_nanos());
    let mut warnings = Vec::new();
    let mut desired = Vec::new();
    let mut sources_complete = true;
    if !c.static_pod_path.is_empty() {
        let (pods, errors) =
            read_manifests_once(Path::new(&c.static_pod_path), &node_name, &seen).await;
        desired.extend(pods);
        warnings.extend(
            errors
                .iter()
                .map(|e| format!("skipping bad static pod manifest: {e}")),
        );
    }
    if !c.static_pod_url.is_empty() {
        let read = match HttpSource::new(
            &c.static_pod_url,
            c.static_pod_url_header.clone(),
            &node_name,
            Duration::from_secs(20),
            Arc::clone(&deps.clock),
        ) {
            Ok(source) => source.read_once().await,
            Err(e) => Err(e),
        };
        match read {
            Ok((pods, errors)) => {
                desired.extend(pods);
                if !errors.is_empty() {
                    sources_complete = false;
                }
                warnings.extend(errors.iter().map(|e| format!("manifest URL: {e}")));
            }
            Err(e) => {
                sources_complete = false;
                warnings.push(format!("cannot read pods from the manifest URL: {e}"));
            }
        }
    }
    let (observed, images, now_unix_nanos) = if resolved.options.dry_run_snapshot.is_some() {
        let images = facts
            .images
            .iter()
            .map(|(image, &present)| (image.clone(), presence(present)))
            .collect();
        let now = facts
            .recorded_at_unix_nanos
            .unwrap_or_else(|| deps.clock.now_unix_nanos());
        (facts.pods.clone(), images, now)
    } else {
        let now = deps.clock.now_unix_nanos();
        let (observed, runtime) = observe_live(resolved, deps, &mut warnings).await;
        let images = match runtime {
            Some(runtime) => {
                image_presence(&runtime, &images_wanted(&desired, &observed, now)).await
            }
            None => Default::default(),
        };
        (observed, images, now)
    };
    Ok(PlanInputs {
        resolved: resolved.clone(),
        hostname: facts.hostname,
        machine: facts.machine,
        cgroup_version: facts.cgroup_version,
        node_stats: facts.node_stats,
        desired,
        sources_complete,
        warnings,
        observed,
        images,
        now_unix_nanos,
    })
}

fn presence(present: bool) -> ImagePresence {
    if present {
        ImagePresence::Present
    } else {
        ImagePresence::Absent
    }
}

/// The image service endpoint: `--image-service-endpoint`, else the runtime's.
fn image_endpoint(resolved: &ResolvedConfig) -> &str {
    let c = &resolved.config;
    if c.image_service_endpoint.is_empty() {
        &c.container_runtime_endpoint
    } else {
        &c.image_service_endpoint
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
    let endpoint = &resolved.config.container_runtime_endpoint;
    let unreachable = |reason: String| {
        format!("the container runtime at {endpoint} did not answer ({reason}); planned as if it held nothing")
    };
    let inner = match (deps.runtime_for)(endpoint) {
        Ok(inner) => inner,
        Err(e) => {
            warnings.push(unreachable(e.to_string()));
            return (Vec::new(), None);
        }
    };
    let mut runtime = ReadOnlyRuntime::new(inner);
    match (deps.images_for)(image_endpoint(resolved)) {
        Ok(images) => runtime = runtime.with_images(images),
        Err(e) => warnings.push(format!(
            "the image service at {} did not answer ({e}); image presence is not known",
            image_endpoint(resolved)
        )),
    }
    let observed = async {
        use crate::ports::runtime::RuntimeService;
        runtime.version().await?;
        observe_pods(&runtime, &[]).await
    }
    .await;
    match observed {
        Ok(pods) => (pods, Some(runtime)),
        Err(e) => {
            warnings.push(unreachable(e.to_string()));
            (Vec::new(), None)
        }
    }
}

/// `rkubelet-snapshot`: this node's state now (machine, hostname, cgroup version, the
/// runtime's pods through read-only calls, whether the images the desired pods name are
/// present, the time), for `--dry-run-snapshot`.
pub async fn record_snapshot(given: GivenFlags) -> Result<Snapshot, Vec<String>> {
    let resolved = load_configuration(given).map_err(problems)?;
    let deps = compose::production_deps(&resolved);
    let mut facts = node_facts(&resolved, &deps)?;
    facts.recorded_at_unix_nanos = Some(deps.clock.now_unix_nanos());
    let endpoint = &resolved.config.container_runtime_endpoint;
    let inner = (deps.runtime_for)(endpoint)
        .map_err(|e| vec![format!("the container runtime at {endpoint}: {e}")])?;
    let images = (deps.images_for)(image_endpoint(&resolved)).map_err(|e| {
        vec![format!(
            "the image service at {}: {e}",
            image_endpoint(&resolved)
        )]
    })?;
    let runtime = ReadOnlyRuntime::new(inner).with_images(images);
    facts.pods = observe_pods(&runtime, &[])
        .await
        .map_err(|e| vec![format!("the container runtime at {endpoint}: {e}")])?;
    // The desired pods as the planner reads them, only for the images they name.
    let desired = gather_inputs(&resolved, &deps).await?.desired;
    for (image, presence) in image_presence(&runtime, &pod_images(&desired)).await {
        match presence {
            ImagePresence::Present => facts.images.insert(image, true),
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
