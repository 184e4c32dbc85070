//! Thresholds against observations (upstream's eviction helpers): which are met, with
//! or without their minimum reclaim; when each was first met and whether its grace
//! period has passed; the node conditions they raise and how long those stay; which
//! resource to reclaim first.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::signals::{MemoryStats, Observations};
use super::{Signal, Threshold, ThresholdValue};
use crate::domain::node_status::status::{
    CONDITION_DISK_PRESSURE, CONDITION_MEMORY_PRESSURE, CONDITION_PID_PRESSURE,
};
use crate::domain::units::quantity::{Format, Quantity};

/// A node condition a met threshold raises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum PressureCondition {
    MemoryPressure,
    DiskPressure,
    #[serde(rename = "PIDPressure")]
    PidPressure,
}

impl PressureCondition {
    pub const ALL: [PressureCondition; 3] = [
        PressureCondition::MemoryPressure,
        PressureCondition::DiskPressure,
        PressureCondition::PidPressure,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PressureCondition::MemoryPressure => CONDITION_MEMORY_PRESSURE,
            PressureCondition::DiskPressure => CONDITION_DISK_PRESSURE,
            PressureCondition::PidPressure => CONDITION_PID_PRESSURE,
        }
    }
}

impl fmt::Display for PressureCondition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The resource a signal measures, as upstream names it in messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Resource {
    #[serde(rename = "memory")]
    Memory,
    #[serde(rename = "ephemeral-storage")]
    EphemeralStorage,
    #[serde(rename = "inodes")]
    Inodes,
    #[serde(rename = "pids")]
    Pids,
}

