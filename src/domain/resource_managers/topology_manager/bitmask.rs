//! A set of NUMA node ids as a 64-bit mask (upstream v1.26
//! `topologymanager/bitmask`), with upstream's order ("narrower": fewer bits, then the
//! lower value) and its text form.

use std::fmt;

/// NUMA nodes 0 to 63 as bits of a `u64` (upstream's `bitMask`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct BitMask(u64);

/// A bit outside 0-63, in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bit number must be in range 0-63")]
pub struct BitOutOfRange;

fn bit(i: i64) -> Result<u64, BitOutOfRange> {
    if (0..64).contains(&i) {
        Ok(1 << i)
    } else {
        Err(BitOutOfRange)
    }
}

impl BitMask {
    /// No bit set (upstream's `NewEmptyBitMask`).
    pub const fn empty() -> BitMask {
        BitMask(0)
    }

    /// The mask with these bits (upstream's `NewBitMask`).
    pub fn new(bits: &[usize]) -> Result<BitMask, BitOutOfRange> {
        let mut mask = BitMask(0);
        mask.add(bits)?;
        Ok(mask)
    }

    /// Sets the bits; with one out of range, none is set.
    pub fn add(&mut self, bits: &[usize]) -> Result<(), BitOutOfRange> {
        let mut mask = self.0;
        for b in bits {
            mask |= bit(i64::try_from(*b).unwrap_or(i64::MAX))?;
        }
        self.0 = mask;
        Ok(())
    }

    /// Clears the bits; with one out of range, none is cleared.
    pub fn remove(&mut self, bits: &[usize]) -> Result<(), BitOutOfRange> {
        let mut mask = self.0;
        for b in bits {
            mask &= !bit(i64::try_from(*b).unwrap_or(i64::MAX))?;
        }
        self.0 = mask;
        Ok(())
    }

    pub fn and(&mut self, masks: &[BitMask]) {
        for m in masks {
            self.0 &= m.0;
        }
    }

    pub fn or(&mut self, masks: &[BitMask]) {
        for m in masks {
            self.0 |= m.0;
        }
    }

    pub fn clear(&mut self) {
        self.0 = 0;
    }

    pub fn fill(&mut self) {
        self.0 = u64::MAX;
    }

    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    pub fn is_set(&self, bit: usize) -> bool {
        bit < 64 && self.0 & (1 << bit) != 0
    }

    pub fn any_set(&self, bits: &[usize]) -> bool {
        bits.iter().any(|b| self.is_set(*b))
    }

    /// Fewer bits set, or as many and a lower value.
    pub fn is_narrower_than(&self, other: &BitMask) -> bool {
        if self.count() == other.count() {
            return self.is_less_than(other);
        }
        self.count() < other.count()
    }

    pub fn is_less_than(&self, other: &BitMask) -> bool {
        self.0 < other.0
    }

    pub fn is_greater_than(&self, other: &BitMask) -> bool {
        self.0 > other.0
    }

    pub fn count(&self) -> usize {
        self.0.count_ones() as usize
    }

    /// The set bits, ascending.
    pub fn bits(&self) -> Vec<usize> {
        (0..64).filter(|i| self.is_set(*i)).collect()
    }

    /// The raw mask.
    pub fn as_u64(&self) -> u64 {
        self.0
    }
}

/// The AND of `first` and `masks` (upstream's `bitmask.And`).
pub fn and(first: BitMask, masks: &[BitMask]) -> BitMask {
    let mut m = first;
    m.and(masks);
    m
}

/// The OR of `first` and `masks` (upstream's `bitmask.Or`).
pub fn or(first: BitMask, masks: &[BitMask]) -> BitMask {
    let mut m = first;
    m.or(masks);
    m
}

impl fmt::Display for BitMask {
    /// Binary, zero-padded to an even width (at least 2) as upstream prints it in logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const GROUPING: u32 = 2;
        let mut shift = 64 - GROUPING;
        while shift > 0 {
            if self.0 > (1u64 << shift) {
                let width = (shift + GROUPING) as usize;
                return write!(f, "{:0width$b}", self.0);
            }
            shift -= GROUPING;
        }
        write!(f, "{:02b}", self.0)
    }
}

