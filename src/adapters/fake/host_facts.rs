//! Fixed host facts.

use std::net::{IpAddr, Ipv4Addr};

use crate::ports::host_facts::HostFacts;

#[derive(Debug, Clone)]
pub struct FakeHostFacts {
    pub kernel_version: String,
    pub os_image: String,
    pub default_route_ip: Option<IpAddr>,
}

impl Default for FakeHostFacts {
    fn default() -> Self {
        FakeHostFacts {
            kernel_version: "6.1.0-fake".into(),
            os_image: "Fake Linux".into(),
            default_route_ip: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 5))),
        }
    }
}

impl HostFacts for FakeHostFacts {
    fn kernel_version(&self) -> String {
        self.kernel_version.clone()
    }

    fn os_image(&self) -> String {
        self.os_image.clone()
    }

    fn default_route_ip(&self) -> Option<IpAddr> {
        self.default_route_ip
    }
}
