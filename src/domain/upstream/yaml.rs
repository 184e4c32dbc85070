//! apimachinery's `utilyaml.ToJSON`, which upstream runs on every static
//! pod manifest: a document whose first non-space character is `{` is
//! taken as JSON as it is; anything else is YAML, read by go-yaml v2 into
//! Go values (YAML 1.1 rules: `yes` is true, `0x10` is 16, `1e3` is the
//! float 1000) and written back as JSON by sigs.k8s.io/yaml with
//! `json.Marshal` (map keys sorted, floats in Go's shortest form).

use std::collections::{BTreeMap, HashMap};

use saphyr_parser_bw::{Event, Parser, ScalarStyle};

use super::gojson::{GoJson, MAX_DEPTH};

/// Why a manifest has no JSON form upstream would decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToJsonError {
    /// Upstream refuses the manifest too.
    #[error("{0}")]
    Invalid(String),
    /// Upstream reads it, but not in a way reproduced here.
    #[error("{0}")]
    Unreproducible(String),
}

/// The JSON document upstream decodes a manifest from.
pub fn to_json(text: &str) -> Result<GoJson, ToJsonError> {
    if text.trim_start().starts_with('{') {
        return GoJson::parse(text).map_err(|e| ToJsonError::Invalid(e.to_string()));
    }
    let node = first_document(text)?;
    let value = to_go(&node)?;
    Ok(value)
}

/// A YAML node with its scalars unresolved.
#[derive(Debug, Clone)]
enum YamlNode {
    Scalar {
        value: String,
        plain: bool,
        tag: Option<String>,
    },
    Seq(Vec<YamlNode>),
    Map(Vec<(YamlNode, YamlNode)>),
}

fn first_document(text: &str) -> Result<YamlNode, ToJsonError> {
    let mut builder = Builder {
        parser: Parser::new_from_str(text),
        anchors: HashMap::new(),
        depth: 0,
        nodes: 0,
    };
    loop {
        match builder.next()? {
            Event::DocumentStart(_) => return builder.node(),
            Event::StreamEnd => {
                // An empty stream decodes to nothing: JSON null.
                return Ok(YamlNode::Scalar {
                    value: String::new(),
                    plain: true,
                    tag: None,
                });
            }
            _ => {}
        }
    }
}

struct Builder<'a> {
    parser: Parser<'a, saphyr_parser_bw::StrInput<'a>>,
    /// Anchored nodes with how many nodes each holds.
    anchors: HashMap<usize, (YamlNode, usize)>,
    depth: usize,
    /// Nodes built so far, aliases expanded.
    nodes: usize,
}

/// More nodes than this (aliases expanded) are refused: a pod has far fewer,
/// and an alias bomb would otherwise grow without bound.
pub const MAX_NODES: usize = 1_000_000;

/// Deeper YAML than this is refused by the parser (serde-saphyr's default, 2,000, lets a
/// 1,500-level manifest overflow a 2 MiB thread stack while it is decoded; a pod is
/// rarely 20 levels deep).
pub const MAX_PARSER_DEPTH: usize = 256;

/// The budget every YAML text rkubelet reads (manifests, configuration files) is parsed
/// under: as many nodes as the upstream identity reads (`MAX_NODES`), so a pod upstream
/// runs, such as one container with 100,000 environment variables (about 500,000
/// nodes), is not refused by the parser's default of 250,000; nesting bounded by
/// `max_depth`; serde-saphyr's alias and anchor limits as they are.
pub fn parser_options(max_depth: usize) -> serde_saphyr::Options {
    serde_saphyr::Options {
        budget: Some(serde_saphyr::Budget {
            max_nodes: MAX_NODES,
            max_events: 2 * MAX_NODES,
            max_depth,
            ..serde_saphyr::Budget::default()
        }),
        ..serde_saphyr::Options::default()
    }
}

