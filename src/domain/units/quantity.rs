//! Kubernetes resource quantities (`100Mi`, `500m`, `1.5Gi`, `1e3`).
//!
//! Parsing and canonical formatting follow apimachinery's
//! `resource.Quantity`, so values read from the API server or a kubelet
//! config print back exactly as upstream prints them. The value is stored
//! exactly as a count of nano-units in an `i128`; upstream also keeps
//! nothing finer than nano (it rounds finer inputs away from zero), and
//! `i128` covers magnitudes up to about 1.7e29, far beyond any real resource.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::{Add, Sub};
use std::str::FromStr;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

const NANOS_PER_UNIT: i128 = 1_000_000_000;
const NANOS_PER_MILLI: i128 = 1_000_000;

/// Upstream silently caps any binary-suffixed quantity at 2^63-1 units.
const MAX_BINARY_SI_NANOS: i128 = i64::MAX as i128 * NANOS_PER_UNIT;

/// How a quantity prints; parsing remembers the suffix style it saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// `12e6`
    DecimalExponent,
    /// `12Mi` (powers of 1024)
    BinarySI,
    /// `12M` (powers of 1000)
    DecimalSI,
}

/// A fixed-point resource amount with nano-unit precision.
///
/// Equality, ordering and hashing use the numeric value only, so
/// `1Gi == 1024Mi` and `1k == 1000`.
#[derive(Debug, Clone, Copy)]
pub struct Quantity {
    nanos: i128,
    format: Format,
}

/// Why a quantity string was rejected. The first three messages are
/// apimachinery's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The text is not `<number><suffix>`.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    FormatWrong,
    /// The number has no digits where upstream needs some.
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    /// The suffix is not one of the known SI, binary or exponent suffixes.
    #[error("unable to parse quantity's suffix")]
    Suffix,
    /// The value is too large for this implementation (upstream has
    /// arbitrary precision; we stop near 1.7e29).
    #[error("unable to parse numeric part of quantity: value out of range")]
    Overflow,
}

impl Quantity {
    /// Parses a quantity string such as `100Mi`, `0.5`, `250m` or `1e3`.
    pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
        let parts = split(s)?;
        let (base, exponent, mut format) = interpret_suffix(parts.suffix)?;

        if parts.int.is_empty() && parts.frac.is_empty() {
            // Input like "-", "." or "Ki": upstream yields zero unless the
            // exponent sends it down its arbitrary-precision path, which
            // then rejects the empty number.
            if base == Base::Ten && exponent < -9 {
                return Err(QuantityError::Numeric);
            }
            return Ok(Quantity { nanos: 0, format });
        }

        let mut digits: Vec<u8> = parts
            .int
            .bytes()
            .chain(parts.frac.bytes())
            .map(|b| b - b'0')
            .skip_while(|d| *d == 0)
            .collect();
        if digits.is_empty() {
            return Ok(Quantity { nanos: 0, format });
        }
        // Decimal point position relative to nano-units.
        let mut shift = 9 - parts.frac.len() as i128;
        match base {
            Base::Ten => shift += i128::from(exponent),
            Base::Two => mul_digits(&mut digits, 1u64 << exponent),
        }
        let magnitude = scale_round_up(&digits, shift)?;

