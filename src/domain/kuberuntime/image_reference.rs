//! Image references as upstream's kubelet reads them before it pulls (`applyDefaultImageTag`,
//! distribution's `ParseNormalizedNamed`): a name that is no reference keeps its container
//! waiting with `InvalidImageName`, without a pull or a back-off. The grammar and the error
//! words are distribution/reference v2.8's (vendored by Kubernetes v1.26).

use std::sync::LazyLock;

use regex::Regex;

/// Why an image name is not a reference, in distribution's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    #[error("invalid reference format")]
    InvalidFormat,
    #[error("invalid reference format: repository name must be lowercase")]
    ContainsUppercase,
    #[error("repository name must have at least one component")]
    NameEmpty,
    #[error("repository name must not be more than 255 characters")]
    NameTooLong,
    #[error("invalid repository name ({0}), cannot specify 64-byte hexadecimal strings")]
    Identifier(String),
    #[error("invalid checksum digest format")]
    DigestFormat,
    #[error("invalid checksum digest length")]
    DigestLength,
    #[error("unsupported digest algorithm")]
    DigestAlgorithm,
}

/// A reference split into its parts, with Docker Hub's defaults applied to the name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageReference {
    /// `docker.io/library/busybox`.
    pub name: String,
    pub tag: Option<String>,
    pub digest: Option<String>,
}

const NAME_TOTAL_LENGTH_MAX: usize = 255;

static REFERENCE: LazyLock<Regex> = LazyLock::new(|| {
    let alphanumeric = "[a-z0-9]+";
    let separator = "(?:[._]|__|[-]*)";
    let component = format!("{alphanumeric}(?:{separator}{alphanumeric})*");
    let domain_component = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])";
    let domain = format!("{domain_component}(?:\\.{domain_component})*(?::[0-9]+)?");
    let name = format!("(?:{domain}/)?{component}(?:/{component})*");
    // Go's `\w` is ASCII; the regex crate's is Unicode, whose 128-fold repetition
    // compiled to 15 MB.
    let tag = "[0-9A-Za-z_][0-9A-Za-z_.-]{0,127}";
    let digest = "[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][0-9a-fA-F]{32,}";
    Regex::new(&format!("^({name})(?::({tag}))?(?:@({digest}))?$"))
        .unwrap_or_else(|e| unreachable!("a constant pattern: {e}"))
});

static IDENTIFIER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new("^[a-f0-9]{64}$").unwrap_or_else(|e| unreachable!("a constant pattern: {e}"))
});

/// Distribution's `ParseNormalizedNamed`: Docker Hub's domain and `library/` for names
/// without them; the repository must be lowercase.
pub fn parse_normalized(image: &str) -> Result<ImageReference, ReferenceError> {
    if IDENTIFIER.is_match(image) {
        return Err(ReferenceError::Identifier(image.to_owned()));
    }
    let (domain, remainder) = split_docker_domain(image);
    let remote_name = remainder
        .split_once(':')
        .map_or(remainder.as_str(), |(n, _)| n);
    if remote_name.to_lowercase() != remote_name {
        return Err(ReferenceError::ContainsUppercase);
    }
    parse(&format!("{domain}/{remainder}"))
}

fn split_docker_domain(name: &str) -> (String, String) {
    let (mut domain, mut remainder) = match name.split_once('/') {
        Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => {
            (first.to_owned(), rest.to_owned())
        }
        _ => ("docker.io".to_owned(), name.to_owned()),
    };
    if domain == "index.docker.io" {
        domain = "docker.io".to_owned();
    }
    if domain == "docker.io" && !remainder.contains('/') {
        remainder = format!("library/{remainder}");
    }
    (domain, remainder)
}