impl<'a> Builder<'a> {
    fn next(&mut self) -> Result<Event<'a>, ToJsonError> {
        match self.parser.next_event() {
            Some(Ok((event, _))) => Ok(event),
            Some(Err(e)) => Err(ToJsonError::Invalid(format!("invalid YAML: {e}"))),
            None => Err(ToJsonError::Invalid("unexpected end of YAML".into())),
        }
    }

    fn node(&mut self) -> Result<YamlNode, ToJsonError> {
        let event = self.next()?;
        self.node_from(event)
    }

    fn node_from(&mut self, event: Event<'a>) -> Result<YamlNode, ToJsonError> {
        self.depth += 1;
        let node = self.nested_node(event);
        self.depth -= 1;
        node
    }

    fn nested_node(&mut self, event: Event<'a>) -> Result<YamlNode, ToJsonError> {
        if self.depth > MAX_DEPTH {
            return Err(ToJsonError::Unreproducible(format!(
                "YAML nested deeper than {MAX_DEPTH} levels"
            )));
        }
        let before = self.nodes;
        self.nodes += 1;
        let (node, anchor) = match event {
            Event::Scalar(value, style, anchor, tag) => (
                YamlNode::Scalar {
                    value: value.into_owned(),
                    plain: style == ScalarStyle::Plain,
                    tag: tag.map(|t| t.to_string()),
                },
                anchor,
            ),
            Event::SequenceStart(anchor, tag) => {
                refuse_tag(tag.map(|t| t.to_string()), "!!seq")?;
                let mut items = Vec::new();
                loop {
                    match self.next()? {
                        Event::SequenceEnd => break,
                        event => items.push(self.node_from(event)?),
                    }
                }
                (YamlNode::Seq(items), anchor)
            }
            Event::MappingStart(anchor, tag) => {
                refuse_tag(tag.map(|t| t.to_string()), "!!map")?;
                let mut entries = Vec::new();
                loop {
                    match self.next()? {
                        Event::MappingEnd => break,
                        event => {
                            let key = self.node_from(event)?;
                            let value = self.node()?;
                            entries.push((key, value));
                        }
                    }
                }
                (YamlNode::Map(entries), anchor)
            }
            Event::Alias(id) => {
                let (node, size) = self
                    .anchors
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| ToJsonError::Invalid("unknown anchor".into()))?;
                self.nodes += size;
                if self.nodes > MAX_NODES {
                    return Err(ToJsonError::Unreproducible(format!(
                        "YAML with more than {MAX_NODES} nodes once its aliases are expanded"
                    )));
                }
                return Ok(node);
            }
            other => {
                return Err(ToJsonError::Invalid(format!(
                    "unexpected YAML event {other:?}"
                )))
            }
        };
        if anchor != 0 {
            self.anchors
                .insert(anchor, (node.clone(), self.nodes - before));
        }
        Ok(node)
    }
}

fn refuse_tag(tag: Option<String>, allowed: &str) -> Result<(), ToJsonError> {
    match tag {
        None => Ok(()),
        Some(t) if t == allowed || t == format!("tag:yaml.org,2002:{}", &allowed[2..]) => Ok(()),
        Some(t) => Err(ToJsonError::Unreproducible(format!(
            "YAML tag {t} is not reproduced"
        ))),
    }
}

/// A go-yaml v2 value converted for `json.Marshal`.
fn to_go(node: &YamlNode) -> Result<GoJson, ToJsonError> {
    match node {
        YamlNode::Scalar { value, plain, tag } => scalar(value, *plain, tag.as_deref()),
        YamlNode::Seq(items) => items
            .iter()
            .map(to_go)
            .collect::<Result<_, _>>()
            .map(GoJson::Array),
        YamlNode::Map(entries) => {
            let mut map = BTreeMap::new();
            merge_into(&mut map, entries)?;
            Ok(GoJson::Object(map.into_iter().collect()))
        }
    }
}

