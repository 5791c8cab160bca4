"""The strict, location-keeping YAML loader."""
from __future__ import annotations

import pytest

from torchfl_gen.errors import SpecErrors
from torchfl_gen.yaml_loader import MAX_BYTES, format_path, load_yaml_bytes, load_yaml_text
from spec_helpers import NPU, NPU_TEXT, line_of


def errs(text, file="f.yaml"):
    with pytest.raises(SpecErrors) as ei:
        (load_yaml_bytes if isinstance(text, bytes) else load_yaml_text)(text, file)
    return [str(e) for e in ei.value.errors]


def test_locations_of_keys_and_values():
    doc = load_yaml_bytes(NPU.read_bytes(), "npu.yaml")
    assert doc.data["driver"]["version"] == "2.1"
    add = line_of(NPU_TEXT, "  add.Tensor: {kernel: add}")
    assert doc.key_loc(("ops", "add.Tensor")) == (add, 3)
    assert doc.value_loc(("ops", "add.Tensor")) == (add, 15)
    assert doc.key_loc(("ops", "add.Tensor", "kernel")) == (add, 16)
    assert doc.value_loc(("ops", "add.Tensor", "kernel")) == (add, 24)
    assert doc.key_loc(("driver", "hooks", "malloc")) == (line_of(NPU_TEXT, "    malloc: simnpuMalloc"), 5)
    assert doc.value_loc(("driver", "libraries", 0)) == (line_of(NPU_TEXT, "    - libsimnpu_runtime.so"), 7)
    assert doc.key_loc(("driver", "memcpy_kinds", "device_to_host")) == (line_of(NPU_TEXT, "  memcpy_kinds:"), 54)
    assert doc.value_loc(()) == (line_of(NPU_TEXT, "spec_version: 1", whole=True), 1)
    # unknown paths fall back to the nearest known ancestor
    assert doc.key_loc(("driver", "hooks", "nope")) == (line_of(NPU_TEXT, "  hooks:", exact=True), 3)


def test_plain_data_types():
    doc = load_yaml_text("a: 1\nb: 1.5\nc: true\nd: null\ne: [x, 'y']\nf: {g: h}\nt: 2021-01-01\n", "f")
    assert doc.data == {"a": 1, "b": 1.5, "c": True, "d": None, "e": ["x", "y"], "f": {"g": "h"},
                        "t": "2021-01-01"}
    assert doc.scalars[("b",)] == "1.5"


def test_duplicate_key_names_first_line():
    assert errs("a: 1\nb: 2\na: 3\n") == ["f.yaml:3:1: <document>: duplicate key 'a' (first defined at line 1)"]


def test_non_string_keys():
    assert errs("1: a\nyes: b\n[x]: c\n") == [
        "f.yaml:1:1: <document>: mapping key must be a string, not int 1",
        "f.yaml:2:1: <document>: mapping key must be a string, not bool true",
        "f.yaml:3:1: <document>: mapping key must be a string, not a collection",
    ]


def test_aliases_rejected_no_bomb():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))
    e = errs(bomb)
    assert e[0] == "f.yaml:1:4: a: YAML anchor '&a' is not allowed in a spec"
    assert "f.yaml:2:8: b[0]: YAML alias '*a' is not allowed in a spec" in e


def test_merge_key_is_just_a_key():
    assert load_yaml_text("a: {<<: x}\n", "f").data == {"a": {"<<": "x"}}


def test_tags():
    assert errs("a: !!binary aGk=\nb: !foo x\nc: !!set {x}\n") == [
        "f.yaml:1:4: a: YAML tag '!!binary' is not allowed in a spec",
        "f.yaml:2:4: b: YAML tag '!foo' is not allowed in a spec",
        "f.yaml:3:4: c: YAML tag '!!set' is not allowed in a spec",
    ]
    assert load_yaml_text("a: !!str 1\nb: !!int '2'\n", "f").data == {"a": "1", "b": 2}
    assert errs("a: !!int x\n") == ["f.yaml:1:4: a: 'x' is not a valid int"]


def test_too_deep():
    assert errs("a: " + "[" * 40 + "]" * 40 + "\n") == [
        "f.yaml:1:35: a" + "[0]" * 30 + ": nesting deeper than 32 levels (limits.MAX_DEPTH)"]
    load_yaml_text("a: " + "[" * 31 + "]" * 31 + "\n", "f")   # 32 levels with the top mapping


def test_too_big():
    assert errs(b"a: 1\n" + b"#" * MAX_BYTES) == [
        f"f.yaml:1:1: <document>: file is larger than 1 MiB ({MAX_BYTES} bytes), the most a spec may be (limits.MAX_BYTES)"]


def test_non_utf8_located():
    assert errs(b"a: 1\nb: caf\xe9 \xc3\xa9\n") == ["f.yaml:2:7: <document>: file is not valid UTF-8 (byte 0xe9)"]
    assert errs("a: é\nb: \x01\n".encode()) == [
        "f.yaml:2:4: <document>: YAML syntax error: unacceptable character U+0001 (special characters are not allowed)"]


def test_bom_accepted():
    assert load_yaml_bytes(b"\xef\xbb\xbfa: 1\n", "f").data == {"a": 1}


@pytest.mark.parametrize("text,expected", [
    ("a:\n\tb: 1\n", "2:1: <document>: YAML syntax error: found character '\\t' that cannot start any token "
                     "(while scanning for the next token)"),
    ("a: 'x\n", "2:1: <document>: YAML syntax error: found unexpected end of stream "
                "(while scanning a quoted scalar at line 1, column 4)"),
    ("a: 1\n---\nb: 2\n", "2:1: <document>: YAML syntax error: but found another document "
                          "(expected a single document in the stream at line 1, column 1)"),
    ("a: 1\n b: 2\n", "2:3: <document>: YAML syntax error: mapping values are not allowed here"),
])
def test_syntax_errors_located(text, expected):
    assert errs(text) == [f"f.yaml:{expected}"]


def test_format_path():
    assert format_path(("driver", "hooks", "malloc")) == "driver.hooks.malloc"
    assert format_path(("ops", "add.Tensor", "kernel")) == 'ops."add.Tensor".kernel'
    assert format_path(("driver", "libraries", 0)) == "driver.libraries[0]"
    assert format_path(()) == ""
