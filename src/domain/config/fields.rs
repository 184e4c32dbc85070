//! The field names a serde struct accepts, read from its `Deserialize` impl, so the
//! lists used for "unknown field" errors and hints can never drift from the struct.

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// The top-level field names `T` accepts (empty for a type that is not a struct).
pub fn struct_fields<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut found: &'static [&'static str] = &[];
    // The probe always fails after recording the names: that failure is expected.
    let _ = T::deserialize(FieldProbe { found: &mut found });
    found
}

struct FieldProbe<'a> {
    found: &'a mut &'static [&'static str],
}

#[derive(Debug)]
struct Probed;

impl std::fmt::Display for Probed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("field names probed")
    }
}

impl std::error::Error for Probed {}

impl de::Error for Probed {
    fn custom<T: std::fmt::Display>(_msg: T) -> Self {
        Probed
    }
}

impl<'de> Deserializer<'de> for FieldProbe<'_> {
    type Error = Probed;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Probed> {
        Err(Probed)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Probed> {
        *self.found = fields;
        Err(Probed)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// The known name closest to `given`, when one is close enough to be a useful hint:
/// same letters ignoring case, a small edit distance, or `given` as an abbreviation
/// (its letters in order inside the candidate, as `reservedCpus` in `reservedSystemCPUs`).
pub fn closest<'a>(given: &str, known: &[&'a str]) -> Option<&'a str> {
    let given_lower = given.to_ascii_lowercase();
    let mut best: Option<(usize, &'a str)> = None;
    for &candidate in known {
        let candidate_lower = candidate.to_ascii_lowercase();
        let distance = edit_distance(&given_lower, &candidate_lower);
        let close = distance <= (given_lower.len() / 3).max(2)
            || (is_subsequence(&given_lower, &candidate_lower)
                && given_lower.len() * 3 >= candidate_lower.len() * 2);
        if close && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, name)| name)
}

fn is_subsequence(needle: &str, haystack: &str) -> bool {
    let mut rest = haystack.chars();
    needle.chars().all(|c| rest.any(|h| h == c))
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::config::model::KubeletConfiguration;

    #[test]
    fn reads_the_fields_of_the_configuration_struct() {
        let fields = struct_fields::<KubeletConfiguration>();
        assert!(fields.contains(&"reservedSystemCPUs"));
        assert!(fields.contains(&"cgroupsPerQOS"));
        assert!(fields.contains(&"evictionHard"));
        assert!(!fields.contains(&"reservedCpus"));
    }

    #[test]
    fn hints_name_the_intended_field() {
        let fields = struct_fields::<KubeletConfiguration>();
        let cases = [
            ("reservedCpus", Some("reservedSystemCPUs")),
            ("evictionhard", Some("evictionHard")),
            ("maxPod", Some("maxPods")),
            ("cgroupDriverr", Some("cgroupDriver")),
            ("completelyUnrelated", None),
        ];
        for (given, want) in cases {
            assert_eq!(closest(given, fields), want, "hint for {given}");
        }
    }
}
