#!/usr/bin/env python3
"""Writes docs/pod-fields.schema.json: every field path an API server from v1.26 to
v1.37 can send in a Pod's `spec`, with its type and the first version known to have it.

    git -C K8S_ANALYSIS_GIT show HEAD:api/openapi-spec/v3/api__v1_openapi.json > /tmp/v126.json
    python3 scripts/pod-field-schema.py /tmp/v126.json ~/.cargo/registry/src/*/k8s-openapi-0.29.0/src \
        > docs/pod-fields.schema.json

Sources: v1.26 is upstream's OpenAPI v3 document of the core group (repository
backendcloud/k8s-analysis, a v1.26 tree; its swagger.json is not stored there). The later
versions are the generated types of the k8s-openapi 0.29 crate (v1_33 to v1_37), read
from their Rust source; 1.27 to 1.32 are in no source at hand, so a field first seen in
1.33 may be older. Only facts are taken: field names, their JSON types, nesting.

A path names a list's items with `[]` (`spec.containers[].ports[].hostPort`); a map's
values are not walked (their keys are the user's). A type met again below itself is not
walked again (recursion ends), nor are the leaf types (Quantity, IntOrString, Time).
"""
import glob
import json
import os
import re
import sys

ROOT = "io.k8s.api.core.v1.PodSpec"
LATER = ["1.33", "1.34", "1.35", "1.36", "1.37"]
LEAVES = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": "quantity",
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": "int-or-string",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time": "time",
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime": "time",
}


# A type: ("scalar", name) | ("object", definition) | ("list", type) | ("map", type)
def openapi_type(prop):
    if "allOf" in prop:
        prop = prop["allOf"][0]
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[-1]
        if name in LEAVES:
            return ("scalar", LEAVES[name])
        return ("object", name)
    kind = prop.get("type")
    if kind == "array":
        return ("list", openapi_type(prop["items"]))
    if kind == "object" and "additionalProperties" in prop:
        return ("map", openapi_type(prop["additionalProperties"]))
    if kind == "string" and prop.get("format") == "byte":
        return ("scalar", "bytes")
    return ("scalar", kind or "any")


def read_v126(path):
    schemas = json.load(open(path))["components"]["schemas"]
    return {
        name: {field: openapi_type(p) for field, p in d.get("properties", {}).items()}
        for name, d in schemas.items()
    }


RUST_SCALARS = {
    "std::string::String": "string",
    "bool": "boolean",
    "i32": "integer",
    "i64": "integer",
    "f64": "number",
    "crate::ByteString": "bytes",
    "crate::serde_json::Value": "any",
}


def rust_type(text):
    text = text.strip()
    m = re.fullmatch(r"Option<(.*)>", text)
    if m:
        return rust_type(m.group(1))
    m = re.fullmatch(r"std::boxed::Box<(.*)>", text)
    if m:
        return rust_type(m.group(1))
    m = re.fullmatch(r"std::vec::Vec<(.*)>", text)
    if m:
        return ("list", rust_type(m.group(1)))
    m = re.fullmatch(r"std::collections::BTreeMap<std::string::String, (.*)>", text)
    if m:
        return ("map", rust_type(m.group(1)))
    if text in RUST_SCALARS:
        return ("scalar", RUST_SCALARS[text])
    m = re.fullmatch(r"crate::(.*)", text)
    if m:
        # crate::api::core::v1::Container -> io.k8s.api.core.v1.Container
        name = "io.k8s." + m.group(1).replace("::", ".")
        if name in LEAVES:
            return ("scalar", LEAVES[name])
        return ("object", name)
    raise SystemExit(f"unknown Rust type {text!r}")


def read_k8s_openapi(version_dir):
    """The definitions of one k8s-openapi version, from its generated structs: the
    field's Rust type, its JSON name from the deserializer's `"json" => Field::Key_rust`."""
    definitions = {}
    for path in glob.glob(os.path.join(version_dir, "**", "*.rs"), recursive=True):
        src = open(path).read()
        head = re.match(r"// Generated from definition (\S+)", src)
        struct = re.search(r"^pub struct \w+ \{\n(.*?)^\}", src, re.S | re.M)
        if not head or not struct:
            continue
        types = {
            m.group(1): m.group(2)
            for m in re.finditer(r"^    pub (\w+): (.*),$", struct.group(1), re.M)
        }
        json_names = dict(
            (rust, js) for js, rust in re.findall(r'"(\w+)" => Field::Key_(\w+),', src)
        )
        definitions[head.group(1)] = {
            json_names.get(rust, rust): rust_type(ty) for rust, ty in types.items()
        }
    return definitions


def walk(versions, name, path, stack, out):
    """Adds the fields of definition `name` under `path` to `out` (path -> [type, since])."""
    fields = {}
    for version, definitions in versions:
        for field, ty in definitions.get(name, {}).items():
            fields.setdefault(field, (ty, version))
    for field, (ty, since) in sorted(fields.items()):
        child = f"{path}.{field}"
        suffix = ""
        while ty[0] == "list":
            ty, suffix = ty[1], suffix + "[]"
        render = {
            "scalar": lambda t: t[1],
            "object": lambda t: "object",
            "map": lambda t: "map[string]" + (t[1][1] if t[1][0] == "scalar" else t[1][0]),
        }[ty[0]](ty)
        out.setdefault(child + suffix, [("[]" * suffix.count("[]")) + render, since])
        if ty[0] == "object" and ty[1] not in stack:
            walk(versions, ty[1], child + suffix, stack | {ty[1]}, out)


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    v126, crate_src = sys.argv[1], sys.argv[2]
    versions = [("1.26", read_v126(v126))]
    for version in LATER:
        versions.append((version, read_k8s_openapi(os.path.join(crate_src, "v" + version.replace(".", "_")))))
    out = {}
    walk(versions, ROOT, "spec", {ROOT}, out)
    document = {
        "comment": "Generated by scripts/pod-field-schema.py; do not edit.",
        "sources": {
            "1.26": "backendcloud/k8s-analysis api/openapi-spec/v3/api__v1_openapi.json",
            "1.33-1.37": "k8s-openapi 0.29.0 src/v1_33 .. src/v1_37 (1.27-1.32: no source; 'since 1.33' may be older)",
        },
        "fields": [
            {"path": path, "type": ty, "since": since} for path, (ty, since) in sorted(out.items())
        ],
    }
    json.dump(document, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