        let mut nanos = magnitude;
        if format == Format::BinarySI {
            nanos = nanos.min(MAX_BINARY_SI_NANOS);
            if nanos < NANOS_PER_UNIT {
                // Upstream: a binary quantity below one unit becomes decimal
                // so it never prints as a rounded-up "1".
                format = Format::DecimalSI;
            }
        }
        if parts.negative {
            nanos = -nanos;
        }
        Ok(Quantity { nanos, format })
    }

    /// Exactly `nanos` nano-units, printed in `format`.
    pub fn from_nanos(nanos: i128, format: Format) -> Quantity {
        Quantity { nanos, format }
    }

    /// The exact value in nano-units.
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    /// `value` whole units.
    pub fn new(value: i64, format: Format) -> Quantity {
        Quantity {
            nanos: i128::from(value) * NANOS_PER_UNIT,
            format,
        }
    }

    /// `milli` thousandths of a unit.
    pub fn from_milli(milli: i64, format: Format) -> Quantity {
        Quantity {
            nanos: i128::from(milli) * NANOS_PER_MILLI,
            format,
        }
    }

    /// Whole units, rounded away from zero like upstream `Value()`
    /// (`1500m` -> 2, `-1500m` -> -2). Saturates at the i64 range where
    /// upstream would silently overflow.
    pub fn value(&self) -> i64 {
        saturate_i64(div_away_from_zero(self.nanos, NANOS_PER_UNIT))
    }

    /// Thousandths of a unit, rounded away from zero like upstream
    /// `MilliValue()`; saturates at the i64 range.
    pub fn milli_value(&self) -> i64 {
        saturate_i64(div_away_from_zero(self.nanos, NANOS_PER_MILLI))
    }

    pub fn format(&self) -> Format {
        self.format
    }

    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// Sum, or `None` on overflow. Like upstream, a zero left-hand side
    /// takes the right-hand side's format.
    pub fn checked_add(&self, other: &Quantity) -> Option<Quantity> {
        Some(Quantity {
            nanos: self.nanos.checked_add(other.nanos)?,
            format: self.combined_format(other),
        })
    }

    /// Difference, or `None` on overflow; format as for `checked_add`.
    pub fn checked_sub(&self, other: &Quantity) -> Option<Quantity> {
        Some(Quantity {
            nanos: self.nanos.checked_sub(other.nanos)?,
            format: self.combined_format(other),
        })
    }

    /// value * numerator / denominator, rounded up (used for percentages of capacity)
    ///
    /// Rounds toward positive infinity at nano-unit precision. `None` when
    /// `denominator` is zero or the product overflows.
    pub fn mul_ratio_ceil(&self, numerator: i64, denominator: i64) -> Option<Quantity> {
        let product = self.nanos.checked_mul(i128::from(numerator))?;
        let den = i128::from(denominator);
        let quotient = product.checked_div(den)?;
        let remainder = product.checked_rem(den)?;
        let ceil = if remainder != 0 && ((remainder > 0) == (den > 0)) {
            quotient.checked_add(1)?
        } else {
            quotient
        };
        Some(Quantity {
            nanos: ceil,
            format: self.format,
        })
    }

    fn combined_format(&self, other: &Quantity) -> Format {
        if self.is_zero() {
            other.format
        } else {
            self.format
        }
    }
}

fn saturate_i64(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

fn div_away_from_zero(n: i128, d: i128) -> i128 {
    let q = n / d;
    match n % d {
        0 => q,
        r if r > 0 => q + 1,
        _ => q - 1,
    }
}

/// The pieces of `[+-]?<int>[.<frac>]<suffix>` found by the scanner.
pub(crate) struct Parts<'a> {
    pub(crate) negative: bool,
    pub(crate) int: &'a str,
    pub(crate) frac: &'a str,
    pub(crate) suffix: &'a str,
}

