//! Node allocatable: capacity minus what is reserved for system daemons, for
//! kube daemons and for the hard eviction thresholds.
//!
//! The arithmetic mirrors the kubelet container manager
//! (GetNodeAllocatableReservation, hardEvictionReservation,
//! validateNodeAllocatable) so the allocatable a node reports matches upstream
//! to the byte, float32 percentage rounding included.

use crate::domain::eviction::{Operator, Signal, Threshold, ThresholdValue};
use crate::domain::node::reserved::ResourceList;
use crate::domain::units::quantity::{Format, Quantity};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocatableError {
    #[error("invalid Node Allocatable configuration. Resource {resource:?} has a reservation of {reservation} but capacity of {capacity}. Expected capacity >= reservation.")]
    ReservationExceedsCapacity {
        resource: String,
        reservation: Quantity,
        capacity: Quantity,
    },
    /// The sum does not fit in a quantity at all; certainly over capacity.
    #[error("invalid Node Allocatable configuration. Resource {resource:?} has a reservation that overflows, capacity is {capacity}. Expected capacity >= reservation.")]
    ReservationOverflow {
        resource: String,
        capacity: Quantity,
    },
}

/// What the hard eviction thresholds hold back: `memory.available` reserves
/// memory and `nodefs.available` reserves ephemeral-storage; a percentage is
/// of that resource's capacity. Only hard thresholds count (a soft one in the
/// slice is ignored), and a later threshold for the same signal wins, as
/// upstream.
pub fn hard_eviction_reservation(
    thresholds: &[Threshold],
    capacity: &ResourceList,
) -> ResourceList {
    let mut out = ResourceList::new();
    for t in thresholds {
        if t.operator != Operator::LessThan || !t.is_hard() {
            continue;
        }
        let resource = match t.signal {
            Signal::MemoryAvailable => "memory",
            Signal::NodeFsAvailable => "ephemeral-storage",
            _ => continue,
        };
        out.insert(
            resource.to_string(),
            threshold_quantity(&t.value, capacity.get(resource)),
        );
    }
    out
}

/// Upstream GetThresholdQuantity, against the resource's capacity (zero when unknown).
fn threshold_quantity(value: &ThresholdValue, capacity: Option<&Quantity>) -> Quantity {
    value.quantity(
        &capacity
            .copied()
            .unwrap_or_else(|| Quantity::new(0, Format::BinarySI)),
    )
}

/// Per resource of `capacity`: system + kube + hard eviction reservation,
/// leaving out resources with nothing reserved (upstream
/// GetNodeAllocatableReservation). `None` marks a sum that overflowed.
fn reservation_sums(
    capacity: &ResourceList,
    system_reserved: &ResourceList,
    kube_reserved: &ResourceList,
    hard_eviction: &[Threshold],
) -> Vec<(String, Option<Quantity>)> {
    let eviction = hard_eviction_reservation(hard_eviction, capacity);
    let mut out = Vec::new();
    for resource in capacity.keys() {
        let mut sum = Some(Quantity::new(0, Format::DecimalSI));
        for list in [system_reserved, kube_reserved, &eviction] {
            if let Some(q) = list.get(resource) {
                sum = sum.and_then(|s| s.checked_add(q));
            }
        }
        let nothing_reserved = matches!(sum, Some(s) if s.is_zero());
        if !nothing_reserved {
            out.push((resource.clone(), sum));
        }
    }
    out
}

/// The total held back from pods per resource (only capacity resources, only
/// non-zero reservations), as the scheduler-facing reservation upstream.
pub fn node_allocatable_reservation(
    capacity: &ResourceList,
    system_reserved: &ResourceList,
    kube_reserved: &ResourceList,
    hard_eviction: &[Threshold],
) -> ResourceList {
    reservation_sums(capacity, system_reserved, kube_reserved, hard_eviction)
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
}

