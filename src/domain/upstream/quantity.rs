//! apimachinery's `resource.Quantity` as Go holds it, not only its value:
//! the int64 amount and scale (or the arbitrary-precision decimal), the
//! cached text and the format. go-spew prints all of them, and the cached
//! text is what `MarshalJSON` writes back, so both depend on how the
//! quantity was written (`ParseQuantity` in quantity.go) and on what
//! defaulting did to it (`RoundUp`).

use crate::domain::units::quantity::{
    interpret_suffix, split, Base, Format, Quantity, QuantityError,
};

/// `resource.Quantity`'s fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuantityRepr {
    /// `i.value` and `i.scale`: the amount is `value * 10^scale`, used when
    /// `dec` is `None`.
    pub value: i64,
    pub scale: i32,
    /// `d.Dec`, the arbitrary-precision form.
    pub dec: Option<DecRepr>,
    /// `s`: the text kept when the input was already canonical.
    pub cached: String,
    /// `Format`; `None` only for the zero `Quantity{}`.
    pub format: Option<Format>,
}

/// An `inf.Dec`: `unscaled * 10^-scale`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecRepr {
    pub unscaled: i128,
    pub scale: i32,
}

/// Why a quantity cannot be represented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuantityIssue {
    /// Upstream refuses it too.
    Invalid(QuantityError),
    /// Upstream accepts it, but its representation is not reproduced here.
    Unreproducible(String),
}

/// apimachinery's `maxInt64Factors`: digits an int64 always holds.
const MAX_INT64_FACTORS: i32 = 18;
const NANO_SCALE: i32 = -9;
const MILLI_SCALE: i32 = -3;

impl QuantityRepr {
    /// Go's `ParseQuantity(text)`, field for field.
    pub fn parse(text: &str) -> Result<QuantityRepr, QuantityIssue> {
        if text.is_empty() {
            return Err(QuantityIssue::Invalid(QuantityError::FormatWrong));
        }
        if text == "0" {
            return Ok(QuantityRepr {
                cached: text.to_string(),
                format: Some(Format::DecimalSI),
                ..QuantityRepr::default()
            });
        }
        let parts = split(text).map_err(QuantityIssue::Invalid)?;
        let (base, exponent, format) =
            interpret_suffix(parts.suffix).map_err(QuantityIssue::Invalid)?;
        let exponent = i32::try_from(exponent).map_err(|_| {
            QuantityIssue::Unreproducible(format!("quantity {text:?} has a huge exponent"))
        })?;
        // Upstream strips leading zeros from the integer part only.
        let num = match parts.int.trim_start_matches('0') {
            "" => "0",
            digits => digits,
        };
        let denom = parts.frac;
        let digits = i32::try_from(num.len() + denom.len()).unwrap_or(i32::MAX);

        let (mut scale, precision, mantissa) = match base {
            Base::Ten => (exponent, MAX_INT64_FACTORS - digits, 1i64),
            Base::Two if denom.is_empty() && exponent >= 0 => {
                // Upstream's estimate of the decimal digits left, in float32.
                let used = (exponent as f32 * 3.0 / 10.0) as i32;
                let precision = 15 - i32::try_from(num.len()).unwrap_or(i32::MAX) - used - 1;
                (0, precision, 1i64 << exponent.min(62))
            }
            Base::Two => (0, -1, 1),
        };
        if precision >= 0 {
            scale -= i32::try_from(denom.len()).unwrap_or(i32::MAX);
            if scale >= NANO_SCALE {
                let shifted = format!("{num}{denom}");
                let value: i64 = shifted
                    .parse()
                    .map_err(|_| QuantityIssue::Invalid(QuantityError::Numeric))?;
                if let Some(mut result) = int64_multiply(value, mantissa) {
                    if parts.negative {
                        result = -result;
                    }
                    let canonical = match format {
                        Format::BinarySI => exponent % 10 == 0 && value & 0x07 != 0,
                        _ => {
                            scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0')
                        }
                    };
                    // Past ~1e29 the canonical text is not reproduced here.
                    if checked_shift10(i128::from(result), scale - NANO_SCALE).is_none() {
                        return Err(QuantityIssue::Unreproducible(format!(
                            "quantity {text:?} is too large"
                        )));
                    }
                    return Ok(QuantityRepr {
                        value: result,
                        scale,
                        dec: None,
                        cached: if canonical {
                            text.to_string()
                        } else {
                            String::new()
                        },
                        format: Some(format),
                    });
                }
            }
        }
        // The arbitrary-precision path: rounded away from zero to nano
        // units (scale 9), binary values capped, small binary ones decimal.
        let exact = Quantity::parse(text).map_err(|e| match e {
            QuantityError::Overflow => {
                QuantityIssue::Unreproducible(format!("quantity {text:?} is too large"))
            }
            other => QuantityIssue::Invalid(other),
        })?;
        if exact.nanos() == 0 {
            return Err(QuantityIssue::Unreproducible(format!(
                "quantity {text:?} is a zero upstream keeps unrounded"
            )));
        }
        if format == Format::BinarySI && exact.nanos().abs() >= i128::from(i64::MAX) * 1_000_000_000
        {
            return Err(QuantityIssue::Unreproducible(format!(
                "quantity {text:?} is capped by upstream"
            )));
        }
        Ok(QuantityRepr {
            dec: Some(DecRepr {
                unscaled: exact.nanos(),
                scale: -NANO_SCALE,
            }),
            format: Some(exact.format()),
            ..QuantityRepr::default()
        })
    }

