//! Sets of CPU ids in the Linux "cpu list" format (`0-3,8,10-11`), as used
//! by cgroup `cpuset.cpus`, the kubelet's `reservedSystemCPUs` and the CPU
//! manager state.
//!
//! Parsing follows Kubernetes' `k8s.io/utils/cpuset` (including Go's
//! `strconv.Atoi` error wording); formatting emits the canonical range list.

use super::go_quote;
use std::fmt;
use std::str::FromStr;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Highest CPU id `parse` accepts. Upstream has no limit, but an untrusted
/// string like `0-99999999999` would then exhaust memory; real kernels top
/// out far below this (NR_CPUS is at most a few thousand).
pub const MAX_CPU_ID: usize = (1 << 20) - 1;

/// An ordered set of CPU ids.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuSet {
    /// Sorted ascending, no duplicates.
    cpus: Vec<usize>,
}

/// Why a cpu list string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuSetError {
    /// An element is not a decimal integer (Go's `strconv.Atoi` wording).
    #[error("strconv.Atoi: parsing {}: invalid syntax", go_quote(.input))]
    InvalidSyntax { input: String },
    /// An element does not fit a 64-bit integer (Go's `strconv.Atoi` wording).
    #[error("strconv.Atoi: parsing {}: value out of range", go_quote(.input))]
    OutOfRange { input: String },
    /// A range whose start exceeds its end, e.g. `3-1`.
    #[error("invalid range {} ({start} > {end})", go_quote(.range))]
    InvalidRange { range: String, start: i64, end: i64 },
    /// A CPU id above [`MAX_CPU_ID`]; a local safeguard, not upstream.
    #[error("cpu id {cpu} exceeds the supported maximum of {max}")]
    TooLarge { cpu: i64, max: usize },
}

impl CpuSet {
    /// Parses a Linux cpu list: comma-separated ids and inclusive `a-b`
    /// ranges, in any order, overlaps allowed; `""` is the empty set.
    /// Whitespace is not trimmed, matching upstream.
    pub fn parse(s: &str) -> Result<CpuSet, CpuSetError> {
        if s.is_empty() {
            return Ok(CpuSet::default());
        }
        let mut cpus = Vec::new();
        for part in s.split(',') {
            match part.split_once('-') {
                None => {
                    let cpu = checked_id(go_atoi(part)?)?;
                    cpus.push(cpu);
                }
                Some((a, b)) => {
                    let start = go_atoi(a)?;
                    let end = go_atoi(b)?;
                    if start > end {
                        return Err(CpuSetError::InvalidRange {
                            range: part.to_string(),
                            start,
                            end,
                        });
                    }
                    let (start, end) = (checked_id(start)?, checked_id(end)?);
                    cpus.extend(start..=end);
                }
            }
        }
        Ok(CpuSet::new(cpus))
    }

    pub fn new(cpus: impl IntoIterator<Item = usize>) -> CpuSet {
        let mut cpus: Vec<usize> = cpus.into_iter().collect();
        cpus.sort_unstable();
        cpus.dedup();
        CpuSet { cpus }
    }

    pub fn len(&self) -> usize {
        self.cpus.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cpus.is_empty()
    }

    pub fn contains(&self, cpu: usize) -> bool {
        self.cpus.binary_search(&cpu).is_ok()
    }

    pub fn is_subset_of(&self, other: &CpuSet) -> bool {
        self.cpus.iter().all(|c| other.contains(*c))
    }

    pub fn union(&self, o: &CpuSet) -> CpuSet {
        CpuSet::new(self.cpus.iter().chain(o.cpus.iter()).copied())
    }

    pub fn difference(&self, o: &CpuSet) -> CpuSet {
        CpuSet {
            cpus: self
                .cpus
                .iter()
                .copied()
                .filter(|c| !o.contains(*c))
                .collect(),
        }
    }

    /// CPU ids in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.cpus.iter().copied()
    }
}

fn checked_id(v: i64) -> Result<usize, CpuSetError> {
    match usize::try_from(v) {
        Ok(cpu) if cpu <= MAX_CPU_ID => Ok(cpu),
        _ => Err(CpuSetError::TooLarge {
            cpu: v,
            max: MAX_CPU_ID,
        }),
    }
}

