//! The node lease (upstream's node lease controller): renewed every quarter of
//! `nodeLeaseDurationSeconds` by update; a conflict reads it again; failures back off from
//! 200 ms doubling to 7 s, so the lease is renewed within seconds of the API server's
//! return.

use tokio::time::Instant;

use super::failures::FailureLog;
use super::Agent;
use crate::domain::node_status::lease::{
    backoff, renew_interval, renewed_lease, NODE_LEASE_NAMESPACE,
};
use crate::domain::node_status::model::Lease;
use crate::ports::api::LeasesError;

/// Read the lease, or create it when absent (upstream's `ensureLease`).
async fn ensure(agent: &Agent) -> Result<Lease, LeasesError> {
    let name = &agent.settings.registration.node_name;
    let api = agent.clients.borrow().leases.clone();
    match api.get_lease(NODE_LEASE_NAMESPACE, name).await {
        Ok(lease) => Ok(lease),
        Err(LeasesError::NotFound { .. }) => {
            let uid = agent.node_uid.borrow().clone();
            let lease = renewed_lease(
                None,
                name,
                agent.settings.lease_duration_seconds,
                uid.as_deref(),
                agent.clock.now_unix_nanos(),
            );
            api.create_lease(&lease).await
        }
        Err(e) => Err(e),
    }
}

/// One renewal; `cached` is the lease as last written (or `None`).
pub async fn renew(agent: &Agent, cached: &mut Option<Lease>) -> Result<(), LeasesError> {
    let name = &agent.settings.registration.node_name;
    let base = match cached.take() {
        Some(lease) => lease,
        None => ensure(agent).await?,
    };
    let uid = agent.node_uid.borrow().clone();
    let lease = renewed_lease(
        Some(&base),
        name,
        agent.settings.lease_duration_seconds,
        uid.as_deref(),
        agent.clock.now_unix_nanos(),
    );
    let api = agent.clients.borrow().leases.clone();
    match api.update_lease(&lease).await {
        Ok(stored) => {
            *cached = Some(stored);
            Ok(())
        }
        Err(LeasesError::Conflict { .. }) => {
            // Someone else wrote it: read it again and retry once now.
            let fresh = ensure(agent).await?;
            let retry = renewed_lease(
                Some(&fresh),
                name,
                agent.settings.lease_duration_seconds,
                uid.as_deref(),
                agent.clock.now_unix_nanos(),
            );
            *cached = Some(api.update_lease(&retry).await?);
            Ok(())
        }
        Err(LeasesError::NotFound { namespace, name }) => {
            Err(LeasesError::NotFound { namespace, name })
        }
        Err(e) => {
            // The API server was not reached or refused this once: the lease as read is
            // still the base, so the next try needs no read.
            *cached = Some(base);
            Err(e)
        }
    }
}

pub async fn run_lease_loop(agent: &Agent) {
    let interval = renew_interval(agent.settings.lease_duration_seconds);
    let mut failures = FailureLog::new("renewing the node lease");
    let mut cached: Option<Lease> = None;
    loop {
        let wait = match renew(agent, &mut cached).await {
            Ok(()) => {
                failures.succeeded();
                interval
            }
            Err(e) => {
                failures.failed(&e);
                backoff(failures.failures()).min(interval)
            }
        };
        tokio::time::sleep_until(Instant::now() + wait).await;
    }
}
