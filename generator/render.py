"""Render a ChipSpec into a backend package: the templates only format the model.

Output is deterministic (sorted, no timestamps, paths relative to the output folder)
so that regenerating a committed `generated/<chip>/` is byte-identical.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import jinja2

from . import __version__
from .model import CompositeSpec, ChipSpec, NativeSpec, OpEntry, Route
from .torch_support import TORCH_REQUIREMENT
from .opinfo_map import opinfo_names_for

TEMPLATE_ROOT = Path(__file__).parent / "templates"

# template (relative to templates/privateuse1) -> output path; "{pkg}" is the package.
PRIVATEUSE1_FILES = (
    ("package/pyproject.toml.j2", "pyproject.toml"),
    ("package/setup.py.j2", "setup.py"),
    ("package/README.md.j2", "README.md"),
    ("package/gitignore.j2", ".gitignore"),
    ("csrc/driver.cpp.j2", "csrc/driver.cpp"),
    ("csrc/registration.cpp.j2", "csrc/registration.cpp"),
    ("csrc/ops.cpp.j2", "csrc/ops.cpp"),
    ("csrc/autocast.cpp.j2", "csrc/autocast.cpp"),
    ("package/__init__.py.j2", "{pkg}/__init__.py"),
    ("package/device.py.j2", "{pkg}/device.py"),
    ("package/spec.py.j2", "{pkg}/spec.py"),
    ("tests/conftest.py.j2", "tests/conftest.py"),
    ("tests/test_device.py.j2", "tests/test_device.py"),
    ("tests/test_torch_api.py.j2", "tests/test_torch_api.py"),
    ("tests/test_upstream.py.j2", "tests/test_upstream.py"),
    ("tests/test_compile.py.j2", "tests/test_compile.py"),
    ("tests/test_vendor_ops.py.j2", "tests/test_vendor_ops.py"),
    ("tests/test_opinfo.py.j2", "tests/test_opinfo.py"),
)
# A chip with a collective library (distributed.library) also gets its bindings.
COLLECTIVES_FILE = (("csrc/collectives.cpp.j2", "csrc/collectives.cpp"),)

# The pure-Python package of a native chip (`integration: native`).
NATIVE_FILES = (
    ("package/pyproject.toml.j2", "pyproject.toml"),
    ("package/README.md.j2", "README.md"),
    ("package/gitignore.j2", ".gitignore"),
    ("package/__init__.py.j2", "{pkg}/__init__.py"),
    ("package/spec.py.j2", "{pkg}/spec.py"),
    ("tests/test_native.py.j2", "tests/test_native_{chip}.py"),  # unique: pytest runs several chips' at once
)

# A composite chip (`integration: composite`): the members' code joined (templates/composite),
# the package and device files of a privateuse1 chip, and one spec module per member.
COMPOSITE_FILES = (
    ("privateuse1/package/pyproject.toml.j2", "pyproject.toml"),
    ("privateuse1/package/setup.py.j2", "setup.py"),
    ("composite/package/README.md.j2", "README.md"),
    ("privateuse1/package/gitignore.j2", ".gitignore"),
    ("composite/csrc/driver.cpp.j2", "csrc/driver.cpp"),
    ("composite/csrc/registration.cpp.j2", "csrc/registration.cpp"),
    ("composite/csrc/ops.cpp.j2", "csrc/ops.cpp"),
    ("privateuse1/csrc/autocast.cpp.j2", "csrc/autocast.cpp"),
    ("privateuse1/package/__init__.py.j2", "{pkg}/__init__.py"),
    ("privateuse1/package/device.py.j2", "{pkg}/device.py"),
    ("composite/package/spec.py.j2", "{pkg}/spec.py"),
    ("composite/tests/conftest.py.j2", "tests/conftest.py"),
    ("composite/tests/test_composite.py.j2", "tests/test_composite.py"),
)

# torch dtype name -> c10::ScalarType enumerator, for the spec's `dtypes:`.
DTYPE_ENUM = {
    "float32": "c10::ScalarType::Float", "float64": "c10::ScalarType::Double",
    "float16": "c10::ScalarType::Half", "bfloat16": "c10::ScalarType::BFloat16",
    "int8": "c10::ScalarType::Char", "uint8": "c10::ScalarType::Byte", "int16": "c10::ScalarType::Short",
    "int32": "c10::ScalarType::Int", "int64": "c10::ScalarType::Long", "bool": "c10::ScalarType::Bool",
    "complex64": "c10::ScalarType::ComplexFloat", "complex128": "c10::ScalarType::ComplexDouble",
}

# The marker that says a folder was written by torchfl-gen (and may be replaced).
MARKER = ".torchfl-generated"


def cpp_string(value: str) -> str:
    """A C++ string literal for any text: only printable ASCII passes through unescaped."""
    out = ['"']
    for ch in value:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= code < 0x7F and ch != "?":  # '?' escaped: no trigraphs
            out.append(ch)
        else:
            for byte in ch.encode("utf-8"):
                out.append(f"\\{byte:03o}")
    out.append('"')
    return "".join(out)


_JSON_ESCAPE = re.compile(r"\\\\|\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})")


def json_literal(value) -> str:
    """JSON text that is also a valid TOML and Python literal (for strings and lists of them).

    json.dumps writes characters beyond the BMP as UTF-16 surrogate pairs (``\\ud83d\\ude00``),
    which TOML rejects and Python reads as two lone surrogates: write them as ``\\UXXXXXXXX``.
    """
    def fix(m: re.Match) -> str:
        if m[1] is None:          # an escaped backslash: keep it (and what follows is not an escape)
            return m[0]
        code = 0x10000 + ((int(m[1], 16) - 0xD800) << 10) + (int(m[2], 16) - 0xDC00)
        return f"\\U{code:08x}"

    return _JSON_ESCAPE.sub(fix, json.dumps(value, sort_keys=True))


_UNSAFE_PATH_CHARS = re.compile(r"[^A-Za-z0-9_./+-]")


def spec_source_for(spec_path: Path, output_dir: Path) -> str:
    """How generated files name their spec: relative to the nearest folder holding both the spec
    and the output folder (`specs/npu.yaml` for `generated/npu/`), so the text does not depend on
    the current directory; just the file name when they share no folder but the root."""
    spec_path, output_dir = Path(spec_path).resolve(), Path(output_dir).resolve()
    try:
        common = Path(os.path.commonpath([spec_path, output_dir]))
    except ValueError:            # different drives
        return spec_path.name
    shown = spec_path.name if common == Path(common.anchor) else _relpath(spec_path, common)
    # Headers, comments and docstrings quote it verbatim: keep it to path-safe characters.
    return _UNSAFE_PATH_CHARS.sub("_", shown)


def py_string(value: str) -> str:
    """A Python string literal (repr is exact and safe for any text)."""
    return repr(str(value))


@dataclass(frozen=True)
class VendorWrapper:
    """What ops.cpp needs to emit one vendor-kernel wrapper."""
    op: OpEntry
    decl: str            # C++ declaration of the wrapper
    guard: str | None    # the device made current: the first argument tensor on the chip
    call: str            # the kernel call
    written: tuple[str, ...]  # tensors the kernel writes: refused when they carry a math bit
    note_missing: str    # the registration's call when the library lacks the kernel
    dtype_arg: str | None = None      # `ops.<op>.dtypes`: the tensor whose dtype is checked
    dtype_enums: tuple[str, ...] = ()  # ... against these c10::ScalarType enumerators
    declined: str = ""   # the statement a declined dtype runs: the op's chain, or the located error


def _device_tensors(op: OpEntry) -> list[str]:
    """The op's tensor arguments in the order their device decides where it runs: the written
    ones first (an out= or in-place self holds the result), then the read ones and lists."""
    args = op.signature.arguments
    return [a.name for a in args if a.writes_tensor] + [a.name for a in args if a.reads_tensor or a.lists_tensors]


def _guard(op: OpEntry) -> str | None:
    """`torch_fl::kernel_device(...)` of the op's tensors, or None for an op without tensors."""
    tensors = _device_tensors(op)
    if not tensors:
        return None
    return cpp_call("torch_fl::kernel_device", tensors, before="  const c10::OptionalDeviceGuard guard(",
                    indent="  ")