/// A mapping's entries, later ones winning, `<<` merging another mapping
/// (or a list of them, earlier ones winning) in its place, as go-yaml v2.
fn merge_into(
    map: &mut BTreeMap<String, GoJson>,
    entries: &[(YamlNode, YamlNode)],
) -> Result<(), ToJsonError> {
    for (key, value) in entries {
        if matches!(key, YamlNode::Scalar { value, plain: true, tag: None } if value == "<<") {
            match value {
                YamlNode::Map(inner) => merge_into(map, inner)?,
                YamlNode::Seq(maps) => {
                    for item in maps.iter().rev() {
                        let YamlNode::Map(inner) = item else {
                            return Err(ToJsonError::Invalid(
                                "map merge requires map or sequence of maps as the value".into(),
                            ));
                        };
                        merge_into(map, inner)?;
                    }
                }
                YamlNode::Scalar { .. } => {
                    return Err(ToJsonError::Invalid(
                        "map merge requires map or sequence of maps as the value".into(),
                    ))
                }
            }
            continue;
        }
        map.insert(key_string(key)?, to_go(value)?);
    }
    Ok(())
}

/// sigs.k8s.io/yaml's map key conversion: strings, ints and bools.
fn key_string(key: &YamlNode) -> Result<String, ToJsonError> {
    let YamlNode::Scalar { value, plain, tag } = key else {
        return Err(ToJsonError::Invalid(
            "a YAML map key must be a scalar".into(),
        ));
    };
    match scalar(value, *plain, tag.as_deref())? {
        GoJson::String(s) => Ok(s),
        GoJson::Bool(b) => Ok(b.to_string()),
        GoJson::Number(n) if !n.contains(['.', 'e']) => Ok(n),
        GoJson::Number(_) => Err(ToJsonError::Unreproducible(format!(
            "a float YAML map key ({value}) is not reproduced"
        ))),
        _ => Err(ToJsonError::Invalid(format!(
            "unsupported YAML map key {value:?}"
        ))),
    }
}

/// go-yaml v2's `resolve` for a scalar, then `json.Marshal`.
fn scalar(value: &str, plain: bool, tag: Option<&str>) -> Result<GoJson, ToJsonError> {
    let tag = tag.map(|t| {
        t.strip_prefix("tag:yaml.org,2002:")
            .map_or(t.to_string(), |s| format!("!!{s}"))
    });
    match tag.as_deref() {
        None if !plain => return Ok(GoJson::String(value.to_string())),
        None => {}
        Some("!!str") => return Ok(GoJson::String(value.to_string())),
        Some(other) => {
            return Err(ToJsonError::Unreproducible(format!(
                "YAML tag {other} is not reproduced"
            )))
        }
    }
    match value {
        "" | "~" | "null" | "Null" | "NULL" => return Ok(GoJson::Null),
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Ok(GoJson::Bool(true))
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Ok(GoJson::Bool(false))
        }
        ".nan" | ".NaN" | ".NAN" | ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF"
        | "-.inf" | "-.Inf" | "-.INF" => {
            return Err(ToJsonError::Invalid(format!(
                "json: unsupported value: {value}"
            )))
        }
        _ => {}
    }
    let first = value.as_bytes().first().copied().unwrap_or(0);
    match first {
        b'.' => match value.parse::<f64>() {
            Ok(f) => float_json(f),
            Err(_) => Ok(GoJson::String(value.to_string())),
        },
        b'+' | b'-' | b'0'..=b'9' => {
            // Timestamps (`2001-12-14`) reach interface{} as strings in
            // go-yaml v2, as does anything below that does not parse.
            let plain = value.replace('_', "");
            if let Some(int) = parse_go_int(&plain) {
                return Ok(GoJson::Number(int));
            }
            if yaml_style_float(&plain) {
                if let Ok(f) = plain.parse::<f64>() {
                    return float_json(f);
                }
            }
            let binary = plain
                .strip_prefix("0b")
                .map(|digits| (false, digits))
                .or_else(|| plain.strip_prefix("-0b").map(|digits| (true, digits)));
            if let Some((negative, digits)) = binary {
                if !digits.is_empty() && digits.bytes().all(|b| b == b'0' || b == b'1') {
                    if let Ok(magnitude) = u64::from_str_radix(digits, 2) {
                        let magnitude = i128::from(magnitude);
                        let value = if negative { -magnitude } else { magnitude };
                        if negative && value < i128::from(i64::MIN) {
                            return Ok(GoJson::String(plain));
                        }
                        return Ok(GoJson::Number(value.to_string()));
                    }
                }
            }
            Ok(GoJson::String(value.to_string()))
        }
        _ => Ok(GoJson::String(value.to_string())),
    }
}

