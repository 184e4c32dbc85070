//! Go's `encoding/json` decoding (as sigs.k8s.io/json runs it for the API
//! machinery: field names matched case-sensitively, unknown fields
//! dropped) of a `GoJson` document into a Go value of a known type.
//!
//! Go goes on after a type mismatch and fails the whole decode at the end;
//! the first mismatch is returned here, which refuses the same documents.

use std::collections::BTreeMap;

use super::gojson::GoJson;
use super::gotype::{StructTy, Ty};
use super::goval::{GoVal, IntOrString};
use super::quantity::{QuantityIssue, QuantityRepr};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Go's decoder refuses the document (so upstream refuses the pod).
    #[error("{path}: cannot decode {found} into Go type {go_type}")]
    Type {
        path: String,
        found: String,
        go_type: String,
    },
    #[error("{path}: {reason}")]
    Invalid { path: String, reason: String },
    /// Go accepts it, but the value it would hold is not reproduced.
    #[error("{path}: {reason}")]
    Unreproducible { path: String, reason: String },
}

/// Decodes `json` into a new zero value of `ty`.
pub fn decode(ty: &'static Ty, json: &GoJson) -> Result<GoVal, DecodeError> {
    let mut val = GoVal::zero(ty);
    decode_into(ty, json, &mut val, "")?;
    Ok(val)
}

fn kind(json: &GoJson) -> String {
    match json {
        GoJson::Null => "null".into(),
        GoJson::Bool(_) => "bool".into(),
        GoJson::Number(n) => format!("number {n}"),
        GoJson::String(_) => "string".into(),
        GoJson::Array(_) => "array".into(),
        GoJson::Object(_) => "object".into(),
    }
}

