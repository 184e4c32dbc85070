//! Values of the Go types in `gotype`: what a Go program holds after
//! decoding, with Go's distinctions kept (a nil slice is not an empty one,
//! a nil pointer is not a pointer to a zero value), because go-spew prints
//! them differently.

use std::collections::BTreeMap;

use super::gotype::{StructTy, Ty};
use super::quantity::QuantityRepr;

#[derive(Debug, Clone, PartialEq)]
pub enum GoVal {
    Bool(bool),
    Int(i64),
    Uint(u64),
    Str(String),
    Ptr(Option<Box<GoVal>>),
    Slice(Option<Vec<GoVal>>),
    /// Go sorts nothing, but go-spew (with `SortKeys`) and `encoding/json`
    /// both print string keys in byte order, which a `BTreeMap` keeps.
    Map(Option<BTreeMap<String, GoVal>>),
    /// Field values in declaration order.
    Struct(Vec<GoVal>),
    Quantity(QuantityRepr),
    /// Only the zero `time.Time` is modelled; see `Unreproducible::Time`.
    ZeroTime,
    IntOrString(IntOrString),
    /// `metav1.FieldsV1`; only its zero value is modelled.
    ZeroFieldsV1,
}

/// `intstr.IntOrString`: `kind` 0 holds `int_val`, 1 holds `str_val`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntOrString {
    pub kind: i64,
    pub int_val: i32,
    pub str_val: String,
}

impl GoVal {
    /// Go's zero value of `ty`.
    pub fn zero(ty: &Ty) -> GoVal {
        match ty {
            Ty::Bool(_) => GoVal::Bool(false),
            Ty::Int(..) => GoVal::Int(0),
            Ty::Uint(..) => GoVal::Uint(0),
            Ty::Str(_) => GoVal::Str(String::new()),
            Ty::Ptr(_) => GoVal::Ptr(None),
            Ty::Slice(..) => GoVal::Slice(None),
            Ty::Map(..) => GoVal::Map(None),
            Ty::Struct(s) => GoVal::zero_struct(s),
            Ty::Quantity => GoVal::Quantity(QuantityRepr::default()),
            Ty::Time(_) => GoVal::ZeroTime,
            Ty::IntOrString => GoVal::IntOrString(IntOrString::default()),
            Ty::FieldsV1 => GoVal::ZeroFieldsV1,
        }
    }

    pub fn zero_struct(sty: &StructTy) -> GoVal {
        GoVal::Struct(sty.fields.iter().map(|f| GoVal::zero(f.ty)).collect())
    }

    /// True for the values `encoding/json`'s `omitempty` leaves out: false,
    /// 0, "", nil pointers and empty slices and maps. Structs never are.
    pub fn is_empty_for_json(&self) -> bool {
        match self {
            GoVal::Bool(b) => !b,
            GoVal::Int(i) => *i == 0,
            GoVal::Uint(u) => *u == 0,
            GoVal::Str(s) => s.is_empty(),
            GoVal::Ptr(p) => p.is_none(),
            GoVal::Slice(s) => s.as_ref().is_none_or(Vec::is_empty),
            GoVal::Map(m) => m.as_ref().is_none_or(BTreeMap::is_empty),
            GoVal::Struct(_)
            | GoVal::Quantity(_)
            | GoVal::ZeroTime
            | GoVal::IntOrString(_)
            | GoVal::ZeroFieldsV1 => false,
        }
    }

    /// True for Go's zero value of its type, deep: what an added field
    /// holds when a manifest does not use it.
    pub fn is_zero(&self) -> bool {
        match self {
            GoVal::Struct(fields) => fields.iter().all(GoVal::is_zero),
            GoVal::Slice(s) => s.is_none(),
            GoVal::Map(m) => m.is_none(),
            GoVal::Quantity(q) => *q == QuantityRepr::default(),
            GoVal::IntOrString(v) => *v == IntOrString::default(),
            GoVal::ZeroTime | GoVal::ZeroFieldsV1 => true,
            other => other.is_empty_for_json(),
        }
    }
}

