//! Host facts for the node status: `uname`, os-release, the default route's address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, UdpSocket};
use std::path::Path;

use crate::ports::host_facts::HostFacts;

#[derive(Debug, Clone, Copy, Default)]
pub struct SystemHostFacts;

/// `PRETTY_NAME` of an os-release text, unquoted.
pub fn pretty_name(os_release: &str) -> Option<String> {
    os_release.lines().find_map(|line| {
        let value = line.trim().strip_prefix("PRETTY_NAME=")?;
        Some(value.trim_matches(['"', '\'']).to_string())
    })
}

/// The source address the kernel picks towards `to` (no packet is sent by a UDP connect).
fn route_source(to: IpAddr) -> Option<IpAddr> {
    let bind: IpAddr = match to {
        IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    };
    let socket = UdpSocket::bind((bind, 0)).ok()?;
    socket.connect((to, 53)).ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_unspecified() && !ip.is_loopback()).then_some(ip)
}

impl HostFacts for SystemHostFacts {
    fn kernel_version(&self) -> String {
        nix::sys::utsname::uname()
            .map(|u| u.release().to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    fn os_image(&self) -> String {
        ["/etc/os-release", "/usr/lib/os-release"]
            .iter()
            .find_map(|p| std::fs::read_to_string(Path::new(p)).ok())
            .and_then(|text| pretty_name(&text))
            .unwrap_or_else(|| "Linux".into())
    }

    fn default_route_ip(&self) -> Option<IpAddr> {
        // Any public address: only the routing decision matters.
        route_source(IpAddr::V4(Ipv4Addr::new(1, 1, 1, 1))).or_else(|| {
            route_source(IpAddr::V6(Ipv6Addr::new(
                0x2606, 0x4700, 0, 0, 0, 0, 0, 0x1111,
            )))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pretty_name_is_unquoted() {
        let text = "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n";
        assert_eq!(
            pretty_name(text).as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
        assert_eq!(pretty_name("NAME=x"), None);
    }

    #[test]
    fn kernel_version_is_the_release() {
        let release = SystemHostFacts.kernel_version();
        assert!(
            release.chars().next().is_some_and(|c| c.is_ascii_digit()),
            "{release}"
        );
    }
}
