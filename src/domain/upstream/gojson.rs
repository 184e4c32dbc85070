//! JSON as Go's `encoding/json` reads and writes it.
//!
//! Reading keeps what Go's decoder sees and a `serde_json::Value` loses:
//! the text of each number (a quantity written `1e3` is not one written
//! `1000`), and every key in order, repeats included. Writing reproduces
//! `json.Marshal` of a Go value: struct fields in declaration order with
//! `omitempty`, map keys sorted, and Go 1.19's string escaping (HTML
//! characters and U+2028/U+2029 escaped, other controls as `\u00XX`).

use std::fmt::Write as _;

use super::gotype::{json_name, StructTy, Ty};
use super::goval::GoVal;

/// A JSON document as Go's decoder reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum GoJson {
    Null,
    Bool(bool),
    /// The number's literal text, as written.
    Number(String),
    String(String),
    Array(Vec<GoJson>),
    /// Keys in document order; a repeated key stays repeated.
    Object(Vec<(String, GoJson)>),
}

/// Where and why a document is not JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid JSON at byte {offset}: {reason}")]
pub struct JsonSyntaxError {
    pub offset: usize,
    pub reason: &'static str,
}

impl GoJson {
    /// Parses a whole document; anything but white space after the value
    /// is an error, as in Go.
    pub fn parse(text: &str) -> Result<GoJson, JsonSyntaxError> {
        let mut parser = Parser {
            bytes: text.as_bytes(),
            text,
            pos: 0,
            depth: 0,
        };
        let value = parser.value()?;
        parser.skip_space();
        if parser.pos != parser.bytes.len() {
            return Err(parser.error("data after the top-level value"));
        }
        Ok(value)
    }

