//! The image pull policy v1.26's defaulting gives a container that names
//! none (`SetDefaults_Container`): `Always` when the image reference
//! parses (docker/distribution's `ParseNormalizedNamed`) with the tag
//! `latest` or with neither tag nor digest, else `IfNotPresent`, including
//! when the reference does not parse at all.

/// `Always` or `IfNotPresent`, as upstream defaults it for `image`.
pub fn default_pull_policy(image: &str) -> &'static str {
    match normalized_tag(image) {
        Some(tag) if tag == "latest" => "Always",
        _ => "IfNotPresent",
    }
}

/// The tag `ParseImageName` returns: the reference's tag, `latest` when
/// it has neither tag nor digest, empty with only a digest; `None` when
/// the reference does not parse.
fn normalized_tag(image: &str) -> Option<String> {
    if image.len() == 64 && image.bytes().all(is_lower_hex) {
        return None;
    }
    let (domain, remainder) = split_docker_domain(image);
    let remote_name = remainder.split(':').next().unwrap_or("");
    if remote_name.to_lowercase() != remote_name {
        return None;
    }
    let full = format!("{domain}/{remainder}");
    let (name_and_tag, digest) = match full.split_once('@') {
        Some((left, digest)) => (left, Some(digest)),
        None => (full.as_str(), None),
    };
    let (name, tag) = match name_and_tag.rfind(':') {
        Some(colon) if !name_and_tag[colon..].contains('/') => {
            (&name_and_tag[..colon], Some(&name_and_tag[colon + 1..]))
        }
        _ => (name_and_tag, None),
    };
    if name.len() > 255 || !valid_name(name) {
        return None;
    }
    if let Some(tag) = tag {
        if !valid_tag(tag) {
            return None;
        }
    }
    if let Some(digest) = digest {
        if !valid_digest(digest) {
            return None;
        }
    }
    Some(match (tag, digest) {
        (Some(tag), _) => tag.to_string(),
        (None, Some(_)) => String::new(),
        (None, None) => "latest".to_string(),
    })
}

fn is_lower_hex(b: u8) -> bool {
    b.is_ascii_digit() || (b'a'..=b'f').contains(&b)
}

/// docker/distribution's `splitDockerDomain`.
fn split_docker_domain(name: &str) -> (String, String) {
    let (mut domain, mut remainder) = match name.split_once('/') {
        Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => {
            (first.to_string(), rest.to_string())
        }
        _ => ("docker.io".to_string(), name.to_string()),
    };
    if domain == "index.docker.io" {
        domain = "docker.io".to_string();
    }
    if domain == "docker.io" && !remainder.contains('/') {
        remainder = format!("library/{remainder}");
    }
    (domain, remainder)
}

/// `(domain '/')? component ('/' component)*`.
fn valid_name(name: &str) -> bool {
    let parts: Vec<&str> = name.split('/').collect();
    let all_components =
        |parts: &[&str]| !parts.is_empty() && parts.iter().all(|p| valid_component(p));
    all_components(&parts)
        || (parts.len() > 1 && valid_domain(parts[0]) && all_components(&parts[1..]))
}

/// `[a-z0-9]+ ((?:[._]|__|[-]*) [a-z0-9]+)*`.
fn valid_component(component: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = component.as_bytes();
    let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    if !alnum(first) || !alnum(last) {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let separator = &component[start..i];
        let ok = matches!(separator, "." | "_" | "__") || separator.bytes().all(|b| b == b'-');
        if !ok {
            return false;
        }
    }
    true
}

/// `label ('.' label)* (':' [0-9]+)?`, labels alphanumeric with inner dashes.
fn valid_domain(domain: &str) -> bool {
    let (host, port) = match domain.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (domain, None),
    };
    if let Some(port) = port {
        if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
    }
    host.split('.').all(|label| {
        let bytes = label.as_bytes();
        match (bytes.first(), bytes.last()) {
            (Some(f), Some(l)) => {
                f.is_ascii_alphanumeric()
                    && l.is_ascii_alphanumeric()
                    && bytes
                        .iter()
                        .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
            }
            _ => false,
        }
    })
}

/// `[\w][\w.-]{0,127}`.
fn valid_tag(tag: &str) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = tag.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 128
        && word(bytes[0])
        && bytes.iter().all(|b| word(*b) || *b == b'.' || *b == b'-')
}

/// A digest go-digest accepts: a known algorithm and its exact length of
/// lower-case hex.
fn valid_digest(digest: &str) -> bool {
    let Some((algorithm, hex)) = digest.split_once(':') else {
        return false;
    };
    let length = match algorithm {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => return false,
    };
    hex.len() == length && hex.bytes().all(is_lower_hex)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policy_defaults() {
        let digest = "sha256:".to_string() + &"a".repeat(64);
        let cases = [
            ("busybox", "Always"),
            ("busybox:latest", "Always"),
            ("busybox:1.36", "IfNotPresent"),
            ("registry.k8s.io/pause:3.6", "IfNotPresent"),
            ("localhost:5000/app", "Always"),
            ("localhost:5000", "IfNotPresent"),
            ("Busybox", "IfNotPresent"),
            ("my_repo/a__b/c-d:v1", "IfNotPresent"),
            ("a..b:1", "IfNotPresent"),
            ("", "IfNotPresent"),
        ];
        for (image, want) in cases {
            assert_eq!(default_pull_policy(image), want, "{image:?}");
        }
        assert_eq!(
            default_pull_policy(&format!("busybox@{digest}")),
            "IfNotPresent"
        );
        assert_eq!(
            default_pull_policy(&format!("busybox:latest@{digest}")),
            "Always"
        );
        assert_eq!(default_pull_policy(&"a".repeat(64)), "IfNotPresent");
        assert_eq!(default_pull_policy("busybox@sha256:abc"), "IfNotPresent");
    }
}
