//! Go-style durations (`1m30s`, `300ms`, `-1.5h`) as they appear in
//! Kubernetes config files and flags.
//!
//! Parsing follows Go's `time.ParseDuration` and formatting follows Go's
//! `Duration.String`, including their error messages, so values written by
//! Go tooling round-trip unchanged and operators can search for the errors.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

const NANOSECOND: u64 = 1;
const MICROSECOND: u64 = 1_000 * NANOSECOND;
const MILLISECOND: u64 = 1_000 * MICROSECOND;
const SECOND: u64 = 1_000 * MILLISECOND;
const MINUTE: u64 = 60 * SECOND;
const HOUR: u64 = 60 * MINUTE;

/// Magnitude of `i64::MIN`: the largest accumulated value a negative duration
/// may reach before it is negated.
const MAX_MAGNITUDE: u64 = 1 << 63;

/// A signed span of time with nanosecond resolution and Go's range
/// (about ±292 years).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct GoDuration {
    nanos: i64,
}

/// Why a duration string was rejected; the messages are Go's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Malformed text or a value outside the i64 nanosecond range.
    #[error("time: invalid duration {}", quote(.input))]
    Invalid { input: String },
    /// A number without a unit, e.g. `10` (only a bare `0` is allowed).
    #[error("time: missing unit in duration {}", quote(.input))]
    MissingUnit { input: String },
    /// A unit other than ns, us, µs, μs, ms, s, m, h.
    #[error("time: unknown unit {} in duration {}", quote(.unit), quote(.input))]
    UnknownUnit { unit: String, input: String },
}

impl GoDuration {
    /// Parses a duration exactly like Go's `time.ParseDuration`.
    pub fn parse(s: &str) -> Result<GoDuration, DurationError> {
        let invalid = || DurationError::Invalid {
            input: s.to_string(),
        };
        let mut rest = s;
        let mut neg = false;
        if let Some(stripped) = rest.strip_prefix('-') {
            neg = true;
            rest = stripped;
        } else if let Some(stripped) = rest.strip_prefix('+') {
            rest = stripped;
        }
        // A bare zero is the only value allowed without a unit.
        if rest == "0" {
            return Ok(GoDuration { nanos: 0 });
        }
        if rest.is_empty() {
            return Err(invalid());
        }
        let mut total: u64 = 0;
        while !rest.is_empty() {
            let first = rest.as_bytes()[0];
            if !(first == b'.' || first.is_ascii_digit()) {
                return Err(invalid());
            }
            let before = rest.len();
            let (mut v, after_int) = leading_int(rest).ok_or_else(invalid)?;
            rest = after_int;
            let pre = before != rest.len();

            let mut frac: u64 = 0;
            let mut scale: f64 = 1.0;
            let mut post = false;
            if let Some(after_dot) = rest.strip_prefix('.') {
                let before = after_dot.len();
                let (f, sc, r) = leading_fraction(after_dot);
                frac = f;
                scale = sc;
                rest = r;
                post = before != rest.len();
            }
            if !pre && !post {
                return Err(invalid());
            }

            let unit_len = rest
                .bytes()
                .position(|c| c == b'.' || c.is_ascii_digit())
                .unwrap_or(rest.len());
            if unit_len == 0 {
                return Err(DurationError::MissingUnit {
                    input: s.to_string(),
                });
            }
            let (unit_text, r) = rest.split_at(unit_len);
            rest = r;
            let unit = unit_nanos(unit_text).ok_or_else(|| DurationError::UnknownUnit {
                unit: unit_text.to_string(),
                input: s.to_string(),
            })?;
            if v > MAX_MAGNITUDE / unit {
                return Err(invalid());
            }
            v *= unit;
            if frac > 0 {
                // Go goes through float64 here so fractions of an hour stay
                // nanosecond-accurate; mirror it to get identical results.
                v += (frac as f64 * (unit as f64 / scale)) as u64;
                if v > MAX_MAGNITUDE {
                    return Err(invalid());
                }
            }
            total += v;
            if total > MAX_MAGNITUDE {
                return Err(invalid());
            }
        }
        if neg {
            // total <= 2^63, so this covers i64::MIN exactly.
            return Ok(GoDuration {
                nanos: 0i64.wrapping_sub_unsigned(total),
            });
        }
        match i64::try_from(total) {
            Ok(nanos) => Ok(GoDuration { nanos }),
            Err(_) => Err(invalid()),
        }
    }

    pub const fn from_nanos(n: i64) -> Self {
        GoDuration { nanos: n }
    }

    /// Saturates at the i64 nanosecond range (about ±292 years).
    pub const fn from_secs(s: i64) -> Self {
        GoDuration {
            nanos: s.saturating_mul(SECOND as i64),
        }
    }