/// Go's `strconv.Atoi` on a 64-bit platform: optional sign, then one or
/// more ASCII digits, nothing else. Like Go, an overflow found while
/// scanning wins over a bad character that comes after it.
fn go_atoi(s: &str) -> Result<i64, CpuSetError> {
    let syntax = || CpuSetError::InvalidSyntax {
        input: s.to_string(),
    };
    let range = || CpuSetError::OutOfRange {
        input: s.to_string(),
    };
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() {
        return Err(syntax());
    }
    let mut n: u64 = 0;
    for b in digits.bytes() {
        if !b.is_ascii_digit() {
            return Err(syntax());
        }
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(b - b'0')))
            .ok_or_else(range)?;
    }
    if negative {
        0i64.checked_sub_unsigned(n).ok_or_else(range)
    } else {
        i64::try_from(n).map_err(|_| range())
    }
}

impl fmt::Display for CpuSet {
    /// Canonical cpu list: runs of two or more consecutive ids become
    /// `a-b`, separated by commas, ascending; the empty set is `""`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut iter = self.cpus.iter().copied();
        let Some(first) = iter.next() else {
            return Ok(());
        };
        let mut start = first;
        let mut end = first;
        let mut need_comma = false;
        let mut emit = |f: &mut fmt::Formatter<'_>, start: usize, end: usize| {
            if need_comma {
                f.write_str(",")?;
            }
            need_comma = true;
            if start == end {
                write!(f, "{start}")
            } else {
                write!(f, "{start}-{end}")
            }
        };
        for cpu in iter {
            if cpu == end + 1 {
                end = cpu;
            } else {
                emit(f, start, end)?;
                start = cpu;
                end = cpu;
            }
        }
        emit(f, start, end)
    }
}

impl FromStr for CpuSet {
    type Err = CpuSetError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CpuSet::parse(s)
    }
}

impl FromIterator<usize> for CpuSet {
    fn from_iter<I: IntoIterator<Item = usize>>(iter: I) -> Self {
        CpuSet::new(iter)
    }
}

impl Serialize for CpuSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CpuSet {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(CpuSetVisitor)
    }
}

struct CpuSetVisitor;

