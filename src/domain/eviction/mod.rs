//! Eviction thresholds: the signal names, the hard/soft threshold maps of the
//! kubelet configuration, their flag syntax and the Linux defaults.
//!
//! Parsing follows the kubelet's `ParseThresholdConfig` rules, including its
//! quirks ("0%" and "100%" switch a threshold off, a soft threshold needs a
//! grace period), so that a configuration accepted upstream is accepted here
//! and means the same thing.
//!
//! The eviction manager's decisions live in the submodules: `signals` (the stats it
//! observes and the signal observations), `thresholds` (met, grace periods, node
//! conditions), `rank` (the order pods go in), `manager` (one cycle: conditions, local
//! storage limits, node reclaim, the pod to evict and its message), `admission` (pods
//! refused under pressure), `image_gc` (which images go).

pub mod admission;
pub mod image_gc;
pub mod manager;
pub mod rank;
pub mod signals;
pub mod thresholds;

/// The reason of an evicted pod's status, of its event and of an admission refused
/// under node pressure.
pub const EVICTED_REASON: &str = "Evicted";

/// Whether the eviction manager leaves `pod` alone (never evicts it, always admits it
/// under pressure): upstream's `IsCriticalPod`, static pods, mirror pods and pods at
/// system-critical priority. A static pod is never evicted because it is never
/// re-admitted afterwards (kubernetes/kubernetes#40573); the pods the API server sends
/// are what the eviction manager reclaims from.
pub fn protected_from_eviction(pod: &crate::domain::pod::Pod) -> bool {
    use crate::domain::pod::{is_static_pod, CONFIG_MIRROR_ANNOTATION, SYSTEM_CRITICAL_PRIORITY};
    is_static_pod(pod)
        || pod
            .metadata
            .annotations
            .contains_key(CONFIG_MIRROR_ANNOTATION)
        || pod
            .spec
            .priority
            .is_some_and(|p| p >= SYSTEM_CRITICAL_PRIORITY)
}

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::domain::units::duration::{DurationError, GoDuration};
use crate::domain::units::quantity::{Quantity, QuantityError};

/// The enforcement key that makes the kubelet add `allocatableMemory.available`
/// thresholds (mirrors `enforceNodeAllocatable: [pods]`).
const NODE_ALLOCATABLE_ENFORCEMENT_KEY: &str = "pods";

/// A measurable node resource whose low level can trigger eviction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Signal {
    #[serde(rename = "memory.available")]
    MemoryAvailable,
    #[serde(rename = "allocatableMemory.available")]
    AllocatableMemoryAvailable,
    #[serde(rename = "nodefs.available")]
    NodeFsAvailable,
    #[serde(rename = "nodefs.inodesFree")]
    NodeFsInodesFree,
    #[serde(rename = "imagefs.available")]
    ImageFsAvailable,
    #[serde(rename = "imagefs.inodesFree")]
    ImageFsInodesFree,
    #[serde(rename = "containerfs.available")]
    ContainerFsAvailable,
    #[serde(rename = "containerfs.inodesFree")]
    ContainerFsInodesFree,
    #[serde(rename = "pid.available")]
    PidAvailable,
}

impl Signal {
    /// Every signal the kubelet accepts on Linux.
    pub const ALL: [Signal; 9] = [
        Signal::MemoryAvailable,
        Signal::AllocatableMemoryAvailable,
        Signal::NodeFsAvailable,
        Signal::NodeFsInodesFree,
        Signal::ImageFsAvailable,
        Signal::ImageFsInodesFree,
        Signal::ContainerFsAvailable,
        Signal::ContainerFsInodesFree,
        Signal::PidAvailable,
    ];

    /// The upstream spelling, as written in configuration and flags.
    pub fn as_str(&self) -> &'static str {
        match self {
            Signal::MemoryAvailable => "memory.available",
            Signal::AllocatableMemoryAvailable => "allocatableMemory.available",
            Signal::NodeFsAvailable => "nodefs.available",
            Signal::NodeFsInodesFree => "nodefs.inodesFree",
            Signal::ImageFsAvailable => "imagefs.available",
            Signal::ImageFsInodesFree => "imagefs.inodesFree",
            Signal::ContainerFsAvailable => "containerfs.available",
            Signal::ContainerFsInodesFree => "containerfs.inodesFree",
            Signal::PidAvailable => "pid.available",
        }
    }

    /// Every signal is compared with "less than": they all measure what is
    /// still available.
    pub fn operator(&self) -> Operator {
        Operator::LessThan
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Signal {
    type Err = EvictionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Signal::ALL
            .iter()
            .copied()
            .find(|sig| sig.as_str() == s)
            .ok_or_else(|| EvictionError::UnsupportedSignal {
                signal: s.to_string(),
            })
    }
}

