//! The node's Lease in `kube-node-lease` (upstream's node lease controller): what it holds,
//! how often it is renewed, and how failures back off.

use std::time::Duration;

use super::model::{Lease, MicroTime, ObjectMeta, OwnerReference};

pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// Upstream's `NodeLeaseRenewIntervalFraction`.
pub const RENEW_INTERVAL_FRACTION: f64 = 0.25;
/// Upstream's lease controller: the back-off after a failure starts at 200 ms (its 100 ms
/// doubled before the first wait) and doubles up to 7 s.
pub const BACKOFF_INITIAL: Duration = Duration::from_millis(200);
pub const BACKOFF_MAX: Duration = Duration::from_secs(7);

/// How often the lease is renewed: a quarter of its duration (10 s for the default 40 s).
pub fn renew_interval(lease_duration_seconds: i32) -> Duration {
    let seconds = f64::from(lease_duration_seconds.max(1)) * RENEW_INTERVAL_FRACTION;
    Duration::from_secs_f64(seconds)
}

/// The wait after `failures` consecutive failures (1 for the first).
pub fn backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    BACKOFF_INITIAL
        .saturating_mul(1 << doublings)
        .min(BACKOFF_MAX)
}

/// The owner reference a node lease carries, so the lease goes when its Node does.
pub fn node_owner(node_name: &str, node_uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: node_name.into(),
        uid: node_uid.into(),
    }
}

/// The lease to write at `now`: `base` (the lease as last read or written) renewed, or a
/// new one; holder and duration set, and the owner reference added once the Node's uid is
/// known (upstream's `newLease` with `setNodeOwnerFunc`).
pub fn renewed_lease(
    base: Option<&Lease>,
    node_name: &str,
    lease_duration_seconds: i32,
    node_uid: Option<&str>,
    now_unix_nanos: i64,
) -> Lease {
    let mut lease = base.cloned().unwrap_or_else(|| Lease {
        metadata: ObjectMeta {
            name: node_name.into(),
            namespace: NODE_LEASE_NAMESPACE.into(),
            ..ObjectMeta::default()
        },
        ..Lease::default()
    });
    lease.spec.holder_identity = Some(node_name.into());
    lease.spec.lease_duration_seconds = Some(lease_duration_seconds);
    lease.spec.renew_time = Some(MicroTime::from_unix_nanos(now_unix_nanos));
    if let Some(uid) = node_uid.filter(|u| !u.is_empty()) {
        if lease.metadata.owner_references.is_empty() {
            lease.metadata.owner_references = vec![node_owner(node_name, uid)];
        }
    }
    lease
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renewed_every_quarter_of_its_duration() {
        assert_eq!(renew_interval(40), Duration::from_secs(10));
        assert_eq!(renew_interval(10), Duration::from_millis(2500));
    }

    #[test]
    fn backoff_doubles_to_seven_seconds() {
        let waits: Vec<u128> = (1..=8).map(|f| backoff(f).as_millis()).collect();
        assert_eq!(waits, [200, 400, 800, 1600, 3200, 6400, 7000, 7000]);
        assert_eq!(backoff(u32::MAX), BACKOFF_MAX);
    }

    /// The lease a fresh node creates, as the API receives it.
    #[test]
    fn golden_new_lease_then_owner_added_on_renewal() {
        let lease = renewed_lease(None, "n1", 40, None, 1_795_232_011_123_456_789);
        assert_eq!(
            serde_json::to_value(&lease).expect("json"),
            json!({
                "metadata": {"name": "n1", "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40,
                         "renewTime": "2026-11-21T03:33:31.123456Z"}
            })
        );
        let mut stored = lease.clone();
        stored.metadata.resource_version = "7".into();
        let renewed = renewed_lease(
            Some(&stored),
            "n1",
            40,
            Some("uid-1"),
            1_795_232_021_000_000_000,
        );
        assert_eq!(renewed.metadata.resource_version, "7");
        assert_eq!(
            renewed.metadata.owner_references,
            [node_owner("n1", "uid-1")]
        );
        assert_eq!(
            renewed.spec.renew_time,
            Some(MicroTime(1_795_232_021_000_000))
        );
    }
}
