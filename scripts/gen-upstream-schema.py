#!/usr/bin/env python3
"""Writes src/domain/upstream/schema.rs: the layout of the Go types the
upstream kubelet v1.26 decodes a static pod into (k8s.io/api/core/v1) and
hashes it as (k8s.io/kubernetes/pkg/apis/core, the internal types), read
from a Kubernetes v1.26 source tree with its vendor/ folder.

    python3 scripts/gen-upstream-schema.py KUBERNETES_SOURCE_DIR > src/domain/upstream/schema.rs
    cargo fmt

Only facts are taken: field names, order, Go types and JSON tags.
"""
import re
import sys

CORE = "pkg/apis/core/types.go"
V1 = "vendor/k8s.io/api/core/v1/types.go"
META = "vendor/k8s.io/apimachinery/pkg/apis/meta/v1/types.go"

# Types whose Go representation the Rust side models by hand.
SPECIAL = {
    "resource.Quantity": "Ty::Quantity",
    "metav1.Time": "Ty::Time(\"v1.Time\")",
    "Time": "Ty::Time(\"v1.Time\")",
    "intstr.IntOrString": "Ty::IntOrString",
    "FieldsV1": "Ty::FieldsV1",
}
BUILTIN_INT = {"int32": 32, "int64": 64, "int": 64, "int8": 8, "int16": 16}
BUILTIN_UINT = {"uint8": 8, "byte": 8, "uint32": 32, "uint64": 64, "uint": 64}

# Fields later upstream versions added that rkubelet acts on. They go where
# upstream later put them (v1.28's Container.RestartPolicy follows Resources,
# with only the unmodelled ResizePolicy between) and are hashed only when
# set, so the identity of a pod that does not use them stays v1.26's.
EXTENSIONS = {
    ("v1", "Container"): [
        ("RestartPolicy", "*ContainerRestartPolicy", "restartPolicy,omitempty", "1.28", "Resources"),
    ],
    ("core", "Container"): [
        ("RestartPolicy", "*ContainerRestartPolicy", None, "1.28", "Resources"),
    ],
}
EXTENSION_NAMED = {"ContainerRestartPolicy": "string"}


def parse(path):
    src = open(path).read()
    structs = {}
    named = {}
    for m in re.finditer(r"^type (\w+) struct \{\n(.*?)^\}", src, re.S | re.M):
        fields = []
        for line in m.group(2).split("\n"):
            s = line.strip()
            if not s or s.startswith("//"):
                continue
            tag = ""
            tm = re.search(r"`([^`]*)`", s)
            if tm:
                tag = tm.group(1)
                s = s[: tm.start()].strip()
            s = re.sub(r"\s*//.*$", "", s)
            parts = s.split()
            if len(parts) == 1:
                name, typ = None, parts[0]
            else:
                name, typ = parts[0], " ".join(parts[1:])
            jm = re.search(r'json:"([^"]*)"', tag)
            fields.append((name, typ, jm.group(1) if jm else None))
        structs[m.group(1)] = fields
    for m in re.finditer(r"^type (\w+) (\S[^\n]*)$", src, re.M):
        rhs = m.group(2).strip()
        if not rhs.startswith("struct") and not rhs.startswith("interface"):
            named[m.group(1)] = rhs
    return structs, named


