//! The container hash upstream writes in the `io.kubernetes.container.hash`
//! annotation and compares to decide that a container's spec changed
//! (pkg/kubelet/container/helpers.go `HashContainer`):
//!
//! - v1.26 (and every version up to v1.30): FNV-32a over go-spew's `%#v`
//!   of the bytes of `json.Marshal(container)`, that is over the text
//!   `([]uint8)[123 34 110 ...]`: every byte of the JSON in decimal;
//! - v1.31 and later (kubernetes/kubernetes#124220): the same over
//!   `json.Marshal(map[string]string{"name": ..., "image": ...})`, so only
//!   the name and the image count.
//!
//! Both are written as lower-case hex without padding (`2100d43`).

use super::decode::{decode, DecodeError};
use super::defaults::container_defaults;
use super::gojson::{marshal, write_string, GoJson};
use super::goval::{GoVal, Node};
use super::schema::T_V1_CONTAINER;
use super::IdentityError;
use crate::domain::pod::Container;

/// FNV-1a, 32 bits (Go's `hash/fnv.New32a`).
pub fn fnv32a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |hash, b| {
        (hash ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// `DeepHashObject(fnv32a, json)`: the hash of the JSON's spew form
/// ([`super::spew::spew_bytes`]), fed to the hash as it is spelled rather than written out first
/// (the planner hashes thousands of containers).
pub fn hash_of_json(json: &str) -> u32 {
    const PRIME: u32 = 0x0100_0193;
    let mut hash: u32 = 0x811c_9dc5;
    let mut feed = |b: u8| hash = (hash ^ u32::from(b)).wrapping_mul(PRIME);
    b"([]uint8)[".iter().for_each(|b| feed(*b));
    for (i, byte) in json.bytes().enumerate() {
        if i > 0 {
            feed(b' ');
        }
        if byte >= 100 {
            feed(b'0' + byte / 100);
        }
        if byte >= 10 {
            feed(b'0' + byte / 10 % 10);
        }
        feed(b'0' + byte % 10);
    }
    feed(b']');
    hash
}

/// v1.26's hash of a decoded, defaulted v1 Container value.
pub fn v1_26_hash(container: &GoVal) -> u32 {
    hash_of_json(&marshal(&T_V1_CONTAINER, container))
}

/// v1.26's hash of a container given as v1 JSON (as the API machinery
/// decodes it, unknown fields dropped), after the container defaults a
/// static pod gets. Pod-level defaults (requests from limits, host ports
/// under host networking) must already be in the JSON.
pub fn v1_26_hash_of_json(container: &GoJson) -> Result<u32, IdentityError> {
    let mut value = decode(&T_V1_CONTAINER, container).map_err(|e| match e {
        DecodeError::Unreproducible { .. } => IdentityError::Unreproducible(e.to_string()),
        other => IdentityError::Refused(other.to_string()),
    })?;
    container_defaults(Node::new(&T_V1_CONTAINER, &mut value));
    Ok(v1_26_hash(&value))
}

/// v1.26's hash of a container known only by rkubelet's model (not read
/// from a manifest): its modelled fields in the v1 JSON shape, defaulted.
/// For a container whose fields are all modelled this is exactly
/// upstream's; should the model ever not decode as a v1 Container, the
/// name and the image still give a stable hash.
pub fn v1_26_hash_of_typed(container: &Container) -> u32 {
    serde_json::to_value(container)
        .ok()
        .and_then(|value| v1_26_hash_of_json(&GoJson::from_serde(&value)).ok())
        .unwrap_or_else(|| name_and_image_hash(&container.name, &container.image))
}

/// v1.31's hash: name and image only.
pub fn name_and_image_hash(name: &str, image: &str) -> u32 {
    // json.Marshal sorts the map's keys: image before name.
    let mut json = String::from("{\"image\":");
    write_string(&mut json, image);
    json.push_str(",\"name\":");
    write_string(&mut json, name);
    json.push('}');
    hash_of_json(&json)
}

/// The hash rkubelet wrote before it adopted upstream's: FNV-1a 64 of the
/// name, a zero byte and the image.
pub fn legacy_rkubelet_hash(name: &str, image: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes().chain([0]).chain(image.bytes()) {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// True when `recorded` (a running container's hash annotation) was
/// written for this spec by any kubelet rkubelet takes over from: upstream
/// v1.26 to v1.30 (or rkubelet) hashing the whole spec, upstream v1.31 and
/// later hashing name and image, or an older rkubelet. Each judges
/// "changed" by the fields its writer hashed, as that writer would have.
pub fn recorded_hash_matches(v1_26: u32, name: &str, image: &str, recorded: u64) -> bool {
    recorded == u64::from(v1_26)
        || recorded == u64::from(name_and_image_hash(name, image))
        || recorded == legacy_rkubelet_hash(name, image)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_of_json_is_fnv_over_its_spew_form() {
        for json in ["", "{}", r#"{"name":"a","image":"b"}"#, "\u{7f}\u{0}~é"] {
            assert_eq!(
                hash_of_json(json),
                fnv32a(super::super::spew::spew_bytes(json.as_bytes()).as_bytes()),
                "{json:?}"
            );
        }
    }

    /// Upstream's own vector (pkg/kubelet/container/container_hash_test.go):
    /// the same container hashed by v1.15 to v1.30 and by v1.31.
    const SAMPLE: &str = r#"{
      "name": "test_container",
      "image": "foo/image:v1",
      "command": ["/bin/testcmd"],
      "args": ["/bin/sh", "-c", "echo abc"],
      "ports": [{"containerPort": 8001}],
      "env": [
        {"name": "ENV_FOO", "value": "bar"},
        {"name": "ENV_BAR", "valueFrom": {"secretKeyRef": {"name": "foo", "key": "bar", "optional": true}}}
      ],
      "resources": {"limits": {"foo": "1G"}, "requests": {"foo": "500M"}}
    }"#;

    #[test]
    fn upstream_sample_container_hashes() {
        let json = GoJson::parse(SAMPLE).expect("sample");
        // Upstream hashes the sample as decoded, without defaults.
        let value = decode(&T_V1_CONTAINER, &json).expect("decodes");
        assert_eq!(v1_26_hash(&value), 0x311670a);
        assert_eq!(
            name_and_image_hash("test_container", "foo/image:v1"),
            0x8e45cbd0
        );
    }

    #[test]
    fn marshal_follows_go_field_order_and_omitempty() {
        let json = GoJson::parse(SAMPLE).expect("sample");
        let value = decode(&T_V1_CONTAINER, &json).expect("decodes");
        assert_eq!(
            marshal(&T_V1_CONTAINER, &value),
            r#"{"name":"test_container","image":"foo/image:v1","command":["/bin/testcmd"],"args":["/bin/sh","-c","echo abc"],"ports":[{"containerPort":8001}],"env":[{"name":"ENV_FOO","value":"bar"},{"name":"ENV_BAR","valueFrom":{"secretKeyRef":{"name":"foo","key":"bar","optional":true}}}],"resources":{"limits":{"foo":"1G"},"requests":{"foo":"500M"}}}"#
        );
    }

    #[test]
    fn defaults_change_the_hash_input() {
        let json =
            GoJson::parse(r#"{"name":"c","image":"busybox:1","ports":[{"containerPort":80}]}"#)
                .expect("json");
        let mut value = decode(&T_V1_CONTAINER, &json).expect("decodes");
        container_defaults(Node::new(&T_V1_CONTAINER, &mut value));
        assert_eq!(
            marshal(&T_V1_CONTAINER, &value),
            r#"{"name":"c","image":"busybox:1","ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}"#
        );
        assert_eq!(v1_26_hash_of_json(&json), Ok(v1_26_hash(&value)));
    }

    #[test]
    fn a_sidecars_restart_policy_is_hashed_where_v1_28_puts_it() {
        let json = GoJson::parse(
            r#"{"name":"s","image":"i:1","restartPolicy":"Always","volumeMounts":[{"name":"v","mountPath":"/v"}]}"#,
        )
        .expect("json");
        let value = decode(&T_V1_CONTAINER, &json).expect("decodes");
        assert_eq!(
            marshal(&T_V1_CONTAINER, &value),
            r#"{"name":"s","image":"i:1","resources":{},"restartPolicy":"Always","volumeMounts":[{"name":"v","mountPath":"/v"}]}"#
        );
    }

    #[test]
    fn recorded_hashes_of_every_writer_match() {
        let (name, image) = ("web", "nginx:1.25");
        let v1_26 = 0x1234_5678;
        assert!(recorded_hash_matches(v1_26, name, image, 0x1234_5678));
        assert!(recorded_hash_matches(
            v1_26,
            name,
            image,
            u64::from(name_and_image_hash(name, image))
        ));
        assert!(recorded_hash_matches(
            v1_26,
            name,
            image,
            legacy_rkubelet_hash(name, image)
        ));
        assert!(!recorded_hash_matches(v1_26, name, image, 0x1234_5679));
        assert!(!recorded_hash_matches(
            v1_26,
            name,
            "nginx:1.26",
            u64::from(name_and_image_hash(name, image))
        ));
        // Pinned: FNV-1a 64 of the single byte 0.
        assert_eq!(legacy_rkubelet_hash("", ""), 0xaf63_bd4c_8601_b7df);
    }
}
