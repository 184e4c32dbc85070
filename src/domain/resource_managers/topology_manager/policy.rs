//! The topology manager's policies (upstream v1.26 `policy*.go`): each merges the hint
//! providers' hints into one best hint and says whether the pod may be admitted with it.
//!
//! - `none`: no merge, always admits.
//! - `best-effort`: the best merged hint, always admits.
//! - `restricted`: the same hint, admits only when it is preferred.
//! - `single-numa-node`: only single-node (or "anywhere") preferred hints take part;
//!   admits only a preferred result.

use std::collections::BTreeMap;

use super::bitmask::{self, BitMask};
use super::hint::{ProviderHints, TopologyHint};
use super::numa_info::NumaInfo;
use super::TopologyManagerError;
use crate::domain::resource_managers::{parse_bool_option, OptionGates};

pub const POLICY_NONE: &str = "none";
pub const POLICY_BEST_EFFORT: &str = "best-effort";
pub const POLICY_RESTRICTED: &str = "restricted";
pub const POLICY_SINGLE_NUMA_NODE: &str = "single-numa-node";

/// `prefer-closest-numa-nodes`, an alpha option in v1.26.
pub const PREFER_CLOSEST_NUMA_NODES: &str = "prefer-closest-numa-nodes";

/// The parsed `topologyManagerPolicyOptions`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PolicyOptions {
    /// Of two equally wide hints, prefer the one whose NUMA nodes are closer.
    pub prefer_closest_numa: bool,
}

impl PolicyOptions {
    /// Parses the options as upstream's `NewPolicyOptions`, refusing unknown ones and
    /// ones their feature gate does not allow.
    pub fn new(
        options: &BTreeMap<String, String>,
        gates: OptionGates,
    ) -> Result<PolicyOptions, TopologyManagerError> {
        let mut opts = PolicyOptions::default();
        for (name, value) in options {
            check_policy_option_available(name, gates)?;
            if name == PREFER_CLOSEST_NUMA_NODES {
                opts.prefer_closest_numa = parse_bool_option(value).map_err(|reason| {
                    TopologyManagerError::BadOptionValue {
                        option: name.clone(),
                        reason,
                    }
                })?;
            }
        }
        Ok(opts)
    }
}

/// Whether an option is known and allowed by the gates (upstream's
/// `CheckPolicyOptionAvailable`).
pub fn check_policy_option_available(
    option: &str,
    gates: OptionGates,
) -> Result<(), TopologyManagerError> {
    let alpha = option == PREFER_CLOSEST_NUMA_NODES;
    if !alpha {
        return Err(TopologyManagerError::UnknownOption(option.to_string()));
    }
    if !gates.alpha {
        return Err(TopologyManagerError::AlphaOptionsDisabled(
            option.to_string(),
        ));
    }
    Ok(())
}

/// One of upstream's four policies with what it merges against.
#[derive(Debug, Clone, PartialEq)]
pub enum Policy {
    None,
    BestEffort {
        numa_info: NumaInfo,
        opts: PolicyOptions,
    },
    Restricted {
        numa_info: NumaInfo,
        opts: PolicyOptions,
    },
    SingleNumaNode {
        numa_info: NumaInfo,
        opts: PolicyOptions,
    },
}

impl Policy {
    pub fn name(&self) -> &'static str {
        match self {
            Policy::None => POLICY_NONE,
            Policy::BestEffort { .. } => POLICY_BEST_EFFORT,
            Policy::Restricted { .. } => POLICY_RESTRICTED,
            Policy::SingleNumaNode { .. } => POLICY_SINGLE_NUMA_NODE,
        }
    }

    /// Whether a pod whose merged hint is `hint` may be admitted.
    pub fn can_admit_pod_result(&self, hint: &TopologyHint) -> bool {
        match self {
            Policy::None | Policy::BestEffort { .. } => true,
            Policy::Restricted { .. } | Policy::SingleNumaNode { .. } => hint.preferred,
        }
    }

    /// The best hint from every provider's hints, and whether it admits the pod
    /// (upstream's `Merge`).
    pub fn merge(&self, providers_hints: &[ProviderHints]) -> (TopologyHint, bool) {
        let best = match self {
            Policy::None => return (TopologyHint::default(), true),
            Policy::BestEffort { numa_info, opts } | Policy::Restricted { numa_info, opts } => {
                let filtered = filter_providers_hints(providers_hints);
                HintMerger::new(numa_info, filtered, self.name(), *opts).merge()
            }
            Policy::SingleNumaNode { numa_info, opts } => {
                let filtered = filter_single_numa_hints(filter_providers_hints(providers_hints));
                let best = HintMerger::new(numa_info, filtered, self.name(), *opts).merge();
                // Every node is the same as "anywhere" to a single-NUMA-node pod.
                if best.numa_node_affinity == Some(numa_info.default_affinity_mask()) {
                    TopologyHint::new(None, best.preferred)
                } else {
                    best
                }
            }
        };
        let admit = self.can_admit_pod_result(&best);
        (best, admit)
    }
}