CPP_WIDTH = 110  # generated C++ lines stay within this, as hand-written code would


def cpp_call(head: str, args, before: str = "", indent: str = "") -> str:
    """`head(args)` written after `before` on a line indented by `indent`: on one line when it
    fits CPP_WIDTH, else one argument a line, indented one level deeper than the line."""
    one_line = f"{head}({', '.join(args)})"
    if len(before) + len(one_line) + 2 <= CPP_WIDTH or not args:  # + 2: the ` {` or `;` after it
        return one_line
    return f"{head}(\n" + ",\n".join(f"{indent}    {a}" for a in args) + ")"


def vendor_wrappers(spec: ChipSpec, spec_source: str) -> list[VendorWrapper]:
    """The wrappers ops.cpp emits; `spec_source` is how generated text names the spec (the same
    wherever the generator runs: spec_source_for)."""
    wrappers = []
    assert spec.kernels is not None or not spec.vendor_ops
    for op in spec.vendor_ops:
        name = f"{op.cpp_ident}_vendor"
        sig = op.signature
        decl = cpp_call(f"{sig.returns} {name}", [f"{a.cpp_type} {a.name}" for a in sig.arguments])
        call = cpp_call(f"{spec.kernels.namespace}::{op.kernel}",
                        ["torch_fl::StreamArg::current()", *sig.kernel_call_args()], before="    return ", indent="    ")
        note_missing = cpp_call("torch_fl::note_missing_kernel", [
            cpp_string(op.name), cpp_string(op.kernel), str(op.line), "true" if op.require_vendor else "false"],
            before="    ", indent="    ")
        dtype_arg, enums, declined = None, (), ""
        if op.dtypes is not None:
            dtype_arg = next(a.name for a in sig.arguments if a.cpp_type.replace(" ", "") in
                             ("constat::Tensor&", "at::Tensor&"))
            enums = tuple(DTYPE_ENUM[d] for d in op.dtypes)
            if op.fallback:
                # The wrapper's own argument types: SymInt ones, or the plain ones the C++ API takes.
                caller = "call_fallback_fn_symint" if any("SymInt" in a.cpp_type for a in sig.arguments) \
                    else "call_fallback_fn"
                declined = "return " + cpp_call(
                    f"at::native::{caller}<&torch_fl::vendor_declined, at::_ops::{op.cpp_ident}>::call",
                    [a.name for a in sig.arguments], before="    return ", indent="    ") + ";"
            else:
                declined = cpp_call("TORCH_CHECK_NOT_IMPLEMENTED", [
                    "false", cpp_string(f"aten::{op.name} on chip '{spec.chip.name}': its vendor kernel "
                                        f"{op.kernel} computes in {', '.join(op.dtypes)} ({spec_source}:"
                                        f"{op.line}), not "), f"{dtype_arg}.scalar_type()",
                    cpp_string(", and the op has no fallback chain; give it one there: `fallback: [cpu]`")],
                    before="    ", indent="    ") + ";"
        wrappers.append(VendorWrapper(op=op, decl=decl, guard=_guard(op), call=call,
                                      written=sig.written_tensors, note_missing=note_missing,
                                      dtype_arg=dtype_arg, dtype_enums=enums, declined=declined))
    return wrappers