    /// Saturates at the i64 nanosecond range.
    pub const fn from_millis(ms: i64) -> Self {
        GoDuration {
            nanos: ms.saturating_mul(MILLISECOND as i64),
        }
    }

    pub fn as_nanos(&self) -> i64 {
        self.nanos
    }

    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// `None` for negative durations, which std cannot represent.
    pub fn to_std(&self) -> Option<std::time::Duration> {
        u64::try_from(self.nanos)
            .ok()
            .map(std::time::Duration::from_nanos)
    }
}

/// Leading `[0-9]*` as an integer; `None` once it exceeds 2^63.
fn leading_int(s: &str) -> Option<(u64, &str)> {
    let mut x: u64 = 0;
    let mut i = 0;
    for c in s.bytes() {
        if !c.is_ascii_digit() {
            break;
        }
        if x > MAX_MAGNITUDE / 10 {
            return None;
        }
        x = x * 10 + u64::from(c - b'0');
        if x > MAX_MAGNITUDE {
            return None;
        }
        i += 1;
    }
    Some((x, &s[i..]))
}

/// Leading `[0-9]*` after a decimal point. Digits that would overflow are
/// consumed but dropped: they are far below nanosecond resolution.
fn leading_fraction(s: &str) -> (u64, f64, &str) {
    let mut x: u64 = 0;
    let mut scale = 1.0;
    let mut overflow = false;
    let mut i = 0;
    for c in s.bytes() {
        if !c.is_ascii_digit() {
            break;
        }
        i += 1;
        if overflow {
            continue;
        }
        if x > (MAX_MAGNITUDE - 1) / 10 {
            overflow = true;
            continue;
        }
        let y = x * 10 + u64::from(c - b'0');
        if y > MAX_MAGNITUDE {
            overflow = true;
            continue;
        }
        x = y;
        scale *= 10.0;
    }
    (x, scale, &s[i..])
}

fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => NANOSECOND,
        // Both the micro sign (U+00B5) and the Greek mu (U+03BC).
        "us" | "\u{b5}s" | "\u{3bc}s" => MICROSECOND,
        "ms" => MILLISECOND,
        "s" => SECOND,
        "m" => MINUTE,
        "h" => HOUR,
        _ => return None,
    })
}

/// Quotes like Go's time package: ASCII stays readable, every byte of a
/// control or non-ASCII character becomes `\xNN`.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c.is_ascii() && c >= ' ' {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        }
    }
    out.push('"');
    out
}

/// Writes `v / 10^prec` with the fraction's trailing zeros (and a bare
/// point) dropped, returning the fraction text and the integer part.
fn split_frac(mut v: u64, prec: u32) -> (String, u64) {
    let mut digits = Vec::new();
    let mut print = false;
    for _ in 0..prec {
        let digit = (v % 10) as u8;
        print = print || digit != 0;
        if print {
            digits.push(b'0' + digit);
        }
        v /= 10;
    }
    let mut frac = String::new();
    if print {
        frac.push('.');
        frac.extend(digits.iter().rev().map(|d| char::from(*d)));
    }
    (frac, v)
}

impl fmt::Display for GoDuration {
    /// Go's `Duration.String`: `1h2m3.5s`, sub-second values in ms/µs/ns,
    /// zero as `0s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let u = self.nanos.unsigned_abs();
        let sign = if self.nanos < 0 { "-" } else { "" };
        if u == 0 {
            return f.write_str("0s");
        }
        if u < SECOND {
            let (prec, unit) = if u < MICROSECOND {
                (0, "ns")
            } else if u < MILLISECOND {
                (3, "\u{b5}s")
            } else {
                (6, "ms")
            };
            let (frac, int) = split_frac(u, prec);
            return write!(f, "{sign}{int}{frac}{unit}");
        }
        let (frac, secs) = split_frac(u, 9);
        let mins = secs / 60;
        let hours = mins / 60;
        f.write_str(sign)?;
        if hours > 0 {
            write!(f, "{hours}h")?;
        }
        if mins > 0 {
            write!(f, "{}m", mins % 60)?;
        }
        write!(f, "{}{frac}s", secs % 60)
    }
}

impl FromStr for GoDuration {
    type Err = DurationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        GoDuration::parse(s)
    }
}

impl From<std::time::Duration> for GoDuration {
    /// Saturates at `i64::MAX` nanoseconds (about 292 years).
    fn from(d: std::time::Duration) -> Self {
        GoDuration {
            nanos: i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        }
    }
}

impl Serialize for GoDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// A string only, as upstream's `metav1.Duration`: a bare number (`syncFrequency: 10`)
/// is refused rather than read as nanoseconds, which no one writing it means.
impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(GoDurationVisitor)
    }
}

struct GoDurationVisitor;