/// Calls `callback` with every non-empty mask made of `bits`: all single bits first, then
/// all pairs, and so on (upstream's `IterateBitMasks`).
pub fn iterate_bit_masks(bits: &[usize], callback: &mut dyn FnMut(BitMask)) {
    fn iterate(bits: &[usize], accum: &mut Vec<usize>, size: usize, cb: &mut dyn FnMut(BitMask)) {
        if accum.len() == size {
            // Only ids 0..64 reach here from NUMA node lists; others are skipped.
            if let Ok(mask) = BitMask::new(accum) {
                cb(mask);
            }
            return;
        }
        for i in 0..bits.len() {
            accum.push(bits[i]);
            iterate(&bits[i + 1..], accum, size, cb);
            accum.pop();
        }
    }
    for size in 1..=bits.len() {
        iterate(bits, &mut Vec::with_capacity(size), size, callback);
    }
}

#[cfg(test)]
mod tests {
    //! Upstream v1.26's bitmask_test.go cases.
    use super::*;

    fn mask(bits: &[usize]) -> BitMask {
        BitMask::new(bits).expect("bits in range")
    }

    #[test]
    fn new_empty_bit_mask_prints_00() {
        assert_eq!(BitMask::empty().to_string(), "00");
    }

    #[test]
    fn new_bit_mask() {
        for (bits, want) in [(&[0][..], "01"), (&[1], "10"), (&[0, 1], "11")] {
            assert_eq!(mask(bits).to_string(), want);
        }
    }

    #[test]
    fn add_sets_bits_and_refuses_out_of_range_ones_whole() {
        for (bits, want) in [(&[0][..], "01"), (&[1], "10"), (&[0, 1], "11")] {
            let mut m = BitMask::empty();
            m.add(bits).expect("in range");
            assert_eq!(m.to_string(), want);
        }
        let mut m = BitMask::empty();
        assert_eq!(m.add(&[64]), Err(BitOutOfRange));
        assert_eq!(m.to_string(), "00");
        assert_eq!(
            BitOutOfRange.to_string(),
            "bit number must be in range 0-63"
        );
    }

    #[test]
    fn remove_clears_bits_and_refuses_out_of_range_ones_whole() {
        let cases: [(&[usize], &[usize], &str); 3] = [
            (&[0], &[0], "00"),
            (&[0, 1], &[1], "01"),
            (&[0, 1], &[0, 1], "00"),
        ];
        for (set, remove, want) in cases {
            let mut m = mask(set);
            m.remove(remove).expect("in range");
            assert_eq!(m.to_string(), want);
        }
        let mut m = mask(&[0]);
        assert_eq!(m.remove(&[64]), Err(BitOutOfRange));
        assert_eq!(m.to_string(), "01");
    }

    #[test]
    fn and_of_masks() {
        let cases: [(&[&[usize]], &str); 6] = [
            (&[&[0, 1], &[0, 1]], "11"),
            (&[&[0, 1], &[1]], "10"),
            (&[&[0], &[0, 1]], "01"),
            (&[&[0, 1], &[0, 1], &[1]], "10"),
            (&[&[0], &[0], &[1], &[0, 1]], "00"),
            (&[&[0, 1, 2, 3], &[1, 2, 3], &[2, 3], &[3]], "1000"),
        ];
        for (masks, want) in cases {
            let masks: Vec<BitMask> = masks.iter().map(|b| mask(b)).collect();
            assert_eq!(and(masks[0], &masks).to_string(), want);
        }
    }

    #[test]
    fn or_of_masks() {
        let cases: [(&[&[usize]], &str); 6] = [
            (&[&[0], &[]], "01"),
            (&[&[1], &[1]], "10"),
            (&[&[0], &[1]], "11"),
            (&[&[0, 1], &[0, 1]], "11"),
            (&[&[0], &[1], &[0, 1]], "11"),
            (&[&[3], &[2], &[1], &[0]], "1111"),
        ];
        for (masks, want) in cases {
            let masks: Vec<BitMask> = masks.iter().map(|b| mask(b)).collect();
            assert_eq!(or(masks[0], &masks).to_string(), want);
        }
    }