fn mismatch(path: &str, json: &GoJson, ty: &Ty) -> DecodeError {
    DecodeError::Type {
        path: path.to_string(),
        found: kind(json),
        go_type: ty.name(),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Decodes into an existing value, as Go does: a struct keeps the fields
/// the object does not name, a non-nil pointer is decoded through, a map
/// gains entries, a slice reuses its elements.
pub fn decode_into(
    ty: &'static Ty,
    json: &GoJson,
    val: &mut GoVal,
    path: &str,
) -> Result<(), DecodeError> {
    if let GoJson::Null = json {
        // null clears pointers, slices and maps and leaves the rest, except
        // the types with their own decoders.
        match val {
            GoVal::Ptr(p) => *p = None,
            GoVal::Slice(s) => *s = None,
            GoVal::Map(m) => *m = None,
            GoVal::Quantity(q) if *q != QuantityRepr::default() => {
                return Err(DecodeError::Unreproducible {
                    path: path.to_string(),
                    reason: "a null quantity over a set one is not reproduced".into(),
                });
            }
            GoVal::IntOrString(v) => v.kind = 0,
            _ => {}
        }
        return Ok(());
    }
    match (ty, val) {
        (Ty::Ptr(elem), GoVal::Ptr(inner)) => {
            let target = inner.get_or_insert_with(|| Box::new(GoVal::zero(elem)));
            decode_into(elem, json, target, path)
        }
        (Ty::Bool(_), GoVal::Bool(b)) => match json {
            GoJson::Bool(v) => {
                *b = *v;
                Ok(())
            }
            other => Err(mismatch(path, other, ty)),
        },
        (Ty::Str(_), GoVal::Str(s)) => match json {
            GoJson::String(v) => {
                s.clone_from(v);
                Ok(())
            }
            other => Err(mismatch(path, other, ty)),
        },
        (Ty::Int(_, bits), GoVal::Int(i)) => match json {
            GoJson::Number(text) => {
                *i = parse_int(text, *bits).ok_or_else(|| mismatch(path, json, ty))?;
                Ok(())
            }
            other => Err(mismatch(path, other, ty)),
        },
        (Ty::Uint(_, bits), GoVal::Uint(u)) => match json {
            GoJson::Number(text) => {
                let v: u64 = text.parse().map_err(|_| mismatch(path, json, ty))?;
                if *bits < 64 && v >> bits != 0 {
                    return Err(mismatch(path, json, ty));
                }
                *u = v;
                Ok(())
            }
            other => Err(mismatch(path, other, ty)),
        },
        (Ty::Slice(_, elem), GoVal::Slice(slice)) => match json {
            GoJson::Array(items) => {
                let existing = slice.get_or_insert_with(Vec::new);
                for (i, item) in items.iter().enumerate() {
                    if i >= existing.len() {
                        existing.push(GoVal::zero(elem));
                    }
                    decode_into(elem, item, &mut existing[i], &format!("{path}[{i}]"))?;
                }
                existing.truncate(items.len());
                Ok(())
            }
            other => Err(mismatch(path, other, ty)),
        },
        (Ty::Map(_, _, value_ty), GoVal::Map(map)) => match json {
            GoJson::Object(entries) => {
                let map = map.get_or_insert_with(BTreeMap::new);
                for (key, item) in entries {
                    // Go decodes each map value into a fresh zero value.
                    let mut value = GoVal::zero(value_ty);
                    decode_into(value_ty, item, &mut value, &join(path, key))?;
                    map.insert(key.clone(), value);
                }
                Ok(())
            }
            other => Err(mismatch(path, other, ty)),
        },
        (Ty::Struct(sty), GoVal::Struct(values)) => match json {
            GoJson::Object(entries) => {
                for (key, item) in entries {
                    if let Some(route) = sty.json_path(key) {
                        decode_field(sty, values, &route, item, &join(path, key))?;
                    }
                }
                Ok(())
            }
            other => Err(mismatch(path, other, ty)),
        },
        (Ty::Quantity, GoVal::Quantity(q)) => {
            let text = match json {
                GoJson::String(s) => s.as_str(),
                GoJson::Number(n) => n.as_str(),
                other => return Err(mismatch(path, other, ty)),
            };
            // Go trims ASCII and Unicode white space.
            *q = QuantityRepr::parse(text.trim()).map_err(|issue| match issue {
                QuantityIssue::Invalid(e) => DecodeError::Invalid {
                    path: path.to_string(),
                    reason: e.to_string(),
                },
                QuantityIssue::Unreproducible(reason) => DecodeError::Unreproducible {
                    path: path.to_string(),
                    reason,
                },
            })?;
            Ok(())
        }
        (Ty::IntOrString, GoVal::IntOrString(v)) => match json {
            GoJson::String(s) => {
                *v = IntOrString {
                    kind: 1,
                    int_val: v.int_val,
                    str_val: s.clone(),
                };
                Ok(())
            }
            GoJson::Number(text) => {
                v.kind = 0;
                let parsed = parse_int(text, 32).ok_or_else(|| mismatch(path, json, ty))?;
                v.int_val = i32::try_from(parsed).map_err(|_| mismatch(path, json, ty))?;
                Ok(())
            }
            other => Err(mismatch(path, other, ty)),
        },
        (Ty::Time(_), GoVal::ZeroTime) => Err(DecodeError::Unreproducible {
            path: path.to_string(),
            reason:
                "a set time is hashed with the node's local time zone data, which is not reproduced"
                    .into(),
        }),
        (Ty::FieldsV1, GoVal::ZeroFieldsV1) => Err(DecodeError::Unreproducible {
            path: path.to_string(),
            reason: "managed fields are not reproduced".into(),
        }),
        (ty, _) => Err(DecodeError::Invalid {
            path: path.to_string(),
            reason: format!("value does not match its type {}", ty.name()),
        }),
    }
}

fn decode_field(
    sty: &'static StructTy,
    values: &mut [GoVal],
    route: &[usize],
    item: &GoJson,
    path: &str,
) -> Result<(), DecodeError> {
    let Some((&first, rest)) = route.split_first() else {
        return Ok(());
    };
    let (Some(field), Some(value)) = (sty.fields.get(first), values.get_mut(first)) else {
        return Ok(());
    };
    if rest.is_empty() {
        return decode_into(field.ty, item, value, path);
    }
    match (field.ty, value) {
        (Ty::Struct(inner), GoVal::Struct(inner_values)) => {
            decode_field(inner, inner_values, rest, item, path)
        }
        _ => Ok(()),
    }
}

/// Go's `strconv.ParseInt(text, 10, bits)`: plain decimal integers only.
fn parse_int(text: &str, bits: u32) -> Option<i64> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value: i64 = text.parse().ok()?;
    if bits < 64 {
        let limit = 1i64 << (bits - 1);
        if value < -limit || value >= limit {
            return None;
        }
    }
    Some(value)
}
