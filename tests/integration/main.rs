//! The integration tests, in one test binary: each links the whole library, so one
//! binary links it once instead of once per file. Each module is one former
//! `tests/<name>.rs`; its tests keep their names under the module's
//! (`cargo test --test integration pods_containerd::`).
//!
//! Tests that need a real peer (root, containerd, a cgroup v1 hierarchy, a systemd
//! manager, systemd-analyze) are `#[ignore = "needs ...: run by scripts/test.sh"]`:
//! a plain `cargo test` lists them as ignored, never as passed. `scripts/test.sh`
//! runs them with `--include-ignored`, and there a missing peer fails the test with
//! what is missing and how to get it (`common::containerd`, `common::systemd`, and
//! the checks of `cgroupfs_real` and `packaging`).

#[path = "../common/mod.rs"]
mod common;

mod api_pods;
mod apiserver_adapter;
mod cgroupfs_real;
mod cgroups_containerd;
mod cli;
mod cluster_node;
mod cpu_manager;
mod cri_containerd;
mod csi_drivers;
mod cve_regressions;
mod device_plugins;
mod docs_links;
mod escapes;
mod eviction_containerd;
mod faults;
mod flag_table;
mod fuzz;
#[path = "../../fuzz/targets.rs"]
mod fuzz_targets;
mod kubeadm_cluster;
mod kubelet_api;
mod kubelet_stats;
mod live_swap;
mod log_lines;
mod mirror_events;
mod mount_propagation;
mod packaging;
mod packaging_systemd;
mod persistent_volumes;
mod planner;
mod pod_contract;
mod pod_fields;
mod pods_containerd;
mod probes_containerd;
mod prometheus_scrape;
mod security_containerd;
mod soak;
mod systemd_real;
mod upstream_compare;
mod upstream_identity;
mod volumes;
mod volumes_in_pods;