/// Capacity minus the reservation, per capacity resource; a reservation
/// larger than capacity gives zero, never a negative allocatable.
pub fn node_allocatable(
    capacity: &ResourceList,
    system_reserved: &ResourceList,
    kube_reserved: &ResourceList,
    hard_eviction: &[Threshold],
) -> ResourceList {
    let reserved = reservation_sums(capacity, system_reserved, kube_reserved, hard_eviction);
    let mut out = ResourceList::new();
    for (resource, cap) in capacity {
        let reservation = reserved
            .iter()
            .find(|(k, _)| k == resource)
            .map(|(_, v)| *v);
        let left = match reservation {
            None => Some(*cap),
            Some(None) => None,
            Some(Some(r)) => cap.checked_sub(&r),
        };
        let zero = Quantity::new(0, cap.format());
        let value = match left {
            Some(v) if !v.is_negative() => v,
            _ => zero,
        };
        out.insert(resource.clone(), value);
    }
    out
}

/// Refuses a configuration that reserves more than the node has, one error
/// per resource (upstream validateNodeAllocatable, run at start-up).
pub fn validate_node_allocatable(
    capacity: &ResourceList,
    system_reserved: &ResourceList,
    kube_reserved: &ResourceList,
    hard_eviction: &[Threshold],
) -> Result<(), Vec<AllocatableError>> {
    let mut errors = Vec::new();
    for (resource, sum) in reservation_sums(capacity, system_reserved, kube_reserved, hard_eviction)
    {
        let Some(cap) = capacity.get(&resource).copied() else {
            continue;
        };
        match sum {
            None => errors.push(AllocatableError::ReservationOverflow {
                resource,
                capacity: cap,
            }),
            Some(reservation) => {
                let fits = matches!(cap.checked_sub(&reservation), Some(d) if !d.is_negative());
                if !fits {
                    errors.push(AllocatableError::ReservationExceedsCapacity {
                        resource,
                        reservation,
                        capacity: cap,
                    });
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;
    use crate::domain::units::duration::GoDuration;

    /// Upstream getResourceList: cpu and memory, "" leaves one out.
    fn cpu_mem(cpu: &str, memory: &str) -> ResourceList {
        let mut out = ResourceList::new();
        if !cpu.is_empty() {
            out.insert("cpu".to_string(), Quantity::parse(cpu).unwrap());
        }
        if !memory.is_empty() {
            out.insert("memory".to_string(), Quantity::parse(memory).unwrap());
        }
        out
    }

    fn storage(s: &str) -> ResourceList {
        let mut out = ResourceList::new();
        if !s.is_empty() {
            out.insert("ephemeral-storage".to_string(), Quantity::parse(s).unwrap());
        }
        out
    }

    fn hard(signal: Signal, value: ThresholdValue) -> Vec<Threshold> {
        vec![Threshold {
            signal,
            operator: Operator::LessThan,
            value,
            grace_period: GoDuration::from_secs(0),
            min_reclaim: None,
        }]
    }

    fn q(s: &str) -> ThresholdValue {
        ThresholdValue::Quantity(Quantity::parse(s).unwrap())
    }

    /// Upstream's zero ThresholdValue: no quantity, 0%.
    fn unset() -> ThresholdValue {
        ThresholdValue::Percentage(0.0)
    }

    fn assert_milli_eq(case: &str, want: &ResourceList, got: &ResourceList) {
        let w: Vec<(&String, i64)> = want.iter().map(|(k, v)| (k, v.milli_value())).collect();
        let g: Vec<(&String, i64)> = got.iter().map(|(k, v)| (k, v.milli_value())).collect();
        assert_eq!(w, g, "{case}");
    }

    /// Ported from upstream TestNodeAllocatableReservationForScheduling; the
    /// allocatable is checked too (capacity minus reservation).
    #[test]
    fn reservation_for_scheduling_cpu_memory() {
        let cases: Vec<(
            ResourceList,
            ResourceList,
            ResourceList,
            ThresholdValue,
            ResourceList,
        )> = vec![
            (
                cpu_mem("100m", "100Mi"),
                cpu_mem("50m", "50Mi"),
                cpu_mem("10", "10Gi"),
                unset(),
                cpu_mem("150m", "150Mi"),
            ),
            (
                cpu_mem("100m", "100Mi"),
                cpu_mem("50m", "50Mi"),
                cpu_mem("10", "10Gi"),
                q("100Mi"),
                cpu_mem("150m", "250Mi"),
            ),
            (
                cpu_mem("100m", "100Mi"),
                cpu_mem("50m", "50Mi"),
                cpu_mem("10", "10Gi"),
                ThresholdValue::Percentage(0.05),
                cpu_mem("150m", "694157320"),
            ),
            (
                ResourceList::new(),
                ResourceList::new(),
                cpu_mem("10", "10Gi"),
                unset(),
                cpu_mem("", ""),
            ),
            (
                cpu_mem("", "100Mi"),
                cpu_mem("50m", "50Mi"),
                cpu_mem("10", "10Gi"),
                unset(),
                cpu_mem("50m", "150Mi"),
            ),
            (
                cpu_mem("50m", "100Mi"),
                cpu_mem("", "50Mi"),
                cpu_mem("10", "10Gi"),
                unset(),
                cpu_mem("50m", "150Mi"),
            ),
            (
                cpu_mem("", "100Mi"),
                cpu_mem("", "50Mi"),
                cpu_mem("10", ""),
                unset(),
                cpu_mem("", ""),
            ),
        ];
        for (i, (kube, system, capacity, threshold, want)) in cases.into_iter().enumerate() {
            let t = hard(Signal::MemoryAvailable, threshold);
            let got = node_allocatable_reservation(&capacity, &system, &kube, &t);
            assert_milli_eq(&format!("case {}", i + 1), &want, &got);

            let alloc = node_allocatable(&capacity, &system, &kube, &t);
            for (k, cap) in &capacity {
                let r = want.get(k).map(Quantity::milli_value).unwrap_or(0);
                assert_eq!(
                    alloc[k].milli_value(),
                    cap.milli_value() - r,
                    "case {} {k}",
                    i + 1
                );
            }
        }
    }

    #[test]
    fn reservation_for_scheduling_ephemeral_storage() {
        let cases = vec![
            (storage("100Mi"), storage("10Gi"), unset(), storage("100Mi")),
            (
                storage("100Mi"),
                storage("10Gi"),
                q("100Mi"),
                storage("200Mi"),
            ),
            (
                storage("150Mi"),
                storage("10Gi"),
                ThresholdValue::Percentage(0.05),
                storage("694157320"),
            ),
            (ResourceList::new(), storage("10Gi"), unset(), storage("")),
        ];
        for (i, (kube, capacity, threshold, want)) in cases.into_iter().enumerate() {
            let t = hard(Signal::NodeFsAvailable, threshold);
            let got = node_allocatable_reservation(&capacity, &ResourceList::new(), &kube, &t);
            assert_milli_eq(&format!("storage case {}", i + 1), &want, &got);
        }
    }

    /// Ported from upstream TestNodeAllocatableInputValidation.
    #[test]
    fn input_validation() {
        let ok = vec![
            (
                cpu_mem("100m", "100Mi"),
                cpu_mem("50m", "50Mi"),
                cpu_mem("10", "10Gi"),
                unset(),
            ),
            (
                cpu_mem("100m", "100Mi"),
                cpu_mem("50m", "50Mi"),
                cpu_mem("10", "10Gi"),
                q("100Mi"),
            ),
            (
                cpu_mem("100m", "100Mi"),
                cpu_mem("50m", "50Mi"),
                cpu_mem("10", "10Gi"),
                ThresholdValue::Percentage(0.05),
            ),
            (
                ResourceList::new(),
                ResourceList::new(),
                cpu_mem("10", "10Gi"),
                unset(),
            ),
            (
                cpu_mem("", "100Mi"),
                cpu_mem("50m", "50Mi"),
                cpu_mem("10", "10Gi"),
                unset(),
            ),
            (
                cpu_mem("50m", "100Mi"),
                cpu_mem("", "50Mi"),
                cpu_mem("10", "10Gi"),
                unset(),
            ),
            (
                cpu_mem("", "100Mi"),
                cpu_mem("", "50Mi"),
                cpu_mem("10", ""),
                unset(),
            ),
        ];
        for (i, (kube, system, capacity, threshold)) in ok.into_iter().enumerate() {
            let t = hard(Signal::MemoryAvailable, threshold);
            assert!(
                validate_node_allocatable(&capacity, &system, &kube, &t).is_ok(),
                "case {}",
                i + 1
            );
        }

        let capacity = cpu_mem("10", "11Gi");
        let t = hard(Signal::MemoryAvailable, q("2Gi"));
        let errs =
            validate_node_allocatable(&capacity, &cpu_mem("5", "10Gi"), &cpu_mem("5", "10Gi"), &t)
                .unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
        let AllocatableError::ReservationExceedsCapacity {
            resource,
            reservation,
            capacity: cap,
        } = &errs[0]
        else {
            panic!("{errs:?}");
        };
        assert_eq!(resource, "memory");
        assert_eq!(
            reservation.milli_value(),
            Quantity::parse("22Gi").unwrap().milli_value()
        );
        assert_eq!(cap.to_string(), "11Gi");
        assert_eq!(
            errs[0].to_string(),
            format!("invalid Node Allocatable configuration. Resource \"memory\" has a reservation of {reservation} but capacity of 11Gi. Expected capacity >= reservation.")
        );
        // Allocatable never goes negative.
        let alloc = node_allocatable(&capacity, &cpu_mem("5", "10Gi"), &cpu_mem("5", "10Gi"), &t);
        assert!(alloc["memory"].is_zero());
        assert!(alloc["cpu"].is_zero());

        assert!(validate_node_allocatable(
            &storage("500Mi"),
            &ResourceList::new(),
            &storage("100Mi"),
            &hard(Signal::NodeFsAvailable, unset()),
        )
        .is_ok());
        let errs = validate_node_allocatable(
            &storage("20Gi"),
            &ResourceList::new(),
            &storage("20Gi"),
            &hard(Signal::NodeFsAvailable, q("100Mi")),
        )
        .unwrap_err();
        assert_eq!(errs.len(), 1);
        assert!(errs[0]
            .to_string()
            .contains("Resource \"ephemeral-storage\""));
    }

    #[test]
    fn one_error_per_resource() {
        let errs = validate_node_allocatable(
            &cpu_mem("1", "1Gi"),
            &cpu_mem("2", "2Gi"),
            &ResourceList::new(),
            &[],
        )
        .unwrap_err();
        let resources: Vec<String> = errs
            .iter()
            .map(|e| match e {
                AllocatableError::ReservationExceedsCapacity { resource, .. }
                | AllocatableError::ReservationOverflow { resource, .. } => resource.clone(),
            })
            .collect();
        assert_eq!(resources, vec!["cpu".to_string(), "memory".to_string()]);
    }

    #[test]
    fn eviction_reservation_details() {
        let capacity = cpu_mem("4", "8Gi");
        // Soft thresholds and other signals hold nothing back.
        let mut soft = hard(Signal::MemoryAvailable, q("1Gi"));
        soft[0].grace_period = GoDuration::from_secs(30);
        assert!(hard_eviction_reservation(&soft, &capacity).is_empty());
        assert!(
            hard_eviction_reservation(&hard(Signal::ImageFsAvailable, q("1Gi")), &capacity)
                .is_empty()
        );
        // Percentages of a missing capacity are zero.
        let r = hard_eviction_reservation(
            &hard(Signal::NodeFsAvailable, ThresholdValue::Percentage(0.1)),
            &capacity,
        );
        assert!(r["ephemeral-storage"].is_zero());
        // The Linux defaults on an 8Gi/100Gi node.
        let mut cap = capacity.clone();
        cap.insert(
            "ephemeral-storage".to_string(),
            Quantity::parse("100Gi").unwrap(),
        );
        let defaults = crate::domain::eviction::parse_threshold_config(
            &[],
            &crate::domain::eviction::default_eviction_hard(),
            &Default::default(),
            &Default::default(),
            &Default::default(),
        )
        .unwrap();
        let r = hard_eviction_reservation(&defaults, &cap);
        assert_eq!(r["memory"].to_string(), "100Mi");
        // 100Gi * float32(0.1), truncated.
        assert_eq!(
            r["ephemeral-storage"].value(),
            (107374182400f64 * f64::from(0.1f32)) as i64
        );
        assert_eq!(r.len(), 2);
    }
}