    /// The exact value in nano-units.
    pub fn nanos(&self) -> i128 {
        match &self.dec {
            Some(dec) => shift10(dec.unscaled, NANO_SCALE.abs() - dec.scale),
            None => shift10(i128::from(self.value), self.scale - NANO_SCALE),
        }
    }

    /// Go's `q.RoundUp(-3)`, what defaulting does to every container
    /// resource: coarser than milli units is kept as it is (text too),
    /// finer is rounded away from zero and loses its text.
    pub fn round_up_to_milli(&mut self) {
        if let Some(dec) = &mut self.dec {
            self.cached.clear();
            let nanos = shift10(dec.unscaled, NANO_SCALE.abs() - dec.scale);
            *dec = DecRepr {
                unscaled: div_away_from_zero(nanos, 1_000_000),
                scale: -MILLI_SCALE,
            };
            return;
        }
        if self.scale >= MILLI_SCALE {
            return;
        }
        self.cached.clear();
        let divisor = 10i128.pow(u32::try_from(MILLI_SCALE - self.scale).unwrap_or(0));
        let rounded = div_away_from_zero(i128::from(self.value), divisor);
        self.value = i64::try_from(rounded).unwrap_or(self.value);
        self.scale = MILLI_SCALE;
    }

    /// The text `MarshalJSON` writes: the kept text, else the canonical form.
    pub fn json_text(&self) -> String {
        if !self.cached.is_empty() {
            return self.cached.clone();
        }
        let format = self.format.unwrap_or(Format::DecimalExponent);
        Quantity::from_nanos(self.nanos(), format).to_string()
    }
}

/// `value * 10^exp`, for the small exponents quantities use.
fn shift10(value: i128, exp: i32) -> i128 {
    if exp >= 0 {
        value.saturating_mul(10i128.saturating_pow(exp.unsigned_abs()))
    } else {
        value / 10i128.saturating_pow(exp.unsigned_abs())
    }
}

fn checked_shift10(value: i128, exp: i32) -> Option<i128> {
    value.checked_mul(10i128.checked_pow(u32::try_from(exp).ok()?)?)
}

fn div_away_from_zero(value: i128, divisor: i128) -> i128 {
    let quotient = value / divisor;
    if value % divisor == 0 {
        quotient
    } else if value > 0 {
        quotient + 1
    } else {
        quotient - 1
    }
}