/// Go's `strconv.ParseInt(s, 0, 64)`, then `ParseUint(s, 0, 64)`, as a
/// decimal string; `None` when neither accepts `s`.
fn parse_go_int(s: &str) -> Option<String> {
    let (negative, unsigned) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let magnitude = parse_go_uint(unsigned)?;
    let value = if negative {
        -i128::from(magnitude)
    } else {
        i128::from(magnitude)
    };
    let fits_int = value >= i128::from(i64::MIN) && value <= i128::from(i64::MAX);
    // ParseUint takes no sign, so a '+' only passes through ParseInt.
    let fits_uint = !negative && s.as_bytes().first() != Some(&b'+');
    (fits_int || fits_uint).then(|| value.to_string())
}

fn parse_go_uint(s: &str) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let bytes = s.as_bytes();
    let (radix, digits) = if bytes[0] == b'0' && bytes.len() >= 3 {
        match bytes[1].to_ascii_lowercase() {
            b'b' => (2, &s[2..]),
            b'o' => (8, &s[2..]),
            b'x' => (16, &s[2..]),
            _ => (8, &s[1..]),
        }
    } else if bytes[0] == b'0' {
        (8, &s[1..])
    } else {
        (10, s)
    };
    if digits.is_empty() {
        return (radix == 8).then_some(0);
    }
    if !digits.bytes().all(|b| (b as char).is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// go-yaml v2's `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn yaml_style_float(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let digits = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", frac)) => !frac.is_empty() && digits(frac),
        Some((int, frac)) => digits(int) && digits(frac),
        None => !mantissa.is_empty() && digits(mantissa),
    };
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok
}

/// `json.Marshal` of a float64: the shortest text that reads back the
/// same, in `%f` form unless tiny or huge (`%e`, `e-07` written `e-7`).
fn float_json(f: f64) -> Result<GoJson, ToJsonError> {
    if !f.is_finite() {
        return Err(ToJsonError::Invalid(format!(
            "json: unsupported value: {f}"
        )));
    }
    Ok(GoJson::Number(go_float(f)))
}