    /// The same document from a `serde_json::Value` (numbers in serde's
    /// text, keys in the map's order).
    pub fn from_serde(value: &serde_json::Value) -> GoJson {
        use serde_json::Value;
        match value {
            Value::Null => GoJson::Null,
            Value::Bool(b) => GoJson::Bool(*b),
            Value::Number(n) => GoJson::Number(n.to_string()),
            Value::String(s) => GoJson::String(s.clone()),
            Value::Array(items) => GoJson::Array(items.iter().map(GoJson::from_serde).collect()),
            Value::Object(map) => GoJson::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), GoJson::from_serde(v)))
                    .collect(),
            ),
        }
    }

    /// The value of `key` in an object (the last one when repeated, as Go
    /// keeps for a scalar).
    pub fn get(&self, key: &str) -> Option<&GoJson> {
        match self {
            GoJson::Object(entries) => entries.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// Nesting beyond this is refused (Go allows 10000): a pod is nowhere near
/// it, and the parser recurses on a thread's stack.
pub const MAX_DEPTH: usize = 512;

struct Parser<'a> {
    bytes: &'a [u8],
    text: &'a str,
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn error(&self, reason: &'static str) -> JsonSyntaxError {
        JsonSyntaxError {
            offset: self.pos,
            reason,
        }
    }

    fn skip_space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    fn value(&mut self) -> Result<GoJson, JsonSyntaxError> {
        self.skip_space();
        match self.bytes.get(self.pos) {
            None => Err(self.error("unexpected end of input")),
            Some(b'{') => self.nested(Self::object),
            Some(b'[') => self.nested(Self::array),
            Some(b'"') => self.string().map(GoJson::String),
            Some(b't') => self.literal("true", GoJson::Bool(true)),
            Some(b'f') => self.literal("false", GoJson::Bool(false)),
            Some(b'n') => self.literal("null", GoJson::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.error("invalid character looking for a value")),
        }
    }

    fn nested(
        &mut self,
        parse: fn(&mut Self) -> Result<GoJson, JsonSyntaxError>,
    ) -> Result<GoJson, JsonSyntaxError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error("exceeded max depth"));
        }
        let value = parse(self);
        self.depth -= 1;
        value
    }

    fn literal(&mut self, word: &'static str, value: GoJson) -> Result<GoJson, JsonSyntaxError> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.error("invalid literal"))
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while self.bytes.get(self.pos).is_some_and(u8::is_ascii_digit) {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<GoJson, JsonSyntaxError> {
        let start = self.pos;
        if self.bytes.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        match self.bytes.get(self.pos) {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.error("invalid character in numeric literal")),
        }
        if self.bytes.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(self.error("invalid character after decimal point"));
            }
        }
        if let Some(b'e' | b'E') = self.bytes.get(self.pos) {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.bytes.get(self.pos) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.error("invalid character in exponent"));
            }
        }
        Ok(GoJson::Number(self.text[start..self.pos].to_string()))
    }

    fn hex4(&mut self) -> Result<u32, JsonSyntaxError> {
        let digits = self
            .text
            .get(self.pos..self.pos + 4)
            .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| self.error("invalid character in \\u escape"))?;
        self.pos += 4;
        u32::from_str_radix(digits, 16).map_err(|_| self.error("invalid \\u escape"))
    }

    fn string(&mut self) -> Result<String, JsonSyntaxError> {
        self.pos += 1; // the opening quote
        let mut out = String::new();
        loop {
            let run_start = self.pos;
            while let Some(&b) = self.bytes.get(self.pos) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            out.push_str(&self.text[run_start..self.pos]);
            match self.bytes.get(self.pos) {
                None => return Err(self.error("unexpected end of string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let escaped = self
                        .bytes
                        .get(self.pos)
                        .copied()
                        .ok_or_else(|| self.error("unexpected end of string"))?;
                    self.pos += 1;
                    match escaped {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => out.push(self.unicode_escape()?),
                        _ => return Err(self.error("invalid escape")),
                    }
                }
                Some(_) => return Err(self.error("control character in string")),
            }
        }
    }

    /// A `\uXXXX` escape, with a following low surrogate joined to a high
    /// one; an unpaired surrogate becomes U+FFFD, as Go does.
    fn unicode_escape(&mut self) -> Result<char, JsonSyntaxError> {
        let first = self.hex4()?;
        if (0xD800..0xDC00).contains(&first) && self.bytes[self.pos..].starts_with(b"\\u") {
            let save = self.pos;
            self.pos += 2;
            let second = self.hex4()?;
            if (0xDC00..0xE000).contains(&second) {
                let combined = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                return Ok(char::from_u32(combined).unwrap_or('\u{FFFD}'));
            }
            self.pos = save;
        }
        Ok(char::from_u32(first).unwrap_or('\u{FFFD}'))
    }

    fn array(&mut self) -> Result<GoJson, JsonSyntaxError> {
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_space();
        if self.bytes.get(self.pos) == Some(&b']') {
            self.pos += 1;
            return Ok(GoJson::Array(items));
        }
        loop {
            items.push(self.value()?);
            self.skip_space();
            match self.bytes.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(GoJson::Array(items));
                }
                _ => return Err(self.error("expected ',' or ']' after array element")),
            }
        }
    }

    fn object(&mut self) -> Result<GoJson, JsonSyntaxError> {
        self.pos += 1;
        let mut entries = Vec::new();
        self.skip_space();
        if self.bytes.get(self.pos) == Some(&b'}') {
            self.pos += 1;
            return Ok(GoJson::Object(entries));
        }
        loop {
            self.skip_space();
            if self.bytes.get(self.pos) != Some(&b'"') {
                return Err(self.error("expected a string object key"));
            }
            let key = self.string()?;
            self.skip_space();
            if self.bytes.get(self.pos) != Some(&b':') {
                return Err(self.error("expected ':' after object key"));
            }
            self.pos += 1;
            let value = self.value()?;
            entries.push((key, value));
            self.skip_space();
            match self.bytes.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(GoJson::Object(entries));
                }
                _ => return Err(self.error("expected ',' or '}' after object value")),
            }
        }
    }
}

/// `json.Marshal` of a Go value of type `ty`.
pub fn marshal(ty: &Ty, val: &GoVal) -> String {
    let mut out = String::new();
    encode(&mut out, ty, val);
    out
}