/// How the observed value is compared with the threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Operator {
    LessThan,
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operator::LessThan => f.write_str("LessThan"),
        }
    }
}

/// An absolute amount, or a fraction (0.0..=1.0) of the resource's capacity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ThresholdValue {
    Quantity(Quantity),
    /// Stored as a fraction, as upstream does: "10%" is 0.1. f32 because the
    /// reservation arithmetic upstream rounds through float32, and node
    /// allocatable must come out byte-identical.
    Percentage(f32),
}

impl fmt::Display for ThresholdValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThresholdValue::Quantity(q) => write!(f, "{q}"),
            ThresholdValue::Percentage(p) => {
                // Round away the float32 noise so 0.105 prints as 10.5%.
                let pct = (f64::from(*p) * 100.0 * 10_000.0).round() / 10_000.0;
                write!(f, "{pct}%")
            }
        }
    }
}

/// One parsed eviction threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    pub signal: Signal,
    pub operator: Operator,
    pub value: ThresholdValue,
    /// Zero for a hard threshold.
    pub grace_period: GoDuration,
    pub min_reclaim: Option<ThresholdValue>,
}

impl Threshold {
    /// Hard thresholds are the ones without a grace period (upstream's
    /// isHardEvictionThreshold).
    pub fn is_hard(&self) -> bool {
        self.grace_period.as_nanos() == 0
    }
}

/// Which map an entry came from; it decides the words of the error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThresholdKind {
    Hard,
    Soft,
}