/// Every provider's hints as one list per resource (upstream's `filterProvidersHints`): a
/// provider without hints, or a resource without preference, becomes one preferred
/// "anywhere" hint; a resource that fits nowhere becomes one non-preferred "anywhere".
pub fn filter_providers_hints(providers_hints: &[ProviderHints]) -> Vec<Vec<TopologyHint>> {
    let mut all = Vec::new();
    for hints in providers_hints {
        if hints.is_empty() {
            all.push(vec![TopologyHint::new(None, true)]);
            continue;
        }
        for resource_hints in hints.values() {
            match resource_hints {
                None => all.push(vec![TopologyHint::new(None, true)]),
                Some(list) if list.is_empty() => all.push(vec![TopologyHint::new(None, false)]),
                Some(list) => all.push(list.clone()),
            }
        }
    }
    all
}

/// Keeps only preferred hints for one node or for anywhere (upstream's
/// `filterSingleNumaHints`).
pub fn filter_single_numa_hints(all: Vec<Vec<TopologyHint>>) -> Vec<Vec<TopologyHint>> {
    all.into_iter()
        .map(|hints| {
            hints
                .into_iter()
                .filter(|h| h.preferred && h.numa_node_affinity.is_none_or(|m| m.count() == 1))
                .collect()
        })
        .collect()
}

/// The AND of one hint per provider: preferred only when every hint is preferred and all
/// affinities are equal (upstream's `mergePermutation`).
fn merge_permutation(default_affinity: BitMask, permutation: &[&TopologyHint]) -> TopologyHint {
    let mut preferred = true;
    let mut affinities: Vec<BitMask> = Vec::new();
    for hint in permutation {
        if let Some(mask) = hint.numa_node_affinity {
            affinities.push(mask);
            if affinities.first() != Some(&mask) {
                preferred = false;
            }
        }
        if !hint.preferred {
            preferred = false;
        }
    }
    TopologyHint::new(Some(bitmask::and(default_affinity, &affinities)), preferred)
}

fn affinity_count(hint: &TopologyHint) -> usize {
    hint.numa_node_affinity.map_or(0, |m| m.count())
}

/// The narrowest affinity among a resource's hints.
fn narrowest_hint(hints: &[TopologyHint]) -> Option<&TopologyHint> {
    let mut narrowest: Option<&TopologyHint> = None;
    for hint in hints {
        let Some(mask) = hint.numa_node_affinity else {
            continue;
        };
        match narrowest.and_then(|n| n.numa_node_affinity) {
            Some(current) if !mask.is_narrower_than(&current) => {}
            _ => narrowest = Some(hint),
        }
    }
    narrowest
}

/// The most NUMA nodes any one resource needs at least (upstream's
/// `maxOfMinAffinityCounts`).
pub fn max_of_min_affinity_counts(filtered: &[Vec<TopologyHint>]) -> usize {
    filtered
        .iter()
        .filter_map(|hints| narrowest_hint(hints))
        .map(affinity_count)
        .max()
        .unwrap_or(0)
}

/// Which of two hints the merger keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Current,
    Candidate,
}