fn encode(out: &mut String, ty: &Ty, val: &GoVal) {
    match (ty, val) {
        (_, GoVal::Bool(b)) => out.push_str(if *b { "true" } else { "false" }),
        (_, GoVal::Int(i)) => {
            let _ = write!(out, "{i}");
        }
        (_, GoVal::Uint(u)) => {
            let _ = write!(out, "{u}");
        }
        (_, GoVal::Str(s)) => write_string(out, s),
        (Ty::Ptr(elem), GoVal::Ptr(Some(inner))) => encode(out, elem, inner),
        (Ty::Slice(_, elem), GoVal::Slice(Some(items))) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                encode(out, elem, item);
            }
            out.push(']');
        }
        (Ty::Map(_, _, value_ty), GoVal::Map(Some(map))) => {
            out.push('{');
            for (i, (key, value)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                encode(out, value_ty, value);
            }
            out.push('}');
        }
        (Ty::Struct(sty), GoVal::Struct(values)) => {
            out.push('{');
            let mut first = true;
            encode_fields(out, sty, values, &mut first);
            out.push('}');
        }
        (_, GoVal::Quantity(q)) => write_string(out, &q.json_text()),
        (_, GoVal::IntOrString(v)) => {
            if v.kind == 1 {
                write_string(out, &v.str_val);
            } else {
                let _ = write!(out, "{}", v.int_val);
            }
        }
        // Nil pointers, slices and maps, the zero time.
        _ => out.push_str("null"),
    }
}

/// A struct's fields, with those of embedded structs promoted in place.
fn encode_fields(out: &mut String, sty: &StructTy, values: &[GoVal], first: &mut bool) {
    for (field, value) in sty.fields.iter().zip(values) {
        if field.json == "-" {
            continue;
        }
        if field.embedded && field.json.is_empty() {
            if let (Ty::Struct(inner), GoVal::Struct(inner_values)) = (field.ty, value) {
                encode_fields(out, inner, inner_values, first);
                continue;
            }
        }
        if field.omitempty && value.is_empty_for_json() {
            continue;
        }
        if !*first {
            out.push(',');
        }
        *first = false;
        write_string(out, json_name(field));
        out.push(':');
        encode(out, field.ty, value);
    }
}

/// A JSON string as Go 1.19's `encoding/json` writes it with HTML escaping.
pub fn write_string(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{0}'..='\u{1f}' => {
                let b = c as u32;
                out.push_str("\\u00");
                out.push(char::from(HEX[(b >> 4) as usize & 0xf]));
                out.push(char::from(HEX[b as usize & 0xf]));
            }
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            other => out.push(other),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_their_text() {
        let doc = GoJson::parse(r#"{"a": 1e3, "b": -0.50, "c": [1, 2.0]}"#).expect("json");
        assert_eq!(doc.get("a"), Some(&GoJson::Number("1e3".into())));
        assert_eq!(doc.get("b"), Some(&GoJson::Number("-0.50".into())));
        assert_eq!(
            doc.get("c"),
            Some(&GoJson::Array(vec![
                GoJson::Number("1".into()),
                GoJson::Number("2.0".into())
            ]))
        );
    }

    #[test]
    fn repeated_keys_are_kept_in_order() {
        let doc = GoJson::parse(r#"{"a": 1, "a": 2}"#).expect("json");
        let GoJson::Object(entries) = &doc else {
            panic!("object expected: {doc:?}");
        };
        assert_eq!(entries.len(), 2);
        assert_eq!(doc.get("a"), Some(&GoJson::Number("2".into())));
    }

    #[test]
    fn strings_unescape_like_go() {
        let doc = GoJson::parse(r#"["\u00e9\n\/", "\ud83d\ude00", "\ud800x"]"#).expect("json");
        assert_eq!(
            doc,
            GoJson::Array(vec![
                GoJson::String("é\n/".into()),
                GoJson::String("😀".into()),
                GoJson::String("\u{FFFD}x".into()),
            ])
        );
    }

    #[test]
    fn syntax_errors() {
        for bad in [
            "",
            "{",
            "{\"a\" 1}",
            "[1,]",
            "01",
            "1.",
            "1e",
            "\"\u{1}\"",
            "{} x",
            "tru",
            "-",
            "{a:1}",
        ] {
            assert!(GoJson::parse(bad).is_err(), "{bad:?} must be refused");
        }
        assert!(GoJson::parse(" {} \n").is_ok());
    }

    #[test]
    fn strings_escape_like_go_1_19() {
        let mut out = String::new();
        write_string(&mut out, "a\"b\\c\n\t<>&\u{8}\u{c}\u{1f}é\u{2028}");
        assert_eq!(
            out,
            r#""a\"b\\c\n\t\u003c\u003e\u0026\u0008\u000c\u001fé\u2028""#
        );
    }
}