/// Splits a quantity into sign, digits and suffix, accepting exactly what
/// upstream's hand-written scanner accepts (which is looser than its
/// published regular expression: `1.`, `.5` and a bare `-` all pass).
pub(crate) fn split(s: &str) -> Result<Parts<'_>, QuantityError> {
    if s.is_empty() {
        return Err(QuantityError::FormatWrong);
    }
    let bytes = s.as_bytes();
    let end = bytes.len();
    let scan = |mut i: usize, ok: &dyn Fn(u8) -> bool| {
        while i < end && ok(bytes[i]) {
            i += 1;
        }
        i
    };
    let (negative, mut pos) = match bytes[0] {
        b'-' => (true, 1),
        b'+' => (false, 1),
        _ => (false, 0),
    };
    let int_start = pos;
    pos = scan(pos, &|b| b.is_ascii_digit());
    let int = &s[int_start..pos];
    let mut frac = "";
    if pos < end && bytes[pos] == b'.' {
        let frac_start = pos + 1;
        pos = scan(frac_start, &|b| b.is_ascii_digit());
        frac = &s[frac_start..pos];
    }
    let suffix_start = pos;
    pos = scan(pos, &|b| b"eEinumkKMGTP".contains(&b));
    if pos < end && (bytes[pos] == b'-' || bytes[pos] == b'+') {
        pos += 1;
    }
    pos = scan(pos, &|b| b.is_ascii_digit());
    if pos != end {
        return Err(QuantityError::FormatWrong);
    }
    Ok(Parts {
        negative,
        int,
        frac,
        suffix: &s[suffix_start..],
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Base {
    Two,
    Ten,
}

/// Maps a suffix to (base, exponent, format); e.g. `Ki` is 2^10.
pub(crate) fn interpret_suffix(suffix: &str) -> Result<(Base, i64, Format), QuantityError> {
    let decimal = |e| Ok((Base::Ten, e, Format::DecimalSI));
    let binary = |e| Ok((Base::Two, e, Format::BinarySI));
    match suffix {
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "" => decimal(0),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        _ => {
            let rest = suffix
                .strip_prefix(['e', 'E'])
                .filter(|r| !r.is_empty())
                .ok_or(QuantityError::Suffix)?;
            // Same acceptance as Go's strconv.ParseInt(rest, 10, 64).
            let exponent: i64 = rest.parse().map_err(|_| QuantityError::Suffix)?;
            Ok((Base::Ten, exponent, Format::DecimalExponent))
        }
    }
}

/// Multiplies a big-endian decimal digit string by `factor` in place.
fn mul_digits(digits: &mut Vec<u8>, factor: u64) {
    let mut carry: u128 = 0;
    for d in digits.iter_mut().rev() {
        let v = u128::from(*d) * u128::from(factor) + carry;
        *d = (v % 10) as u8;
        carry = v / 10;
    }
    let mut head = Vec::new();
    while carry > 0 {
        head.push((carry % 10) as u8);
        carry /= 10;
    }
    head.reverse();
    digits.splice(0..0, head);
}

/// `digits * 10^shift`, rounded away from zero to an integer; `digits` has
/// no leading zeros and is not empty.
fn scale_round_up(digits: &[u8], shift: i128) -> Result<i128, QuantityError> {
    // i128::MAX has 39 digits; anything longer cannot fit.
    const MAX_DIGITS: i128 = 39;
    let len = digits.len() as i128;
    let (kept, round_up) = if shift >= 0 {
        if len + shift > MAX_DIGITS {
            return Err(QuantityError::Overflow);
        }
        (digits, false)
    } else {
        let drop = -shift;
        if drop >= len {
            // Entirely below one nano-unit, but non-zero.
            return Ok(1);
        }
        let split_at = (len - drop) as usize;
        let (kept, dropped) = digits.split_at(split_at);
        (kept, dropped.iter().any(|d| *d != 0))
    };
    let mut value: i128 = 0;
    for d in kept {
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(i128::from(*d)))
            .ok_or(QuantityError::Overflow)?;
    }
    for _ in 0..shift.max(0) {
        value = value.checked_mul(10).ok_or(QuantityError::Overflow)?;
    }
    if round_up {
        value = value.checked_add(1).ok_or(QuantityError::Overflow)?;
    }
    Ok(value)
}

impl fmt::Display for Quantity {
    /// Upstream's canonical form: no fractional digits, the largest suffix
    /// that loses nothing, sign only when negative.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nanos == 0 {
            return f.write_str("0");
        }
        let mut format = self.format;
        if format == Format::BinarySI {
            // Small or fractional binary values print in decimal so nothing
            // gets rounded.
            let small = self.nanos.unsigned_abs() < 1024 * NANOS_PER_UNIT.unsigned_abs();
            if small || self.nanos % NANOS_PER_UNIT != 0 {
                format = Format::DecimalSI;
            }
        }
        if format == Format::BinarySI {
            let mut units = self.nanos / NANOS_PER_UNIT;
            let mut exponent = 0;
            // Ei is the largest binary suffix; beyond it the mantissa grows.
            while exponent < 60 && units % 1024 == 0 {
                units /= 1024;
                exponent += 10;
            }
            let suffix = match exponent {
                10 => "Ki",
                20 => "Mi",
                30 => "Gi",
                40 => "Ti",
                50 => "Pi",
                60 => "Ei",
                _ => "",
            };
            return write!(f, "{units}{suffix}");
        }

        let mut mantissa = self.nanos;
        let mut exponent: i32 = -9;
        while mantissa % 10 == 0 {
            mantissa /= 10;
            exponent += 1;
        }
        // Give back zeros until the exponent is a multiple of three; this
        // never exceeds the zeros just removed.
        while exponent.rem_euclid(3) != 0 {
            mantissa *= 10;
            exponent -= 1;
        }
        let si = match exponent {
            -9 => Some("n"),
            -6 => Some("u"),
            -3 => Some("m"),
            0 => Some(""),
            3 => Some("k"),
            6 => Some("M"),
            9 => Some("G"),
            12 => Some("T"),
            15 => Some("P"),
            18 => Some("E"),
            _ => None,
        };
        match (format, si) {
            (Format::DecimalSI, Some(suffix)) => write!(f, "{mantissa}{suffix}"),
            // Exponent form, also DecimalSI's fallback beyond E (10^18).
            _ if exponent == 0 => write!(f, "{mantissa}"),
            _ => write!(f, "{mantissa}e{exponent}"),
        }
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantity::parse(s)
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl Hash for Quantity {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.nanos.hash(state);
    }
}

impl Add for Quantity {
    type Output = Quantity;

    /// Saturates at the representable range (about ±1.7e29 units) instead
    /// of panicking; use `checked_add` to detect that.
    fn add(self, rhs: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_add(rhs.nanos),
            format: self.combined_format(&rhs),
        }
    }
}

impl Sub for Quantity {
    type Output = Quantity;

    /// Saturates like `Add`; use `checked_sub` to detect that.
    fn sub(self, rhs: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_sub(rhs.nanos),
            format: self.combined_format(&rhs),
        }
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(QuantityVisitor)
    }
}

struct QuantityVisitor;