/// Upstream's words for a number where a duration string belongs, with what to write.
const NUMBER_FOR_DURATION: &str = "json: cannot unmarshal number into Go value of type string (a duration is a string with a unit, such as \"10s\" or \"1m30s\")";

impl Visitor<'_> for GoDurationVisitor {
    type Value = GoDuration;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Go duration string such as \"1m30s\"")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<GoDuration, E> {
        GoDuration::parse(v).map_err(E::custom)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<GoDuration, E> {
        Err(E::custom(NUMBER_FOR_DURATION))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<GoDuration, E> {
        Err(E::custom(NUMBER_FOR_DURATION))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<GoDuration, E> {
        Err(E::custom(NUMBER_FOR_DURATION))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: i64 = 1;
    const US: i64 = 1_000;
    const MS: i64 = 1_000_000;
    const S: i64 = 1_000_000_000;
    const M: i64 = 60 * S;
    const H: i64 = 60 * M;

    // Cases from Go's parseDurationTests.
    #[test]
    fn parse_valid() {
        let cases: &[(&str, i64)] = &[
            ("0", 0),
            ("5s", 5 * S),
            ("30s", 30 * S),
            ("1478s", 1478 * S),
            ("-5s", -5 * S),
            ("+5s", 5 * S),
            ("-0", 0),
            ("+0", 0),
            ("5.0s", 5 * S),
            ("5.6s", 5 * S + 600 * MS),
            ("5.s", 5 * S),
            (".5s", 500 * MS),
            ("1.0s", S),
            ("1.00s", S),
            ("1.004s", S + 4 * MS),
            ("1.0040s", S + 4 * MS),
            ("100.00100s", 100 * S + MS),
            ("10ns", 10 * NS),
            ("11us", 11 * US),
            ("12\u{b5}s", 12 * US),
            ("12\u{3bc}s", 12 * US),
            ("13ms", 13 * MS),
            ("14s", 14 * S),
            ("15m", 15 * M),
            ("16h", 16 * H),
            ("3h30m", 3 * H + 30 * M),
            ("10.5s4m", 4 * M + 10 * S + 500 * MS),
            ("-2m3.4s", -(2 * M + 3 * S + 400 * MS)),
            (
                "1h2m3s4ms5us6ns",
                H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS,
            ),
            ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
            ("52763797000ns", 52_763_797_000),
            ("0.3333333333333333333h", 20 * M),
            ("9007199254740993ns", (1 << 53) + 1),
            ("9223372036854775807ns", i64::MAX),
            ("9223372036854775.807us", i64::MAX),
            ("9223372036s854ms775us807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("-9223372036854775.808us", i64::MIN),
            ("-9223372036s854ms775us808ns", i64::MIN),
            ("-2562047h47m16.854775808s", i64::MIN),
            ("0.100000000000000000000h", 6 * M),
            ("0.830103483285477580700h", 49 * M + 48 * S + 372_539_827),
            // Forms the kubelet config commonly uses.
            ("1m30s", M + 30 * S),
            ("300ms", 300 * MS),
            ("2h45m", 2 * H + 45 * M),
            ("1.5h", 90 * M),
            ("-1s", -S),
        ];
        for (input, want) in cases {
            let got = GoDuration::parse(input);
            assert_eq!(got, Ok(GoDuration::from_nanos(*want)), "parse({input:?})");
            assert_eq!(input.parse::<GoDuration>(), got);
        }
    }

    // Cases from Go's parseDurationErrorTests, with full messages.
    #[test]
    fn parse_errors() {
        let cases: &[(&str, &str)] = &[
            ("", r#"time: invalid duration """#),
            ("3", r#"time: missing unit in duration "3""#),
            ("-", r#"time: invalid duration "-""#),
            ("s", r#"time: invalid duration "s""#),
            (".", r#"time: invalid duration ".""#),
            ("-.", r#"time: invalid duration "-.""#),
            (".s", r#"time: invalid duration ".s""#),
            ("+.s", r#"time: invalid duration "+.s""#),
            ("1d", r#"time: unknown unit "d" in duration "1d""#),
            ("\u{fffd}", r#"time: invalid duration "\xef\xbf\xbd""#),
            (
                "\u{fffd} hello \u{fffd} world",
                r#"time: invalid duration "\xef\xbf\xbd hello \xef\xbf\xbd world""#,
            ),
            (
                "9223372036854775810ns",
                r#"time: invalid duration "9223372036854775810ns""#,
            ),
            (
                "9223372036854775808ns",
                r#"time: invalid duration "9223372036854775808ns""#,
            ),
            (
                "-9223372036854775809ns",
                r#"time: invalid duration "-9223372036854775809ns""#,
            ),
            (
                "9223372036854776us",
                r#"time: invalid duration "9223372036854776us""#,
            ),
            ("3000000h", r#"time: invalid duration "3000000h""#),
            (
                "9223372036854775.808us",
                r#"time: invalid duration "9223372036854775.808us""#,
            ),
            (
                "9223372036854ms775us808ns",
                r#"time: invalid duration "9223372036854ms775us808ns""#,
            ),
            // Wording the brief asks for.
            ("abc", r#"time: invalid duration "abc""#),
            ("10", r#"time: missing unit in duration "10""#),
            ("10x", r#"time: unknown unit "x" in duration "10x""#),
            (
                "1\u{b5}",
                r#"time: unknown unit "\xc2\xb5" in duration "1\xc2\xb5""#,
            ),
            ("1\"s", r#"time: unknown unit "\"s" in duration "1\"s""#),
        ];
        for (input, want) in cases {
            match GoDuration::parse(input) {
                Ok(d) => panic!("parse({input:?}) = {d}, want error {want}"),
                Err(e) => assert_eq!(e.to_string(), *want, "parse({input:?})"),
            }
        }
    }

    // Cases from Go's durationTests.
    #[test]
    fn display() {
        let cases: &[(&str, i64)] = &[
            ("0s", 0),
            ("1ns", NS),
            ("1.1\u{b5}s", 1100 * NS),
            ("2.2ms", 2200 * US),
            ("3.3s", 3300 * MS),
            ("4m5s", 4 * M + 5 * S),
            ("4m5.001s", 4 * M + 5001 * MS),
            ("5h6m7.001s", 5 * H + 6 * M + 7001 * MS),
            ("8m0.000000001s", 8 * M + NS),
            ("2562047h47m16.854775807s", i64::MAX),
            ("-2562047h47m16.854775808s", i64::MIN),
            ("1m30s", M + 30 * S),
            ("300ms", 300 * MS),
            ("2h45m0s", 2 * H + 45 * M),
            ("1.5s", 1500 * MS),
            ("1h0m0s", H),
        ];
        for (want, nanos) in cases {
            let d = GoDuration::from_nanos(*nanos);
            assert_eq!(d.to_string(), *want);
            if *nanos > 0 {
                assert_eq!(
                    GoDuration::from_nanos(-nanos).to_string(),
                    format!("-{want}")
                );
            }
        }
    }

    #[test]
    fn round_trip_extremes_and_samples() {
        for n in [
            i64::MAX,
            i64::MIN,
            0,
            1,
            -1,
            999,
            1_000,
            999_999_999,
            1_000_000_001,
            3_723_000_000_004,
            -86_400_000_000_000,
        ] {
            let d = GoDuration::from_nanos(n);
            assert_eq!(GoDuration::parse(&d.to_string()), Ok(d), "{n}");
        }
    }

    #[test]
    fn constructors_and_conversions() {
        assert_eq!(GoDuration::from_secs(90).as_nanos(), 90 * S);
        assert_eq!(GoDuration::from_millis(-5).as_nanos(), -5 * MS);
        assert_eq!(GoDuration::from_secs(i64::MAX).as_nanos(), i64::MAX);
        assert!(GoDuration::from_nanos(-1).is_negative());
        assert!(!GoDuration::default().is_negative());
        assert_eq!(GoDuration::from_nanos(-1).to_std(), None);
        assert_eq!(
            GoDuration::from_millis(1500).to_std(),
            Some(std::time::Duration::from_millis(1500))
        );
        assert_eq!(
            GoDuration::from(std::time::Duration::from_millis(250)),
            GoDuration::from_millis(250)
        );
        assert_eq!(
            GoDuration::from(std::time::Duration::MAX).as_nanos(),
            i64::MAX
        );
        assert!(GoDuration::from_secs(1) < GoDuration::from_secs(2));
    }

    #[test]
    fn serde() {
        let d = GoDuration::from_secs(90);
        assert_eq!(
            serde_json::to_string(&d).expect("valid test input"),
            r#""1m30s""#
        );
        assert_eq!(
            serde_json::from_str::<GoDuration>(r#""1m30s""#).expect("valid test input"),
            d
        );
        // A bare number is no duration (`syncFrequency: 10` is not 10 ns), as upstream's.
        for number in ["90000000000", "-5", "10", "1.5"] {
            let err = serde_json::from_str::<GoDuration>(number).expect_err("a number");
            assert!(
                err.to_string()
                    .contains("json: cannot unmarshal number into Go value of type string"),
                "{number}: {err}"
            );
        }
        let err = serde_json::from_str::<GoDuration>(r#""10""#).expect_err("must be rejected");
        assert!(
            err.to_string()
                .contains(r#"time: missing unit in duration "10""#),
            "{err}"
        );
        assert!(serde_json::from_str::<GoDuration>("18446744073709551615").is_err());
        assert!(serde_json::from_str::<GoDuration>("1.5").is_err());
    }
}
