//! The plan as text for an operator. The JSON form is the stable interface; this one
//! is for reading.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::Value;

use super::{EvictionDecisionPlan, Plan, ThresholdPlan};
use crate::domain::eviction::manager::NodeReclaim;

fn list(map: &BTreeMap<String, String>) -> String {
    if map.is_empty() {
        return "none".into();
    }
    map.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn thresholds(out: &mut String, kind: &str, list: &[ThresholdPlan]) {
    if list.is_empty() {
        let _ = writeln!(out, "  eviction {kind}: none");
        return;
    }
    let _ = writeln!(out, "  eviction {kind}:");
    for t in list {
        let _ = write!(out, "    {}<{}", t.signal, t.value);
        if t.grace_period != "0s" {
            let _ = write!(out, " grace {}", t.grace_period);
        }
        if let Some(min) = &t.minimum_reclaim {
            let _ = write!(out, " minimum reclaim {min}");
        }
        if let Some(observed) = &t.observed {
            let _ = write!(out, " (observed {observed})");
        }
        out.push('\n');
    }
}

/// What the eviction manager would do now, in words.
fn eviction_decision(out: &mut String, d: &EvictionDecisionPlan) {
    if d.thresholds_met.is_empty() && d.would_evict.is_empty() {
        let _ = writeln!(
            out,
            "  eviction now: no threshold met and no local storage limit exceeded; nothing would be evicted"
        );
        return;
    }
    if !d.thresholds_met.is_empty() {
        let _ = writeln!(
            out,
            "  eviction now: thresholds met: {}",
            d.thresholds_met.join(", ")
        );
    }
    if !d.reclaim_first.is_empty() {
        let names: Vec<&str> = d
            .reclaim_first
            .iter()
            .map(|r| match r {
                NodeReclaim::DeadContainers => "dead containers",
                NodeReclaim::UnusedImages => "unused images",
            })
            .collect();
        let _ = writeln!(
            out,
            "    first, remove {}; then, if still short:",
            names.join(", then ")
        );
    }
    for e in &d.would_evict {
        let _ = writeln!(out, "    would evict {}: {}", e.pod, e.message.trim_end());
    }
    if d.would_evict.is_empty() {
        let _ = writeln!(out, "    no pod may be evicted");
    }
    if d.ranked.len() > 1 {
        let _ = writeln!(out, "    eviction order: {}", d.ranked.join(", "));
    }
    for p in &d.protected {
        let _ = writeln!(out, "    left alone (critical): {p}");
    }
}

/// The text form of `plan`.
pub fn render_text(plan: &Plan) -> String {
    let mut out = String::new();
    let verdict = if !plan.valid {
        format!("INVALID configuration, {} problem(s)", plan.problems.len())
    } else if plan.action_count == 0 {
        "valid configuration, nothing to do".into()
    } else {
        format!("valid configuration, {} action(s)", plan.action_count)
    };
    let _ = writeln!(
        out,
        "rkubelet dry run: {verdict} (exit {})",
        plan.exit_code()
    );
    for problem in &plan.problems {
        let _ = writeln!(out, "  problem: {problem}");
    }
    for warning in &plan.warnings {
        let _ = writeln!(out, "  warning: {warning}");
    }
    for skipped in &plan.skipped_manifests {
        let _ = writeln!(out, "  skipped a bad static pod manifest: {skipped}");
    }
    if !plan.valid {
        return out;
    }

    for item in &plan.not_implemented {
        let _ = writeln!(
            out,
            "  not implemented (accepted, ignored): {}={}",
            item.name, item.value
        );
    }
    let _ = writeln!(out, "\nConfiguration (value <- source):");
    for entry in &plan.config {
        let _ = writeln!(
            out,
            "  {} = {} <- {}",
            entry.field, entry.value, entry.source
        );
    }

    if let Some(node) = &plan.node {
        let source = match node.name_source {
            crate::domain::node::NodeNameSource::HostnameOverride => "--hostname-override",
            crate::domain::node::NodeNameSource::Hostname => "the hostname",
        };
        let _ = writeln!(out, "\nNode {} (from {source})", node.name);
        let _ = writeln!(out, "  capacity: {}", list(&node.capacity));
        let _ = writeln!(
            out,
            "  online CPUs: {}; reserved CPUs: {}",
            node.online_cpus,
            node.reserved_cpus.as_deref().unwrap_or("none")
        );
        let _ = writeln!(
            out,
            "  system-reserved: given {} -> in force {}",
            list(&node.system_reserved.given),
            list(&node.system_reserved.effective)
        );
        let _ = writeln!(
            out,
            "  kube-reserved: given {} -> in force {}",
            list(&node.kube_reserved.given),
            list(&node.kube_reserved.effective)
        );
        for effect in &node.reserved_cpus_effect {
            let _ = writeln!(out, "  reserved CPUs: {effect}");
        }
        let _ = writeln!(out, "  allocatable: {}", list(&node.allocatable));
        thresholds(&mut out, "hard", &node.eviction.hard);
        thresholds(&mut out, "soft", &node.eviction.soft);
        let _ = writeln!(out, "  {}", node.eviction.note);
        if let Some(decision) = &node.eviction.decision {
            eviction_decision(&mut out, decision);
        }
        let _ = writeln!(out, "  {}", node.container_logs);
        if !node.stats.is_empty() {
            let _ = writeln!(out, "  node statistics: {}", list(&node.stats));
        }
    }

    if let Some(c) = &plan.cluster {
        let _ = writeln!(out, "\nAPI server {} (node {}):", c.server, c.node);
        if c.bootstrap_first {
            let _ = writeln!(
                out,
                "  request a client certificate first (TLS bootstrap with --bootstrap-kubeconfig)"
            );
        }
        let reason = c.reason.as_deref().unwrap_or("");
        let _ = writeln!(out, "  {}: {reason}", c.action);
        let json = |v: &Value| serde_json::to_string(v).unwrap_or_default();
        if let Some(node) = &c.node_object {
            let _ = writeln!(out, "  create Node {}", json(node));
        }
        if let Some(patch) = &c.metadata_patch {
            let _ = writeln!(out, "  patch Node metadata {}", json(patch));
        }
        if let Some(patch) = &c.status_patch {
            let _ = writeln!(out, "  patch Node status {}", json(patch));
        }
        if let Some(error) = &c.pods_error {
            let _ = writeln!(out, "  the node's pods could not be listed: {error}");
        }
        for p in &c.pods {
            let mut line = format!("  pod {}/{} ({}): {}", p.namespace, p.name, p.uid, p.action);
            if let Some(reason) = &p.reason {
                line.push_str(&format!(" {reason}"));
            }
            if let Some(message) = &p.message {
                line.push_str(&format!(": {message}"));
            }
            let _ = writeln!(out, "{line}");
        }
    }

    match &plan.cgroups {
        Some(cg) => {
            let _ = writeln!(
                out,
                "\nCgroups (driver {}, cgroup {}, created or updated at start):",
                cg.driver, cg.cgroup_version
            );
            for entry in &cg.entries {
                let _ = writeln!(out, "  {} [{}]", entry.name, entry.role);
                for v in &entry.values {
                    let _ = writeln!(out, "    {} = {}", v.key, v.value);
                }
            }
        }
        None => {
            let _ = writeln!(out, "\nCgroups: none (cgroupsPerQOS is off)");
        }
    }

    let _ = writeln!(out, "\nPods ({}):", plan.pods.len());
    for pod in &plan.pods {
        let _ = writeln!(
            out,
            "  {}/{} uid {} from {}, {}{}",
            pod.namespace,
            pod.name,
            pod.uid,
            pod.source,
            pod.qos_class,
            pod.cgroup
                .as_ref()
                .map(|c| format!(", cgroup {c}"))
                .unwrap_or_default()
        );
        for (container, cpus) in &pod.cpus {
            // The whole pod's refusal is kept under `*`.
            let _ = if container == "*" {
                writeln!(out, "    the CPU manager would refuse it: {cpus}")
            } else {
                writeln!(out, "    cpus of {container}: {cpus}")
            };
        }
        for (container, resources) in &pod.devices {
            let held: Vec<String> = resources
                .iter()
                .map(|(resource, d)| {
                    let ids = if d.ids.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", d.ids.join(", "))
                    };
                    format!("{resource}: {}{ids}", d.count)
                })
                .collect();
            let _ = writeln!(out, "    devices of {container}: {}", held.join(", "));
        }
        for volume in &pod.volumes {
            match (&volume.mount, &volume.waits) {
                (Some(mount), _) => {
                    let _ = writeln!(out, "    volume {}: {mount}", volume.name);
                }
                (None, Some(waits)) => {
                    let _ = writeln!(out, "    volume {} would wait: {waits}", volume.name);
                }
                (None, None) => {}
            }
        }
        let a = &pod.actions;
        if pod.action_count == 0 && a.held_containers.is_empty() && a.rejected.is_none() {
            let _ = writeln!(
                out,
                "    up to date (running: {})",
                if pod.running.is_empty() {
                    "nothing".into()
                } else {
                    pod.running.join(", ")
                }
            );
            continue;
        }
        if let Some(rejected) = &a.rejected {
            let _ = writeln!(
                out,
                "    rejected [{}]: {}",
                rejected.reason, rejected.message
            );
        }
        if let Some(reason) = &a.kill_pod {
            let _ = writeln!(out, "    kill pod [{}]: {}", reason.code, reason.message);
        }
        if let Some(sandbox) = &a.create_sandbox {
            let _ = writeln!(
                out,
                "    create sandbox (attempt {}): {}",
                sandbox.attempt, sandbox.reason
            );
        }
        for kill in &a.kill_containers {
            let _ = writeln!(
                out,
                "    kill container {} ({}) [{}]: {}",
                kill.name, kill.id, kill.reason.code, kill.reason.message
            );
        }
        for pull in &a.pull_images {
            let _ = writeln!(
                out,
                "    pull image {} (for {})",
                pull.image,
                pull.containers.join(", ")
            );
        }
        // Ephemeral containers start first (upstream's order); only regular ones say why.
        let starts = [
            ("ephemeral container", &a.start_ephemeral_containers, false),
            ("init container", &a.start_init_containers, false),
            ("container", &a.start_containers, true),
        ];
        for (kind, list, with_reason) in starts {
            for start in list {
                let reason = if with_reason {
                    format!(": {}", start.reason)
                } else {
                    String::new()
                };
                let _ = writeln!(
                    out,
                    "    start {kind} {} ({}){reason}",
                    start.name, start.image
                );
                let _ = writeln!(out, "      security: {}", security_line(&start.security));
                for sub in &start.sub_paths {
                    let _ = writeln!(
                        out,
                        "      bind subPath {:?} of volume {} at {}",
                        sub.path, sub.volume, sub.target
                    );
                }
            }
        }
        for held in &a.held_containers {
            let _ = writeln!(
                out,
                "    hold {}container {} ({}) [{}]: {}; next try in {}",
                match (held.init, held.ephemeral) {
                    (true, _) => "init ",
                    (_, true) => "ephemeral ",
                    _ => "",
                },
                held.name,
                held.image,
                held.reason,
                held.message,
                held.retry_after
            );
        }
    }
    if !plan.pods_to_remove.is_empty() {
        let _ = writeln!(out, "\nPods to remove ({}):", plan.pods_to_remove.len());
        for pod in &plan.pods_to_remove {
            let _ = writeln!(
                out,
                "  {}/{} uid {} [{}]: {}",
                pod.namespace, pod.name, pod.uid, pod.reason.code, pod.reason.message
            );
            let _ = writeln!(
                out,
                "    stop containers: {}; remove containers: {}; remove sandboxes: {}",
                pod.stop_containers.join(", "),
                pod.remove_containers.join(", "),
                pod.remove_sandboxes.join(", ")
            );
        }
    }
    out
}