/// A value together with its type, for walking a struct by field name.
pub struct Node<'a> {
    pub ty: &'static Ty,
    pub val: &'a mut GoVal,
}

/// A read-only `Node`: the same navigation through a shared borrow, so reading a field
/// needs no copy of the value around it.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    pub ty: &'static Ty,
    pub val: &'a GoVal,
}

impl<'a> View<'a> {
    pub fn new(ty: &'static Ty, val: &'a GoVal) -> Self {
        View { ty, val }
    }

    /// The named field of a struct (through a non-nil pointer too).
    pub fn field(self, name: &str) -> Option<View<'a>> {
        let node = self.deref()?;
        let (Ty::Struct(sty), GoVal::Struct(values)) = (node.ty, node.val) else {
            return None;
        };
        let index = sty.index_of(name)?;
        let field = sty.fields.get(index)?;
        values.get(index).map(|val| View { ty: field.ty, val })
    }

    /// Follows a pointer; `None` when it is nil. Anything else is returned as it is.
    pub fn deref(self) -> Option<View<'a>> {
        match (self.ty, self.val) {
            (Ty::Ptr(elem), GoVal::Ptr(inner)) => {
                inner.as_deref().map(|val| View { ty: elem, val })
            }
            (ty, val) => Some(View { ty, val }),
        }
    }
}

impl<'a> Node<'a> {
    pub fn new(ty: &'static Ty, val: &'a mut GoVal) -> Self {
        Node { ty, val }
    }

    /// The named field of a struct (through a non-nil pointer too).
    pub fn field(self, name: &str) -> Option<Node<'a>> {
        let node = self.deref()?;
        let (Ty::Struct(sty), GoVal::Struct(values)) = (node.ty, node.val) else {
            return None;
        };
        let index = sty.index_of(name)?;
        let field = sty.fields.get(index)?;
        values.get_mut(index).map(|val| Node { ty: field.ty, val })
    }

    /// Follows a pointer; `None` when it is nil. Anything else is returned
    /// as it is.
    pub fn deref(self) -> Option<Node<'a>> {
        match (self.ty, self.val) {
            (Ty::Ptr(elem), GoVal::Ptr(inner)) => {
                inner.as_deref_mut().map(|val| Node { ty: elem, val })
            }
            (ty, val) => Some(Node { ty, val }),
        }
    }

    /// The elements of a slice (none when nil).
    pub fn elems(self) -> Vec<Node<'a>> {
        match (self.ty, self.val) {
            (Ty::Slice(_, elem), GoVal::Slice(Some(items))) => {
                items.iter_mut().map(|val| Node { ty: elem, val }).collect()
            }
            _ => Vec::new(),
        }
    }

    /// Points a nil pointer at a new zero value, as `x = &T{}` does.
    pub fn alloc(self) -> Option<Node<'a>> {
        match (self.ty, self.val) {
            (Ty::Ptr(elem), GoVal::Ptr(inner)) => {
                let val = inner.get_or_insert_with(|| Box::new(GoVal::zero(elem)));
                Some(Node { ty: elem, val })
            }
            _ => None,
        }
    }

    /// Sets a string (or named string) that is empty.
    pub fn default_str(self, value: &str) {
        if let GoVal::Str(s) = self.val {
            if s.is_empty() {
                *s = value.to_string();
            }
        }
    }

    /// Sets an integer that is zero.
    pub fn default_int(self, value: i64) {
        if let GoVal::Int(i) = self.val {
            if *i == 0 {
                *i = value;
            }
        }
    }

    /// Points a nil pointer at `value`.
    pub fn default_ptr(self, value: GoVal) {
        if let GoVal::Ptr(p) = self.val {
            if p.is_none() {
                *p = Some(Box::new(value));
            }
        }
    }

    pub fn is_nil(&self) -> bool {
        matches!(
            self.val,
            GoVal::Ptr(None) | GoVal::Slice(None) | GoVal::Map(None)
        )
    }
}