impl Visitor<'_> for QuantityVisitor {
    type Value = Quantity;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a quantity string such as \"100Mi\" or a number")
    }

    // Upstream trims surrounding whitespace when decoding JSON.
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Quantity, E> {
        Quantity::parse(v.trim()).map_err(E::custom)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Quantity, E> {
        Ok(Quantity::new(v, Format::DecimalSI))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Quantity, E> {
        Ok(Quantity {
            nanos: i128::from(v) * NANOS_PER_UNIT,
            format: Format::DecimalSI,
        })
    }

    // Rust prints floats without exponents and with the shortest digits
    // that round-trip, which is the text a JSON author most likely wrote.
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Quantity, E> {
        if !v.is_finite() {
            return Err(E::invalid_value(de::Unexpected::Float(v), &self));
        }
        Quantity::parse(&v.to_string()).map_err(E::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNIT: i128 = NANOS_PER_UNIT;
    const KI: i128 = 1024 * UNIT;
    const MI: i128 = 1024 * KI;
    const GI: i128 = 1024 * MI;
    const TI: i128 = 1024 * GI;
    const PI: i128 = 1024 * TI;
    const EI: i128 = 1024 * PI;

    use Format::{BinarySI, DecimalExponent, DecimalSI};

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|e| panic!("parse({s:?}): {e}"))
    }

    /// `mantissa * 10^exp` units, as upstream's test helper builds them.
    fn dec(mantissa: i128, exp: i32) -> i128 {
        let e = exp + 9;
        assert!(e >= 0);
        mantissa * 10i128.pow(e as u32)
    }

    fn nanos(nanos: i128, format: Format) -> Quantity {
        Quantity { nanos, format }
    }

    // TestQuantityParse from apimachinery: value and remembered format,
    // also with an explicit sign in front.
    #[test]
    fn parse_table() {
        let cases: &[(&str, i128, Format)] = &[
            ("0", 0, DecimalSI),
            ("0n", 0, DecimalSI),
            ("0u", 0, DecimalSI),
            ("0m", 0, DecimalSI),
            ("0Ki", 0, BinarySI),
            ("0k", 0, DecimalSI),
            ("0Mi", 0, BinarySI),
            ("0M", 0, DecimalSI),
            ("0Gi", 0, BinarySI),
            ("0G", 0, DecimalSI),
            ("0Ti", 0, BinarySI),
            ("0T", 0, DecimalSI),
            ("1", dec(1, 0), DecimalSI),
            ("1Ki", KI, BinarySI),
            ("8Ki", 8 * KI, BinarySI),
            ("7Mi", 7 * MI, BinarySI),
            ("6Gi", 6 * GI, BinarySI),
            ("5Ti", 5 * TI, BinarySI),
            ("4Pi", 4 * PI, BinarySI),
            ("3Ei", 3 * EI, BinarySI),
            ("10Ti", 10 * TI, BinarySI),
            ("100Ti", 100 * TI, BinarySI),
            ("5n", dec(5, -9), DecimalSI),
            ("4u", dec(4, -6), DecimalSI),
            ("3m", dec(3, -3), DecimalSI),
            ("9", dec(9, 0), DecimalSI),
            ("8k", dec(8, 3), DecimalSI),
            ("50k", dec(5, 4), DecimalSI),
            ("7M", dec(7, 6), DecimalSI),
            ("6G", dec(6, 9), DecimalSI),
            ("5T", dec(5, 12), DecimalSI),
            ("40T", dec(4, 13), DecimalSI),
            ("300T", dec(3, 14), DecimalSI),
            ("2P", dec(2, 15), DecimalSI),
            ("1E", dec(1, 18), DecimalSI),
            ("1E-3", dec(1, -3), DecimalExponent),
            ("1e3", dec(1, 3), DecimalExponent),
            ("1E6", dec(1, 6), DecimalExponent),
            ("1e9", dec(1, 9), DecimalExponent),
            ("1E12", dec(1, 12), DecimalExponent),
            ("1e15", dec(1, 15), DecimalExponent),
            ("1E18", dec(1, 18), DecimalExponent),
            ("1e14", dec(1, 14), DecimalExponent),
            ("1e13", dec(1, 13), DecimalExponent),
            ("100.035k", dec(100035, 0), DecimalSI),
            ("0.001", dec(1, -3), DecimalSI),
            ("0.0005k", dec(5, -1), DecimalSI),
            ("0.005", dec(5, -3), DecimalSI),
            ("0.05", dec(5, -2), DecimalSI),
            ("0.5", dec(5, -1), DecimalSI),
            ("0.00050k", dec(5, -1), DecimalSI),
            ("0.00500", dec(5, -3), DecimalSI),
            ("0.05000", dec(5, -2), DecimalSI),
            ("0.50000", dec(5, -1), DecimalSI),
            ("0.5e0", dec(5, -1), DecimalExponent),
            ("0.5e-1", dec(5, -2), DecimalExponent),
            ("0.5e-2", dec(5, -3), DecimalExponent),
            ("10.035M", dec(10035, 3), DecimalSI),
            ("1.2e3", dec(12, 2), DecimalExponent),
            ("1.3E+6", dec(13, 5), DecimalExponent),
            ("1.40e9", dec(14, 8), DecimalExponent),
            ("1.53E12", dec(153, 10), DecimalExponent),
            ("1.6e15", dec(16, 14), DecimalExponent),
            ("1.7E18", dec(17, 17), DecimalExponent),
            ("9.01", dec(901, -2), DecimalSI),
            ("8.1k", dec(81, 2), DecimalSI),
            ("7.123456M", dec(7123456, 0), DecimalSI),
            ("6.987654321G", dec(6987654321, 0), DecimalSI),
            ("5.444T", dec(5444, 9), DecimalSI),
            ("40.1T", dec(401, 11), DecimalSI),
            ("300.2T", dec(3002, 11), DecimalSI),
            ("2.5P", dec(25, 14), DecimalSI),
            ("1.01E", dec(101, 16), DecimalSI),
            // Rounded up to the nearest nano-unit.
            ("3.001n", dec(4, -9), DecimalSI),
            ("1.1E-9", dec(2, -9), DecimalExponent),
            ("0.0000000001", dec(1, -9), DecimalSI),
            ("0.0000000005", dec(1, -9), DecimalSI),
            ("0.00000000050", dec(1, -9), DecimalSI),
            ("0.5e-9", dec(1, -9), DecimalExponent),
            ("0.9n", dec(1, -9), DecimalSI),
            ("0.00000012345", dec(124, -9), DecimalSI),
            ("0.00000012354", dec(124, -9), DecimalSI),
            // Binary values are capped at 2^63-1.
            ("9Ei", MAX_BINARY_SI_NANOS, BinarySI),
            ("9223372036854775807Ki", MAX_BINARY_SI_NANOS, BinarySI),
            ("12E", dec(12, 18), DecimalSI),
            ("100.035Ki", dec(10243584, -2), BinarySI),
            ("0.5Mi", dec(524288, 0), BinarySI),
            ("0.05Gi", dec(536870912, -1), BinarySI),
            ("0.025Ti", dec(274877906944, -1), BinarySI),
            // Rounds up and falls back to decimal below one unit.
            ("0.000000000001Ki", dec(2, -9), DecimalSI),
            (".001", dec(1, -3), DecimalSI),
            (".0001k", dec(100, -3), DecimalSI),
            ("1.", dec(1, 0), DecimalSI),
            ("1.G", dec(1, 9), DecimalSI),
        ];
        for (input, want, format) in cases {
            let got = q(input);
            assert_eq!(got.nanos, *want, "value of {input:?}");
            assert_eq!(got.format(), *format, "format of {input:?}");

            let plus = q(&format!("+{input}"));
            assert_eq!((plus.nanos, plus.format), (*want, *format), "+{input}");

            let minus = q(&format!("-{input}"));
            assert_eq!((minus.nanos, minus.format), (-*want, *format), "-{input}");
        }
    }

    #[test]
    fn parse_errors() {
        let format = QuantityError::FormatWrong;
        let suffix = QuantityError::Suffix;
        let cases: &[(&str, &QuantityError)] = &[
            ("", &format),
            // TestQuantityParse's invalid list.
            ("1.1.M", &format),
            ("1+1.0M", &format),
            ("0.1mi", &suffix),
            ("0.1am", &format),
            ("aoeu", &format),
            (".5i", &suffix),
            ("1i", &suffix),
            ("-3.01i", &suffix),
            ("-3.01e-", &suffix),
            (" 1", &format),
            ("1 ", &format),
            ("Non-Numeric", &format),
            ("1e", &suffix),
            ("1ee3", &suffix),
            ("1Ki3", &suffix),
            ("1e99999999999999999999", &suffix),
            ("e-10", &QuantityError::Numeric),
            ("1e30", &QuantityError::Overflow),
            ("200000000000000000000000000000", &QuantityError::Overflow),
        ];
        for (input, want) in cases {
            assert_eq!(
                Quantity::parse(input).as_ref(),
                Err(*want),
                "parse({input:?})"
            );
        }
        assert_eq!(
            QuantityError::FormatWrong.to_string(),
            "quantities must match the regular expression \
             '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
        assert_eq!(
            QuantityError::Suffix.to_string(),
            "unable to parse quantity's suffix"
        );
    }

    #[test]
    fn parse_loose_forms_upstream_accepts() {
        // Upstream's scanner treats a number without digits as zero.
        for input in [".", "-.", "-", "+", "Ki", "m"] {
            assert!(q(input).is_zero(), "{input:?}");
        }
        assert_eq!(q("1e-20").nanos, 1);
        assert_eq!(q("-1e-20").nanos, -1);
        assert_eq!(
            q("00000000000000000000000000000000000000000001k").nanos,
            dec(1, 3)
        );
        let long_fraction = format!("1.{}1", "0".repeat(60));
        assert_eq!(q(&long_fraction).nanos, UNIT + 1);
    }

    // TestQuantityString: the canonical form of a value in a format, which
    // must also be what parsing that text (and the alternate spelling) prints.
    #[test]
    fn canonical_string() {
        let cases: &[(i128, Format, &str, &str)] = &[
            (GI, BinarySI, "1Gi", "1024Mi"),
            (300 * MI, BinarySI, "300Mi", "307200Ki"),
            (6 * KI, BinarySI, "6Ki", ""),
            (1001 * GI, BinarySI, "1001Gi", "1025024Mi"),
            (TI, BinarySI, "1Ti", "1024Gi"),
            (dec(5, 0), BinarySI, "5", "5000m"),
            (dec(500, -3), BinarySI, "500m", "0.5"),
            (dec(1, 9), DecimalSI, "1G", "1000M"),
            (dec(1000, 6), DecimalSI, "1G", "0.001T"),
            (dec(1000000, 3), DecimalSI, "1G", ""),
            (dec(1000000000, 0), DecimalSI, "1G", ""),
            (dec(1, -3), DecimalSI, "1m", "1000u"),
            (dec(80, -3), DecimalSI, "80m", ""),
            (dec(1080, -3), DecimalSI, "1080m", "1.08"),
            (dec(108, -2), DecimalSI, "1080m", "1080000000n"),
            (dec(10800, -4), DecimalSI, "1080m", ""),
            (dec(300, 6), DecimalSI, "300M", ""),
            (dec(1, 12), DecimalSI, "1T", ""),
            (dec(1, 18), DecimalSI, "1E", ""),
            (dec(1, 21), DecimalSI, "1e21", "1000E"),
            (dec(5, 21), DecimalSI, "5e21", "5000E"),
            (dec(1, 24), DecimalSI, "1e24", "1000000E"),
            (dec(1234567, 6), DecimalSI, "1234567M", ""),
            (dec(1234567, -3), BinarySI, "1234567m", ""),
            (dec(3, 3), DecimalSI, "3k", ""),
            (dec(1025, 0), BinarySI, "1025", ""),
            (0, DecimalSI, "0", ""),
            (0, BinarySI, "0", ""),
            (dec(1, 9), DecimalExponent, "1e9", ".001e12"),
            (dec(1, -3), DecimalExponent, "1e-3", "0.001e0"),
            (dec(1, -9), DecimalExponent, "1e-9", "1000e-12"),
            (dec(80, -3), DecimalExponent, "80e-3", ""),
            (dec(300, 6), DecimalExponent, "300e6", ""),
            (dec(1, 12), DecimalExponent, "1e12", ""),
            (dec(1, 3), DecimalExponent, "1e3", ""),
            (dec(3, 3), DecimalExponent, "3e3", ""),
            (0, DecimalExponent, "0", "00"),
            (dec(1, -9), DecimalSI, "1n", ""),
            (dec(80, -9), DecimalSI, "80n", ""),
            (dec(1080, -9), DecimalSI, "1080n", ""),
            (dec(1, -6), DecimalSI, "1u", ""),
            (dec(80, -6), DecimalSI, "80u", ""),
            (dec(1080, -6), DecimalSI, "1080u", ""),
        ];
        for (value, format, want, alternate) in cases {
            let built = nanos(*value, *format);
            assert_eq!(built.to_string(), *want, "{value}n as {format:?}");
            assert_eq!(q(want).to_string(), *want, "reparse {want:?}");
            if !alternate.is_empty() {
                assert_eq!(q(alternate).to_string(), *want, "alternate {alternate:?}");
            }
            if *value != 0 {
                assert_eq!(nanos(-*value, *format).to_string(), format!("-{want}"));
            }
        }
    }

    // TestQuantityParseEmit plus the canonical forms the brief lists.
    #[test]
    fn parse_emit() {
        let cases: &[(&str, &str)] = &[
            ("1Ki", "1Ki"),
            ("1Mi", "1Mi"),
            ("1Gi", "1Gi"),
            ("1024Mi", "1Gi"),
            ("1000M", "1G"),
            (".001Ki", "1024m"),
            (".000001Ki", "1024u"),
            (".000000001Ki", "1024n"),
            (".000000000001Ki", "2n"),
            ("100Mi", "100Mi"),
            ("1.5Gi", "1536Mi"),
            ("500m", "500m"),
            ("1e3", "1e3"),
            ("2k", "2k"),
            ("1000", "1k"),
            ("0.5", "500m"),
            ("1.2345", "1234500u"),
            ("1500", "1500"),
            ("1.5", "1500m"),
            ("1.5Ki", "1536"),
            ("1.1Ki", "1126400m"),
            ("100.035Ki", "102435840m"),
            ("9Ei", "9223372036854775807"),
            ("8Ei", "9223372036854775807"),
            ("4Ei", "4Ei"),
            ("1.5e3", "1500"),
            ("15e2", "1500"),
            ("1e-10", "1e-9"),
            ("18446744073709551616", "18446744073709551616"),
            ("1e20", "100e18"),
        ];
        for (input, want) in cases {
            assert_eq!(q(input).to_string(), *want, "{input:?}");
            let negative = q(&format!("-{input}"));
            if !negative.is_zero() {
                assert_eq!(negative.to_string(), format!("-{want}"), "-{input}");
            }
        }
        assert_eq!(q("-0").to_string(), "0");
        assert_eq!(Quantity::parse("--0"), Err(QuantityError::Suffix));
    }

    // TestNewSet / TestMilliNewSet (the formats this API can express).
    #[test]
    fn constructors() {
        let whole: &[(i64, Format, &str)] = &[
            (1, DecimalSI, "1"),
            (1000, DecimalSI, "1k"),
            (1234000, DecimalSI, "1234k"),
            (1024, BinarySI, "1Ki"),
            (1000000, DecimalExponent, "1e6"),
            (1024 * 1024, BinarySI, "1Mi"),
        ];
        for (value, format, want) in whole {
            let built = Quantity::new(*value, *format);
            assert_eq!(built.to_string(), *want);
            assert_eq!(q(want).value(), *value);
        }
        let milli: &[(i64, Format, &str)] = &[
            (1, DecimalSI, "1m"),
            (1000, DecimalSI, "1"),
            (1234000, DecimalSI, "1234"),
            (1024, BinarySI, "1024m"),
            (1000000, DecimalExponent, "1e3"),
            (1024 * 1024, BinarySI, "1048576m"),
        ];
        for (value, format, want) in milli {
            let built = Quantity::from_milli(*value, *format);
            assert_eq!(built.to_string(), *want);
            assert_eq!(q(want).milli_value(), *value);
        }
    }

    #[test]
    fn value_rounds_away_from_zero() {
        let cases: &[(&str, i64, i64)] = &[
            ("0", 0, 0),
            ("1", 1, 1000),
            ("1500m", 2, 1500),
            ("-1500m", -2, -1500),
            ("1n", 1, 1),
            ("-1n", -1, -1),
            ("1001u", 1, 2),
            ("100Mi", 104857600, 104857600000),
            ("9.01", 10, 9010),
            ("-9.01", -10, -9010),
            ("1E", 1_000_000_000_000_000_000, i64::MAX),
            ("-1E", -1_000_000_000_000_000_000, i64::MIN),
            ("100E", i64::MAX, i64::MAX),
        ];
        for (input, value, milli) in cases {
            let got = q(input);
            assert_eq!(got.value(), *value, "value of {input:?}");
            assert_eq!(got.milli_value(), *milli, "milli of {input:?}");
        }
    }

    // TestQuantityCmp and the equality-by-value contract.
    #[test]
    fn ordering_and_equality() {
        let cases: &[(&str, &str, Ordering)] = &[
            ("0", "0", Ordering::Equal),
            ("100m", "50m", Ordering::Greater),
            ("50m", "100m", Ordering::Less),
            ("10000T", "100Gi", Ordering::Greater),
            ("1Gi", "1024Mi", Ordering::Equal),
            ("1k", "1000", Ordering::Equal),
            ("1e3", "1k", Ordering::Equal),
            ("800m", "1", Ordering::Less),
            ("800m", "790m", Ordering::Greater),
            ("-1", "0", Ordering::Less),
        ];
        for (a, b, want) in cases {
            assert_eq!(q(a).cmp(&q(b)), *want, "{a} vs {b}");
            assert_eq!(q(b).cmp(&q(a)), want.reverse(), "{b} vs {a}");
        }
        use std::collections::HashSet;
        let set: HashSet<Quantity> = [q("1Gi"), q("1024Mi"), q("1073741824")].into();
        assert_eq!(set.len(), 1);
    }

    // TestAdd / TestSub, plus upstream's zero-keeps-the-other-suffix rule.
    #[test]
    fn arithmetic() {
        let d = |n: i64, f| Quantity::new(n, f);
        let zero = Quantity::new(0, DecimalSI);
        let adds = [
            (d(10, DecimalSI), d(10, DecimalSI), d(20, DecimalSI)),
            (d(10, DecimalSI), d(1, BinarySI), d(11, DecimalSI)),
            (d(10, BinarySI), d(1, DecimalSI), d(11, BinarySI)),
            (zero, d(50, DecimalSI), d(50, DecimalSI)),
            (d(50, DecimalSI), zero, d(50, DecimalSI)),
            (zero, zero, zero),
        ];
        for (a, b, want) in adds {
            let sum = a + b;
            assert_eq!((sum, sum.format()), (want, want.format()), "{a} + {b}");
            assert_eq!(a.checked_add(&b), Some(want));
        }
        let subs = [
            (d(10, DecimalSI), d(10, DecimalSI), zero),
            (d(10, DecimalSI), d(1, BinarySI), d(9, DecimalSI)),
            (d(10, BinarySI), d(1, DecimalSI), d(9, BinarySI)),
            (zero, d(50, DecimalSI), d(-50, DecimalSI)),
            (d(50, DecimalSI), zero, d(50, DecimalSI)),
            (zero, zero, zero),
        ];
        for (a, b, want) in subs {
            let diff = a - b;
            assert_eq!((diff, diff.format()), (want, want.format()), "{a} - {b}");
            assert_eq!(a.checked_sub(&b), Some(want));
        }
        for s in ["100m", "1Gi"] {
            assert_eq!((q(s) + q("0")).to_string(), s);
            assert_eq!((q("0") + q(s)).to_string(), s);
            assert_eq!((q(s) - q("0")).to_string(), s);
            assert_eq!((q("0") - q(s)).to_string(), format!("-{s}"));
        }
        assert_eq!((q("1.5Gi") - q("512Mi")).to_string(), "1Gi");
        assert_eq!((q("500m") + q("1500m")).to_string(), "2");

        let max = nanos(i128::MAX, DecimalSI);
        let min = nanos(i128::MIN, DecimalSI);
        assert_eq!(max.checked_add(&q("1n")), None);
        assert_eq!(min.checked_sub(&q("1n")), None);
        assert_eq!(max + q("1"), max);
        assert_eq!(min - q("1"), min);
    }

    #[test]
    fn mul_ratio_ceil() {
        let cases: &[(&str, i64, i64, &str)] = &[
            ("1Gi", 10, 100, "107374182400m"),
            ("100Mi", 5, 100, "5Mi"),
            ("4", 1, 3, "1333333334n"),
            ("1", 1, 3, "333333334n"),
            ("-1", 1, 3, "-333333333n"),
            ("10", -1, 3, "-3333333333n"),
            ("10", 1, -3, "-3333333333n"),
            ("10", 0, 7, "0"),
            ("3", 2, 1, "6"),
        ];
        for (input, num, den, want) in cases {
            let got = q(input)
                .mul_ratio_ceil(*num, *den)
                .expect("valid test input");
            assert_eq!(got.to_string(), *want, "{input} * {num} / {den}");
        }
        assert_eq!(
            q("1Gi")
                .mul_ratio_ceil(10, 100)
                .expect("valid test input")
                .value(),
            107374183
        );
        assert_eq!(q("1").mul_ratio_ceil(1, 0), None);
        assert_eq!(nanos(i128::MAX, DecimalSI).mul_ratio_ceil(2, 1), None);
        assert_eq!(
            q("1Gi")
                .mul_ratio_ceil(1, 2)
                .expect("valid test input")
                .format(),
            BinarySI
        );
    }

    #[test]
    fn predicates() {
        assert!(q("0").is_zero() && !q("0").is_negative());
        assert!(q("-1m").is_negative() && !q("-1m").is_zero());
        assert_eq!(q("100Mi").format(), BinarySI);
        assert_eq!("2Gi".parse::<Quantity>(), Ok(q("2048Mi")));
    }

    #[test]
    fn serde() {
        assert_eq!(
            serde_json::to_string(&q("1.5Gi")).expect("valid test input"),
            r#""1536Mi""#
        );
        assert_eq!(
            serde_json::to_string(&q("0.5")).expect("valid test input"),
            r#""500m""#
        );
        // TestJSONWhitespace.
        let cases: &[(&str, &str)] = &[
            (r#"" 1""#, "1"),
            (r#""1 ""#, "1"),
            ("1", "1"),
            (" 1", "1"),
            ("1 ", "1"),
            ("10", "10"),
            ("-1", "-1"),
            (" -1", "-1"),
            (r#""100Mi""#, "100Mi"),
            ("0.5", "500m"),
            ("1.5e3", "1500"),
            ("18446744073709551615", "18446744073709551615"),
        ];
        for (json, want) in cases {
            let got: Quantity = serde_json::from_str(json).expect("valid test input");
            assert_eq!(got.to_string(), *want, "{json}");
        }
        let err = serde_json::from_str::<Quantity>(r#""abc""#).expect_err("must be rejected");
        assert!(err.to_string().contains("quantities must match"), "{err}");
        assert!(serde_json::from_str::<Quantity>("true").is_err());
        for s in ["100Mi", "1536Mi", "500m", "1e3", "-2k", "0"] {
            let round: Quantity =
                serde_json::from_str(&serde_json::to_string(&q(s)).expect("valid test input"))
                    .expect("valid test input");
            assert_eq!(round.to_string(), s);
        }
    }
}