impl ThresholdKind {
    fn field(&self) -> &'static str {
        match self {
            ThresholdKind::Hard => "evictionHard (--eviction-hard)",
            ThresholdKind::Soft => "evictionSoft (--eviction-soft)",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvictionError {
    #[error("unsupported eviction signal {signal}")]
    UnsupportedSignal { signal: String },
    #[error("{}: invalid eviction threshold \"{signal}<{value}\": {source}", kind.field())]
    InvalidQuantity {
        kind: ThresholdKind,
        signal: Signal,
        value: String,
        source: QuantityError,
    },
    #[error("{}: invalid eviction threshold \"{signal}<{value}\": strconv.ParseFloat: parsing {number:?}: invalid syntax", kind.field())]
    InvalidPercentage {
        kind: ThresholdKind,
        signal: Signal,
        value: String,
        number: String,
    },
    #[error("eviction percentage threshold {signal} must be >= 0%: {value}")]
    PercentageNegative { signal: Signal, value: String },
    #[error("eviction percentage threshold {signal} must be <= 100%: {value}")]
    PercentageTooLarge { signal: Signal, value: String },
    #[error("eviction threshold {signal} must be positive: {value}")]
    NotPositive { signal: Signal, value: Quantity },
    #[error("grace period must be specified for the soft eviction threshold {signal}")]
    MissingGracePeriod { signal: Signal },
    #[error("evictionSoftGracePeriod (--eviction-soft-grace-period): invalid eviction grace period \"{signal}={value}\": {source}")]
    InvalidGracePeriod {
        signal: Signal,
        value: String,
        source: DurationError,
    },
    #[error("invalid eviction grace period specified: {value}, must be a positive value")]
    NegativeGracePeriod { signal: Signal, value: String },
    #[error("evictionMinimumReclaim (--eviction-minimum-reclaim): invalid eviction minimum reclaim \"{signal}={value}\": {source}")]
    InvalidMinReclaimQuantity {
        signal: Signal,
        value: String,
        source: QuantityError,
    },
    #[error("evictionMinimumReclaim (--eviction-minimum-reclaim): invalid eviction minimum reclaim \"{signal}={value}\": strconv.ParseFloat: parsing {number:?}: invalid syntax")]
    InvalidMinReclaimPercentage {
        signal: Signal,
        value: String,
        number: String,
    },
    #[error("eviction percentage minimum reclaim {signal} must be positive: {value}")]
    MinReclaimPercentageNotPositive { signal: Signal, value: String },
    #[error("negative eviction minimum reclaim specified for {signal}")]
    NegativeMinReclaim { signal: Signal, value: String },
    #[error("invalid value {text:?}: malformed pair {pair:?}, expect string{separator}string")]
    MalformedPair {
        text: String,
        pair: String,
        separator: char,
    },
}

/// Linux defaults for `evictionHard` (upstream v1beta1 DefaultEvictionHard).
pub fn default_eviction_hard() -> BTreeMap<String, String> {
    [
        ("memory.available", "100Mi"),
        ("nodefs.available", "10%"),
        ("nodefs.inodesFree", "5%"),
        ("imagefs.available", "15%"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The effective `evictionHard`: an absent map means the defaults; a given
/// map replaces them, unless `mergeDefaultEvictionSettings` asks for the
/// missing default signals to be filled in (given values win).
pub fn effective_eviction_hard(
    given: Option<&BTreeMap<String, String>>,
    merge_default_eviction_settings: bool,
) -> BTreeMap<String, String> {
    match given {
        None => default_eviction_hard(),
        Some(map) => {
            let mut out = map.clone();
            if merge_default_eviction_settings {
                for (k, v) in default_eviction_hard() {
                    out.entry(k).or_insert(v);
                }
            }
            out
        }
    }
}

/// `--eviction-hard` / `--eviction-soft` syntax: "signal<value,signal<value".
pub fn parse_lt_map(s: &str) -> Result<BTreeMap<String, String>, EvictionError> {
    parse_pairs(s, '<')
}

/// `--eviction-soft-grace-period` / `--eviction-minimum-reclaim` syntax:
/// "signal=value,signal=value".
pub fn parse_eq_map(s: &str) -> Result<BTreeMap<String, String>, EvictionError> {
    parse_pairs(s, '=')
}

/// Same splitting as upstream's map flags: empty items are skipped, keys and
/// values are trimmed, the first separator splits.
fn parse_pairs(s: &str, separator: char) -> Result<BTreeMap<String, String>, EvictionError> {
    let mut out = BTreeMap::new();
    for item in s.split(',') {
        if item.is_empty() {
            continue;
        }
        let Some((k, v)) = item.split_once(separator) else {
            return Err(EvictionError::MalformedPair {
                text: s.to_string(),
                pair: item.to_string(),
                separator,
            });
        };
        out.insert(k.trim().to_string(), v.trim().to_string());
    }
    Ok(out)
}

/// Upstream ParseThresholdConfig: hard thresholds, then soft thresholds (each
/// needing a grace period), minimum reclaims attached by signal, and, when
/// node allocatable is enforced on pods, an `allocatableMemory.available`
/// copy of every hard `memory.available` threshold. Stops at the first
/// problem, in the order upstream checks them.
pub fn parse_threshold_config(
    enforce_node_allocatable: &[String],
    hard: &BTreeMap<String, String>,
    soft: &BTreeMap<String, String>,
    soft_grace_period: &BTreeMap<String, String>,
    min_reclaim: &BTreeMap<String, String>,
) -> Result<Vec<Threshold>, EvictionError> {
    let (thresholds, mut errors) = build(
        enforce_node_allocatable,
        hard,
        soft,
        soft_grace_period,
        min_reclaim,
    );
    if errors.is_empty() {
        Ok(thresholds)
    } else {
        Err(errors.swap_remove(0))
    }
}

/// Like [`parse_threshold_config`] but reports every problem; empty when the
/// configuration is valid.
pub fn validate_threshold_config(
    enforce_node_allocatable: &[String],
    hard: &BTreeMap<String, String>,
    soft: &BTreeMap<String, String>,
    soft_grace_period: &BTreeMap<String, String>,
    min_reclaim: &BTreeMap<String, String>,
) -> Vec<EvictionError> {
    build(
        enforce_node_allocatable,
        hard,
        soft,
        soft_grace_period,
        min_reclaim,
    )
    .1
}

/// The configuration's thresholds, hard and soft apart, with every problem found.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedThresholds {
    /// Hard thresholds, then the `allocatableMemory.available` copies (see
    /// [`parse_threshold_config`]).
    pub hard: Vec<Threshold>,
    pub soft: Vec<Threshold>,
    pub errors: Vec<EvictionError>,
}

/// Like [`parse_threshold_config`], reporting every problem and splitting the kinds.
pub fn thresholds(
    enforce_node_allocatable: &[String],
    hard: &BTreeMap<String, String>,
    soft: &BTreeMap<String, String>,
    soft_grace_period: &BTreeMap<String, String>,
    min_reclaim: &BTreeMap<String, String>,
) -> ParsedThresholds {
    let (all, errors) = build(
        enforce_node_allocatable,
        hard,
        soft,
        soft_grace_period,
        min_reclaim,
    );
    let (hard, soft) = all.into_iter().partition(Threshold::is_hard);
    ParsedThresholds { hard, soft, errors }
}

fn build(
    enforce_node_allocatable: &[String],
    hard: &BTreeMap<String, String>,
    soft: &BTreeMap<String, String>,
    soft_grace_period: &BTreeMap<String, String>,
    min_reclaim: &BTreeMap<String, String>,
) -> (Vec<Threshold>, Vec<EvictionError>) {
    let mut errors = Vec::new();
    let mut results = parse_statements(ThresholdKind::Hard, hard, &mut errors);
    let mut soft_thresholds = parse_statements(ThresholdKind::Soft, soft, &mut errors);
    let (mut grace_periods, grace_given) = parse_grace_periods(soft_grace_period, &mut errors);
    let reclaims = parse_min_reclaims(min_reclaim, &mut errors);

    for t in &mut soft_thresholds {
        // Each signal appears once among soft thresholds, so taking is fine.
        match grace_periods.remove(&t.signal) {
            Some(period) => t.grace_period = period,
            // A grace period that was given but failed to parse is already
            // reported; don't report it as missing too.
            None if grace_given.contains(&t.signal) => {}
            None => errors.push(EvictionError::MissingGracePeriod { signal: t.signal }),
        }
    }
    results.append(&mut soft_thresholds);
    for t in &mut results {
        if let Some(r) = reclaims.get(&t.signal) {
            t.min_reclaim = Some(*r);
        }
    }
    if enforce_node_allocatable
        .iter()
        .any(|k| k == NODE_ALLOCATABLE_ENFORCEMENT_KEY)
    {
        // Pods are held to allocatable memory with the same hard memory
        // threshold the node itself uses.
        let extra: Vec<Threshold> = results
            .iter()
            .filter(|t| t.signal == Signal::MemoryAvailable && t.is_hard())
            .map(|t| Threshold {
                signal: Signal::AllocatableMemoryAvailable,
                operator: t.operator,
                value: t.value,
                grace_period: GoDuration::from_secs(0),
                min_reclaim: t.min_reclaim,
            })
            .collect();
        results.extend(extra);
    }
    (results, errors)
}

fn parse_signal(name: &str, errors: &mut Vec<EvictionError>) -> Option<Signal> {
    match name.parse::<Signal>() {
        Ok(s) => Some(s),
        Err(e) => {
            errors.push(e);
            None
        }
    }
}

fn parse_statements(
    kind: ThresholdKind,
    statements: &BTreeMap<String, String>,
    errors: &mut Vec<EvictionError>,
) -> Vec<Threshold> {
    let mut out = Vec::new();
    for (name, value) in statements {
        let Some(signal) = parse_signal(name, errors) else {
            continue;
        };
        match parse_statement(kind, signal, value) {
            Ok(Some(t)) => out.push(t),
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
    }
    out
}

/// One "signal<value" statement; `Ok(None)` when the value switches the
/// threshold off.
fn parse_statement(
    kind: ThresholdKind,
    signal: Signal,
    value: &str,
) -> Result<Option<Threshold>, EvictionError> {
    let threshold = |v| Threshold {
        signal,
        operator: signal.operator(),
        value: v,
        grace_period: GoDuration::from_secs(0),
        min_reclaim: None,
    };
    if let Some(number) = value.strip_suffix('%') {
        // Upstream compares the literal text, so only these two spellings
        // disable a threshold ("0.0%" does not).
        if value == "0%" || value == "100%" {
            return Ok(None);
        }
        let Some(p) = parse_percentage(number) else {
            return Err(EvictionError::InvalidPercentage {
                kind,
                signal,
                value: value.to_string(),
                number: trim_percent(value).to_string(),
            });
        };
        if p < 0.0 {
            return Err(EvictionError::PercentageNegative {
                signal,
                value: value.to_string(),
            });
        }
        if p > 1.0 {
            return Err(EvictionError::PercentageTooLarge {
                signal,
                value: value.to_string(),
            });
        }
        return Ok(Some(threshold(ThresholdValue::Percentage(p))));
    }
    let q = Quantity::parse(value).map_err(|source| EvictionError::InvalidQuantity {
        kind,
        signal,
        value: value.to_string(),
        source,
    })?;
    if q.is_negative() || q.is_zero() {
        return Err(EvictionError::NotPositive { signal, value: q });
    }
    Ok(Some(threshold(ThresholdValue::Quantity(q))))
}

/// Upstream strips every trailing '%' before parsing, so "5%%" reads as 5.
fn trim_percent(value: &str) -> &str {
    value.trim_end_matches('%')
}

/// "12.5" (the part before '%') as a fraction: float32 parse, then divided by
/// 100 in float32, as upstream does. NaN is refused: upstream would accept it
/// and then compare nothing against it.
fn parse_percentage(number: &str) -> Option<f32> {
    let number = number.trim_end_matches('%');
    let v: f32 = number.parse().ok()?;
    if v.is_nan() {
        return None;
    }
    Some(v / 100.0)
}

/// Grace periods by signal, plus every signal that had an entry at all.
fn parse_grace_periods(
    statements: &BTreeMap<String, String>,
    errors: &mut Vec<EvictionError>,
) -> (BTreeMap<Signal, GoDuration>, Vec<Signal>) {
    let mut out = BTreeMap::new();
    let mut given = Vec::new();
    for (name, value) in statements {
        let Some(signal) = parse_signal(name, errors) else {
            continue;
        };
        given.push(signal);
        match GoDuration::parse(value) {
            Ok(d) if d.is_negative() => errors.push(EvictionError::NegativeGracePeriod {
                signal,
                value: value.clone(),
            }),
            Ok(d) => {
                out.insert(signal, d);
            }
            Err(source) => errors.push(EvictionError::InvalidGracePeriod {
                signal,
                value: value.clone(),
                source,
            }),
        }
    }
    (out, given)
}

fn parse_min_reclaims(
    statements: &BTreeMap<String, String>,
    errors: &mut Vec<EvictionError>,
) -> BTreeMap<Signal, ThresholdValue> {
    let mut out = BTreeMap::new();
    for (name, value) in statements {
        let Some(signal) = parse_signal(name, errors) else {
            continue;
        };
        match parse_min_reclaim(signal, value) {
            Ok(v) => {
                out.insert(signal, v);
            }
            Err(e) => errors.push(e),
        }
    }
    out
}

fn parse_min_reclaim(signal: Signal, value: &str) -> Result<ThresholdValue, EvictionError> {
    if let Some(number) = value.strip_suffix('%') {
        let Some(p) = parse_percentage(number) else {
            return Err(EvictionError::InvalidMinReclaimPercentage {
                signal,
                value: value.to_string(),
                number: trim_percent(value).to_string(),
            });
        };
        // Unlike thresholds, a reclaim of "0%" is an error rather than "off".
        if p <= 0.0 {
            return Err(EvictionError::MinReclaimPercentageNotPositive {
                signal,
                value: value.to_string(),
            });
        }
        return Ok(ThresholdValue::Percentage(p));
    }
    let q = Quantity::parse(value).map_err(|source| EvictionError::InvalidMinReclaimQuantity {
        signal,
        value: value.to_string(),
        source,
    })?;
    if q.is_negative() {
        return Err(EvictionError::NegativeMinReclaim {
            signal,
            value: value.to_string(),
        });
    }
    Ok(ThresholdValue::Quantity(q))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;
    use crate::domain::test_support::map;

    fn q(s: &str) -> ThresholdValue {
        ThresholdValue::Quantity(Quantity::parse(s).unwrap())
    }

    fn pct(p: f32) -> ThresholdValue {
        ThresholdValue::Percentage(p)
    }

    fn th(
        signal: Signal,
        value: ThresholdValue,
        grace_secs: i64,
        min_reclaim: Option<ThresholdValue>,
    ) -> Threshold {
        Threshold {
            signal,
            operator: Operator::LessThan,
            value,
            grace_period: GoDuration::from_secs(grace_secs),
            min_reclaim,
        }
    }

    /// Upstream compares thresholds as an unordered set.
    fn assert_same(case: &str, expected: &[Threshold], got: &[Threshold]) {
        assert_eq!(expected.len(), got.len(), "{case}: {got:?}");
        let mut rest: Vec<&Threshold> = got.iter().collect();
        for e in expected {
            let pos = rest
                .iter()
                .position(|g| *g == e)
                .unwrap_or_else(|| panic!("{case}: missing {e:?} in {got:?}"));
            rest.remove(pos);
        }
    }

    struct Case {
        name: &'static str,
        allocatable: &'static [&'static str],
        hard: &'static [(&'static str, &'static str)],
        soft: &'static [(&'static str, &'static str)],
        grace: &'static [(&'static str, &'static str)],
        reclaim: &'static [(&'static str, &'static str)],
        expect: Result<Vec<Threshold>, &'static str>,
    }

    fn run(c: &Case) {
        let alloc: Vec<String> = c.allocatable.iter().map(|s| s.to_string()).collect();
        let got = parse_threshold_config(
            &alloc,
            &map(c.hard),
            &map(c.soft),
            &map(c.grace),
            &map(c.reclaim),
        );
        match (&c.expect, got) {
            (Ok(want), Ok(got)) => assert_same(c.name, want, &got),
            (Err(msg), Err(e)) => assert_eq!(e.to_string(), *msg, "{}", c.name),
            (want, got) => panic!("{}: want {want:?}, got {got:?}", c.name),
        }
    }

    /// Ported from upstream TestParseThresholdConfig.
    #[test]
    fn parse_threshold_config_cases() {
        use Signal::*;
        let cases = vec![
            Case {
                name: "no values",
                allocatable: &[],
                hard: &[],
                soft: &[],
                grace: &[],
                reclaim: &[],
                expect: Ok(vec![]),
            },
            Case {
                name: "all memory eviction values",
                allocatable: &["pods"],
                hard: &[("memory.available", "150Mi")],
                soft: &[("memory.available", "300Mi")],
                grace: &[("memory.available", "30s")],
                reclaim: &[("memory.available", "0")],
                expect: Ok(vec![
                    th(AllocatableMemoryAvailable, q("150Mi"), 0, Some(q("0"))),
                    th(MemoryAvailable, q("150Mi"), 0, Some(q("0"))),
                    th(MemoryAvailable, q("300Mi"), 30, Some(q("0"))),
                ]),
            },
            Case {
                name: "all memory eviction values in percentages",
                allocatable: &[],
                hard: &[("memory.available", "10%")],
                soft: &[("memory.available", "30%")],
                grace: &[("memory.available", "30s")],
                reclaim: &[("memory.available", "5%")],
                expect: Ok(vec![
                    th(MemoryAvailable, pct(0.1), 0, Some(pct(0.05))),
                    th(MemoryAvailable, pct(0.3), 30, Some(pct(0.05))),
                ]),
            },
            Case {
                name: "disk eviction values",
                allocatable: &[],
                hard: &[("imagefs.available", "150Mi"), ("nodefs.available", "100Mi")],
                soft: &[("imagefs.available", "300Mi"), ("nodefs.available", "200Mi")],
                grace: &[("imagefs.available", "30s"), ("nodefs.available", "30s")],
                reclaim: &[("imagefs.available", "2Gi"), ("nodefs.available", "1Gi")],
                expect: Ok(vec![
                    th(ImageFsAvailable, q("150Mi"), 0, Some(q("2Gi"))),
                    th(NodeFsAvailable, q("100Mi"), 0, Some(q("1Gi"))),
                    th(ImageFsAvailable, q("300Mi"), 30, Some(q("2Gi"))),
                    th(NodeFsAvailable, q("200Mi"), 30, Some(q("1Gi"))),
                ]),
            },
            Case {
                name: "disk eviction values in percentages",
                allocatable: &[],
                hard: &[("imagefs.available", "15%"), ("nodefs.available", "10.5%")],
                soft: &[("imagefs.available", "30%"), ("nodefs.available", "20.5%")],
                grace: &[("imagefs.available", "30s"), ("nodefs.available", "30s")],
                reclaim: &[("imagefs.available", "10%"), ("nodefs.available", "5%")],
                expect: Ok(vec![
                    th(ImageFsAvailable, pct(0.15), 0, Some(pct(0.1))),
                    th(NodeFsAvailable, pct(0.105), 0, Some(pct(0.05))),
                    th(ImageFsAvailable, pct(0.3), 30, Some(pct(0.1))),
                    th(NodeFsAvailable, pct(0.205), 30, Some(pct(0.05))),
                ]),
            },
            Case {
                name: "inode eviction values",
                allocatable: &[],
                hard: &[("imagefs.inodesFree", "150Mi"), ("nodefs.inodesFree", "100Mi")],
                soft: &[("imagefs.inodesFree", "300Mi"), ("nodefs.inodesFree", "200Mi")],
                grace: &[("imagefs.inodesFree", "30s"), ("nodefs.inodesFree", "30s")],
                reclaim: &[("imagefs.inodesFree", "2Gi"), ("nodefs.inodesFree", "1Gi")],
                expect: Ok(vec![
                    th(ImageFsInodesFree, q("150Mi"), 0, Some(q("2Gi"))),
                    th(NodeFsInodesFree, q("100Mi"), 0, Some(q("1Gi"))),
                    th(ImageFsInodesFree, q("300Mi"), 30, Some(q("2Gi"))),
                    th(NodeFsInodesFree, q("200Mi"), 30, Some(q("1Gi"))),
                ]),
            },
            Case {
                name: "disable via 0%",
                allocatable: &[],
                hard: &[("memory.available", "0%")],
                soft: &[("memory.available", "0%")],
                grace: &[],
                reclaim: &[],
                expect: Ok(vec![]),
            },
            Case {
                name: "disable via 100%",
                allocatable: &[],
                hard: &[("memory.available", "100%")],
                soft: &[("memory.available", "100%")],
                grace: &[],
                reclaim: &[],
                expect: Ok(vec![]),
            },
            Case {
                name: "invalid-signal",
                allocatable: &[],
                hard: &[("mem.available", "150Mi")],
                soft: &[],
                grace: &[],
                reclaim: &[],
                expect: Err("unsupported eviction signal mem.available"),
            },
            Case {
                name: "hard-signal-negative",
                allocatable: &[],
                hard: &[("memory.available", "-150Mi")],
                soft: &[],
                grace: &[],
                reclaim: &[],
                expect: Err("eviction threshold memory.available must be positive: -150Mi"),
            },
            Case {
                name: "hard-signal-negative-percentage",
                allocatable: &[],
                hard: &[("memory.available", "-15%")],
                soft: &[],
                grace: &[],
                reclaim: &[],
                expect: Err("eviction percentage threshold memory.available must be >= 0%: -15%"),
            },
            Case {
                name: "hard-signal-percentage-greater-than-100%",
                allocatable: &[],
                hard: &[("memory.available", "150%")],
                soft: &[],
                grace: &[],
                reclaim: &[],
                expect: Err("eviction percentage threshold memory.available must be <= 100%: 150%"),
            },
            Case {
                name: "soft-signal-negative",
                allocatable: &[],
                hard: &[],
                soft: &[("memory.available", "-150Mi")],
                grace: &[],
                reclaim: &[],
                expect: Err("eviction threshold memory.available must be positive: -150Mi"),
            },
            Case {
                name: "valid-and-invalid-signal",
                allocatable: &[],
                hard: &[("memory.available", "150Mi"), ("invalid.foo", "150Mi")],
                soft: &[],
                grace: &[],
                reclaim: &[],
                expect: Err("unsupported eviction signal invalid.foo"),
            },
            Case {
                name: "soft-no-grace-period",
                allocatable: &[],
                hard: &[],
                soft: &[("memory.available", "150Mi")],
                grace: &[],
                reclaim: &[],
                expect: Err(
                    "grace period must be specified for the soft eviction threshold memory.available",
                ),
            },
            Case {
                name: "soft-negative-grace-period",
                allocatable: &[],
                hard: &[],
                soft: &[("memory.available", "150Mi")],
                grace: &[("memory.available", "-30s")],
                reclaim: &[],
                expect: Err(
                    "invalid eviction grace period specified: -30s, must be a positive value",
                ),
            },
            Case {
                name: "negative-reclaim",
                allocatable: &[],
                hard: &[],
                soft: &[],
                grace: &[],
                reclaim: &[("memory.available", "-300Mi")],
                expect: Err("negative eviction minimum reclaim specified for memory.available"),
            },
            // The cases below are ours, around the same rules.
            Case {
                name: "bad quantity names signal and value",
                allocatable: &[],
                hard: &[("memory.available", "abc")],
                soft: &[],
                grace: &[],
                reclaim: &[],
                expect: Err("evictionHard (--eviction-hard): invalid eviction threshold \"memory.available<abc\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
            },
            Case {
                name: "unsupported signal foo.bar",
                allocatable: &[],
                hard: &[("foo.bar", "1Gi")],
                soft: &[],
                grace: &[],
                reclaim: &[],
                expect: Err("unsupported eviction signal foo.bar"),
            },
            Case {
                name: "zero quantity is not positive",
                allocatable: &[],
                hard: &[("memory.available", "0")],
                soft: &[],
                grace: &[],
                reclaim: &[],
                expect: Err("eviction threshold memory.available must be positive: 0"),
            },
            Case {
                name: "0.0% is not the literal 0% and stays a threshold",
                allocatable: &[],
                hard: &[("nodefs.available", "0.0%")],
                soft: &[],
                grace: &[],
                reclaim: &[],
                expect: Ok(vec![th(NodeFsAvailable, pct(0.0), 0, None)]),
            },
            Case {
                name: "bad percentage",
                allocatable: &[],
                hard: &[],
                soft: &[("nodefs.available", "x%")],
                grace: &[("nodefs.available", "1m")],
                reclaim: &[],
                expect: Err("evictionSoft (--eviction-soft): invalid eviction threshold \"nodefs.available<x%\": strconv.ParseFloat: parsing \"x\": invalid syntax"),
            },
            Case {
                name: "0% minimum reclaim is refused",
                allocatable: &[],
                hard: &[],
                soft: &[],
                grace: &[],
                reclaim: &[("nodefs.available", "0%")],
                expect: Err("eviction percentage minimum reclaim nodefs.available must be positive: 0%"),
            },
            Case {
                name: "grace period for an unknown signal",
                allocatable: &[],
                hard: &[],
                soft: &[],
                grace: &[("foo.bar", "1m")],
                reclaim: &[],
                expect: Err("unsupported eviction signal foo.bar"),
            },
            Case {
                name: "minimum reclaim for an unknown signal",
                allocatable: &[],
                hard: &[],
                soft: &[],
                grace: &[],
                reclaim: &[("foo.bar", "1Gi")],
                expect: Err("unsupported eviction signal foo.bar"),
            },
            Case {
                name: "soft memory with zero grace counts as hard for allocatable",
                allocatable: &["pods"],
                hard: &[],
                soft: &[("memory.available", "1Gi")],
                grace: &[("memory.available", "0s")],
                reclaim: &[],
                expect: Ok(vec![
                    th(MemoryAvailable, q("1Gi"), 0, None),
                    th(AllocatableMemoryAvailable, q("1Gi"), 0, None),
                ]),
            },
        ];
        for c in &cases {
            run(c);
        }
    }

    /// Ported from upstream TestAddAllocatableThresholds.
    #[test]
    fn allocatable_thresholds_copy_only_hard_memory() {
        let alloc = vec!["pods".to_string()];
        let got = parse_threshold_config(
            &alloc,
            &map(&[("imagefs.available", "150Mi")]),
            &map(&[("memory.available", "150Mi")]),
            &map(&[("memory.available", "10s")]),
            &map(&[]),
        )
        .unwrap();
        assert!(got
            .iter()
            .all(|t| t.signal != Signal::AllocatableMemoryAvailable));
        let got = parse_threshold_config(
            &alloc,
            &map(&[("memory.available", "150Mi")]),
            &map(&[]),
            &map(&[]),
            &map(&[("memory.available", "0")]),
        )
        .unwrap();
        assert_same(
            "memory-signal-without-grace",
            &[
                th(Signal::MemoryAvailable, q("150Mi"), 0, Some(q("0"))),
                th(
                    Signal::AllocatableMemoryAvailable,
                    q("150Mi"),
                    0,
                    Some(q("0")),
                ),
            ],
            &got,
        );
    }

    #[test]
    fn validate_collects_every_problem() {
        let errs = validate_threshold_config(
            &[],
            &map(&[("foo.bar", "1Gi"), ("memory.available", "abc")]),
            &map(&[("nodefs.available", "10%"), ("imagefs.available", "1Gi")]),
            &map(&[("imagefs.available", "soon")]),
            &map(&[("memory.available", "-1")]),
        );
        let msgs: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        assert_eq!(msgs.len(), 5, "{msgs:#?}");
        assert_eq!(msgs[0], "unsupported eviction signal foo.bar");
        assert!(msgs[1].contains("\"memory.available<abc\""), "{}", msgs[1]);
        assert!(
            msgs[2].contains("\"imagefs.available=soon\""),
            "{}",
            msgs[2]
        );
        assert_eq!(
            msgs[3],
            "negative eviction minimum reclaim specified for memory.available"
        );
        assert_eq!(
            msgs[4],
            "grace period must be specified for the soft eviction threshold nodefs.available"
        );
        assert!(validate_threshold_config(
            &["pods".to_string()],
            &default_eviction_hard(),
            &map(&[]),
            &map(&[]),
            &map(&[])
        )
        .is_empty());
    }

    #[test]
    fn signals_round_trip() {
        for s in Signal::ALL {
            assert_eq!(s.as_str().parse::<Signal>().unwrap(), s);
            assert_eq!(
                serde_json::to_string(&s).unwrap(),
                format!("\"{}\"", s.as_str())
            );
        }
        assert_eq!(
            "swap.available".parse::<Signal>().unwrap_err().to_string(),
            "unsupported eviction signal swap.available"
        );
    }

    #[test]
    fn threshold_value_display() {
        assert_eq!(q("100Mi").to_string(), "100Mi");
        assert_eq!(pct(0.1).to_string(), "10%");
        assert_eq!(pct(0.105).to_string(), "10.5%");
    }

    #[test]
    fn defaults_parse_to_linux_thresholds() {
        let t = parse_threshold_config(
            &[],
            &default_eviction_hard(),
            &map(&[]),
            &map(&[]),
            &map(&[]),
        )
        .unwrap();
        assert_same(
            "defaults",
            &[
                th(Signal::MemoryAvailable, q("100Mi"), 0, None),
                th(Signal::NodeFsAvailable, pct(0.1), 0, None),
                th(Signal::NodeFsInodesFree, pct(0.05), 0, None),
                th(Signal::ImageFsAvailable, pct(0.15), 0, None),
            ],
            &t,
        );
    }

    #[test]
    fn effective_hard_map() {
        assert_eq!(
            effective_eviction_hard(None, false),
            default_eviction_hard()
        );
        assert_eq!(effective_eviction_hard(None, true), default_eviction_hard());
        let given = map(&[("memory.available", "1Gi")]);
        assert_eq!(effective_eviction_hard(Some(&given), false), given);
        let merged = effective_eviction_hard(Some(&given), true);
        assert_eq!(merged.len(), 4);
        assert_eq!(merged["memory.available"], "1Gi");
        assert_eq!(merged["imagefs.available"], "15%");
        // An explicitly empty map turns hard eviction off unless merged.
        assert!(effective_eviction_hard(Some(&map(&[])), false).is_empty());
        assert_eq!(
            effective_eviction_hard(Some(&map(&[])), true),
            default_eviction_hard()
        );
    }

    #[test]
    fn flag_maps() {
        assert_eq!(
            parse_lt_map("memory.available<100Mi, nodefs.available<10%,").unwrap(),
            map(&[("memory.available", "100Mi"), ("nodefs.available", "10%")])
        );
        assert!(parse_lt_map("").unwrap().is_empty());
        assert_eq!(
            parse_lt_map("memory.available=100Mi").unwrap_err().to_string(),
            "invalid value \"memory.available=100Mi\": malformed pair \"memory.available=100Mi\", expect string<string"
        );
        assert_eq!(
            parse_eq_map("memory.available=1m30s,nodefs.available=2m").unwrap(),
            map(&[("memory.available", "1m30s"), ("nodefs.available", "2m")])
        );
        assert_eq!(
            parse_eq_map("a=1,b").unwrap_err().to_string(),
            "invalid value \"a=1,b\": malformed pair \"b\", expect string=string"
        );
    }
}
