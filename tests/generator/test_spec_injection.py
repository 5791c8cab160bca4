"""No spec string reaches C++, Python or a shell unvalidated.

Identifiers (chip, kernels, hook symbols, namespace, libraries, environment variables) must
match strict patterns; paths stay inside the spec's project (no absolute paths, no `~`, no
`..` past the folder above the spec's own, no symbolic links out of it); free text (the
description) is escaped wherever it is rendered, so it arrives in the generated Python and
C++ as the very same text and is never evaluated, by Jinja either.
"""
from __future__ import annotations

import ast
import os
import re

import pytest

from spec_helpers import NPU_TEXT, edit, errors_of, write
from torchfl_gen.render import render
from torchfl_gen.spec import load_spec


def _rejected(tmp_path, text, field: str) -> list[str]:
    errors = errors_of(tmp_path, text)
    assert any(field in e for e in errors), errors
    return errors


@pytest.mark.parametrize("old, new, field", [
    # C++: identifiers pasted into generated code
    ("  add.Tensor: {kernel: add}", '  add.Tensor: {kernel: "add(); system(\\"id\\"); //"}', 'ops."add.Tensor".kernel'),
    ("    malloc: simnpuMalloc", '    malloc: "simnpuMalloc; int x"', "driver.hooks.malloc"),
    ("  namespace: simnpu::ops", '  namespace: "simnpu::ops { void f(); } namespace x"', "kernels.namespace"),
    ("  headers: [simnpu/simnpu_kernels.h]", '  headers: ["simnpu/x.h>\\n#include </etc/passwd"]', "kernels.headers[0]"),
    ("  headers: [simnpu/simnpu_kernels.h]", "  headers: [../../../etc/passwd.h]", "kernels.headers[0]"),
    ("  name: npu", '  name: "npu\\"); import os; os.system(\\"id\\"); (\\""', "chip.name"),
    # shell / loader: names that reach dlopen, the linker and the environment
    ("    - libsimnpu_runtime.so", '    - "libx.so; rm -rf ~"', "driver.libraries[0]"),
    ("    - libsimnpu_runtime.so", '    - "$(id).so"', "driver.libraries[0]"),
    ("  libraries: [simnpu_kernels]", '  libraries: ["simnpu_kernels -Wl,--wrap=malloc"]', "kernels.libraries[0]"),
    ("  home_env: SIMNPU_HOME", '  home_env: "SIMNPU_HOME; id"', "driver.home_env"),
    ("  backend: npuccl", '  backend: "npuccl\\nimport os"', "distributed.backend"),
])
def test_hostile_identifiers_are_refused(tmp_path, old, new, field):
    _rejected(tmp_path, edit((old, new)), field)


@pytest.mark.parametrize("path, why", [
    ("/usr/include", "absolute"),
    ("~/include", "home"),
    ("../../outside", "outside"),
    ("../simnpu/../../outside", "outside"),
])
def test_paths_stay_inside_the_spec_project(tmp_path, path, why):
    errors = _rejected(tmp_path, edit(("  include_dirs: [../simnpu/include]", f"  include_dirs: [{path!r}]")),
                       "kernels.include_dirs[0]")
    assert any("must stay inside" in e or "must be relative" in e for e in errors), errors


def test_a_symbolic_link_out_of_the_project_is_refused(tmp_path):
    project = tmp_path / "project"
    (project / "sdk").mkdir(parents=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.symlink(outside, project / "sdk" / "include")
    spec = write(project, edit(("  include_dirs: [../simnpu/include]", "  include_dirs: [../sdk/include]")))
    from torchfl_gen.errors import SpecErrors

    with pytest.raises(SpecErrors) as ei:
        load_spec(spec, display="specs/npu.yaml")
    assert any("kernels.include_dirs[0]" in str(e) and "symbolic link" in str(e) for e in ei.value.errors), \
        [str(e) for e in ei.value.errors]


HOSTILE_TEXT = ('A chip """ \'\'\' \\" \\\\ {{ 7*7 }} {% raw %} ${HOME} $(id) `id` */ /* ??/ \\n'
                '#include <x> \u00e9\u4e2d\U0001f600 %s {0}')


def _literal_strings_py(text: str) -> list[str]:
    return [n.value for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


_CPP_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def _unescape_cpp(body: str) -> str:
    out = bytearray()
    i = 0
    while i < len(body):
        if body[i] == "\\":
            if body[i + 1] in "01234567":
                out.append(int(body[i + 1:i + 4], 8))
                i += 4
                continue
            out += body[i + 1].encode()
            i += 2
            continue
        out += body[i].encode()
        i += 1
    return out.decode("utf-8")


def test_free_text_arrives_as_the_same_text_in_the_generated_python(tmp_path):
    import yaml

    text = edit(("  description: Simulated NPU (reference chip, runs on any CPU host)",
                 "  description: " + yaml.safe_dump(HOSTILE_TEXT, width=10**6).strip().removesuffix("...").strip()))
    spec = load_spec(write(tmp_path, text), display="specs/npu.yaml")
    assert spec.chip.description == HOSTILE_TEXT
    files = render(spec, tmp_path / "pkg")
    found = [path for path, content in files.items()
             if path.endswith(".py") and HOSTILE_TEXT in _literal_strings_py(content)]  # parses, too
    assert found, "the description reached no Python string literal intact"
    # TOML (the package metadata) gets it escaped and whole too; and Jinja evaluated none of it
    # (its template syntax is part of the text that arrived)
    import tomllib

    assert HOSTILE_TEXT in tomllib.loads(files["pyproject.toml"])["project"]["description"]


@pytest.mark.parametrize("value", [HOSTILE_TEXT, "", "??=", "a\nb", "\x00\x01\x7f", " ", "x" * 300])
def test_cpp_string_literals_carry_any_text_exactly(value):
    """Every spec string that reaches C++ goes through cpp_string: one literal, no raw newline,
    quote or trigraph, and it decodes to the same text."""
    from torchfl_gen.render import cpp_string

    literal = cpp_string(value)
    assert literal[0] == literal[-1] == '"' and "\n" not in literal and "??" not in literal
    assert _CPP_STRING.fullmatch(literal)
    assert _unescape_cpp(literal[1:-1]) == value


hypothesis = pytest.importorskip("hypothesis")


@hypothesis.settings(max_examples=200, database=None, derandomize=True)
@hypothesis.given(hypothesis.strategies.text())
def test_cpp_string_round_trips_random_text(value):
    from torchfl_gen.render import cpp_string

    literal = cpp_string(value)
    assert _CPP_STRING.fullmatch(literal) and _unescape_cpp(literal[1:-1]) == value


def test_spec_text_never_becomes_a_shell_command(tmp_path, monkeypatch):
    """The build runs its tools with argument lists, never through a shell."""
    import subprocess

    from torchfl_gen import build

    calls = []

    def record(cmd, *args, **kwargs):
        calls.append((cmd, kwargs.get("shell", False)))
        raise subprocess.CalledProcessError(1, cmd)

    monkeypatch.setattr(subprocess, "run", record)
    monkeypatch.setattr(subprocess, "Popen", record)
    spec = load_spec(write(tmp_path, NPU_TEXT), display="specs/npu.yaml")
    result = build.generate(spec, tmp_path / "pkg")
    with pytest.raises(subprocess.CalledProcessError):
        build.compile_package(spec, result, install=False, verbose=False, progress=lambda message: None)
    assert calls and all(isinstance(cmd, (list, tuple)) and not shell for cmd, shell in calls), calls
