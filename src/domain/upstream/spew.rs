//! go-spew's `%#v` output, as upstream's `hashutil.DeepHashObject` prints
//! an object into a hash (pkg/util/hash/hash.go: `Indent: " "`,
//! `SortKeys`, `DisableMethods`, `SpewKeys`; the indent only matters to
//! spew's `Dump`, not to `Fprintf`).
//!
//! The rules, from go-spew's format.go: a value is preceded by its type in
//! parentheses, `(core.RestartPolicy)Always`, except inside a slice or a
//! map, whose elements and keys print bare; a pointer prints `(*T)` and
//! then its target without a type (or `(*T)<nil>`); strings print raw,
//! without quotes; structs print `{Name:value Name:value}` with every
//! field, zero or not; nil slices and maps print `<nil>`, empty ones `[]`
//! and `map[]`; map entries print `key:value` sorted by key.

use std::fmt::Write as _;

use super::gotype::Ty;
use super::goval::GoVal;
use super::quantity::QuantityRepr;
use crate::domain::units::quantity::Format;

/// `%#v` of a pointer to a value of type `ty`, as `DeepHashObject(h, &x)`.
pub fn spew_pointer_to(ty: &Ty, val: &GoVal) -> String {
    let mut out = format!("(*{})", ty.name());
    write_value(&mut out, ty, val, false);
    out
}

/// `%#v` of a value of type `ty`.
pub fn spew(ty: &Ty, val: &GoVal) -> String {
    let mut out = String::new();
    write_value(&mut out, ty, val, true);
    out
}

/// `%#v` of a `[]byte`: `([]uint8)[123 34 ...]`, each byte in decimal.
pub fn spew_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 4 + 10);
    out.push_str("([]uint8)[");
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let _ = write!(out, "{b}");
    }
    out.push(']');
    out
}

fn write_value(out: &mut String, ty: &Ty, val: &GoVal, show_type: bool) {
    if let (Ty::Ptr(elem), GoVal::Ptr(inner)) = (ty, val) {
        match inner {
            None if show_type => {
                let _ = write!(out, "(*{})<nil>", elem.name());
            }
            None => out.push_str("<nil>"),
            Some(target) => {
                if show_type {
                    let _ = write!(out, "(*{})", elem.name());
                } else {
                    out.push_str("<*>");
                }
                write_value(out, elem, target, false);
            }
        }
        return;
    }
    if show_type {
        let _ = write!(out, "({})", ty.name());
    }
    match (ty, val) {
        (_, GoVal::Bool(b)) => out.push_str(if *b { "true" } else { "false" }),
        (_, GoVal::Int(i)) => {
            let _ = write!(out, "{i}");
        }
        (_, GoVal::Uint(u)) => {
            let _ = write!(out, "{u}");
        }
        (_, GoVal::Str(s)) => out.push_str(s),
        (Ty::Slice(_, elem), GoVal::Slice(Some(items))) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                write_value(out, elem, item, false);
            }
            out.push(']');
        }
        (Ty::Map(_, key_ty, value_ty), GoVal::Map(Some(map))) => {
            out.push_str("map[");
            for (i, (key, value)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                write_value(out, key_ty, &GoVal::Str(key.clone()), false);
                out.push(':');
                write_value(out, value_ty, value, false);
            }
            out.push(']');
        }
        (Ty::Struct(sty), GoVal::Struct(values)) => {
            out.push('{');
            let mut first = true;
            for (field, value) in sty.fields.iter().zip(values) {
                // A field newer than v1.26 shows only when used, so a pod
                // that does not use it keeps v1.26's identity.
                if field.since.is_some() && value.is_zero() {
                    continue;
                }
                if !first {
                    out.push(' ');
                }
                first = false;
                let _ = write!(out, "{}:", field.name);
                write_value(out, field.ty, value, true);
            }
            out.push('}');
        }
        (_, GoVal::Quantity(q)) => write_quantity(out, q),
        (_, GoVal::IntOrString(v)) => {
            let _ = write!(
                out,
                "{{Type:(intstr.Type){} IntVal:(int32){} StrVal:(string){}}}",
                v.kind, v.int_val, v.str_val
            );
        }
        (_, GoVal::ZeroTime) => out
            .push_str("{Time:(time.Time){wall:(uint64)0 ext:(int64)0 loc:(*time.Location)<nil>}}"),
        (_, GoVal::ZeroFieldsV1) => out.push_str("{Raw:([]uint8)<nil>}"),
        // Nil slices and maps.
        _ => out.push_str("<nil>"),
    }
}

/// `resource.Quantity{i int64Amount; d infDecAmount; s string; Format}`.
fn write_quantity(out: &mut String, q: &QuantityRepr) {
    let _ = write!(
        out,
        "{{i:(resource.int64Amount){{value:(int64){} scale:(resource.Scale){}}} d:(resource.infDecAmount){{Dec:",
        q.value, q.scale
    );
    match &q.dec {
        None => out.push_str("(*inf.Dec)<nil>"),
        Some(dec) => {
            // big.Int{neg bool; abs nat}, nat being little-endian 64-bit words.
            let magnitude = dec.unscaled.unsigned_abs();
            let low = magnitude as u64;
            let high = (magnitude >> 64) as u64;
            let words = if high == 0 {
                format!("{low}")
            } else {
                format!("{low} {high}")
            };
            let _ = write!(
                out,
                "(*inf.Dec){{unscaled:(big.Int){{neg:(bool){} abs:(big.nat)[{}]}} scale:(inf.Scale){}}}",
                dec.unscaled < 0,
                words,
                dec.scale
            );
        }
    }
    let format = match q.format {
        None => "",
        Some(Format::DecimalExponent) => "DecimalExponent",
        Some(Format::BinarySI) => "BinarySI",
        Some(Format::DecimalSI) => "DecimalSI",
    };
    let _ = write!(
        out,
        "}} s:(string){} Format:(resource.Format){}}}",
        q.cached, format
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_print_in_decimal() {
        assert_eq!(spew_bytes(b"{\"a\"}"), "([]uint8)[123 34 97 34 125]");
        assert_eq!(spew_bytes(b""), "([]uint8)[]");
    }

    #[test]
    fn quantity_prints_every_field() {
        let mut out = String::new();
        let q = QuantityRepr::parse("500m").expect("quantity");
        write_quantity(&mut out, &q);
        assert_eq!(
            out,
            "{i:(resource.int64Amount){value:(int64)500 scale:(resource.Scale)-3} d:(resource.infDecAmount){Dec:(*inf.Dec)<nil>} s:(string)500m Format:(resource.Format)DecimalSI}"
        );
        let mut out = String::new();
        let q = QuantityRepr::parse("1.5Gi").expect("quantity");
        write_quantity(&mut out, &q);
        assert!(
            out.contains("Dec:(*inf.Dec){unscaled:(big.Int){neg:(bool)false abs:(big.nat)[1610612736000000000]} scale:(inf.Scale)9}"),
            "{out}"
        );
    }
}