impl Visitor<'_> for CpuSetVisitor {
    type Value = CpuSet;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a cpu list string such as \"0-3,8\"")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<CpuSet, E> {
        CpuSet::parse(v).map_err(E::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(cpus: &[usize]) -> CpuSet {
        CpuSet::new(cpus.iter().copied())
    }

    // Positive cases from k8s.io/utils/cpuset TestParse.
    #[test]
    fn parse_valid() {
        let cases: &[(&str, &[usize])] = &[
            ("", &[]),
            ("5", &[5]),
            ("1,2,3,4,5", &[1, 2, 3, 4, 5]),
            ("1-5", &[1, 2, 3, 4, 5]),
            ("1-2,3-5", &[1, 2, 3, 4, 5]),
            ("5,4,3,2,1", &[1, 2, 3, 4, 5]),
            ("3-6,1-5", &[1, 2, 3, 4, 5, 6]),
            ("3-3,5-5", &[3, 5]),
            ("0-3,8,10-11", &[0, 1, 2, 3, 8, 10, 11]),
            ("01,+3", &[1, 3]),
        ];
        for (input, want) in cases {
            assert_eq!(CpuSet::parse(input), Ok(set(want)), "parse({input:?})");
            assert_eq!(input.parse::<CpuSet>(), Ok(set(want)));
        }
    }

    // Negative cases from k8s.io/utils/cpuset TestParse, with the messages
    // Go produces for them.
    #[test]
    fn parse_errors() {
        let cases: &[(&str, &str)] = &[
            (
                "nonnumeric",
                r#"strconv.Atoi: parsing "nonnumeric": invalid syntax"#,
            ),
            (
                "non-numeric",
                r#"strconv.Atoi: parsing "non": invalid syntax"#,
            ),
            (
                "no,numbers",
                r#"strconv.Atoi: parsing "no": invalid syntax"#,
            ),
            ("0-a", r#"strconv.Atoi: parsing "a": invalid syntax"#),
            ("a-0", r#"strconv.Atoi: parsing "a": invalid syntax"#),
            (",a-0", r#"strconv.Atoi: parsing "": invalid syntax"#),
            ("0,a-0", r#"strconv.Atoi: parsing "a": invalid syntax"#),
            ("a-0,0", r#"strconv.Atoi: parsing "a": invalid syntax"#),
            ("0,", r#"strconv.Atoi: parsing "": invalid syntax"#),
            ("0,,", r#"strconv.Atoi: parsing "": invalid syntax"#),
            (",3", r#"strconv.Atoi: parsing "": invalid syntax"#),
            (",", r#"strconv.Atoi: parsing "": invalid syntax"#),
            ("-", r#"strconv.Atoi: parsing "": invalid syntax"#),
            ("5-", r#"strconv.Atoi: parsing "": invalid syntax"#),
            ("3-5,", r#"strconv.Atoi: parsing "": invalid syntax"#),
            ("3-0", r#"invalid range "3-0" (3 > 0)"#),
            ("0--3", r#"invalid range "0--3" (0 > -3)"#),
            ("3-1", r#"invalid range "3-1" (3 > 1)"#),
            ("abc", r#"strconv.Atoi: parsing "abc": invalid syntax"#),
            ("1-3-5", r#"strconv.Atoi: parsing "3-5": invalid syntax"#),
            (" 1", r#"strconv.Atoi: parsing " 1": invalid syntax"#),
            ("1\n", r#"strconv.Atoi: parsing "1\n": invalid syntax"#),
            (
                "99999999999999999999",
                r#"strconv.Atoi: parsing "99999999999999999999": value out of range"#,
            ),
            (
                "99999999999999999999x",
                r#"strconv.Atoi: parsing "99999999999999999999x": value out of range"#,
            ),
            (
                "0-99999999999",
                "cpu id 99999999999 exceeds the supported maximum of 1048575",
            ),
        ];
        for (input, want) in cases {
            match CpuSet::parse(input) {
                Ok(s) => panic!("parse({input:?}) = {s}, want error {want}"),
                Err(e) => assert_eq!(e.to_string(), *want, "parse({input:?})"),
            }
        }
    }

    // Cases from k8s.io/utils/cpuset TestString.
    #[test]
    fn display() {
        let cases: &[(&[usize], &str)] = &[
            (&[], ""),
            (&[5], "5"),
            (&[1, 2, 3, 4, 5], "1-5"),
            (&[1, 2, 3, 5, 6, 8], "1-3,5-6,8"),
            (&[0, 1, 2, 3, 8, 10, 11], "0-3,8,10-11"),
        ];
        for (cpus, want) in cases {
            assert_eq!(set(cpus).to_string(), *want);
        }
    }

    #[test]
    fn canonical_round_trip_is_identity() {
        for s in [
            "",
            "0",
            "5",
            "1-5",
            "1-3,5-6,8",
            "0-3,8,10-11",
            "0,2,4-63,127",
        ] {
            assert_eq!(CpuSet::parse(s).expect("valid test input").to_string(), s);
        }
        assert_eq!(
            CpuSet::parse("5,4,3-3,0-1")
                .expect("valid test input")
                .to_string(),
            "0-1,3-5"
        );
    }

    #[test]
    fn set_operations() {
        let a = set(&[1, 2, 3]);
        let b = set(&[3, 4]);
        assert_eq!(a.union(&b), set(&[1, 2, 3, 4]));
        assert_eq!(a.union(&CpuSet::default()), a);
        assert_eq!(a.difference(&b), set(&[1, 2]));
        assert_eq!(b.difference(&a), set(&[4]));
        assert_eq!(a.difference(&a), CpuSet::default());
        assert!(set(&[1, 3]).is_subset_of(&a));
        assert!(CpuSet::default().is_subset_of(&a));
        assert!(a.is_subset_of(&a));
        assert!(!b.is_subset_of(&a));
        assert!(a.contains(2) && !a.contains(4));
        assert_eq!(a.len(), 3);
        assert!(!a.is_empty() && CpuSet::default().is_empty());
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!([3usize, 1, 3].into_iter().collect::<CpuSet>(), set(&[1, 3]));
    }

    #[test]
    fn serde() {
        let s = set(&[0, 1, 2, 3, 8]);
        assert_eq!(
            serde_json::to_string(&s).expect("valid test input"),
            r#""0-3,8""#
        );
        assert_eq!(
            serde_json::from_str::<CpuSet>(r#""8,0-3""#).expect("valid test input"),
            s
        );
        assert_eq!(
            serde_json::from_str::<CpuSet>(r#""""#).expect("valid test input"),
            CpuSet::default()
        );
        let err = serde_json::from_str::<CpuSet>(r#""3-1""#).expect_err("must be rejected");
        assert!(
            err.to_string().contains(r#"invalid range "3-1" (3 > 1)"#),
            "{err}"
        );
        assert!(serde_json::from_str::<CpuSet>("3").is_err());
    }
}
