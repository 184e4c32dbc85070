//! Where the pods' and containers' CPU and memory come from: their cgroups, as
//! cAdvisor reads them (the default), or the runtime's own `ListPodSandboxStats` and
//! `ListContainerStats`, as upstream's `PodAndContainerStatsFromCRI` gate asks.

use super::{CgroupStats, RuntimeContainerStats};

/// Upstream's gate that takes the pods' and containers' usage from the runtime.
pub const STATS_FROM_CRI_GATE: &str = "PodAndContainerStatsFromCRI";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UsageSource {
    /// The cgroup files; the runtime is listed at housekeeping for the writable layers.
    #[default]
    Cgroups,
    /// The runtime, asked at every sample. The cgroups are still read for cAdvisor's
    /// finer series (`/metrics/cadvisor`), which upstream keeps on cAdvisor under the
    /// gate too.
    Runtime,
}

impl UsageSource {
    pub fn from_gate(stats_from_cri: bool) -> Self {
        if stats_from_cri {
            UsageSource::Runtime
        } else {
            UsageSource::Cgroups
        }
    }

    /// Whether a sample may take its containers from their cgroups with the layers last
    /// listed, rather than list the runtime.
    pub fn containers_from_cgroups(self, has_pod_cgroups: bool) -> bool {
        self == UsageSource::Cgroups && has_pod_cgroups
    }
}

/// A pod sandbox's CPU, memory and processes as the runtime reports them (CRI
/// `LinuxPodSandboxStats`); each `None` where the runtime does not say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeUsage {
    pub cpu_usage_nanos: Option<u64>,
    pub memory_working_set_bytes: Option<u64>,
    pub memory_usage_bytes: Option<u64>,
    /// The limit less the working set; the runtime gives 0 without a limit.
    pub memory_available_bytes: Option<u64>,
    pub rss_bytes: Option<u64>,
    pub page_faults: Option<u64>,
    pub major_page_faults: Option<u64>,
    pub process_count: Option<u64>,
}

impl RuntimeUsage {
    /// The runtime's reading laid over the pod's cgroup reading (or an empty one): CPU,
    /// memory and tasks from the runtime where it gives them, cAdvisor's finer counters
    /// from the cgroup. The working set is kept as the runtime counts it: the usage less
    /// what it left out.
    pub fn over(&self, cgroup: Option<&CgroupStats>) -> CgroupStats {
        let mut stats = cgroup.cloned().unwrap_or_default();
        if let Some(cpu) = self.cpu_usage_nanos {
            stats.cpu_usage_nanos = Some(cpu);
        }
        let usage = self.memory_usage_bytes.or(self.memory_working_set_bytes);
        if let Some(usage) = usage {
            stats.memory_usage_bytes = usage;
            stats.inactive_file_bytes =
                usage.saturating_sub(self.memory_working_set_bytes.unwrap_or(usage));
        }
        if let (Some(working_set), Some(available)) = (
            self.memory_working_set_bytes,
            self.memory_available_bytes.filter(|a| *a > 0),
        ) {
            stats.memory_limit_bytes = Some(working_set.saturating_add(available));
        }
        for (mine, theirs) in [
            (&mut stats.rss_bytes, self.rss_bytes),
            (&mut stats.page_faults, self.page_faults),
            (&mut stats.major_page_faults, self.major_page_faults),
            (&mut stats.tasks, self.process_count),
        ] {
            if theirs.is_some() {
                *mine = theirs;
            }
        }
        stats
    }
}

