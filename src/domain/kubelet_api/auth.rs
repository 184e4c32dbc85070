//! Authentication results and authorization attributes of a kubelet API request, as
//! upstream's `nodeAuthorizerAttributesGetter` computes them.

use std::collections::BTreeMap;

/// An authenticated (or anonymous) user.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The user of requests without credentials when `authentication.anonymous.enabled`.
pub fn anonymous_user() -> UserInfo {
    UserInfo {
        name: "system:anonymous".into(),
        groups: vec!["system:unauthenticated".into()],
        ..UserInfo::default()
    }
}

/// The user of a verified client certificate: the subject's common name and its
/// organizations as groups (upstream's `CommonNameUserConversion`), plus
/// `system:authenticated`.
pub fn x509_user(common_name: &str, organizations: &[String]) -> Option<UserInfo> {
    if common_name.is_empty() {
        return None;
    }
    let mut user = UserInfo {
        name: common_name.into(),
        groups: organizations.to_vec(),
        ..UserInfo::default()
    };
    add_authenticated_group(&mut user);
    Some(user)
}

/// Upstream's `AuthenticatedGroupAdder`: every authenticated user is in
/// `system:authenticated`.
pub fn add_authenticated_group(user: &mut UserInfo) {
    if user.name != "system:anonymous" && !user.groups.iter().any(|g| g == "system:authenticated") {
        user.groups.push("system:authenticated".into());
    }
}

/// What authorization is asked about one request (`authorizer.AttributesRecord`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    pub user: UserInfo,
    pub verb: String,
    pub namespace: String,
    pub api_group: String,
    pub api_version: String,
    pub resource: String,
    pub subresource: String,
    /// The node's name.
    pub name: String,
    pub path: String,
}

/// The API verb of an HTTP method; methods upstream does not map get none.
pub fn verb_for_method(method: &str) -> &'static str {
    match method {
        "POST" => "create",
        "GET" => "get",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "",
    }
}

/// Whether `subpath` is `path` or below it (upstream's `isSubpath`).
fn is_subpath(subpath: &str, path: &str) -> bool {
    let path = path.strip_suffix('/').unwrap_or(path);
    subpath == path
        || (subpath.starts_with(path) && subpath.as_bytes().get(path.len()) == Some(&b'/'))
}

/// The `nodes` subresource a path is authorized as: `stats`, `metrics`, `log`, `spec`,
/// and `proxy` for everything else (logs, exec, pods...).
pub fn subresource_for_path(path: &str) -> &'static str {
    if is_subpath(path, "/stats/") {
        "stats"
    } else if is_subpath(path, "/metrics") {
        "metrics"
    } else if is_subpath(path, "/logs/") {
        "log"
    } else if is_subpath(path, "/spec/") {
        "spec"
    } else {
        "proxy"
    }
}

/// The attributes of `method path` by `user` on node `node_name`.
pub fn request_attributes(user: UserInfo, method: &str, path: &str, node_name: &str) -> Attributes {
    Attributes {
        user,
        verb: verb_for_method(method).into(),
        namespace: String::new(),
        api_group: String::new(),
        api_version: "v1".into(),
        resource: "nodes".into(),
        subresource: subresource_for_path(path).into(),
        name: node_name.into(),
        path: path.into(),
    }
}

/// Upstream's 403 body.
pub fn forbidden_message(attrs: &Attributes) -> String {
    format!(
        "Forbidden (user={}, verb={}, resource={}, subresource={})",
        attrs.user.name, attrs.verb, attrs.resource, attrs.subresource
    )
}

/// Upstream's 500 body when the authorizer could not decide.
pub fn authorization_error_message(attrs: &Attributes) -> String {
    format!(
        "Authorization error (user={}, verb={}, resource={}, subresource={})",
        attrs.user.name, attrs.verb, attrs.resource, attrs.subresource
    )
}

/// Upstream's 401 body.
pub const UNAUTHORIZED: &str = "Unauthorized";

/// An authorizer's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Denied or no opinion: both are 403.
    Deny,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_map_to_upstreams_verbs() {
        for (method, verb) in [
            ("GET", "get"),
            ("POST", "create"),
            ("PUT", "update"),
            ("PATCH", "patch"),
            ("DELETE", "delete"),
            ("OPTIONS", ""),
        ] {
            assert_eq!(verb_for_method(method), verb, "{method}");
        }
    }

    #[test]
    fn paths_map_to_upstreams_subresources() {
        for (path, sub) in [
            ("/stats/summary", "stats"),
            ("/stats", "stats"),
            ("/statsx", "proxy"),
            ("/metrics", "metrics"),
            ("/metrics/cadvisor", "metrics"),
            ("/metricsfoo", "proxy"),
            ("/logs/", "log"),
            ("/logs/syslog", "log"),
            ("/spec/", "spec"),
            ("/containerLogs/ns/pod/c", "proxy"),
            ("/exec/ns/pod/c", "proxy"),
            ("/pods", "proxy"),
            ("/healthz", "proxy"),
            ("/", "proxy"),
        ] {
            assert_eq!(subresource_for_path(path), sub, "{path}");
        }
    }

    #[test]
    fn forbidden_is_worded_as_upstream() {
        let user = x509_user("system:serviceaccount:default:x", &[]).unwrap_or_default();
        let attrs = request_attributes(user, "GET", "/containerLogs/a/b/c", "node-1");
        assert_eq!(
            forbidden_message(&attrs),
            "Forbidden (user=system:serviceaccount:default:x, verb=get, resource=nodes, subresource=proxy)"
        );
        assert_eq!(attrs.name, "node-1");
        assert_eq!(attrs.api_version, "v1");
    }

    #[test]
    fn x509_users_are_authenticated_and_anonymous_is_not() {
        let user = x509_user("kube-apiserver-kubelet-client", &["system:masters".into()])
            .unwrap_or_default();
        assert_eq!(user.groups, ["system:masters", "system:authenticated"]);
        assert!(x509_user("", &[]).is_none());
        assert_eq!(anonymous_user().groups, ["system:unauthenticated"]);
    }
}