/// Distribution's `Parse`.
fn parse(reference: &str) -> Result<ImageReference, ReferenceError> {
    let Some(parts) = REFERENCE.captures(reference) else {
        if reference.is_empty() {
            return Err(ReferenceError::NameEmpty);
        }
        if REFERENCE.is_match(&reference.to_lowercase()) {
            return Err(ReferenceError::ContainsUppercase);
        }
        return Err(ReferenceError::InvalidFormat);
    };
    let name = parts.get(1).map_or("", |m| m.as_str());
    if name.len() > NAME_TOTAL_LENGTH_MAX {
        return Err(ReferenceError::NameTooLong);
    }
    let digest = parts.get(3).map(|m| m.as_str().to_owned());
    if let Some(digest) = &digest {
        check_digest(digest)?;
    }
    Ok(ImageReference {
        name: name.to_owned(),
        tag: parts.get(2).map(|m| m.as_str().to_owned()),
        digest,
    })
}

/// go-digest's `Validate`: a known algorithm with a hex encoding of its length.
fn check_digest(digest: &str) -> Result<(), ReferenceError> {
    let (algorithm, encoded) = digest.split_once(':').ok_or(ReferenceError::DigestFormat)?;
    let length = match algorithm {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => return Err(ReferenceError::DigestAlgorithm),
    };
    if encoded.len() != length {
        return Err(ReferenceError::DigestLength);
    }
    if !encoded
        .bytes()
        .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return Err(ReferenceError::DigestFormat);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_parse_with_docker_hubs_defaults() {
        let parsed = |image: &str| parse_normalized(image).map(|r| (r.name, r.tag, r.digest));
        let digest = format!("sha256:{}", "a".repeat(64));
        assert_eq!(
            parsed("busybox"),
            Ok(("docker.io/library/busybox".into(), None, None))
        );
        assert_eq!(
            parsed("user/app:1.2"),
            Ok(("docker.io/user/app".into(), Some("1.2".into()), None))
        );
        assert_eq!(
            parsed("index.docker.io/busybox:1"),
            Ok(("docker.io/library/busybox".into(), Some("1".into()), None))
        );
        assert_eq!(
            parsed("localhost:5000/a/b-c__d.e:v_1"),
            Ok(("localhost:5000/a/b-c__d.e".into(), Some("v_1".into()), None))
        );
        assert_eq!(
            parsed(&format!("Registry.Example.com/app@{digest}")),
            Ok((
                "Registry.Example.com/app".into(),
                None,
                Some(digest.clone())
            ))
        );
        assert_eq!(
            parsed("registry.rkubelet.test/busybox:1.36"),
            Ok((
                "registry.rkubelet.test/busybox".into(),
                Some("1.36".into()),
                None
            ))
        );
    }

    #[test]
    fn bad_names_are_refused_in_distributions_words() {
        let error = |image: &str| parse_normalized(image).map(drop).map_err(|e| e.to_string());
        let refused = |m: &str| Err(m.to_owned());
        assert_eq!(
            error("Busybox:UPPER"),
            refused("invalid reference format: repository name must be lowercase")
        );
        assert_eq!(error("busybox:"), refused("invalid reference format"));
        assert_eq!(error("busy box"), refused("invalid reference format"));
        assert_eq!(error("busybox::1"), refused("invalid reference format"));
        // Go's `\w` is ASCII: a tag with a letter beyond it is no reference.
        assert_eq!(
            error("busybox:v\u{e9}"),
            refused("invalid reference format")
        );
        assert_eq!(error("-busybox"), refused("invalid reference format"));
        assert_eq!(error(""), refused("invalid reference format"));
        assert_eq!(
            error(&"a".repeat(64)),
            refused(&format!(
                "invalid repository name ({}), cannot specify 64-byte hexadecimal strings",
                "a".repeat(64)
            ))
        );
        assert_eq!(
            error(&format!("app:{}", "t".repeat(129))),
            refused("invalid reference format")
        );
        assert_eq!(
            error(&format!("r.io/{}", "a".repeat(255))),
            refused("repository name must not be more than 255 characters")
        );
        assert_eq!(
            error(&format!("app@md5:{}", "a".repeat(32))),
            refused("unsupported digest algorithm")
        );
        assert_eq!(
            error(&format!("app@sha256:{}", "a".repeat(63))),
            refused("invalid checksum digest length")
        );
    }
}