class Universe:
    def __init__(self, root):
        self.pkgs = {}
        for key, path in (("core", CORE), ("v1", V1), ("meta", META)):
            self.pkgs[key] = parse(root + "/" + path)
        for key in ("core", "v1"):
            self.pkgs[key][1].update(EXTENSION_NAMED)
        self.statics = {}  # rust name -> initializer
        self.order = []
        self.structs_done = set()

    def go_pkg_name(self, pkg):
        return {"core": "core", "v1": "v1", "meta": "v1"}[pkg]

    def resolve(self, pkg, expr):
        """Returns the rust static name for the type expression `expr` seen in package `pkg`."""
        expr = expr.strip()
        if expr in SPECIAL:
            return self.emit("T_" + ident(expr), SPECIAL[expr])
        if expr.startswith("*"):
            inner = self.resolve(pkg, expr[1:])
            return self.emit("T_PTR_" + inner[2:], "Ty::Ptr(&%s)" % inner)
        if expr.startswith("[]"):
            elem_name = self.type_string(pkg, expr[2:])
            inner = self.resolve(pkg, expr[2:])
            return self.emit("T_SLICE_" + inner[2:], 'Ty::Slice("[]%s", &%s)' % (elem_name, inner))
        m = re.match(r"map\[([^\]]+)\](.*)", expr)
        if m:
            k = self.resolve(pkg, m.group(1))
            v = self.resolve(pkg, m.group(2))
            name = "map[%s]%s" % (self.type_string(pkg, m.group(1)), self.type_string(pkg, m.group(2)))
            return self.emit("T_MAP_%s_%s" % (k[2:], v[2:]), 'Ty::Map("%s", &%s, &%s)' % (name, k, v))
        if expr == "string":
            return self.emit("T_STRING", 'Ty::Str("string")')
        if expr == "bool":
            return self.emit("T_BOOL", 'Ty::Bool("bool")')
        if expr in BUILTIN_INT:
            return self.emit("T_" + expr.upper(), 'Ty::Int("%s", %d)' % (expr, BUILTIN_INT[expr]))
        if expr in BUILTIN_UINT:
            go = "uint8" if expr == "byte" else expr
            return self.emit("T_" + go.upper(), 'Ty::Uint("%s", %d)' % (go, BUILTIN_UINT[expr]))
        if expr == "types.UID":
            return self.emit("T_TYPES_UID", 'Ty::Str("types.UID")')
        if expr.startswith("metav1."):
            return self.resolve("meta", expr[len("metav1."):])
        if "." in expr:
            raise SystemExit("unknown qualified type %s in %s" % (expr, pkg))
        structs, named = self.pkgs[pkg]
        go_name = "%s.%s" % (self.go_pkg_name(pkg), expr)
        if expr in structs:
            sname = "S_%s_%s" % (pkg.upper(), ident(expr))
            if sname not in self.structs_done:
                self.structs_done.add(sname)
                self.emit_struct(pkg, expr, sname, go_name)
            return self.emit("T_%s_%s" % (pkg.upper(), ident(expr)), "Ty::Struct(&%s)" % sname)
        if expr in named:
            under = named[expr]
            tname = "T_%s_%s" % (pkg.upper(), ident(expr))
            if under == "string":
                return self.emit(tname, 'Ty::Str("%s")' % go_name)
            if under in BUILTIN_INT:
                return self.emit(tname, 'Ty::Int("%s", %d)' % (go_name, BUILTIN_INT[under]))
            m = re.match(r"map\[([^\]]+)\](.*)", under)
            if m:
                k = self.resolve(pkg, m.group(1))
                v = self.resolve(pkg, m.group(2))
                return self.emit(tname, 'Ty::Map("%s", &%s, &%s)' % (go_name, k, v))
            raise SystemExit("unsupported named type %s = %s" % (expr, under))
        raise SystemExit("unknown type %s in %s" % (expr, pkg))

    def type_string(self, pkg, expr):
        """Go's reflect Type.String() for `expr`."""
        expr = expr.strip()
        if expr.startswith("*"):
            return "*" + self.type_string(pkg, expr[1:])
        if expr.startswith("[]"):
            return "[]" + self.type_string(pkg, expr[2:])
        m = re.match(r"map\[([^\]]+)\](.*)", expr)
        if m:
            return "map[%s]%s" % (self.type_string(pkg, m.group(1)), self.type_string(pkg, m.group(2)))
        if expr == "byte":
            return "uint8"
        if expr in ("string", "bool") or expr in BUILTIN_INT or expr in BUILTIN_UINT:
            return expr
        if expr.startswith("metav1."):
            return "v1." + expr[len("metav1."):]
        if "." in expr:
            return expr
        return "%s.%s" % (self.go_pkg_name(pkg), expr)

    def emit(self, name, init):
        if name not in self.statics:
            self.statics[name] = "pub static %s: Ty = %s;" % (name, init)
            self.order.append(name)
        return name

    def emit_struct(self, pkg, sname_go, rust_name, go_name):
        structs, _ = self.pkgs[pkg]
        fields = list(structs[sname_go])
        ext = EXTENSIONS.get((pkg, sname_go), [])
        since = {}
        for name, typ, tag, version, after in ext:
            at = [i for i, f in enumerate(fields) if f[0] == after][0]
            fields.insert(at + 1, (name, typ, tag))
            since[name] = version
        lines = []
        for name, typ, tag in fields:
            embedded = name is None
            if embedded:
                name = typ.split(".")[-1].lstrip("*")
            json_name, omitempty, skip = "", False, False
            if tag is not None:
                parts = tag.split(",")
                json_name = parts[0]
                omitempty = "omitempty" in parts[1:]
                skip = json_name == "-"
            if pkg == "core" and tag is None:
                json_name = ""
            if skip:
                json_name = "-"
            ty = self.resolve(pkg, typ)
            lines.append(
                '        Field { name: "%s", json: "%s", embedded: %s, omitempty: %s, since: %s, ty: &%s },'
                % (
                    name,
                    json_name,
                    str(embedded).lower(),
                    str(omitempty).lower(),
                    ('Some("%s")' % since[name]) if name in since else "None",
                    ty,
                )
            )
        body = "pub static %s: StructTy = StructTy {\n    name: \"%s\",\n    fields: &[\n%s\n    ],\n};" % (
            rust_name,
            go_name,
            "\n".join(lines),
        )
        self.statics[rust_name] = body
        self.order.append(rust_name)


def ident(expr):
    return re.sub(r"[^A-Za-z0-9]", "_", expr).upper()


def main():
    root = sys.argv[1]
    u = Universe(root)
    u.resolve("v1", "Pod")
    u.resolve("v1", "PodList")
    u.resolve("core", "Pod")
    print("// @generated by scripts/gen-upstream-schema.py from the Kubernetes v1.26 source")
    print("// (k8s.io/api/core/v1, pkg/apis/core, apimachinery meta/v1). Do not edit by hand.")
    print("//! The Go types upstream's static pod decoding goes through, field by field.")
    print()
    print("use super::gotype::{Field, StructTy, Ty};")
    print()
    for name in sorted(u.order):
        print(u.statics[name])
        print()


main()