fn go_float(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "1.5e-7".
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if f < 0.0 { "-" } else { "" };
    let abs = f.abs();
    if !(1e-6..1e21).contains(&abs) {
        let mut out = format!("{sign}{}", &digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let exp_sign = if exp < 0 { '-' } else { '+' };
        let magnitude = exp.unsigned_abs();
        // Go writes at least two exponent digits, then json drops the
        // zero of a negative one-digit exponent.
        if exp < 0 && magnitude < 10 {
            out.push_str(&format!("e-{magnitude}"));
        } else {
            out.push_str(&format!("e{exp_sign}{magnitude:02}"));
        }
        return out;
    }
    let point = exp + 1; // digits before the decimal point
    let len = i32::try_from(digits.len()).unwrap_or(i32::MAX);
    if point <= 0 {
        format!(
            "{sign}0.{}{digits}",
            "0".repeat(point.unsigned_abs() as usize)
        )
    } else if point >= len {
        format!("{sign}{digits}{}", "0".repeat((point - len) as usize))
    } else {
        let (int, frac) = digits.split_at(point as usize);
        format!("{sign}{int}.{frac}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json_of(yaml: &str) -> GoJson {
        to_json(yaml).expect("converts")
    }

    #[test]
    fn scalars_resolve_as_go_yaml_v2() {
        let doc = json_of(
            "a: 1e3\nb: 0.5\nc: '0.5'\nd: yes\ne: 0x10\nf: 1_000\ng: 0755\nh: ~\ni:\nj: .5\nk: 2001-12-14\nl: 08\nm: +5\nnn: 1.0\no: \"on\"\np: 12345678901234567890\nq: 1e-7\nr: 1e21\ns: -0b11\nt: 500m\n",
        );
        let want = [
            ("a", GoJson::Number("1000".into())),
            ("b", GoJson::Number("0.5".into())),
            ("c", GoJson::String("0.5".into())),
            ("d", GoJson::Bool(true)),
            ("e", GoJson::Number("16".into())),
            ("f", GoJson::Number("1000".into())),
            ("g", GoJson::Number("493".into())),
            ("h", GoJson::Null),
            ("i", GoJson::Null),
            ("j", GoJson::Number("0.5".into())),
            ("k", GoJson::String("2001-12-14".into())),
            ("l", GoJson::Number("8".into())),
            ("m", GoJson::Number("5".into())),
            ("nn", GoJson::Number("1".into())),
            ("o", GoJson::String("on".into())),
            ("p", GoJson::Number("12345678901234567890".into())),
            ("q", GoJson::Number("1e-7".into())),
            ("r", GoJson::Number("1e+21".into())),
            ("s", GoJson::Number("-3".into())),
            ("t", GoJson::String("500m".into())),
        ];
        for (key, value) in want {
            assert_eq!(doc.get(key), Some(&value), "key {key}");
        }
    }

    #[test]
    fn keys_sorted_merged_and_aliases_resolved() {
        let doc = json_of("z: 1\nbase: &b {x: 1, w: 2}\nm:\n  <<: *b\n  w: 3\n1: one\ny: t\n");
        let GoJson::Object(entries) = &doc else {
            panic!("object");
        };
        let keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["1", "base", "m", "true", "z"]);
        let m = doc.get("m").expect("m");
        assert_eq!(m.get("x"), Some(&GoJson::Number("1".into())));
        assert_eq!(m.get("w"), Some(&GoJson::Number("3".into())));
        // go-yaml v2 reads the plain key `y` as the boolean true.
        assert_eq!(doc.get("true"), Some(&GoJson::String("t".into())));
    }

    #[test]
    fn json_documents_pass_through() {
        let doc = json_of("  {\"cpu\": 1e3}");
        assert_eq!(doc.get("cpu"), Some(&GoJson::Number("1e3".into())));
        assert!(matches!(to_json("{a: 1}"), Err(ToJsonError::Invalid(_))));
    }

    #[test]
    fn deep_nesting_is_refused_not_overflowed() {
        let deep = format!("a: {}1{}", "[".repeat(5000), "]".repeat(5000));
        assert!(to_json(&deep).is_err());
        let deep_json = format!("{{\"a\": {}1{}}}", "[".repeat(5000), "]".repeat(5000));
        assert!(matches!(to_json(&deep_json), Err(ToJsonError::Invalid(_))));
    }

    #[test]
    fn alias_bombs_are_refused() {
        let mut doc = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            let p = i - 1;
            doc.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        assert!(matches!(to_json(&doc), Err(ToJsonError::Unreproducible(_))));
    }

    #[test]
    fn go_float_forms() {
        let cases = [
            (1000.0, "1000"),
            (0.5, "0.5"),
            (1e21, "1e+21"),
            (1.5e-7, "1.5e-7"),
            (1e-6, "0.000001"),
            (123456.789, "123456.789"),
            (-2.5, "-2.5"),
            (1e100, "1e+100"),
            (1e-10, "1e-10"),
        ];
        for (f, want) in cases {
            assert_eq!(go_float(f), want, "{f}");
        }
        assert!(matches!(to_json("a: .inf\n"), Err(ToJsonError::Invalid(_))));
    }
}
