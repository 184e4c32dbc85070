//! Facts about the host the node status reports, read when needed.

use std::net::IpAddr;

pub trait HostFacts: Send + Sync {
    /// The kernel release (`uname -r`); empty when unknown.
    fn kernel_version(&self) -> String;
    /// The OS's `PRETTY_NAME` from os-release; `"Linux"` when absent, as cAdvisor.
    fn os_image(&self) -> String;
    /// The source address of the host's default route (upstream's `ResolveBindAddress`
    /// fallback for the node's InternalIP), when there is one.
    fn default_route_ip(&self) -> Option<IpAddr>;
}