@dataclass(frozen=True)
class SuiteDtypes:
    """The dtypes the generated suite computes in, from the chip's `dtypes`."""
    float: str               # float32 where the chip has it, else its first floating dtype
    default_changed: bool    # no float32 on the chip: the suite sets torch's default dtype to `float`
    byte: str                # the out-of-memory test's element type (one byte where the chip has one)
    convert: str | None      # a second dtype for converting copies, or None (the chip has one dtype)
    atol: float              # the autograd test's tolerance in `float`


def suite_dtypes(spec: ChipSpec) -> SuiteDtypes:
    from .model import FLOATING_DTYPES

    floating = next(d for d in FLOATING_DTYPES if d in spec.dtypes)  # validation requires one
    byte = next((d for d in ("uint8", "int8", "bool") if d in spec.dtypes), floating)
    convert = next((d for d in ("float64", *FLOATING_DTYPES, *spec.dtypes) if d in spec.dtypes and d != floating),
                   None)
    return SuiteDtypes(float=floating, default_changed=floating != "float32", byte=byte, convert=convert,
                      atol=1e-5 if floating in ("float32", "float64") else 1e-2)


_DTYPE_NAME = re.compile(r"torch\.(float64|float32|float16|bfloat16|int64|int32|int16|int8|uint8|bool|complex64|complex128)\b")


def vendor_op_cases(spec: ChipSpec) -> list[tuple[str, tuple]]:
    """Each vendor op's CPU comparisons (opinfo_map), without the expressions that name a
    dtype the chip refuses."""
    out = []
    for op in spec.vendor_ops:
        cases = tuple(case for case in opinfo_names_for(op.name)
                      if case[0] != "expr" or set(_DTYPE_NAME.findall(case[1])) <= set(spec.dtypes))
        if cases:
            out.append((op.name, cases))
    return out