    #[test]
    fn clear_and_fill() {
        for bits in [&[0][..], &[1], &[0, 1]] {
            let mut m = mask(bits);
            m.clear();
            assert_eq!(m.to_string(), "00");
        }
        for bits in [&[][..], &[0], &[0, 1]] {
            let mut m = mask(bits);
            m.fill();
            assert_eq!(m.to_string(), "1".repeat(64));
        }
    }

    #[test]
    fn is_empty_is_set_any_set() {
        assert!(mask(&[]).is_empty());
        assert!(!mask(&[0]).is_empty());
        assert!(!mask(&[0, 1]).is_empty());
        assert!(!mask(&[]).is_set(0));
        assert!(mask(&[0]).is_set(0));
        assert!(mask(&[0, 1]).is_set(1));
        assert!(!mask(&[0, 1]).is_set(64));
        assert!(!mask(&[]).any_set(&[0, 1]));
        assert!(mask(&[0]).any_set(&[0, 1]));
        assert!(mask(&[0, 1]).any_set(&[0, 1]));
        assert!(!mask(&[0, 1]).any_set(&[64, 65]));
        assert!(!mask(&[1, 2]).any_set(&[0, 3]));
    }

    #[test]
    fn is_equal_count_get_bits() {
        assert_eq!(mask(&[]), mask(&[]));
        assert_ne!(mask(&[]), mask(&[0]));
        assert_eq!(mask(&[0]), mask(&[0]));
        assert_ne!(mask(&[0]), mask(&[1]));
        assert_eq!(mask(&[0, 1]), mask(&[0, 1]));
        assert_eq!(mask(&[]).count(), 0);
        assert_eq!(mask(&[0]).count(), 1);
        assert_eq!(mask(&[0, 1]).count(), 2);
        assert_eq!(mask(&[]).bits(), Vec::<usize>::new());
        assert_eq!(mask(&[0]).bits(), vec![0]);
        assert_eq!(mask(&[0, 1]).bits(), vec![0, 1]);
    }

    #[test]
    fn narrower_less_greater() {
        assert!(mask(&[0]).is_narrower_than(&mask(&[0, 1])));
        assert!(!mask(&[0, 1]).is_narrower_than(&mask(&[0])));
        assert!(mask(&[0]).is_narrower_than(&mask(&[1])));
        assert!(!mask(&[1]).is_narrower_than(&mask(&[0])));
        assert!(!mask(&[0]).is_less_than(&mask(&[0])));
        assert!(!mask(&[1]).is_less_than(&mask(&[0])));
        assert!(mask(&[0]).is_less_than(&mask(&[1])));
        assert!(!mask(&[0]).is_greater_than(&mask(&[0])));
        assert!(mask(&[1]).is_greater_than(&mask(&[0])));
        assert!(!mask(&[0]).is_greater_than(&mask(&[1])));
    }

    #[test]
    fn iterate_bit_masks_visits_every_non_empty_mask_once() {
        for numbits in [1usize, 2, 4, 8, 16] {
            let bits: Vec<usize> = (0..numbits).collect();
            let mut count = 0;
            iterate_bit_masks(&bits, &mut |_| count += 1);
            assert_eq!(count, (1 << numbits) - 1, "{numbits} bits");
        }
        let mut order = Vec::new();
        iterate_bit_masks(&[0, 1, 2], &mut |m| order.push(m.bits()));
        assert_eq!(
            order,
            vec![
                vec![0],
                vec![1],
                vec![2],
                vec![0, 1],
                vec![0, 2],
                vec![1, 2],
                vec![0, 1, 2]
            ]
        );
    }

    #[test]
    fn display_widens_in_pairs_of_bits() {
        assert_eq!(mask(&[2]).to_string(), "100");
        assert_eq!(mask(&[0, 2]).to_string(), "0101");
        assert_eq!(mask(&[63]).to_string(), format!("1{}", "0".repeat(63)));
    }
}
