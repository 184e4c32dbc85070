//! A hint provider's statement about where a resource could be allocated (upstream's
//! `TopologyHint`), and the hints a provider returns per resource.

use std::collections::BTreeMap;
use std::fmt;

use super::bitmask::BitMask;

/// NUMA nodes a resource could come from, and whether that placement is one the
/// provider prefers. No affinity (`None`) means "anywhere" (upstream's nil mask).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct TopologyHint {
    pub numa_node_affinity: Option<BitMask>,
    pub preferred: bool,
}

impl TopologyHint {
    pub const fn new(numa_node_affinity: Option<BitMask>, preferred: bool) -> TopologyHint {
        TopologyHint {
            numa_node_affinity,
            preferred,
        }
    }

    /// Preferred first, then the narrower affinity (upstream's `LessThan`); a hint without
    /// affinity counts as the empty mask.
    pub fn less_than(&self, other: &TopologyHint) -> bool {
        if self.preferred != other.preferred {
            return self.preferred;
        }
        let mine = self.numa_node_affinity.unwrap_or_default();
        mine.is_narrower_than(&other.numa_node_affinity.unwrap_or_default())
    }

    /// [`TopologyHint::less_than`] as an ordering, to sort hints as upstream does.
    pub fn ordering(&self, other: &TopologyHint) -> std::cmp::Ordering {
        if self.less_than(other) {
            std::cmp::Ordering::Less
        } else if other.less_than(self) {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    }
}

impl fmt::Display for TopologyHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.numa_node_affinity {
            Some(mask) => write!(f, "{{{mask} {}}}", self.preferred),
            None => write!(f, "{{<nil> {}}}", self.preferred),
        }
    }
}

/// One provider's hints per resource name. An empty map means the provider has no
/// preference at all; per resource, `None` means no preference for it and `Some(vec![])`
/// means it cannot be placed anywhere (upstream's nil versus empty slice).
pub type ProviderHints = BTreeMap<String, Option<Vec<TopologyHint>>>;

#[cfg(test)]
mod tests {
    use super::*;

    fn hint(bits: &[usize], preferred: bool) -> TopologyHint {
        TopologyHint::new(Some(BitMask::new(bits).expect("in range")), preferred)
    }

    // Upstream's `LessThan`: the preference decides first, then the narrower mask.
    #[test]
    fn less_than_prefers_preferred_then_narrower() {
        let cases = [
            (
                "Preferred hint < non-preferred",
                hint(&[0], true),
                hint(&[0], false),
                true,
            ),
            (
                "non-preferred < preferred",
                hint(&[0], false),
                hint(&[0], true),
                false,
            ),
            (
                "narrower < wider (both preferred)",
                hint(&[0], true),
                hint(&[0, 1], true),
                true,
            ),
            (
                "wider < narrower (both preferred)",
                hint(&[0, 1], true),
                hint(&[0], true),
                false,
            ),
            (
                "narrower < wider (both non-preferred)",
                hint(&[0], false),
                hint(&[0, 1], false),
                true,
            ),
            (
                "wider < narrower (both non-preferred)",
                hint(&[0, 1], false),
                hint(&[0], false),
                false,
            ),
        ];
        for (name, a, b, want) in cases {
            assert_eq!(a.less_than(&b), want, "{name}");
        }
    }

    // Upstream's `IsEqual`: equal when preference and affinity match, a missing affinity
    // equal only to another missing one.
    #[test]
    fn equality_counts_a_missing_affinity_as_distinct() {
        assert_eq!(TopologyHint::new(None, true), TopologyHint::new(None, true));
        assert_ne!(TopologyHint::new(None, true), hint(&[], true));
        assert_ne!(hint(&[0], true), hint(&[0], false));
        assert_eq!(hint(&[0, 1], false), hint(&[0, 1], false));
        assert_eq!(hint(&[0, 1], true).to_string(), "{11 true}");
        assert_eq!(TopologyHint::default().to_string(), "{<nil> false}");
    }
}
