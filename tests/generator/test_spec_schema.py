"""The JSON Schema itself, and docs/spec.md generated from it."""
from __future__ import annotations

import jsonschema
import pytest

from torchfl_gen import hook_abi, model
from torchfl_gen.docs_gen import DOC_REL, REGENERATE, iter_properties, render_spec_doc, render_spec_reference
from torchfl_gen.spec import load_schema
from spec_helpers import ROOT


@pytest.fixture(scope="module")
def schema():
    return load_schema()


def _objects(node, where="#"):
    """Every (location, subschema) in the schema that describes a document's shape: an `if` is a
    predicate over the document (which chips are native), not a shape, so it is left out."""
    if isinstance(node, dict):
        yield where, node
        for k, v in node.items():
            if k != "if":
                yield from _objects(v, f"{where}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _objects(v, f"{where}/{i}")


def test_schema_is_valid_2020_12(schema):
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_every_property_has_a_description(schema):
    missing = [f"{where}/properties/{key}" for where, node in _objects(schema)
               if isinstance(node.get("properties"), dict)
               for key, sub in node["properties"].items() if not sub.get("description")]
    missing += [f"#/$defs/{k}" for k, v in schema["$defs"].items() if not v.get("description")]
    assert not missing, f"schema properties without a description: {missing}"


def test_no_open_objects(schema):
    open_ = [where for where, node in _objects(schema)
             if node.get("type") == "object" and "additionalProperties" not in node]
    assert not open_, f"objects without additionalProperties: {open_}"
    closed = [where for where, node in _objects(schema) if "properties" in node]
    assert all(_at(schema, w).get("additionalProperties") is False for w in closed)


def _at(schema, where):
    node = schema
    for part in where.split("/")[1:]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def test_hooks_match_model(schema):
    hooks = schema["properties"]["driver"]["properties"]["hooks"]
    assert tuple(hooks["required"]) == model.REQUIRED_HOOKS
    assert tuple(hooks["properties"]) == model.REQUIRED_HOOKS
    assert tuple(hook_abi.HOOK_ABI) == model.REQUIRED_HOOKS


def test_enums_match_model(schema):
    assert tuple(schema["$defs"]["fallback_step"]["enum"]) == model.FALLBACK_STEPS
    assert tuple(schema["properties"]["fallback"]["properties"]["warn"]["enum"]) == model.WARN_POLICIES
    assert schema["$defs"]["dtype"]["enum"] == ["float32", "float64", "float16", "bfloat16", "int8", "uint8",
                                                "int16", "int32", "int64", "bool", "complex64", "complex128"]


def test_hook_abi_table():
    assert hook_abi.HOOK_ABI["malloc"] == ("int", ["void**", "size_t"])
    assert hook_abi.HOOK_ABI["memcpy"] == ("int", ["void*", "const void*", "size_t", "int"])
    assert hook_abi.HOOK_ABI["stream_create"] == ("int", ["void**"])
    assert hook_abi.HOOK_ABI["event_elapsed_time"] == ("int", ["float*", "void*", "void*"])
    assert hook_abi.HOOK_ABI["error_string"] == ("const char*", ["int"])
    assert hook_abi.HOOK_ABI["driver_version"] == ("int", ["int*"])
    assert hook_abi.HOOK_ABI["device_count"] == ("int", ["int*"])
    assert hook_abi.HOOK_ABI["mem_get_info"] == ("int", ["size_t*", "size_t*"])
    assert hook_abi.HOOK_ABI["stream_query"] == ("int", ["void*"])
    assert hook_abi.HOOK_ABI["event_query"] == ("int", ["void*"])
    assert hook_abi.HOOK_ABI["device_synchronize"] == ("int", [])
    assert hook_abi.c_function_type("malloc") == "int (void** ptr, size_t size)"
    assert hook_abi.c_pointer_typedef("device_synchronize", "fn_t") == "typedef int (*fn_t)(void);"


def test_docs_in_sync_with_schema(schema):
    doc = ROOT / DOC_REL
    expected = render_spec_doc(schema)
    actual = doc.read_text(encoding="utf-8") if doc.exists() else ""
    assert actual == expected, (f"{DOC_REL} is out of date with generator/schema/chip-spec.schema.json: "
                                f"run `{REGENERATE}` (or `python -m torchfl_gen.docs_gen`) and commit the result")


def test_docs_cover_every_key(schema):
    ref = render_spec_reference(schema)
    paths = [p for p, _, _ in iter_properties(schema)]
    for p in ["spec_version", "driver.hooks.malloc", "driver.status.not_ready", "kernels.namespace",
              "ops.<op>.kernel", "ops.<op>.require", "fallback.warn", "amp.default"]:
        assert p in paths
    for p in paths:
        assert f"`{p}`" in ref, p
    assert render_spec_reference(schema) == ref   # deterministic
    full = render_spec_doc(schema)
    assert full.splitlines()[0].startswith("<!-- Generated from generator/schema/chip-spec.schema.json by "
                                           "`torchfl-gen docs`")
    assert "| `malloc` | `int (void** ptr, size_t size)` |" in full