/// apimachinery's `int64Multiply`: `None` on overflow.
fn int64_multiply(a: i64, b: i64) -> Option<i64> {
    if a == 0 || b == 0 || a == 1 || b == 1 {
        return Some(a.wrapping_mul(b));
    }
    if a == i64::MIN || b == i64::MIN {
        return None;
    }
    a.checked_mul(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> QuantityRepr {
        QuantityRepr::parse(text).expect("parses")
    }

    #[test]
    fn fast_path_keeps_canonical_text_only() {
        // (input, value, scale, kept text, format)
        let cases = [
            ("500m", 500, -3, "500m", Format::DecimalSI),
            ("1000m", 1000, -3, "", Format::DecimalSI),
            ("0.5", 5, -1, "", Format::DecimalSI),
            ("1", 1, 0, "1", Format::DecimalSI),
            ("+1", 1, 0, "+1", Format::DecimalSI),
            ("1e3", 1, 3, "1e3", Format::DecimalExponent),
            ("1Gi", 1 << 30, 0, "1Gi", Format::BinarySI),
            ("1024Mi", 1 << 30, 0, "", Format::BinarySI),
            ("100Mi", 100 << 20, 0, "100Mi", Format::BinarySI),
            ("1G", 1, 9, "1G", Format::DecimalSI),
            ("500M", 500, 6, "500M", Format::DecimalSI),
            ("0.0", 0, -1, "", Format::DecimalSI),
            ("-2", -2, 0, "-2", Format::DecimalSI),
        ];
        for (text, value, scale, cached, format) in cases {
            let q = parsed(text);
            assert_eq!(
                (
                    q.value,
                    q.scale,
                    q.cached.as_str(),
                    q.format,
                    q.dec.is_none()
                ),
                (value, scale, cached, Some(format), true),
                "{text}"
            );
        }
        assert_eq!(parsed("0").cached, "0");
    }

    #[test]
    fn slow_path_is_a_nano_decimal() {
        let q = parsed("1.5Gi");
        assert_eq!(
            q.dec,
            Some(DecRepr {
                unscaled: 1_610_612_736_000_000_000,
                scale: 9
            })
        );
        assert_eq!(q.format, Some(Format::BinarySI));
        assert_eq!(q.json_text(), "1536Mi");
        let small = parsed("0.5Ki");
        assert_eq!(small.format, Some(Format::BinarySI));
        assert_eq!(parsed("0.1n").dec.map(|d| d.unscaled), Some(1));
    }

    #[test]
    fn round_up_to_milli() {
        let mut q = parsed("1u");
        q.round_up_to_milli();
        assert_eq!((q.value, q.scale, q.json_text().as_str()), (1, -3, "1m"));
        let mut q = parsed("500m");
        q.round_up_to_milli();
        assert_eq!((q.value, q.scale, q.cached.as_str()), (500, -3, "500m"));
        let mut q = parsed("1.5Gi");
        q.round_up_to_milli();
        assert_eq!(
            q.dec,
            Some(DecRepr {
                unscaled: 1_610_612_736_000,
                scale: 3
            })
        );
        let mut q = parsed("-0.0001");
        q.round_up_to_milli();
        assert_eq!((q.value, q.scale), (-1, -3));
    }

    #[test]
    fn json_text_is_canonical_without_kept_text() {
        let cases = [
            ("0.5", "500m"),
            ("1000m", "1"),
            ("1024Mi", "1Gi"),
            ("1e3", "1e3"),
            ("1000", "1k"),
            ("+1", "+1"),
        ];
        for (text, want) in cases {
            assert_eq!(parsed(text).json_text(), want, "{text}");
        }
    }

    #[test]
    fn refusals() {
        assert!(matches!(
            QuantityRepr::parse("1Zi"),
            Err(QuantityIssue::Invalid(_))
        ));
        assert!(matches!(
            QuantityRepr::parse(""),
            Err(QuantityIssue::Invalid(_))
        ));
        assert!(matches!(
            QuantityRepr::parse("0.0000000000"),
            Err(QuantityIssue::Unreproducible(_))
        ));
        assert!(matches!(
            QuantityRepr::parse("1e100"),
            Err(QuantityIssue::Unreproducible(_))
        ));
    }
}
