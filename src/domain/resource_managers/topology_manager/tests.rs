//! Upstream v1.26's topology manager tests: the policy merge tables of policy_test.go
//! (generated from its source) run through each policy as policy_best_effort_test.go,
//! policy_restricted_test.go, policy_single_numa_node_test.go and policy_none_test.go do,
//! and the manager's tests of topology_manager_test.go.

use std::collections::BTreeMap;

use super::policy::*;
use super::*;
use crate::domain::pod::{Container, Pod};

type MergeCase = (&'static str, Vec<ProviderHints>, TopologyHint);

fn mask(bits: &[usize]) -> Option<BitMask> {
    Some(BitMask::new(bits).expect("bits in range"))
}

fn hint(numa_node_affinity: Option<BitMask>, preferred: bool) -> TopologyHint {
    TopologyHint::new(numa_node_affinity, preferred)
}

fn provider(resources: &[(&str, Option<Vec<TopologyHint>>)]) -> ProviderHints {
    resources
        .iter()
        .map(|(name, hints)| (name.to_string(), hints.clone()))
        .collect()
}

fn numa_info(distances: &[&[u64]]) -> NumaInfo {
    NumaInfo {
        nodes: (0..distances.len()).collect(),
        numa_distances: distances
            .iter()
            .enumerate()
            .map(|(i, d)| (i, d.to_vec()))
            .collect(),
    }
}

fn two_nodes() -> NumaInfo {
    numa_info(&[&[10, 11], &[11, 10]])
}

fn four_nodes() -> NumaInfo {
    numa_info(&[
        &[10, 11, 12, 12],
        &[11, 10, 12, 12],
        &[12, 12, 10, 11],
        &[12, 12, 11, 10],
    ])
}

fn eight_nodes() -> NumaInfo {
    numa_info(&[
        &[10, 11, 12, 12, 30, 30, 30, 30],
        &[11, 10, 12, 12, 30, 30, 30, 30],
        &[12, 12, 10, 11, 30, 30, 30, 30],
        &[12, 12, 11, 10, 30, 30, 30, 30],
        &[30, 30, 30, 30, 10, 11, 12, 12],
        &[30, 30, 30, 30, 11, 10, 12, 12],
        &[30, 30, 30, 30, 12, 12, 10, 11],
        &[30, 30, 30, 30, 12, 12, 13, 10],
    ])
}

mod cases {
    use super::*;

    pub(super) fn common_policy_merge_test_cases(nodes: &[usize]) -> Vec<MergeCase> {
        let _ = nodes; // only some tables use every node
        vec![
            (
                "Two providers, 1 hint each, same mask, both preferred 1/2",
                vec![
                    provider(&[("resource1", Some(vec![hint(mask(&[0]), true)]))]),
                    provider(&[("resource2", Some(vec![hint(mask(&[0]), true)]))]),
                ],
                hint(mask(&[0]), true),
            ),
            (
                "Two providers, 1 hint each, same mask, both preferred 2/2",
                vec![
                    provider(&[("resource1", Some(vec![hint(mask(&[1]), true)]))]),
                    provider(&[("resource2", Some(vec![hint(mask(&[1]), true)]))]),
                ],
                hint(mask(&[1]), true),
            ),
            (
                "Two providers, 1 no hints, 1 single hint preferred 1/2",
                vec![
                    ProviderHints::new(),
                    provider(&[("resource", Some(vec![hint(mask(&[0]), true)]))]),
                ],
                hint(mask(&[0]), true),
            ),
            (
                "Two providers, 1 no hints, 1 single hint preferred 2/2",
                vec![
                    ProviderHints::new(),
                    provider(&[("resource", Some(vec![hint(mask(&[1]), true)]))]),
                ],
                hint(mask(&[1]), true),
            ),
            (
                "Two providers, 1 with 2 hints, 1 with single hint matching 1/2",
                vec![
                    provider(&[(
                        "resource1",
                        Some(vec![hint(mask(&[0]), true), hint(mask(&[1]), true)]),
                    )]),
                    provider(&[("resource2", Some(vec![hint(mask(&[0]), true)]))]),
                ],
                hint(mask(&[0]), true),
            ),
            (
                "Two providers, 1 with 2 hints, 1 with single hint matching 2/2",
                vec![
                    provider(&[(
                        "resource1",
                        Some(vec![hint(mask(&[0]), true), hint(mask(&[1]), true)]),
                    )]),
                    provider(&[("resource2", Some(vec![hint(mask(&[1]), true)]))]),
                ],
                hint(mask(&[1]), true),
            ),
            (
                "Two providers, both with 2 hints, matching narrower preferred hint from both",
                vec![
                    provider(&[(
                        "resource1",
                        Some(vec![hint(mask(&[0]), true), hint(mask(&[1]), true)]),
                    )]),
                    provider(&[(
                        "resource2",
                        Some(vec![hint(mask(&[0]), true), hint(mask(&[0, 1]), false)]),
                    )]),
                ],
                hint(mask(&[0]), true),
            ),
            (
                "Ensure less narrow preferred hints are chosen over narrower non-preferred hints",
                vec![
                    provider(&[(
                        "resource1",
                        Some(vec![hint(mask(&[1]), true), hint(mask(&[0, 1]), false)]),
                    )]),
                    provider(&[(
                        "resource2",
                        Some(vec![
                            hint(mask(&[0]), true),
                            hint(mask(&[1]), true),
                            hint(mask(&[0, 1]), false),
                        ]),
                    )]),
                ],
                hint(mask(&[1]), true),
            ),
            (
                "Multiple resources, same provider",
                vec![provider(&[
                    (
                        "resource1",
                        Some(vec![hint(mask(&[1]), true), hint(mask(&[0, 1]), false)]),
                    ),
                    (
                        "resource2",
                        Some(vec![
                            hint(mask(&[0]), true),
                            hint(mask(&[1]), true),
                            hint(mask(&[0, 1]), false),
                        ]),
                    ),
                ])],
                hint(mask(&[1]), true),
            ),
        ]
    }

    pub(super) fn best_effort_merge_test_cases(nodes: &[usize]) -> Vec<MergeCase> {
        let _ = nodes; // only some tables use every node
        vec![
            (
                "Two providers, 2 hints each, same mask (some with different bits), same preferred",
                vec![
                    provider(&[(
                        "resource1",
                        Some(vec![hint(mask(&[0, 1]), true), hint(mask(&[0, 2]), true)]),
                    )]),
                    provider(&[(
                        "resource2",
                        Some(vec![hint(mask(&[0, 1]), true), hint(mask(&[0, 2]), true)]),
                    )]),
                ],
                hint(mask(&[0, 1]), true),
            ),
            ("TopologyHint not set", vec![], hint(mask(nodes), true)),
            (
                "HintProvider returns empty non-nil map[string][]TopologyHint",
                vec![provider(&[])],
                hint(mask(nodes), true),
            ),
            (
                "HintProvider returns -nil map[string][]TopologyHint from provider",
                vec![provider(&[("resource", None)])],
                hint(mask(nodes), true),
            ),
            (
                "HintProvider returns empty non-nil map[string][]TopologyHint from provider",
                vec![provider(&[("resource", Some(vec![]))])],
                hint(mask(nodes), false),
            ),
            (
                "Single TopologyHint with Preferred as true and NUMANodeAffinity as nil",
                vec![provider(&[("resource", Some(vec![hint(None, true)]))])],
                hint(mask(nodes), true),
            ),
            (
                "Single TopologyHint with Preferred as false and NUMANodeAffinity as nil",
                vec![provider(&[("resource", Some(vec![hint(None, false)]))])],
                hint(mask(nodes), false),
            ),
            (
                "Two providers, 1 hint each, no common mask",
                vec![
                    provider(&[("resource1", Some(vec![hint(mask(&[0]), true)]))]),
                    provider(&[("resource2", Some(vec![hint(mask(&[1]), true)]))]),
                ],
                hint(mask(nodes), false),
            ),
            (
                "Two providers, 1 hint each, same mask, 1 preferred, 1 not 1/2",
                vec![
                    provider(&[("resource1", Some(vec![hint(mask(&[0]), true)]))]),
                    provider(&[("resource2", Some(vec![hint(mask(&[0]), false)]))]),
                ],
                hint(mask(&[0]), false),
            ),
            (
                "Two providers, 1 hint each, same mask, 1 preferred, 1 not 2/2",
                vec![
                    provider(&[("resource1", Some(vec![hint(mask(&[1]), true)]))]),
                    provider(&[("resource2", Some(vec![hint(mask(&[1]), false)]))]),
                ],
                hint(mask(&[1]), false),
            ),
            (
                "Two providers, 1 hint each, 1 wider mask, both preferred 1/2",
                vec![
                    provider(&[("resource1", Some(vec![hint(mask(&[0]), true)]))]),
                    provider(&[("resource2", Some(vec![hint(mask(&[0, 1]), true)]))]),
                ],
                hint(mask(&[0]), false),
            ),
            (
                "Two providers, 1 with 2 hints, 1 with single non-preferred hint matching",
                vec![
                    provider(&[(
                        "resource1",
                        Some(vec![hint(mask(&[0]), true), hint(mask(&[1]), true)]),
                    )]),
                    provider(&[("resource2", Some(vec![hint(mask(&[0, 1]), false)]))]),
                ],
                hint(mask(&[0]), false),
            ),
            (
                "Two providers, 1 hint each, 1 wider mask, both preferred 2/2",
                vec![
                    provider(&[("resource1", Some(vec![hint(mask(&[1]), true)]))]),
                    provider(&[("resource2", Some(vec![hint(mask(&[0, 1]), true)]))]),
                ],
                hint(mask(&[1]), false),
            ),
            (
                "bestNonPreferredAffinityCount (1)",
                vec![
                    provider(&[(
                        "resource1",
                        Some(vec![
                            hint(mask(&[0, 1, 2, 3]), false),
                            hint(mask(&[0, 1]), false),
                        ]),
                    )]),
                    provider(&[("resource2", Some(vec![hint(mask(&[0, 1]), false)]))]),
                ],
                hint(mask(&[0, 1]), false),
            ),
            (
                "bestNonPreferredAffinityCount (2)",
                vec![
                    provider(&[(
                        "resource1",
                        Some(vec![
                            hint(mask(&[0, 1, 2, 3]), false),
                            hint(mask(&[0, 1]), false),
                        ]),
                    )]),
                    provider(&[("resource2", Some(vec![hint(mask(&[0, 3]), false)]))]),
                ],
                hint(mask(&[0, 3]), false),
            ),
            (
                "bestNonPreferredAffinityCount (3)",
                vec![
                    provider(&[(
                        "resource1",
                        Some(vec![
                            hint(mask(&[0, 1, 2, 3]), false),
                            hint(mask(&[0, 1]), false),
                        ]),
                    )]),
                    provider(&[("resource2", Some(vec![hint(mask(&[1, 2]), false)]))]),
                ],
                hint(mask(&[1, 2]), false),
            ),
            (
                "bestNonPreferredAffinityCount (4)",
                vec![
                    provider(&[(
                        "resource1",
                        Some(vec![
                            hint(mask(&[0, 1, 2, 3]), false),
                            hint(mask(&[0, 1]), false),
                        ]),
                    )]),
                    provider(&[("resource2", Some(vec![hint(mask(&[2, 3]), false)]))]),
                ],
                hint(mask(&[2, 3]), false),
            ),
        ]
    }

    pub(super) fn best_effort_merge_test_cases_no_policies(nodes: &[usize]) -> Vec<MergeCase> {
        let _ = nodes; // only some tables use every node
        vec![
            (
                "bestNonPreferredAffinityCount (5)",
                vec![
                    provider(&[(
                        "resource1",
                        Some(vec![
                            hint(mask(&[0, 1, 2, 3]), false),
                            hint(mask(&[0, 1]), false),
                        ]),
                    )]),
                    provider(&[(
                        "resource2",
                        Some(vec![hint(mask(&[1, 2]), false), hint(mask(&[2, 3]), false)]),
                    )]),
                ],
                hint(mask(&[1, 2]), false),
            ),
            (
                "bestNonPreferredAffinityCount (6)",
                vec![
                    provider(&[(
                        "resource1",
                        Some(vec![
                            hint(mask(&[0, 1, 2, 3]), false),
                            hint(mask(&[0, 1]), false),
                        ]),
                    )]),
                    provider(&[(
                        "resource2",
                        Some(vec![
                            hint(mask(&[1, 2, 3]), false),
                            hint(mask(&[1, 2]), false),
                            hint(mask(&[1, 3]), false),
                            hint(mask(&[2, 3]), false),
                        ]),
                    )]),
                ],
                hint(mask(&[1, 2]), false),
            ),
        ]
    }

    pub(super) fn best_effort_merge_test_cases_closest_numa(nodes: &[usize]) -> Vec<MergeCase> {
        let _ = nodes; // only some tables use every node
        vec![
            (
                "Two providers, 2 hints each, same mask (some with different bits), same preferred",
                vec![
                    provider(&[(
                        "resource1",
                        Some(vec![hint(mask(&[0, 4]), true), hint(mask(&[0, 2]), true)]),
                    )]),
                    provider(&[(
                        "resource2",
                        Some(vec![hint(mask(&[0, 4]), true), hint(mask(&[0, 2]), true)]),
                    )]),
                ],
                hint(mask(&[0, 2]), true),
            ),
            (
                "Two providers, 2 hints each, different mask",
                vec![
                    provider(&[(
                        "resource1",
                        Some(vec![hint(mask(&[4]), true), hint(mask(&[0, 2]), true)]),
                    )]),
                    provider(&[(
                        "resource2",
                        Some(vec![hint(mask(&[4]), true), hint(mask(&[0, 2]), true)]),
                    )]),
                ],
                hint(mask(&[4]), true),
            ),
            (
                "bestNonPreferredAffinityCount (5)",
                vec![
                    provider(&[(
                        "resource1",
                        Some(vec![
                            hint(mask(&[0, 1, 2, 3]), false),
                            hint(mask(&[0, 1]), false),
                        ]),
                    )]),
                    provider(&[(
                        "resource2",
                        Some(vec![hint(mask(&[1, 2]), false), hint(mask(&[2, 3]), false)]),
                    )]),
                ],
                hint(mask(&[2, 3]), false),
            ),
            (
                "bestNonPreferredAffinityCount (6)",
                vec![
                    provider(&[(
                        "resource1",
                        Some(vec![
                            hint(mask(&[0, 1, 2, 3]), false),
                            hint(mask(&[0, 1]), false),
                        ]),
                    )]),
                    provider(&[(
                        "resource2",
                        Some(vec![
                            hint(mask(&[1, 2, 3]), false),
                            hint(mask(&[1, 2]), false),
                            hint(mask(&[1, 3]), false),
                            hint(mask(&[2, 3]), false),
                        ]),
                    )]),
                ],
                hint(mask(&[2, 3]), false),
            ),
        ]
    }

    pub(super) fn single_numa_node_merge_test_cases(nodes: &[usize]) -> Vec<MergeCase> {
        let _ = nodes; // only some tables use every node
        vec![
            ("TopologyHint not set", vec![], hint(None, true)),
            (
                "HintProvider returns empty non-nil map[string][]TopologyHint",
                vec![provider(&[])],
                hint(None, true),
            ),
            (
                "HintProvider returns -nil map[string][]TopologyHint from provider",
                vec![provider(&[("resource", None)])],
                hint(None, true),
            ),
            (
                "HintProvider returns empty non-nil map[string][]TopologyHint from provider",
                vec![provider(&[("resource", Some(vec![]))])],
                hint(None, false),
            ),
            (
                "Single TopologyHint with Preferred as true and NUMANodeAffinity as nil",
                vec![provider(&[("resource", Some(vec![hint(None, true)]))])],
                hint(None, true),
            ),
            (
                "Single TopologyHint with Preferred as false and NUMANodeAffinity as nil",
                vec![provider(&[("resource", Some(vec![hint(None, false)]))])],
                hint(None, false),
            ),
            (
                "Two providers, 1 hint each, no common mask",
                vec![
                    provider(&[("resource1", Some(vec![hint(mask(&[0]), true)]))]),
                    provider(&[("resource2", Some(vec![hint(mask(&[1]), true)]))]),
                ],
                hint(None, false),
            ),
            (
                "Two providers, 1 hint each, same mask, 1 preferred, 1 not 1/2",
                vec![
                    provider(&[("resource1", Some(vec![hint(mask(&[0]), true)]))]),
                    provider(&[("resource2", Some(vec![hint(mask(&[0]), false)]))]),
                ],
                hint(None, false),
            ),
            (
                "Two providers, 1 hint each, same mask, 1 preferred, 1 not 2/2",
                vec![
                    provider(&[("resource1", Some(vec![hint(mask(&[1]), true)]))]),
                    provider(&[("resource2", Some(vec![hint(mask(&[1]), false)]))]),
                ],
                hint(None, false),
            ),
            (
                "Two providers, 1 with 2 hints, 1 with single non-preferred hint matching",
                vec![
                    provider(&[(
                        "resource1",
                        Some(vec![hint(mask(&[0]), true), hint(mask(&[1]), true)]),
                    )]),
                    provider(&[("resource2", Some(vec![hint(mask(&[0, 1]), false)]))]),
                ],
                hint(None, false),
            ),
            (
                "Single NUMA hint generation",
                vec![provider(&[
                    ("resource1", Some(vec![hint(mask(&[0, 1]), true)])),
                    (
                        "resource2",
                        Some(vec![
                            hint(mask(&[0]), true),
                            hint(mask(&[1]), true),
                            hint(mask(&[0, 1]), false),
                        ]),
                    ),
                ])],
                hint(None, false),
            ),
            (
                "One no-preference provider",
                vec![
                    provider(&[(
                        "resource1",
                        Some(vec![
                            hint(mask(&[0]), true),
                            hint(mask(&[1]), true),
                            hint(mask(&[0, 1]), false),
                        ]),
                    )]),
                    ProviderHints::new(),
                ],
                hint(mask(&[0]), true),
            ),
        ]
    }
}

fn test_policy_merge(policy: &Policy, cases: Vec<MergeCase>) {
    assert!(!cases.is_empty());
    for (name, providers, expected) in cases {
        let (actual, _) = policy.merge(&providers);
        assert_eq!(actual, expected, "{name}");
    }
}

fn closest() -> PolicyOptions {
    PolicyOptions {
        prefer_closest_numa: true,
    }
}

#[test]
fn best_effort_merge() {
    let numa_info = four_nodes();
    let nodes = numa_info.nodes.clone();
    let policy = Policy::BestEffort {
        numa_info,
        opts: PolicyOptions::default(),
    };
    let mut cases = cases::common_policy_merge_test_cases(&nodes);
    cases.extend(cases::best_effort_merge_test_cases(&nodes));
    cases.extend(cases::best_effort_merge_test_cases_no_policies(&nodes));
    test_policy_merge(&policy, cases);
}

#[test]
fn best_effort_merge_closest_numa() {
    let numa_info = eight_nodes();
    let nodes = numa_info.nodes.clone();
    let policy = Policy::BestEffort {
        numa_info,
        opts: closest(),
    };
    let mut cases = cases::common_policy_merge_test_cases(&nodes);
    cases.extend(cases::best_effort_merge_test_cases(&nodes));
    cases.extend(cases::best_effort_merge_test_cases_closest_numa(&nodes));
    test_policy_merge(&policy, cases);
}

#[test]
fn restricted_merge() {
    let numa_info = four_nodes();
    let nodes = numa_info.nodes.clone();
    let policy = Policy::Restricted {
        numa_info,
        opts: PolicyOptions::default(),
    };
    let mut cases = cases::common_policy_merge_test_cases(&nodes);
    cases.extend(cases::best_effort_merge_test_cases(&nodes));
    cases.extend(cases::best_effort_merge_test_cases_no_policies(&nodes));
    test_policy_merge(&policy, cases);
}

#[test]
fn restricted_merge_closest_numa() {
    let numa_info = eight_nodes();
    let nodes = numa_info.nodes.clone();
    let policy = Policy::Restricted {
        numa_info,
        opts: closest(),
    };
    let mut cases = cases::common_policy_merge_test_cases(&nodes);
    cases.extend(cases::best_effort_merge_test_cases(&nodes));
    cases.extend(cases::best_effort_merge_test_cases_closest_numa(&nodes));
    test_policy_merge(&policy, cases);
}

#[test]
fn single_numa_node_merge() {
    let numa_info = four_nodes();
    let nodes = numa_info.nodes.clone();
    let policy = Policy::SingleNumaNode {
        numa_info,
        opts: PolicyOptions::default(),
    };
    let mut cases = cases::common_policy_merge_test_cases(&nodes);
    cases.extend(cases::single_numa_node_merge_test_cases(&nodes));
    test_policy_merge(&policy, cases);
}

#[test]
fn policy_names() {
    let opts = PolicyOptions::default();
    assert_eq!(Policy::None.name(), "none");
    assert_eq!(
        Policy::BestEffort {
            numa_info: two_nodes(),
            opts
        }
        .name(),
        "best-effort"
    );
    assert_eq!(
        Policy::Restricted {
            numa_info: two_nodes(),
            opts
        }
        .name(),
        "restricted"
    );
    assert_eq!(
        Policy::SingleNumaNode {
            numa_info: two_nodes(),
            opts
        }
        .name(),
        "single-numa-node"
    );
}

// The CanAdmitPodResult tests of the four policy test files.
#[test]
fn can_admit_pod_result_per_policy() {
    let opts = PolicyOptions::default();
    let not_preferred = hint(None, false);
    let preferred = hint(None, true);
    for policy in [
        Policy::None,
        Policy::BestEffort {
            numa_info: two_nodes(),
            opts,
        },
    ] {
        assert!(
            policy.can_admit_pod_result(&not_preferred),
            "{}",
            policy.name()
        );
        assert!(policy.can_admit_pod_result(&preferred), "{}", policy.name());
    }
    let restricted = Policy::Restricted {
        numa_info: two_nodes(),
        opts,
    };
    assert!(!restricted.can_admit_pod_result(&not_preferred));
    assert!(restricted.can_admit_pod_result(&preferred));
    let single = Policy::SingleNumaNode {
        numa_info: two_nodes(),
        opts,
    };
    assert!(!single.can_admit_pod_result(&not_preferred));
}

// policy_none_test.go TestPolicyNoneMerge.
#[test]
fn none_merge_always_admits_with_an_empty_hint() {
    let cases = vec![
        ("merged empty providers hints", vec![]),
        (
            "merge with a single provider with a single preferred resource",
            vec![provider(&[(
                "resource",
                Some(vec![hint(mask(&[0, 1]), true)]),
            )])],
        ),
        (
            "merge with a single provider with a single non-preferred resource",
            vec![provider(&[(
                "resource",
                Some(vec![hint(mask(&[0, 1]), false)]),
            )])],
        ),
    ];
    for (name, providers) in cases {
        assert_eq!(
            Policy::None.merge(&providers),
            (TopologyHint::default(), true),
            "{name}"
        );
    }
}

type FilterCase = (&'static str, Vec<Vec<TopologyHint>>, Vec<Vec<TopologyHint>>);

// policy_single_numa_node_test.go TestPolicySingleNumaNodeFilterHints.
#[test]
fn single_numa_node_filter_hints() {
    let cases: Vec<FilterCase> = vec![
        ("filter empty resources", vec![], vec![]),
        (
            "filter hints with nil socket mask 1/2",
            vec![vec![hint(None, false)], vec![hint(None, true)]],
            vec![vec![], vec![hint(None, true)]],
        ),
        (
            "filter hints with nil socket mask 2/2",
            vec![
                vec![hint(mask(&[0]), true), hint(None, false)],
                vec![hint(mask(&[1]), true), hint(None, true)],
            ],
            vec![
                vec![hint(mask(&[0]), true)],
                vec![hint(mask(&[1]), true), hint(None, true)],
            ],
        ),
        (
            "filter hints with empty resource socket mask",
            vec![
                vec![
                    hint(mask(&[1]), true),
                    hint(mask(&[0]), true),
                    hint(None, false),
                ],
                vec![],
            ],
            vec![vec![hint(mask(&[1]), true), hint(mask(&[0]), true)], vec![]],
        ),
        (
            "filter hints with wide sockemask",
            vec![
                vec![
                    hint(mask(&[0]), true),
                    hint(mask(&[1]), true),
                    hint(mask(&[1, 2]), false),
                    hint(mask(&[0, 1, 2]), false),
                    hint(None, false),
                ],
                vec![
                    hint(mask(&[1, 2]), false),
                    hint(mask(&[0, 1, 2]), false),
                    hint(mask(&[0, 2]), false),
                    hint(mask(&[3]), false),
                ],
                vec![
                    hint(mask(&[1, 2]), false),
                    hint(mask(&[0, 1, 2]), false),
                    hint(mask(&[0, 2]), false),
                ],
            ],
            vec![
                vec![hint(mask(&[0]), true), hint(mask(&[1]), true)],
                vec![],
                vec![],
            ],
        ),
    ];
    for (name, all, expected) in cases {
        assert_eq!(filter_single_numa_hints(all), expected, "{name}");
    }
}

// policy_test.go TestMaxOfMinAffinityCounts.
#[test]
fn max_of_min_affinity_counts_cases() {
    let cases: Vec<(Vec<Vec<TopologyHint>>, usize)> = vec![
        (vec![], 0),
        (vec![vec![hint(mask(&[]), true)]], 0),
        (vec![vec![hint(mask(&[0]), true)]], 1),
        (vec![vec![hint(mask(&[0, 1]), true)]], 2),
        (
            vec![vec![
                hint(mask(&[0, 1]), true),
                hint(mask(&[0, 1, 2]), true),
            ]],
            2,
        ),
        (
            vec![
                vec![hint(mask(&[0, 1]), true), hint(mask(&[0, 1, 2]), true)],
                vec![hint(mask(&[0, 1, 2]), true)],
            ],
            3,
        ),
        (
            vec![
                vec![hint(mask(&[0, 1]), true), hint(mask(&[0, 1, 2]), true)],
                vec![
                    hint(mask(&[0, 1, 2]), true),
                    hint(mask(&[0, 1, 2, 3]), true),
                ],
            ],
            3,
        ),
    ];
    for (hints, expected) in cases {
        assert_eq!(max_of_min_affinity_counts(&hints), expected, "{hints:?}");
    }
}

// policy_test.go TestCompareHintsNarrowest (upstream's -1 counts, never reached by those
// cases, are 0 here).
#[test]
fn compare_hints_narrowest() {
    let cases: Vec<(&str, usize, Option<TopologyHint>, TopologyHint, Choice)> = vec![
        (
            "candidate.NUMANodeAffinity.Count() == 0 (1)",
            0,
            None,
            hint(mask(&[]), false),
            Choice::Current,
        ),
        (
            "candidate.NUMANodeAffinity.Count() == 0 (2)",
            0,
            Some(hint(mask(&[]), true)),
            hint(mask(&[]), false),
            Choice::Current,
        ),
        (
            "current == nil (1)",
            0,
            None,
            hint(mask(&[0]), true),
            Choice::Candidate,
        ),
        (
            "current == nil (2)",
            0,
            None,
            hint(mask(&[0]), false),
            Choice::Candidate,
        ),
        (
            "!current.Preferred && candidate.Preferred",
            0,
            Some(hint(mask(&[0]), false)),
            hint(mask(&[0]), true),
            Choice::Candidate,
        ),
        (
            "current.Preferred && !candidate.Preferred",
            0,
            Some(hint(mask(&[0]), true)),
            hint(mask(&[0]), false),
            Choice::Current,
        ),
        (
            "current.Preferred && candidate.Preferred (1)",
            0,
            Some(hint(mask(&[0]), true)),
            hint(mask(&[0]), true),
            Choice::Current,
        ),
        (
            "current.Preferred && candidate.Preferred (2)",
            0,
            Some(hint(mask(&[0, 1]), true)),
            hint(mask(&[0]), true),
            Choice::Candidate,
        ),
        (
            "current.Preferred && candidate.Preferred (3)",
            0,
            Some(hint(mask(&[0]), true)),
            hint(mask(&[0, 1]), true),
            Choice::Current,
        ),
        (
            "!current.Preferred && !candidate.Preferred (1.1)",
            1,
            Some(hint(mask(&[0, 1]), false)),
            hint(mask(&[0, 1]), false),
            Choice::Current,
        ),
        (
            "!current.Preferred && !candidate.Preferred (1.2)",
            1,
            Some(hint(mask(&[1, 2]), false)),
            hint(mask(&[0, 1]), false),
            Choice::Candidate,
        ),
        (
            "!current.Preferred && !candidate.Preferred (1.3)",
            1,
            Some(hint(mask(&[0, 1]), false)),
            hint(mask(&[1, 2]), false),
            Choice::Current,
        ),
        (
            "!current.Preferred && !candidate.Preferred (2.1)",
            2,
            Some(hint(mask(&[0, 1]), false)),
            hint(mask(&[0]), false),
            Choice::Current,
        ),
        (
            "!current.Preferred && !candidate.Preferred (2.2)",
            2,
            Some(hint(mask(&[0, 1]), false)),
            hint(mask(&[0, 1]), false),
            Choice::Current,
        ),
        (
            "!current.Preferred && !candidate.Preferred (2.3)",
            2,
            Some(hint(mask(&[1, 2]), false)),
            hint(mask(&[0, 1]), false),
            Choice::Candidate,
        ),
        (
            "!current.Preferred && !candidate.Preferred (2.4)",
            2,
            Some(hint(mask(&[0, 1]), false)),
            hint(mask(&[1, 2]), false),
            Choice::Current,
        ),
        (
            "!current.Preferred && !candidate.Preferred (3a)",
            2,
            Some(hint(mask(&[0]), false)),
            hint(mask(&[0, 1, 2]), false),
            Choice::Current,
        ),
        (
            "!current.Preferred && !candidate.Preferred (3b)",
            2,
            Some(hint(mask(&[0]), false)),
            hint(mask(&[0, 1]), false),
            Choice::Candidate,
        ),
        (
            "!current.Preferred && !candidate.Preferred (3ca.1)",
            3,
            Some(hint(mask(&[0]), false)),
            hint(mask(&[0, 1]), false),
            Choice::Candidate,
        ),
        (
            "!current.Preferred && !candidate.Preferred (3ca.2)",
            3,
            Some(hint(mask(&[0]), false)),
            hint(mask(&[1, 2]), false),
            Choice::Candidate,
        ),
        (
            "!current.Preferred && !candidate.Preferred (3ca.3)",
            4,
            Some(hint(mask(&[0, 1]), false)),
            hint(mask(&[1, 2, 3]), false),
            Choice::Candidate,
        ),
        (
            "!current.Preferred && !candidate.Preferred (3cb)",
            4,
            Some(hint(mask(&[1, 2, 3]), false)),
            hint(mask(&[0, 1]), false),
            Choice::Current,
        ),
        (
            "!current.Preferred && !candidate.Preferred (3cc.1)",
            4,
            Some(hint(mask(&[0, 1, 2]), false)),
            hint(mask(&[0, 1, 2]), false),
            Choice::Current,
        ),
        (
            "!current.Preferred && !candidate.Preferred (3cc.2)",
            4,
            Some(hint(mask(&[0, 1, 2]), false)),
            hint(mask(&[1, 2, 3]), false),
            Choice::Current,
        ),
        (
            "!current.Preferred && !candidate.Preferred (3cc.3)",
            4,
            Some(hint(mask(&[1, 2, 3]), false)),
            hint(mask(&[0, 1, 2]), false),
            Choice::Candidate,
        ),
    ];
    let numa_info = NumaInfo::default();
    for (name, count, current, candidate, expected) in cases {
        let mut merger = HintMerger::new(
            &numa_info,
            vec![],
            POLICY_BEST_EFFORT,
            PolicyOptions::default(),
        );
        merger.best_non_preferred_affinity_count = count;
        assert_eq!(
            merger.compare(current.as_ref(), &candidate),
            expected,
            "{name}"
        );
    }
}

fn nodes(n: usize) -> Vec<NumaNode> {
    (0..n)
        .map(|id| NumaNode {
            id,
            distances: vec![],
        })
        .collect()
}

// topology_manager_test.go TestNewManager.
#[test]
fn new_manager_policies_and_errors() {
    let gates = OptionGates::TOPOLOGY_MANAGER_DEFAULT;
    let none = BTreeMap::new();
    for name in ["none", "best-effort", "restricted", "single-numa-node"] {
        let manager =
            TopologyManager::new(&[], name, "container", &none, gates).expect("known policy");
        assert_eq!(manager.policy().name(), name);
    }
    assert_eq!(
        TopologyManager::new(&[], "unknown", "container", &none, gates).map(|_| ()),
        Err(TopologyManagerError::UnknownPolicy("unknown".into()))
    );
    assert_eq!(
        TopologyManagerError::UnknownPolicy("unknown".into()).to_string(),
        r#"unknown policy: "unknown""#
    );
    let unknown_option = BTreeMap::from([("unknown-option".to_string(), "true".to_string())]);
    for name in ["best-effort", "restricted"] {
        let err = TopologyManager::new(&[], name, "container", &unknown_option, gates)
            .expect_err("unknown option");
        assert!(
            err.to_string()
                .starts_with("unknown Topology Manager Policy option:"),
            "{err}"
        );
    }
}

// topology_manager_test.go TestManagerScope.
#[test]
fn new_manager_scopes() {
    let gates = OptionGates::TOPOLOGY_MANAGER_DEFAULT;
    let none = BTreeMap::new();
    for name in ["container", "pod"] {
        let manager =
            TopologyManager::new(&[], "best-effort", name, &none, gates).expect("known scope");
        assert_eq!(manager.scope().name(), name);
    }
    let err = TopologyManager::new(&[], "best-effort", "unknown", &none, gates)
        .expect_err("unknown scope");
    assert_eq!(err.to_string(), r#"unknown scope: "unknown""#);
}

// policy_options_test.go: the alpha option needs its gate; distances are needed with it;
// more than 8 NUMA nodes only with `none`.
#[test]
fn new_manager_options_gates_and_machine_limits() {
    let prefer = BTreeMap::from([(PREFER_CLOSEST_NUMA_NODES.to_string(), "true".to_string())]);
    let err = TopologyManager::new(
        &nodes(2),
        "best-effort",
        "container",
        &prefer,
        OptionGates::TOPOLOGY_MANAGER_DEFAULT,
    )
    .expect_err("gate off");
    assert_eq!(
        err.to_string(),
        r#"Topology Manager Policy Alpha-level Options not enabled, but option "prefer-closest-numa-nodes" provided"#
    );
    let alpha = OptionGates {
        alpha: true,
        beta: false,
    };
    let err = TopologyManager::new(&nodes(2), "best-effort", "container", &prefer, alpha)
        .expect_err("no distances");
    assert_eq!(
        err.to_string(),
        "cannot discover NUMA topology: error getting NUMA distances from cadvisor"
    );
    let with_distances = vec![
        NumaNode {
            id: 0,
            distances: vec![10, 11],
        },
        NumaNode {
            id: 1,
            distances: vec![11, 10],
        },
    ];
    let manager = TopologyManager::new(&with_distances, "best-effort", "container", &prefer, alpha)
        .expect("valid");
    assert_eq!(
        manager.policy(),
        &Policy::BestEffort {
            numa_info: two_nodes(),
            opts: closest()
        }
    );
    let bad = BTreeMap::from([(PREFER_CLOSEST_NUMA_NODES.to_string(), "maybe".to_string())]);
    let err = TopologyManager::new(&with_distances, "best-effort", "container", &bad, alpha)
        .expect_err("bad value");
    assert_eq!(
        err.to_string(),
        r#"bad value for option "prefer-closest-numa-nodes": strconv.ParseBool: parsing "maybe": invalid syntax"#
    );
    let none = BTreeMap::new();
    let gates = OptionGates::TOPOLOGY_MANAGER_DEFAULT;
    let err = TopologyManager::new(&nodes(9), "best-effort", "container", &none, gates)
        .expect_err("9 nodes");
    assert_eq!(
        err.to_string(),
        "unsupported on machines with more than 8 NUMA Nodes"
    );
    assert!(TopologyManager::new(&nodes(9), "none", "container", &none, gates).is_ok());
    assert!(TopologyManager::new(&nodes(8), "single-numa-node", "pod", &none, gates).is_ok());
}

/// A provider that answers the same hints for every container and the pod, and records
/// the affinities it is asked to allocate with (upstream's `mockHintProvider`).
struct MockHintProvider {
    hints: ProviderHints,
    allocated: Vec<(String, TopologyHint)>,
    fail: Option<Rejection>,
}

impl MockHintProvider {
    fn new(hints: ProviderHints) -> MockHintProvider {
        MockHintProvider {
            hints,
            allocated: vec![],
            fail: None,
        }
    }
}

impl HintProvider for MockHintProvider {
    fn get_topology_hints(&self, _pod: &Pod, _container: &Container) -> ProviderHints {
        self.hints.clone()
    }
    fn get_pod_topology_hints(&self, _pod: &Pod) -> ProviderHints {
        self.hints.clone()
    }
    fn allocate(
        &mut self,
        _pod: &Pod,
        container: &Container,
        affinity: &TopologyHint,
    ) -> Result<(), Rejection> {
        if let Some(rejection) = &self.fail {
            return Err(rejection.clone());
        }
        self.allocated.push((container.name.clone(), *affinity));
        Ok(())
    }
}

fn pod_with(containers: &[&str], init: &[&str]) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.uid = "pod-uid".into();
    let make = |name: &&str| {
        crate::domain::pod::fixtures::container(name, BTreeMap::new(), BTreeMap::new())
    };
    pod.spec.containers = containers.iter().map(make).collect();
    pod.spec.init_containers = init.iter().map(make).collect();
    pod
}

// topology_manager_test.go TestAdmit: both scopes admit or refuse alike, with
// TopologyAffinityError.
#[test]
fn admit_with_each_policy_and_scope() {
    let opts = PolicyOptions::default();
    let best_effort = Policy::BestEffort {
        numa_info: two_nodes(),
        opts,
    };
    let restricted = Policy::Restricted {
        numa_info: two_nodes(),
        opts,
    };
    let single = Policy::SingleNumaNode {
        numa_info: two_nodes(),
        opts,
    };
    let preferred = provider(&[(
        "resource",
        Some(vec![hint(mask(&[0]), true), hint(mask(&[0, 1]), false)]),
    )]);
    let several = provider(&[(
        "resource",
        Some(vec![
            hint(mask(&[0]), true),
            hint(mask(&[1]), true),
            hint(mask(&[0, 1]), false),
        ]),
    )]);
    let none_preferred = provider(&[("resource", Some(vec![hint(mask(&[0, 1]), false)]))]);
    let cases: Vec<(&str, Policy, Vec<ProviderHints>, bool)> = vec![
        ("None Policy. No Hints.", Policy::None, vec![], true),
        (
            "single-numa-node Policy. No Hints.",
            single.clone(),
            vec![ProviderHints::new()],
            true,
        ),
        (
            "Restricted Policy. No Hints.",
            restricted.clone(),
            vec![ProviderHints::new()],
            true,
        ),
        (
            "BestEffort Policy. Preferred Affinity.",
            best_effort.clone(),
            vec![preferred.clone()],
            true,
        ),
        (
            "BestEffort Policy. More than one Preferred Affinity.",
            best_effort.clone(),
            vec![several.clone()],
            true,
        ),
        (
            "BestEffort Policy. No Preferred Affinity.",
            best_effort.clone(),
            vec![none_preferred.clone()],
            true,
        ),
        (
            "Restricted Policy. Preferred Affinity.",
            restricted.clone(),
            vec![preferred.clone()],
            true,
        ),
        (
            "Restricted Policy. More than one Preferred affinity.",
            restricted.clone(),
            vec![several.clone()],
            true,
        ),
        (
            "Restricted Policy. No Preferred affinity.",
            restricted.clone(),
            vec![none_preferred.clone()],
            false,
        ),
        (
            "single-numa-node Policy. Preferred Affinity.",
            single.clone(),
            vec![preferred.clone()],
            true,
        ),
        (
            "single-numa-node Policy. More than one Preferred affinity.",
            single.clone(),
            vec![several],
            true,
        ),
        (
            "single-numa-node Policy. No Preferred affinity.",
            single,
            vec![none_preferred],
            false,
        ),
    ];
    let pod = pod_with(&["c"], &[]);
    for (name, policy, hints, expected) in cases {
        for scope in [Scope::Container, Scope::Pod] {
            let mut manager = TopologyManager::with_policy(policy.clone(), scope);
            let mut mocks: Vec<MockHintProvider> =
                hints.iter().cloned().map(MockHintProvider::new).collect();
            let mut providers: Vec<&mut dyn HintProvider> = mocks
                .iter_mut()
                .map(|m| m as &mut dyn HintProvider)
                .collect();
            let result = manager.admit(&pod, &mut providers);
            match result {
                Ok(()) => assert!(expected, "{name} ({scope:?}): admitted"),
                Err(rejection) => {
                    assert!(!expected, "{name} ({scope:?}): refused");
                    assert_eq!(rejection.reason, ERROR_TOPOLOGY_AFFINITY);
                    assert_eq!(
                        rejection.message,
                        "Resources cannot be allocated with Topology locality"
                    );
                }
            }
        }
    }
}

// The scopes' Admit: hints are kept per container (init containers first) and handed to
// the providers' allocation; the pod scope merges once for all of them.
#[test]
fn admit_records_affinity_and_allocates_in_order() {
    let policy = Policy::BestEffort {
        numa_info: two_nodes(),
        opts: PolicyOptions::default(),
    };
    let pod = pod_with(&["app"], &["init"]);
    for scope in [Scope::Container, Scope::Pod] {
        let mut manager = TopologyManager::with_policy(policy.clone(), scope);
        let mut mock = MockHintProvider::new(provider(&[(
            "cpu",
            Some(vec![hint(mask(&[1]), true), hint(mask(&[0, 1]), false)]),
        )]));
        manager.admit(&pod, &mut [&mut mock]).expect("admitted");
        let want = hint(mask(&[1]), true);
        assert_eq!(
            mock.allocated,
            vec![("init".to_string(), want), ("app".to_string(), want)]
        );
        assert_eq!(manager.get_affinity("pod-uid", "app"), want);
        assert_eq!(manager.get_affinity("pod-uid", "init"), want);
        assert_eq!(
            manager.get_affinity("pod-uid", "other"),
            TopologyHint::default()
        );

        manager.add_container("pod-uid", "app", "id-1");
        manager.add_container("pod-uid", "app", "id-2");
        manager.remove_container("id-1");
        assert_eq!(
            manager.get_affinity("pod-uid", "app"),
            want,
            "another id is left"
        );
        manager.remove_container("id-2");
        assert_eq!(
            manager.get_affinity("pod-uid", "app"),
            TopologyHint::default()
        );
        manager.remove_container("unknown");
    }
}

// scope.go admitPolicyNone and GetPodAdmitResult: the provider's rejection comes back
// as it is; the `none` policy allocates with "anywhere".
#[test]
fn admit_passes_on_allocation_failures() {
    let pod = pod_with(&["app"], &[]);
    let mut manager = TopologyManager::with_policy(Policy::None, Scope::Container);
    let mut ok = MockHintProvider::new(ProviderHints::new());
    manager.admit(&pod, &mut [&mut ok]).expect("admitted");
    assert_eq!(
        ok.allocated,
        vec![("app".to_string(), TopologyHint::default())]
    );

    let mut failing = MockHintProvider::new(ProviderHints::new());
    failing.fail = Some(unexpected_admission_error(&"boom"));
    let rejection = manager
        .admit(&pod, &mut [&mut failing])
        .expect_err("refused");
    assert_eq!(rejection.reason, "UnexpectedAdmissionError");
    assert_eq!(
        rejection.message,
        "Allocate failed due to boom, which is unexpected"
    );
}