/// Finds the best merged hint over every permutation of the providers' hints
/// (upstream's `HintMerger`).
pub struct HintMerger<'a> {
    numa_info: &'a NumaInfo,
    hints: Vec<Vec<TopologyHint>>,
    /// Among non-preferred hints, the width to aim for: the most NUMA nodes any one
    /// resource needs at least.
    pub best_non_preferred_affinity_count: usize,
    use_closest: bool,
}

impl<'a> HintMerger<'a> {
    pub fn new(
        numa_info: &'a NumaInfo,
        hints: Vec<Vec<TopologyHint>>,
        policy_name: &str,
        opts: PolicyOptions,
    ) -> HintMerger<'a> {
        HintMerger {
            numa_info,
            best_non_preferred_affinity_count: max_of_min_affinity_counts(&hints),
            hints,
            use_closest: policy_name != POLICY_SINGLE_NUMA_NODE && opts.prefer_closest_numa,
        }
    }

    fn compare_numa_affinity_masks(
        &self,
        current: &TopologyHint,
        candidate: &TopologyHint,
    ) -> Choice {
        let cur = current.numa_node_affinity.unwrap_or_default();
        let cand = candidate.numa_node_affinity.unwrap_or_default();
        if cand == cur {
            return Choice::Current;
        }
        let best = if self.use_closest {
            self.numa_info.closest(cur, cand)
        } else {
            self.numa_info.narrowest(cur, cand)
        };
        if best == cur {
            Choice::Current
        } else {
            Choice::Candidate
        }
    }

    /// Whether `candidate` replaces `current` as the best hint so far: preferred beats
    /// non-preferred; two preferred compare their masks; two non-preferred move towards
    /// `best_non_preferred_affinity_count` nodes without exceeding it.
    pub fn compare(&self, current: Option<&TopologyHint>, candidate: &TopologyHint) -> Choice {
        let target = self.best_non_preferred_affinity_count;
        let cand_count = affinity_count(candidate);
        if cand_count == 0 {
            return Choice::Current;
        }
        let Some(current) = current else {
            return Choice::Candidate;
        };
        match (current.preferred, candidate.preferred) {
            (false, true) => return Choice::Candidate,
            (true, false) => return Choice::Current,
            (true, true) => return self.compare_numa_affinity_masks(current, candidate),
            (false, false) => {}
        }
        let cur_count = affinity_count(current);
        if cur_count > target {
            return self.compare_numa_affinity_masks(current, candidate);
        }
        if cur_count == target {
            if cand_count != target {
                return Choice::Current;
            }
            return self.compare_numa_affinity_masks(current, candidate);
        }
        if cand_count > target {
            return Choice::Current;
        }
        if cand_count == target {
            return Choice::Candidate;
        }
        if cand_count > cur_count {
            return Choice::Candidate;
        }
        if cand_count < cur_count {
            return Choice::Current;
        }
        self.compare_numa_affinity_masks(current, candidate)
    }

    /// The best merged hint; every node, not preferred, when no permutation gives one.
    pub fn merge(&self) -> TopologyHint {
        let default_affinity = self.numa_info.default_affinity_mask();
        let mut best: Option<TopologyHint> = None;
        iterate_all_provider_topology_hints(&self.hints, &mut |permutation| {
            let merged = merge_permutation(default_affinity, permutation);
            if self.compare(best.as_ref(), &merged) == Choice::Candidate {
                best = Some(merged);
            }
        });
        best.unwrap_or(TopologyHint::new(Some(default_affinity), false))
    }
}

/// Calls `callback` with every combination of one hint per provider, the first
/// provider's hint varying slowest (upstream's `iterateAllProviderTopologyHints`).
pub fn iterate_all_provider_topology_hints(
    all: &[Vec<TopologyHint>],
    callback: &mut dyn FnMut(&[&TopologyHint]),
) {
    fn iterate<'h>(
        all: &'h [Vec<TopologyHint>],
        i: usize,
        accum: &mut Vec<&'h TopologyHint>,
        callback: &mut dyn FnMut(&[&TopologyHint]),
    ) {
        if i == all.len() {
            callback(accum);
            return;
        }
        for hint in &all[i] {
            accum.push(hint);
            iterate(all, i + 1, accum, callback);
            accum.pop();
        }
    }
    iterate(all, 0, &mut Vec::with_capacity(all.len()), callback);
}