/// The reading a container of `name` is summarised from, among those `measured` (the
/// runtime's list and the cgroup readings): the instance running now (`running_id`; a
/// restarted container leaves dead ones), then, from cgroups, its own cgroup's reading,
/// which has the finer counters; from the runtime, the runtime's reading with the
/// cgroup's finer counters kept.
pub fn container_reading(
    source: UsageSource,
    name: &str,
    running_id: &str,
    measured: &[RuntimeContainerStats],
) -> Option<RuntimeContainerStats> {
    let candidates = || measured.iter().filter(|c| c.name == name);
    let by_cgroup = candidates().max_by_key(|c| {
        (
            c.id == running_id,
            c.memory_working_set_bytes.is_some(),
            c.detail.is_some(),
        )
    })?;
    if source == UsageSource::Cgroups {
        return Some(by_cgroup.clone());
    }
    let Some(runtime) = candidates()
        .filter(|c| c.id == by_cgroup.id && c.detail.is_none())
        .max_by_key(|c| c.memory_working_set_bytes.is_some())
    else {
        return Some(by_cgroup.clone());
    };
    Some(RuntimeContainerStats {
        detail: candidates()
            .filter(|c| c.id == by_cgroup.id)
            .find_map(|c| c.detail.clone()),
        writable_layer: runtime.writable_layer.or(by_cgroup.writable_layer),
        ..runtime.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::stats::CgroupDetail;

    fn reading(id: &str, working_set: u64, from_cgroup: bool) -> RuntimeContainerStats {
        RuntimeContainerStats {
            id: id.into(),
            name: "app".into(),
            pod_uid: "u".into(),
            memory_working_set_bytes: Some(working_set),
            cpu_usage_nanos: Some(working_set * 10),
            timestamp_unix_nanos: if from_cgroup { 5 } else { 7 },
            detail: from_cgroup.then(|| CgroupDetail {
                cpu_user_nanos: Some(1),
                ..CgroupDetail::default()
            }),
            ..RuntimeContainerStats::default()
        }
    }

    #[test]
    fn the_gate_chooses_the_source_and_the_runtime_is_listed_at_every_sample() {
        assert_eq!(UsageSource::from_gate(false), UsageSource::Cgroups);
        assert_eq!(UsageSource::from_gate(true), UsageSource::Runtime);
        assert!(UsageSource::Cgroups.containers_from_cgroups(true));
        assert!(!UsageSource::Cgroups.containers_from_cgroups(false));
        assert!(!UsageSource::Runtime.containers_from_cgroups(true));
    }

    #[test]
    fn from_cgroups_the_running_instances_own_cgroup_is_summarised() {
        let measured = [
            reading("old", 1, true),
            reading("new", 2, false),
            reading("new", 3, true),
        ];
        let chosen =
            container_reading(UsageSource::Cgroups, "app", "new", &measured).expect("a reading");
        assert_eq!(
            (chosen.id.as_str(), chosen.memory_working_set_bytes),
            ("new", Some(3))
        );
        assert!(container_reading(UsageSource::Cgroups, "other", "new", &measured).is_none());
    }

    #[test]
    fn from_the_runtime_its_usage_is_summarised_with_the_cgroups_finer_counters() {
        let measured = [
            reading("old", 1, false),
            reading("new", 2, false),
            reading("new", 3, true),
        ];
        let chosen =
            container_reading(UsageSource::Runtime, "app", "new", &measured).expect("a reading");
        assert_eq!(chosen.id, "new");
        assert_eq!(chosen.memory_working_set_bytes, Some(2));
        assert_eq!(chosen.cpu_usage_nanos, Some(20));
        assert_eq!(chosen.timestamp_unix_nanos, 7);
        assert_eq!(
            chosen.detail.and_then(|d| d.cpu_user_nanos),
            Some(1),
            "cAdvisor's finer counters stay"
        );
        // A container the runtime did not list (started since) keeps its cgroup reading.
        let only_cgroup = [reading("new", 3, true)];
        let chosen =
            container_reading(UsageSource::Runtime, "app", "new", &only_cgroup).expect("a reading");
        assert_eq!(chosen.memory_working_set_bytes, Some(3));
    }

    #[test]
    fn a_pods_runtime_usage_is_laid_over_its_cgroup_reading() {
        let cgroup = CgroupStats {
            memory_usage_bytes: 100,
            inactive_file_bytes: 10,
            memory_limit_bytes: Some(1000),
            tasks: Some(3),
            cpu_usage_nanos: Some(50),
            rss_bytes: Some(40),
            detail: CgroupDetail {
                cpu_user_nanos: Some(9),
                ..CgroupDetail::default()
            },
            ..CgroupStats::default()
        };
        let usage = RuntimeUsage {
            cpu_usage_nanos: Some(60),
            memory_working_set_bytes: Some(80),
            memory_usage_bytes: Some(120),
            memory_available_bytes: Some(0),
            process_count: Some(4),
            ..RuntimeUsage::default()
        };
        let laid = usage.over(Some(&cgroup));
        assert_eq!(laid.cpu_usage_nanos, Some(60));
        assert_eq!(
            (laid.memory_usage_bytes, laid.working_set_bytes()),
            (120, 80)
        );
        assert_eq!(
            laid.memory_limit_bytes,
            Some(1000),
            "no limit said: the cgroup's"
        );
        assert_eq!(laid.tasks, Some(4));
        assert_eq!(laid.rss_bytes, Some(40), "not said: the cgroup's");
        assert_eq!(laid.detail.cpu_user_nanos, Some(9));

        let limited = RuntimeUsage {
            memory_working_set_bytes: Some(80),
            memory_available_bytes: Some(20),
            ..RuntimeUsage::default()
        };
        let laid = limited.over(None);
        assert_eq!(
            (laid.memory_usage_bytes, laid.working_set_bytes()),
            (80, 80)
        );
        assert_eq!(laid.memory_limit_bytes, Some(100));
        assert_eq!(laid.cpu_usage_nanos, None);
    }
}