def amp_kernels(spec: ChipSpec) -> dict[str, list]:
    """The amp lists as autocast.cpp registers them: (name, overload) pairs, fp32 ops with
    the policy CUDA casts them with; the `norm` overloads that append a dtype apart."""
    from .amp_lists import FP32_APPEND_DTYPE, fp32_policy

    def split(op: str) -> tuple[str, str]:
        name, _, overload = op.partition(".")
        return name, overload

    amp = spec.amp
    if amp is None:
        return {"lower_precision": [], "fp32": [], "append_dtype": [], "promote": [], "bce_listed": False}
    listed = amp.lower_precision_ops + amp.fp32_ops + amp.promote_ops
    return {
        # CUDA refuses binary_cross_entropy under autocast; a spec that lists it decides instead
        "bce_listed": "binary_cross_entropy" in listed,
        "lower_precision": [split(op) for op in amp.lower_precision_ops],
        "fp32": [split(op) + (fp32_policy(op),) for op in amp.fp32_ops if fp32_policy(op) != FP32_APPEND_DTYPE],
        "append_dtype": [op for op in amp.fp32_ops if fp32_policy(op) == FP32_APPEND_DTYPE],
        "promote": [split(op) for op in amp.promote_ops],
    }


def _relpath(target: Path, output_dir: Path) -> str:
    return Path(os.path.relpath(target, output_dir)).as_posix()


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_ROOT)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["cpp_string"] = cpp_string
    env.filters["py_string"] = py_string
    env.filters["tojson"] = json_literal
    env.filters["py_literal"] = py_literal
    env.filters["route_literal"] = route_literal
    env.filters["py_tuple_lines"] = py_tuple_lines
    return env


