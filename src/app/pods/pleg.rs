//! The pod lifecycle event generator's event half: container events the runtime
//! streams, forwarded as pod uids (the relist half is `runtime_state::relist`).

use std::sync::Arc;

use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use crate::ports::error::Chain;
use crate::ports::runtime::{RuntimeError, RuntimeService};

/// Forwards the pod uid of each container event the runtime streams, so a change is
/// synced at once rather than at the next relist. The relist stays either way: it is
/// the only source on runtimes without the call (containerd 1.6) and the safety net
/// for a lost event on the others.
pub(super) async fn forward_container_events(
    runtime: Arc<dyn RuntimeService>,
    uids: mpsc::Sender<String>,
) {
    let mut stream = match runtime.container_events().await {
        Ok(stream) => stream,
        Err(RuntimeError::Unimplemented(_)) => {
            info!("the runtime does not stream container events (GetContainerEvents); the PLEG relists every second");
            return;
        }
        Err(error) => {
            warn!(error = %Chain(&error), "cannot subscribe to container events; the PLEG relists every second");
            return;
        }
    };
    info!("subscribed to the runtime's container events");
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) if !event.pod_uid.is_empty() => {
                debug!(container = %event.container_id, kind = ?event.kind, uid = %event.pod_uid, "container event");
                if uids.send(event.pod_uid).await.is_err() {
                    return;
                }
            }
            Ok(_) => {}
            Err(error) => {
                warn!(error = %Chain(&error), "container event stream failed; the PLEG relists every second");
                return;
            }
        }
    }
}