/// One line of a container's security settings: who it runs as, then what differs
/// from an ordinary container.
fn security_line(s: &super::ContainerSecurityPlan) -> String {
    let mut parts = Vec::new();
    let user = match (s.run_as_user, &s.run_as_username) {
        (Some(uid), _) => format!("uid {uid}"),
        (None, Some(name)) => format!("user {name}"),
        (None, None) => "the image's user".to_owned(),
    };
    parts.push(match s.run_as_group {
        Some(gid) => format!("{user}, gid {gid}"),
        None => user,
    });
    if !s.supplemental_groups.is_empty() {
        let groups: Vec<String> = s.supplemental_groups.iter().map(i64::to_string).collect();
        parts.push(format!("groups {}", groups.join(",")));
    }
    if s.privileged {
        parts.push("privileged".to_owned());
    }
    if let Some(caps) = &s.capabilities {
        for (what, sign) in [("add", '+'), ("drop", '-')] {
            for cap in caps.get(what).into_iter().flatten() {
                parts.push(format!("{sign}{cap}"));
            }
        }
    }
    if s.read_only_root_filesystem {
        parts.push("read-only root".to_owned());
    }
    if s.no_new_privs {
        parts.push("no_new_privs".to_owned());
    }
    parts.push(format!("seccomp {}", s.seccomp));
    if let Some(apparmor) = &s.apparmor {
        parts.push(format!("apparmor {apparmor}"));
    }
    if let Some(selinux) = &s.selinux {
        parts.push(format!("selinux {selinux}"));
    }
    let ns: Vec<String> = s
        .namespaces
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    parts.push(format!("namespaces {}", ns.join(", ")));
    parts.push(format!(
        "{} masked and {} read-only paths",
        s.masked_paths.len(),
        s.readonly_paths.len()
    ));
    parts.join("; ")
}
