//! The container hash the kubelet records on each container and compares to decide
//! whether a running container still matches its spec: upstream v1.26's, so either
//! kubelet adopts the other's containers (see `domain::upstream`).

use super::*;
use crate::domain::upstream;

/// The hash rkubelet writes in the `io.kubernetes.container.hash`
/// annotation: upstream kubelet v1.26's (see `upstream::container_hash`),
/// so either kubelet adopts the other's containers. It covers the whole
/// spec when the container came from a manifest, else the modelled fields.
pub fn container_hash(container: &Container) -> u64 {
    u64::from(v1_26_hash(container))
}

fn v1_26_hash(container: &Container) -> u32 {
    container
        .upstream_hash
        .unwrap_or_else(|| upstream::container_hash::v1_26_hash_of_typed(container))
}

/// True when a running container whose hash annotation says `recorded`
/// was made from this spec, by rkubelet or by an upstream kubelet of any
/// version from v1.26 (each judged by the fields its writer hashed).
pub fn container_hash_matches(container: &Container, recorded: u64) -> bool {
    upstream::container_hash::recorded_hash_matches(
        v1_26_hash(container),
        &container.name,
        &container.image,
        recorded,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busybox_main() -> Container {
        Container {
            name: "main".into(),
            image: "docker.io/library/busybox:1.36".into(),
            command: vec!["sleep".into(), "3600".into()],
            ..Container::default()
        }
    }

    #[test]
    fn container_hash_is_upstream_v1_26s() {
        // Written by the upstream kubelet v1.26.1 for this container
        // (fixtures/upstream-identity, 01-minimal.yaml).
        assert_eq!(container_hash(&busybox_main()), 0x48fb_2b9d);
        // The hash the manifest decoder kept wins over the modelled fields.
        let decoded = Container {
            upstream_hash: Some(0x0210_0d43),
            ..busybox_main()
        };
        assert_eq!(container_hash(&decoded), 0x0210_0d43);
    }

    #[test]
    fn container_hash_changes_with_any_hashed_field() {
        let base = container_hash(&busybox_main());
        type Change = (&'static str, fn(&mut Container));
        let changes: Vec<Change> = vec![
            ("command", |c| c.command.push("x".into())),
            ("args", |c| c.args.push("x".into())),
            ("env", |c| {
                c.env.push(EnvVar {
                    name: "X".into(),
                    value: "1".into(),
                    ..EnvVar::default()
                })
            }),
            ("image", |c| {
                c.image = "docker.io/library/busybox:1.37".into()
            }),
            ("working dir", |c| c.working_dir = "/tmp".into()),
            ("tty", |c| c.tty = true),
            ("pull policy", |c| {
                c.image_pull_policy = Some(PullPolicy::Never)
            }),
            ("restart policy", |c| {
                c.restart_policy = Some(RestartPolicy::Always)
            }),
            ("limits", |c| {
                c.resources
                    .limits
                    .insert("cpu".into(), Quantity::parse("1").expect("q"));
            }),
        ];
        for (what, change) in changes {
            let mut c = busybox_main();
            change(&mut c);
            assert_ne!(container_hash(&c), base, "{what} must change the hash");
        }
    }

    #[test]
    fn recorded_hashes_of_upstream_versions_are_accepted() {
        let c = busybox_main();
        assert!(container_hash_matches(&c, container_hash(&c)));
        // v1.31+ hashes only the name and the image.
        let v1_31 = upstream::container_hash::name_and_image_hash(&c.name, &c.image);
        assert!(container_hash_matches(&c, u64::from(v1_31)));
        let mut other_image = c.clone();
        other_image.image = "docker.io/library/busybox:1.37".into();
        assert!(!container_hash_matches(&other_image, u64::from(v1_31)));
        assert!(!container_hash_matches(&other_image, container_hash(&c)));
        // An older rkubelet's 64-bit hash of name and image.
        let legacy = upstream::container_hash::legacy_rkubelet_hash(&c.name, &c.image);
        assert!(container_hash_matches(&c, legacy));
        assert!(!container_hash_matches(&c, 0));
    }
}
