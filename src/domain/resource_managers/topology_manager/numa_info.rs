//! The node's NUMA nodes and their distances (upstream v1.26 `numa_info.go`): the default
//! affinity (every node) and the comparisons the hint merger makes.

use std::collections::BTreeMap;

use super::bitmask::BitMask;

/// Each NUMA node's distance to every node, by node id (sysfs `distance`).
pub type NumaDistances = BTreeMap<usize, Vec<u64>>;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NumaInfo {
    pub nodes: Vec<usize>,
    pub numa_distances: NumaDistances,
}

impl NumaInfo {
    /// The narrower of two masks (fewer nodes, then the lower mask).
    pub fn narrowest(&self, m1: BitMask, m2: BitMask) -> BitMask {
        if m1.is_narrower_than(&m2) {
            m1
        } else {
            m2
        }
    }

    /// The narrower of two masks; of two as wide, the one whose nodes are closer to each
    /// other on average, then the lower mask (`prefer-closest-numa-nodes`).
    pub fn closest(&self, m1: BitMask, m2: BitMask) -> BitMask {
        if m1.count() != m2.count() {
            return self.narrowest(m1, m2);
        }
        let d1 = self.average_distance(m1);
        let d2 = self.average_distance(m2);
        if d1 == d2 {
            return if m1.is_less_than(&m2) { m1 } else { m2 };
        }
        if d1 < d2 {
            m1
        } else {
            m2
        }
    }

    /// Every NUMA node of the machine.
    pub fn default_affinity_mask(&self) -> BitMask {
        // Node ids above 63 cannot be masks; the manager refuses more than 8 nodes.
        BitMask::new(&self.nodes).unwrap_or_default()
    }

    /// The mean distance over every ordered pair of the mask's nodes (upstream's
    /// `CalculateAverageFor`); 0 for the empty mask.
    pub fn average_distance(&self, mask: BitMask) -> f64 {
        let bits = mask.bits();
        if bits.is_empty() {
            return 0.0;
        }
        let mut sum = 0.0;
        let mut count = 0.0;
        for n1 in &bits {
            for n2 in &bits {
                let d = self
                    .numa_distances
                    .get(n1)
                    .and_then(|row| row.get(*n2))
                    .copied()
                    .unwrap_or(0);
                sum += d as f64;
                count += 1.0;
            }
        }
        sum / count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask(bits: &[usize]) -> BitMask {
        BitMask::new(bits).expect("in range")
    }

    pub(crate) fn eight_nodes() -> NumaInfo {
        NumaInfo {
            nodes: (0..8).collect(),
            numa_distances: BTreeMap::from([
                (0, vec![10, 11, 12, 12, 30, 30, 30, 30]),
                (1, vec![11, 10, 12, 12, 30, 30, 30, 30]),
                (2, vec![12, 12, 10, 11, 30, 30, 30, 30]),
                (3, vec![12, 12, 11, 10, 30, 30, 30, 30]),
                (4, vec![30, 30, 30, 30, 10, 11, 12, 12]),
                (5, vec![30, 30, 30, 30, 11, 10, 12, 12]),
                (6, vec![30, 30, 30, 30, 12, 12, 10, 11]),
                (7, vec![30, 30, 30, 30, 12, 12, 13, 10]),
            ]),
        }
    }

    // Upstream's TestCalculateAvgDistanceFor and TestClosest, in short: the average over
    // ordered pairs, and the closer of two masks as wide.
    #[test]
    fn average_distance_and_closest() {
        let info = eight_nodes();
        assert_eq!(info.average_distance(mask(&[])), 0.0);
        assert_eq!(info.average_distance(mask(&[0])), 10.0);
        assert_eq!(info.average_distance(mask(&[0, 1])), 10.5);
        assert_eq!(info.average_distance(mask(&[0, 4])), 20.0);
        assert_eq!(info.closest(mask(&[0, 4]), mask(&[0, 1])), mask(&[0, 1]));
        assert_eq!(info.closest(mask(&[0, 1]), mask(&[2, 3])), mask(&[0, 1]));
        assert_eq!(info.closest(mask(&[2, 3]), mask(&[0, 1])), mask(&[0, 1]));
        assert_eq!(info.closest(mask(&[0, 1, 2]), mask(&[4])), mask(&[4]));
        assert_eq!(info.narrowest(mask(&[1]), mask(&[0])), mask(&[0]));
        assert_eq!(
            info.default_affinity_mask(),
            mask(&[0, 1, 2, 3, 4, 5, 6, 7])
        );
    }
}
