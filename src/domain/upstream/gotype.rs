//! A description of Go types, enough to decode JSON into them the way Go's
//! `encoding/json` does, to encode them back, and to print them the way
//! go-spew does. The tables themselves are in `schema.rs`, generated from
//! upstream's sources.

/// A Go type. The `&'static str` is the name Go's `reflect.Type.String()`
/// gives it (`string`, `core.RestartPolicy`, `[]core.Container`), which
/// go-spew prints.
#[derive(Debug)]
pub enum Ty {
    Bool(&'static str),
    /// A signed integer of the given width in bits.
    Int(&'static str, u32),
    /// An unsigned integer of the given width in bits.
    Uint(&'static str, u32),
    Str(&'static str),
    Ptr(&'static Ty),
    Slice(&'static str, &'static Ty),
    /// Name, key type, value type. Every map upstream's pods hold is keyed
    /// by a string kind.
    Map(&'static str, &'static Ty, &'static Ty),
    Struct(&'static StructTy),
    /// apimachinery's `resource.Quantity`, with its own JSON forms.
    Quantity,
    /// `metav1.Time` (named as given): RFC 3339 text in JSON, a `time.Time`
    /// inside.
    Time(&'static str),
    /// `intstr.IntOrString`: a JSON number or string.
    IntOrString,
    /// `metav1.FieldsV1`: raw JSON kept as bytes.
    FieldsV1,
}

#[derive(Debug)]
pub struct StructTy {
    pub name: &'static str,
    pub fields: &'static [Field],
}

#[derive(Debug)]
pub struct Field {
    /// The Go field name; for an embedded field, its type's name.
    pub name: &'static str,
    /// The JSON name; empty for an embedded field whose fields are promoted
    /// (and for the internal types, which are never JSON), `-` for a field
    /// JSON skips.
    pub json: &'static str,
    pub embedded: bool,
    pub omitempty: bool,
    /// The upstream version that added a field v1.26 does not have. Such a
    /// field is hashed only when set, so pods that do not use it keep v1.26's
    /// identity.
    pub since: Option<&'static str>,
    pub ty: &'static Ty,
}

impl Ty {
    /// The name go-spew prints for the type.
    pub fn name(&self) -> String {
        match self {
            Ty::Bool(n) | Ty::Int(n, _) | Ty::Uint(n, _) | Ty::Str(n) => (*n).to_string(),
            Ty::Slice(n, _) | Ty::Map(n, _, _) | Ty::Time(n) => (*n).to_string(),
            Ty::Ptr(elem) => format!("*{}", elem.name()),
            Ty::Struct(s) => s.name.to_string(),
            Ty::Quantity => "resource.Quantity".to_string(),
            Ty::IntOrString => "intstr.IntOrString".to_string(),
            Ty::FieldsV1 => "v1.FieldsV1".to_string(),
        }
    }
}

impl StructTy {
    /// The index of the field with this Go name.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }

    /// The path of field indices JSON key `key` decodes into, following
    /// Go's rules for promoted fields of embedded structs: the shallowest
    /// match wins, and two at the same depth cancel each other out.
    pub fn json_path(&self, key: &str) -> Option<Vec<usize>> {
        let mut level: Vec<(Vec<usize>, &StructTy)> = vec![(Vec::new(), self)];
        while !level.is_empty() {
            let mut found: Vec<Vec<usize>> = Vec::new();
            let mut next = Vec::new();
            for (prefix, sty) in &level {
                for (i, field) in sty.fields.iter().enumerate() {
                    let mut path = prefix.clone();
                    path.push(i);
                    if field.embedded && field.json.is_empty() {
                        if let Ty::Struct(inner) = field.ty {
                            next.push((path, *inner));
                            continue;
                        }
                    }
                    if field.json != "-" && json_name(field) == key {
                        found.push(path);
                    }
                }
            }
            match found.len() {
                0 => level = next,
                1 => return found.pop(),
                _ => return None,
            }
        }
        None
    }
}

/// The key a field has in JSON: its tag name, else its Go name.
pub fn json_name(field: &Field) -> &'static str {
    if field.json.is_empty() {
        field.name
    } else {
        field.json
    }
}
