//! What the API server's defaulting fills in, done by the kubelet for static pods.

use super::*;
/// Fills in what the API server's defaulting would have: requests from
/// limits, pull policies, port protocols, host ports under host networking,
/// the DNS policy and termination message path, probe and hook defaults, and a negative grace period
/// raised to 1 second. Static pods never pass through an API server, so the
/// decoder calls this itself.
pub fn apply_api_defaults(pod: &mut Pod) {
    let spec = &mut pod.spec;
    if spec.dns_policy.is_empty() {
        spec.dns_policy = "ClusterFirst".to_string();
    }
    if let Some(grace) = spec.termination_grace_period_seconds {
        // Zero means "kill now" and is allowed; below that upstream clamps to
        // the shortest real grace period.
        if grace < 0 {
            spec.termination_grace_period_seconds = Some(1);
        }
    }
    let host_network = spec.host_network;
    for container in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut())
        .chain(
            spec.ephemeral_containers
                .iter_mut()
                .map(|e| &mut e.container),
        )
    {
        if container.image_pull_policy.is_none() {
            container.image_pull_policy = Some(container.pull_policy());
        }
        if container.termination_message_path.is_empty() {
            container.termination_message_path = DEFAULT_TERMINATION_MESSAGE_PATH.to_string();
        }
        for port in &mut container.ports {
            if port.protocol.is_empty() {
                port.protocol = "TCP".to_string();
            }
            if host_network && port.host_port == 0 {
                port.host_port = port.container_port;
            }
        }
        crate::domain::probe::spec::apply_container_defaults(container);
        let resources = &mut container.resources;
        for (name, limit) in &resources.limits {
            resources.requests.entry(name.clone()).or_insert(*limit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::pod::fixtures::{container, list};

    #[test]
    fn api_defaults() {
        let mut pod = Pod {
            spec: PodSpec {
                host_network: true,
                dns_policy: String::new(),
                termination_grace_period_seconds: Some(-5),
                containers: vec![Container {
                    name: "c".into(),
                    image: "busybox".into(),
                    ports: vec![ContainerPort {
                        container_port: 8080,
                        protocol: String::new(),
                        ..ContainerPort::default()
                    }],
                    termination_message_path: String::new(),
                    ..container("c", list("", ""), list("500m", "1Gi"))
                }],
                ..PodSpec::default()
            },
            ..Pod::default()
        };
        pod.spec.containers[0].image = "busybox".into();
        apply_api_defaults(&mut pod);
        let c = &pod.spec.containers[0];
        assert_eq!(c.resources.requests, list("500m", "1Gi"));
        assert_eq!(c.image_pull_policy, Some(PullPolicy::Always));
        assert_eq!(c.ports[0].host_port, 8080);
        assert_eq!(c.ports[0].protocol, "TCP");
        assert_eq!(c.termination_message_path, DEFAULT_TERMINATION_MESSAGE_PATH);
        assert_eq!(pod.spec.dns_policy, "ClusterFirst");
        // Upstream clamps a negative grace period to 1 while decoding.
        assert_eq!(pod.spec.termination_grace_period_seconds, Some(1));
    }
}
