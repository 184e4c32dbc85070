//! Ports for the servers a test or benchmark starts (shared by both through `#[path]`).
#![allow(dead_code)] // not every crate that includes it picks pairs

use std::net::TcpListener;

/// The ports handed out in this process.
static HANDED_OUT: std::sync::Mutex<std::collections::BTreeSet<u16>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// A port free now, never one this process was handed before: a server binds it only
/// later, the kernel may offer a released port again, and a taken port stops the server.
/// From `RKUBELET_TEST_PORTS=LOW-HIGH` when set (a range reserved for this user), else the
/// kernel's choice.
pub fn free_port() -> u16 {
    pick_ports(false)
}

/// A port free now with the next one free too (etcd's client and peer ports).
pub fn free_port_pair() -> u16 {
    pick_ports(true)
}

fn pick_ports(pair: bool) -> u16 {
    let free = |p: u16| TcpListener::bind(("127.0.0.1", p)).is_ok();
    let mut handed = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    let mut take = |port: u16| {
        let next = port.checked_add(1);
        let usable = !handed.contains(&port)
            && free(port)
            && (!pair || next.is_some_and(|n| !handed.contains(&n) && free(n)));
        if usable {
            handed.insert(port);
            if let (true, Some(n)) = (pair, next) {
                handed.insert(n);
            }
        }
        usable
    };
    // Under nextest each test is a process of its own, so the set above cannot keep two
    // running tests apart: each slot (unique among the tests running at once) takes its
    // own window below the kernel's ephemeral range, which no other test's and no
    // outgoing connection's port falls in.
    let slot_range = std::env::var("NEXTEST_TEST_GLOBAL_SLOT")
        .ok()
        .and_then(|s| s.parse::<u16>().ok())
        .filter(|slot| *slot < 12)
        .map(|slot| {
            let low = 20_000 + slot * 1_000;
            format!("{low}-{}", low + 999)
        });
    if let Some(range) = std::env::var("RKUBELET_TEST_PORTS").ok().or(slot_range) {
        let (low, high) = range
            .split_once('-')
            .and_then(|(l, h)| Some((l.parse::<u16>().ok()?, h.parse::<u16>().ok()?)))
            .unwrap_or_else(|| panic!("RKUBELET_TEST_PORTS={range}: expected LOW-HIGH"));
        let span = u32::from(high.saturating_sub(low)).max(1);
        // Start at a point that differs between test processes, so parallel runs rarely race.
        let seed = std::process::id().wrapping_mul(2_654_435_761)
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
        for i in 0..span {
            let port = low + u16::try_from(seed.wrapping_add(i) % span).unwrap_or(0);
            if (!pair || port < high) && take(port) {
                return port;
            }
        }
        panic!("no free port in RKUBELET_TEST_PORTS={range}");
    }
    for _ in 0..1000 {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        if take(port) {
            return port;
        }
    }
    panic!("no port the kernel offered was free and new to this process")
}