def py_literal(value) -> str:
    """A Python literal for None, a bool, an int, a str, or a tuple/list of them."""
    if value is None or isinstance(value, (bool, int)):
        return repr(value)
    if isinstance(value, str):
        return py_string(value)
    if isinstance(value, (tuple, list)):
        items = [py_literal(v) for v in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    raise TypeError(f"no Python literal for {type(value).__name__}")


def py_tuple_lines(items, width: int = 104) -> str:
    """A tuple literal of strings, one indented line per `width` characters: `()` when empty."""
    if not items:
        return "()"
    lines, line = [], ""
    for item in map(py_string, items):
        if line and len(line) + len(item) + 2 > width:
            lines.append(line)
            line = ""
        line += ("" if not line else " ") + item + ","
    lines.append(line)
    return "(\n" + "".join(f"    {line}\n" for line in lines) + ")"


def route_literal(route: Route) -> str:
    """A route as its row of the generated ROUTES table (torch_fl.routes.Route's fields)."""
    return py_literal((route.kernel, route.chain, route.triton, route.line, route.path))


MANIFEST_HEADING = "files:"


def _marker(source: str, files: dict[str, str], package: str) -> str:
    """The marker: who wrote the folder, and the list of the files it wrote (its manifest). What
    the folder may hold besides them is what building or testing the package makes
    (`build.is_build_product`); anything else makes the generator refuse the folder."""
    listed = "".join(f"  {path}\n" for path in sorted({*files, MARKER}))
    return (f"Written by torchfl-gen {__version__} from {source}; "
            "torchfl-gen replaces this folder on each build.\n"
            "It owns the files listed below and what building or testing the package makes here\n"
            f"(build/, *.egg-info/, __pycache__/, .pytest_cache/, .torchfl/, {package}/_build.json, {package}/*.so);\n"
            "it refuses to write here while the folder holds anything else.\n"
            f"\n{MANIFEST_HEADING}\n{listed}")


def manifest(marker_text: str) -> frozenset[str] | None:
    """The files a marker lists (posix paths in the folder); None for a marker without a list
    (written before torchfl-gen kept one)."""
    lines = marker_text.splitlines()
    if MANIFEST_HEADING not in lines:
        return None
    start = lines.index(MANIFEST_HEADING) + 1
    return frozenset(line[2:] for line in lines[start:] if line.startswith("  ") and line[2:].strip())


def render_native(spec: NativeSpec, output_dir: Path) -> dict[str, str]:
    """The pure-Python package of a native chip: its facts for torch_fl, and its tests."""
    env = _environment()
    output_dir = output_dir.resolve()
    source = spec_source_for(spec.source, output_dir)
    context = {
        "spec": spec,
        "chip": spec.chip,
        "pkg": spec.chip.package,
        "generator_version": __version__,
        "torch_requirement": TORCH_REQUIREMENT,
        "spec_source": source,
        "spec_digest": spec.spec_sha256[:16],
        "build_command": f"torchfl-gen build {source}",
        "package_version": __version__,
        "tests_path": "tests",
    }
    files = {out.replace("{pkg}", spec.chip.package).replace("{chip}", spec.chip.name): env.get_template(f"native/{template}").render(**context)
             for template, out in NATIVE_FILES}
    files[MARKER] = _marker(source, files, spec.chip.package)
    return files


@dataclass(frozen=True)
class Router:
    """One op of a composite's ops.cpp: the kernel of the call's member chip, else its chain."""
    op: str
    ident: str
    schema: str
    decl: str
    device: str   # the C++ expression of the call's device (an optional)
    cases: tuple  # (member index, chip, kernel expression, call), members with a kernel for the op
    declined: str  # the statement for a member without one: the op on that member's chain


def composite_routers(members: list[dict]) -> list[Router]:
    by_op: dict[str, list] = {}
    for m in members:
        for w in m["wrappers"]:
            by_op.setdefault(w.op.name, []).append((m, w))
    routers = []
    for name in sorted(by_op):
        first = by_op[name][0][1]
        sig = first.op.signature
        args = [a.name for a in sig.arguments]
        caller = "call_fallback_fn_symint" if any("SymInt" in a.cpp_type for a in sig.arguments) else "call_fallback_fn"
        declined = "return " + cpp_call(f"at::native::{caller}<&torch_fl::vendor_declined, at::_ops::{first.op.cpp_ident}>::call",
                                        args, before="  return ", indent="  ") + ";"
        cases = tuple({"member": m["index"], "chip": m["chip"].name,
                       "kernel": f"{m['spec'].kernels.namespace}::{w.op.kernel}",
                       "call": cpp_call(f"member_{m['chip'].name}::{w.op.cpp_ident}_vendor", args,
                                        before="      if (...) return ", indent="        ")}
                      for m, w in by_op[name])
        routers.append(Router(op=name, ident=first.op.cpp_ident, schema=sig.schema,
                              decl=cpp_call(f"{sig.returns} {first.op.cpp_ident}_router",
                                            [f"{a.cpp_type} {a.name}" for a in sig.arguments]),
                              device=_device_expression(first), cases=cases, declined=declined))
    return routers


def _device_expression(wrapper: VendorWrapper) -> str:
    """The device a call runs on: that of its first tensor on the chip (torch_fl::kernel_device),
    or none (the current device's)."""
    tensors = _device_tensors(wrapper.op)
    return cpp_call("torch_fl::kernel_device", tensors, before="  switch (member_of(", indent="  ") \
        if tensors else "std::nullopt"


def render_composite(spec: CompositeSpec, output_dir: Path) -> dict[str, str]:
    """A composite's package: one extension joining its members' drivers and kernels, the
    composite's facts, and each member's own spec module."""
    env = _environment()
    output_dir = output_dir.resolve()
    source = spec_source_for(spec.source, output_dir)
    members = []
    for index, member in enumerate(spec.members):
        member_source = spec_source_for(member.source, output_dir)
        wrappers = vendor_wrappers(member, member_source)
        members.append({
            "index": index,
            "spec": member,
            "chip": member.chip,
            "spec_source": member_source,
            "wrappers": wrappers,
            "copy_wrapper": next((w for w in wrappers if w.op.name == "copy_"), None),
            "missing_notes": [(f"{member.kernels.namespace}::{w.op.kernel}", cpp_call("torch_fl::note_missing_kernel", [
                cpp_string(w.op.name), cpp_string(w.op.kernel), str(w.op.line),
                "true" if w.op.require_vendor else "false", str(index)], before="  if (...) ", indent="  "))
                for w in wrappers],
        })
    kernels = [m.kernels for m in spec.members if m.kernels]
    context = {
        "spec": spec,
        "chip": spec.chip,
        "pkg": spec.chip.package,
        "members": members,
        "routers": composite_routers(members),
        "generator_version": __version__,
        "torch_requirement": TORCH_REQUIREMENT,
        "spec_source": source,
        "spec_digest": spec.spec_sha256[:16],
        "build_command": f"torchfl-gen build {source}",
        "package_version": __version__,
        "dtype_enum": DTYPE_ENUM,
        "amp_kernels": amp_kernels(spec),
        "kernel_toolkit": "cuda" if any(k.toolkit == "cuda" for k in kernels) else "none",
        "paths": {
            "kernel_include_dirs": _unique(_relpath(p, output_dir) for k in kernels for p in k.include_dirs),
            "kernel_library_dirs": _unique(_relpath(p, output_dir) for k in kernels for p in k.library_dirs),
            "kernel_libraries": _unique(lib for k in kernels for lib in k.libraries),
            "kernel_sources": _unique(_relpath(p, output_dir) for k in kernels for p in k.sources),
            "driver_search_paths": _unique(_relpath(p, output_dir) for m in spec.members for p in m.driver.search_paths),
        },
    }
    files: dict[str, str] = {}
    for template, out in COMPOSITE_FILES:
        files[out.replace("{pkg}", spec.chip.package)] = env.get_template(template).render(**context)
    for m in members:
        member_context = {**_chip_context(m["spec"], output_dir), "spec_source": m["spec_source"]}
        files[f"{spec.chip.package}/member_{m['chip'].name}.py"] = env.get_template(
            "privateuse1/package/spec.py.j2").render(**member_context)
    files[MARKER] = _marker(source, files, spec.chip.package)
    return files


def _unique(items) -> list:
    return list(dict.fromkeys(items))


def render(spec: ChipSpec | NativeSpec | CompositeSpec, output_dir: Path) -> dict[str, str]:
    """Every file of the package, path -> text, for a package written to `output_dir`."""
    if isinstance(spec, NativeSpec):
        return render_native(spec, output_dir)
    if isinstance(spec, CompositeSpec):
        return render_composite(spec, output_dir)
    env = _environment()
    output_dir = output_dir.resolve()
    source = spec_source_for(spec.source, output_dir)
    context = _chip_context(spec, output_dir)
    files: dict[str, str] = {}
    templates = PRIVATEUSE1_FILES + (COLLECTIVES_FILE if spec.distributed and spec.distributed.library else ())
    for template, out in templates:
        path = out.replace("{pkg}", spec.chip.package)
        files[path] = env.get_template(f"privateuse1/{template}").render(**context)
    files[MARKER] = _marker(source, files, spec.chip.package)
    return files


def _chip_context(spec: ChipSpec, output_dir: Path) -> dict:
    """What the privateuse1 templates format for one chip."""
    output_dir = output_dir.resolve()
    source = spec_source_for(spec.source, output_dir)
    return {
        "spec": spec,
        "chip": spec.chip,
        "pkg": spec.chip.package,
        "generator_version": __version__,
        "torch_requirement": TORCH_REQUIREMENT,
        "spec_source": source,
        "spec_digest": spec.spec_sha256[:16],
        "kernel_toolkit": spec.kernels.toolkit if spec.kernels else "none",
        "build_command": f"torchfl-gen build {source}" + (
            f" --driver-version {spec.driver.version}" if spec.driver.version != spec.driver.default_version else ""),
        "package_version": f"{__version__}+driver{spec.driver.version}",
        "wrappers": vendor_wrappers(spec, source),
        "dtype_enum": DTYPE_ENUM,
        "amp_kernels": amp_kernels(spec),
        "copy_wrapper": next((w for w in vendor_wrappers(spec, source) if w.op.name == "copy_"), None),
        "default_route": route_literal(spec.default_route),
        "paths": {
            "kernel_include_dirs": [_relpath(p, output_dir) for p in (spec.kernels.include_dirs if spec.kernels else ())],
            "kernel_library_dirs": [_relpath(p, output_dir) for p in (spec.kernels.library_dirs if spec.kernels else ())],
            "kernel_libraries": list(spec.kernels.libraries) if spec.kernels else [],
            "kernel_sources": [_relpath(p, output_dir) for p in (spec.kernels.sources if spec.kernels else ())],
            "driver_search_paths": [_relpath(p, output_dir) for p in spec.driver.search_paths],
        },
        "opinfo_cases": vendor_op_cases(spec),
        "untested_vendor_ops": [op.name for op in spec.vendor_ops
                                if op.name not in {name for name, _ in vendor_op_cases(spec)}],
        "suite_dtypes": suite_dtypes(spec),
    }


def digest(files: dict[str, str]) -> str:
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.encode() + b"\0" + files[path].encode() + b"\0")
    return h.hexdigest()