impl Resource {
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Memory => "memory",
            Resource::EphemeralStorage => "ephemeral-storage",
            Resource::Inodes => "inodes",
            Resource::Pids => "pids",
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Signal {
    /// The resource the signal measures (upstream `signalToResource`).
    pub fn resource(self) -> Resource {
        match self {
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => Resource::Memory,
            Signal::NodeFsAvailable | Signal::ImageFsAvailable | Signal::ContainerFsAvailable => {
                Resource::EphemeralStorage
            }
            Signal::NodeFsInodesFree
            | Signal::ImageFsInodesFree
            | Signal::ContainerFsInodesFree => Resource::Inodes,
            Signal::PidAvailable => Resource::Pids,
        }
    }

    /// The node condition a met threshold on the signal raises (upstream
    /// `signalToNodeCondition`).
    pub fn node_condition(self) -> PressureCondition {
        match self.resource() {
            Resource::Memory => PressureCondition::MemoryPressure,
            Resource::EphemeralStorage | Resource::Inodes => PressureCondition::DiskPressure,
            Resource::Pids => PressureCondition::PidPressure,
        }
    }

    fn is_memory(self) -> bool {
        matches!(
            self,
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable
        )
    }
}

impl ThresholdValue {
    /// The threshold as an amount of a resource with `capacity` (upstream
    /// `GetThresholdQuantity`): the quantity itself, or the capacity's whole units times
    /// the float32 fraction, widened to float64 and truncated, in bytes.
    pub fn quantity(&self, capacity: &Quantity) -> Quantity {
        match self {
            ThresholdValue::Quantity(q) => *q,
            ThresholdValue::Percentage(p) => {
                // `as` saturates; a fraction is at most 1.0, so it never exceeds capacity.
                let amount = (capacity.value() as f64 * f64::from(*p)) as i64;
                Quantity::new(amount, Format::BinarySI)
            }
        }
    }
}

impl Threshold {
    /// The same threshold for upstream's `hasThreshold`: signal, operator, grace period
    /// and value (a minimum reclaim does not tell two apart).
    pub fn same_as(&self, other: &Threshold) -> bool {
        self.signal == other.signal
            && self.operator == other.operator
            && self.grace_period == other.grace_period
            && self.value == other.value
    }
}

/// The thresholds `observations` meet, grace periods aside (upstream `thresholdsMet`).
/// With `enforce_min_reclaim` a threshold stays met until the minimum reclaim above it
/// is available too. A threshold whose signal was not observed is not met.
pub fn thresholds_met(
    thresholds: &[Threshold],
    observations: &Observations,
    enforce_min_reclaim: bool,
) -> Vec<Threshold> {
    thresholds
        .iter()
        .filter(|t| {
            let Some(observed) = observations.get(&t.signal) else {
                return false;
            };
            let mut quantity = t.value.quantity(&observed.capacity);
            if enforce_min_reclaim {
                if let Some(reclaim) = &t.min_reclaim {
                    let more = reclaim.quantity(&observed.capacity);
                    quantity = quantity.checked_add(&more).unwrap_or(quantity);
                }
            }
            quantity > observed.available
        })
        .cloned()
        .collect()
}

/// `a` with the thresholds of `b` it lacks (upstream `mergeThresholds`).
pub fn merge_thresholds(mut a: Vec<Threshold>, b: Vec<Threshold>) -> Vec<Threshold> {
    for t in b {
        if !a.iter().any(|x| x.same_as(&t)) {
            a.push(t);
        }
    }
    a
}

/// The thresholds whose observation is newer than the last one (upstream
/// `thresholdsUpdatedStats`): acting twice on the same stats would evict twice for one
/// shortage. An observation without a time counts as new.
pub fn thresholds_updated_stats(
    thresholds: &[Threshold],
    observations: &Observations,
    last: &Observations,
) -> Vec<Threshold> {
    thresholds
        .iter()
        .filter(|t| {
            let Some(observed) = observations.get(&t.signal) else {
                return false;
            };
            match last.get(&t.signal) {
                None => true,
                Some(_) if observed.time_unix_nanos == 0 => true,
                Some(before) => observed.time_unix_nanos > before.time_unix_nanos,
            }
        })
        .cloned()
        .collect()
}

/// When each threshold met now was first met: as before, or `now` (upstream
/// `thresholdsFirstObservedAt`).
pub type ThresholdsObservedAt = Vec<(Threshold, i64)>;

pub fn thresholds_first_observed_at(
    thresholds: &[Threshold],
    last: &ThresholdsObservedAt,
    now: i64,
) -> ThresholdsObservedAt {
    thresholds
        .iter()
        .map(|t| {
            let at = last
                .iter()
                .find(|(seen, _)| seen == t)
                .map_or(now, |(_, at)| *at);
            (t.clone(), at)
        })
        .collect()
}

/// The thresholds met for at least their grace period (upstream
/// `thresholdsMetGracePeriod`); hard ones at once.
pub fn thresholds_met_grace_period(observed_at: &ThresholdsObservedAt, now: i64) -> Vec<Threshold> {
    observed_at
        .iter()
        .filter(|(t, at)| now.saturating_sub(*at) >= t.grace_period.as_nanos())
        .map(|(t, _)| t.clone())
        .collect()
}

/// The node conditions the thresholds raise, each once (upstream `nodeConditions`).
pub fn node_conditions(thresholds: &[Threshold]) -> Vec<PressureCondition> {
    let mut out = Vec::new();
    for t in thresholds {
        let c = t.signal.node_condition();
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// When each condition was last observed: `now` for those observed now, the old time for
/// the others (upstream `nodeConditionsLastObservedAt`).
pub fn node_conditions_last_observed_at(
    conditions: &[PressureCondition],
    last: &BTreeMap<PressureCondition, i64>,
    now: i64,
) -> BTreeMap<PressureCondition, i64> {
    let mut out = last.clone();
    for c in conditions {
        out.insert(*c, now);
    }
    out
}

/// The conditions observed within the last `period` (upstream
/// `nodeConditionsObservedSince`): a condition clears only after the pressure
/// transition period without it, so it does not flap.
pub fn node_conditions_observed_since(
    observed_at: &BTreeMap<PressureCondition, i64>,
    period_nanos: i64,
    now: i64,
) -> Vec<PressureCondition> {
    observed_at
        .iter()
        .filter(|(_, at)| now.saturating_sub(**at) < period_nanos)
        .map(|(c, _)| *c)
        .collect()
}

/// Memory first, then the others in their order (upstream `byEvictionPriority`).
pub fn sort_by_eviction_priority(thresholds: &mut [Threshold]) {
    thresholds.sort_by_key(|t| !t.signal.is_memory());
}

/// The first threshold with a resource to reclaim, and that resource (upstream
/// `getReclaimableThreshold`).
pub fn reclaimable_threshold(thresholds: &[Threshold]) -> Option<(Threshold, Resource)> {
    thresholds.first().map(|t| (t.clone(), t.signal.resource()))
}

/// The threshold quantity and what is available of the first threshold on `resource`
/// with an observation (upstream `getThresholdMetInfo`).
pub fn threshold_met_info(
    resource: Resource,
    thresholds: &[Threshold],
    observations: &Observations,
) -> Option<(Quantity, Quantity)> {
    thresholds
        .iter()
        .filter(|t| t.signal.resource() == resource)
        .find_map(|t| {
            let observed = observations.get(&t.signal)?;
            Some((t.value.quantity(&observed.capacity), observed.available))
        })
}

/// The usage at which a cgroup's working set reaches a memory threshold: capacity −
/// threshold + inactive file (upstream's memory threshold notifier), where the capacity
/// is available + working set. `None` without an observation of the cgroup.
pub fn memcg_usage_threshold(threshold: &Threshold, memory: &MemoryStats) -> Option<u64> {
    let available = memory.available_bytes?;
    let capacity = available.saturating_add(memory.working_set_bytes);
    let inactive_file = memory.usage_bytes.saturating_sub(memory.working_set_bytes);
    let capacity_q = Quantity::new(
        i64::try_from(capacity).unwrap_or(i64::MAX),
        Format::BinarySI,
    );
    let reserve = u64::try_from(threshold.value.quantity(&capacity_q).value()).unwrap_or(0);
    Some(
        capacity
            .saturating_sub(reserve)
            .saturating_add(inactive_file),
    )
}

/// How often the kernel memory thresholds are set again from fresh stats (upstream's
/// `notifierRefreshInterval`).
pub const NOTIFIER_REFRESH_NANOS: i64 = 10_000_000_000;
/// After a crossing, the least time since the last setting before they are set again.
pub const NOTIFIER_REARM_AFTER_CROSSING_NANOS: i64 = 1_000_000_000;

/// Whether the kernel memory thresholds are set again now: when never set, every
/// [`NOTIFIER_REFRESH_NANOS`], and after a crossing (`crossed`) once
/// [`NOTIFIER_REARM_AFTER_CROSSING_NANOS`] have passed. A crossing fires once: the
/// threshold counts the inactive file of its setting, so when the cycle it woke finds the
/// working set still under the threshold (the inactive file grew meanwhile), only a
/// threshold set from that cycle's stats fires again as the usage goes on rising.
pub fn notifiers_due(set_at: Option<i64>, now: i64, crossed: bool) -> bool {
    let Some(at) = set_at else {
        return true;
    };
    let since = now.saturating_sub(at);
    since >= NOTIFIER_REFRESH_NANOS || (crossed && since >= NOTIFIER_REARM_AFTER_CROSSING_NANOS)
}

#[cfg(test)]
mod tests {
    use super::super::signals::SignalObservation;
    use super::super::Operator;
    use super::*;
    use crate::domain::units::duration::GoDuration;

    pub(crate) fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn threshold(signal: Signal, value: ThresholdValue, grace_secs: i64) -> Threshold {
        Threshold {
            signal,
            operator: Operator::LessThan,
            value,
            grace_period: GoDuration::from_secs(grace_secs),
            min_reclaim: None,
        }
    }

    fn observed(available: &str, capacity: Option<&str>) -> SignalObservation {
        SignalObservation {
            available: q(available),
            capacity: capacity.map_or(Quantity::new(0, Format::BinarySI), q),
            time_unix_nanos: 0,
        }
    }

    fn same_set(a: &[Threshold], b: &[Threshold]) -> bool {
        a.len() == b.len() && a.iter().all(|x| b.iter().any(|y| x.same_as(y)))
    }

    /// Ported from upstream TestThresholdsMet.
    #[test]
    fn thresholds_met_with_and_without_min_reclaim() {
        let mut hard = threshold(
            Signal::MemoryAvailable,
            ThresholdValue::Quantity(q("1Gi")),
            0,
        );
        hard.min_reclaim = Some(ThresholdValue::Quantity(q("500Mi")));
        let obs = |a: &str| Observations::from([(Signal::MemoryAvailable, observed(a, None))]);
        type Case = (
            &'static str,
            bool,
            Vec<Threshold>,
            Observations,
            Vec<Threshold>,
        );
        let cases: [Case; 5] = [
            ("empty", false, vec![], Observations::new(), vec![]),
            (
                "threshold-met-memory",
                false,
                vec![hard.clone()],
                obs("500Mi"),
                vec![hard.clone()],
            ),
            (
                "threshold-not-met",
                false,
                vec![hard.clone()],
                obs("2Gi"),
                vec![],
            ),
            (
                "threshold-met-with-min-reclaim",
                true,
                vec![hard.clone()],
                obs("1.05Gi"),
                vec![hard.clone()],
            ),
            (
                "threshold-not-met-with-min-reclaim",
                true,
                vec![hard.clone()],
                obs("2Gi"),
                vec![],
            ),
        ];
        for (name, enforce, thresholds, observations, want) in cases {
            let got = thresholds_met(&thresholds, &observations, enforce);
            assert!(same_set(&got, &want), "{name}: {got:?}");
        }
    }

    /// Ported from upstream TestPercentageThresholdsMet.
    #[test]
    fn percentage_thresholds_met() {
        let mut memory = threshold(Signal::MemoryAvailable, ThresholdValue::Percentage(0.2), 0);
        memory.min_reclaim = Some(ThresholdValue::Percentage(0.05));
        let disk = threshold(Signal::NodeFsAvailable, ThresholdValue::Percentage(0.3), 0);
        let both = vec![memory.clone(), disk.clone()];
        let obs = |mem: &str, fs: Option<&str>| {
            let mut o =
                Observations::from([(Signal::MemoryAvailable, observed(mem, Some("1000Mi")))]);
            if let Some(fs) = fs {
                o.insert(Signal::NodeFsAvailable, observed(fs, Some("1000Gi")));
            }
            o
        };
        let cases = [
            ("BothMet", false, obs("100Mi", Some("100Gi")), both.clone()),
            ("NoneMet", false, obs("300Mi", Some("400Gi")), vec![]),
            (
                "DiskMet",
                false,
                obs("300Mi", Some("100Gi")),
                vec![disk.clone()],
            ),
            (
                "MemoryMet",
                false,
                obs("100Mi", Some("400Gi")),
                vec![memory.clone()],
            ),
            (
                "MemoryMetWithMinReclaim",
                true,
                obs("225Mi", None),
                vec![memory.clone()],
            ),
            (
                "MemoryNotMetWithMinReclaim",
                true,
                obs("300Mi", None),
                vec![],
            ),
        ];
        for (name, enforce, observations, want) in cases {
            let got = thresholds_met(&both, &observations, enforce);
            assert!(same_set(&got, &want), "{name}: {got:?}");
        }
    }

    /// Ported from upstream TestThresholdsUpdatedStats.
    #[test]
    fn only_thresholds_with_fresh_stats_act() {
        let t = threshold(Signal::MemoryAvailable, ThresholdValue::Percentage(0.1), 0);
        let at = |time: i64| {
            Observations::from([(
                Signal::MemoryAvailable,
                SignalObservation {
                    time_unix_nanos: time,
                    ..observed("1", None)
                },
            )])
        };
        let minute = 60_000_000_000;
        let cases = [
            ("empty", vec![], Observations::new(), Observations::new(), 0),
            ("no-time", vec![t.clone()], at(0), Observations::new(), 1),
            (
                "no-last-observation",
                vec![t.clone()],
                at(1),
                Observations::new(),
                1,
            ),
            ("time-machine", vec![t.clone()], at(1), at(1 + minute), 0),
            ("same-observation", vec![t.clone()], at(1), at(1), 0),
            ("new-observation", vec![t.clone()], at(1 + minute), at(1), 1),
        ];
        for (name, thresholds, now, last, want) in cases {
            let got = thresholds_updated_stats(&thresholds, &now, &last);
            assert_eq!(got.len(), want, "{name}");
        }
    }

    /// Ported from upstream TestThresholdsFirstObservedAt and TestThresholdsMetGracePeriod.
    #[test]
    fn first_observed_and_grace_periods() {
        let hard = threshold(
            Signal::MemoryAvailable,
            ThresholdValue::Quantity(q("1Gi")),
            0,
        );
        let soft = threshold(
            Signal::MemoryAvailable,
            ThresholdValue::Quantity(q("2Gi")),
            60,
        );
        let now = 1_000_000_000_000;
        let minute = 60_000_000_000;
        assert!(thresholds_first_observed_at(&[], &vec![], now).is_empty());
        assert_eq!(
            thresholds_first_observed_at(std::slice::from_ref(&hard), &vec![], now),
            vec![(hard.clone(), now)]
        );
        assert_eq!(
            thresholds_first_observed_at(
                std::slice::from_ref(&hard),
                &vec![(hard.clone(), now - minute)],
                now
            ),
            vec![(hard.clone(), now - minute)]
        );
        assert!(thresholds_met_grace_period(&vec![], now).is_empty());
        assert_eq!(
            thresholds_met_grace_period(&vec![(hard.clone(), now)], now),
            vec![hard.clone()]
        );
        assert!(thresholds_met_grace_period(&vec![(soft.clone(), now)], now).is_empty());
        assert_eq!(
            thresholds_met_grace_period(&vec![(soft.clone(), now - 2 * minute)], now),
            vec![soft]
        );
    }

    /// Ported from upstream TestNodeConditions, TestNodeConditionsLastObservedAt,
    /// TestNodeConditionsObservedSince.
    #[test]
    fn conditions_and_their_transition_period() {
        use PressureCondition::*;
        assert!(node_conditions(&[]).is_empty());
        let memory = threshold(Signal::MemoryAvailable, ThresholdValue::Percentage(0.1), 0);
        let alloc = threshold(
            Signal::AllocatableMemoryAvailable,
            ThresholdValue::Percentage(0.1),
            0,
        );
        let inodes = threshold(
            Signal::ImageFsInodesFree,
            ThresholdValue::Percentage(0.1),
            0,
        );
        assert_eq!(
            node_conditions(std::slice::from_ref(&memory)),
            vec![MemoryPressure]
        );
        assert_eq!(
            node_conditions(&[memory, alloc, inodes]),
            vec![MemoryPressure, DiskPressure]
        );
        let now = 10_000_000_000_000;
        let old = now - 60_000_000_000;
        let cases = [
            (
                vec![MemoryPressure],
                BTreeMap::new(),
                BTreeMap::from([(MemoryPressure, now)]),
            ),
            (
                vec![MemoryPressure],
                BTreeMap::from([(MemoryPressure, old)]),
                BTreeMap::from([(MemoryPressure, now)]),
            ),
            (
                vec![],
                BTreeMap::from([(MemoryPressure, old)]),
                BTreeMap::from([(MemoryPressure, old)]),
            ),
        ];
        for (conditions, last, want) in cases {
            assert_eq!(
                node_conditions_last_observed_at(&conditions, &last, now),
                want
            );
        }
        let observed = BTreeMap::from([(MemoryPressure, old)]);
        assert_eq!(
            node_conditions_observed_since(&observed, 120_000_000_000, now),
            vec![MemoryPressure]
        );
        assert!(node_conditions_observed_since(&observed, 30_000_000_000, now).is_empty());
    }

    /// Ported from upstream TestSortByEvictionPriority and TestGetReclaimableThreshold.
    #[test]
    fn memory_is_reclaimed_first() {
        let t = |s| threshold(s, ThresholdValue::Percentage(0.1), 0);
        for memory in [Signal::MemoryAvailable, Signal::AllocatableMemoryAvailable] {
            let mut list = vec![
                t(Signal::NodeFsAvailable),
                t(Signal::PidAvailable),
                t(memory),
            ];
            sort_by_eviction_priority(&mut list);
            let signals: Vec<Signal> = list.iter().map(|t| t.signal).collect();
            assert_eq!(
                signals,
                [memory, Signal::NodeFsAvailable, Signal::PidAvailable]
            );
        }
        let mut empty: Vec<Threshold> = vec![];
        sort_by_eviction_priority(&mut empty);
        assert!(reclaimable_threshold(&empty).is_none());
        let mut list = vec![
            t(Signal::AllocatableMemoryAvailable),
            t(Signal::MemoryAvailable),
            t(Signal::ImageFsAvailable),
            t(Signal::NodeFsAvailable),
        ];
        sort_by_eviction_priority(&mut list);
        let found = reclaimable_threshold(&list);
        assert_eq!(found.map(|(_, r)| r), Some(Resource::Memory));
    }

    /// Ported from upstream TestCompareThresholdValue (as `same_as`).
    #[test]
    fn threshold_identity_is_signal_operator_grace_and_value() {
        let t = |v| threshold(Signal::MemoryAvailable, v, 0);
        let n = |b| ThresholdValue::Quantity(Quantity::new(b, Format::BinarySI));
        let cases = [
            (n(123), n(123), true),
            (n(123), n(456), false),
            (n(123), ThresholdValue::Percentage(0.1), false),
            (
                ThresholdValue::Percentage(0.1),
                ThresholdValue::Percentage(0.1),
                true,
            ),
            (
                ThresholdValue::Percentage(0.2),
                ThresholdValue::Percentage(0.1),
                false,
            ),
        ];
        for (i, (a, b, equal)) in cases.into_iter().enumerate() {
            assert_eq!(t(a).same_as(&t(b)), equal, "case {i}");
            assert_eq!(t(b).same_as(&t(a)), equal, "case {i}");
        }
        let mut with_reclaim = t(n(1));
        with_reclaim.min_reclaim = Some(n(5));
        assert!(with_reclaim.same_as(&t(n(1))));
        let merged = merge_thresholds(vec![t(n(1))], vec![with_reclaim, t(n(2))]);
        assert_eq!(merged.len(), 2);
    }

    #[test]
    fn the_kernel_is_told_the_usage_at_which_the_working_set_meets_the_threshold() {
        let t = threshold(
            Signal::MemoryAvailable,
            ThresholdValue::Quantity(q("1Gi")),
            0,
        );
        // 8Gi capacity (6Gi available + 2Gi working set), 1Gi of inactive cache.
        let memory = MemoryStats {
            usage_bytes: 3 << 30,
            working_set_bytes: 2 << 30,
            available_bytes: Some(6 << 30),
        };
        assert_eq!(
            memcg_usage_threshold(&t, &memory),
            Some((8 << 30) - (1 << 30) + (1 << 30))
        );
        let pct = threshold(Signal::MemoryAvailable, ThresholdValue::Percentage(0.5), 0);
        assert_eq!(
            memcg_usage_threshold(&pct, &memory),
            Some((4 << 30) + (1 << 30))
        );
        let unlimited = MemoryStats {
            available_bytes: None,
            ..memory
        };
        assert_eq!(memcg_usage_threshold(&t, &unlimited), None);
    }

    #[test]
    fn percentage_quantity_truncates_as_upstream() {
        let v = ThresholdValue::Percentage(0.105);
        // float32(0.105) widened: 0.10499999672174454 * 1000 bytes, truncated.
        assert_eq!(
            v.quantity(&Quantity::new(1000, Format::BinarySI)).value(),
            104
        );
        assert_eq!(
            ThresholdValue::Percentage(0.5)
                .quantity(&q("2Gi"))
                .to_string(),
            "1Gi"
        );
    }

    #[test]
    fn notifiers_are_set_again_every_refresh_and_soon_after_a_crossing() {
        let s = 1_000_000_000;
        assert!(notifiers_due(None, 0, false));
        assert!(!notifiers_due(Some(0), 9 * s, false));
        assert!(notifiers_due(Some(0), 10 * s, false));
        // A crossing sets them again from the stats it woke a cycle for...
        assert!(notifiers_due(Some(0), 5 * s, true));
        // ...but not more than once a second, however often the usage crosses.
        assert!(!notifiers_due(Some(0), s / 2, true));
    }
}
