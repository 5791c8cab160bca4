"""Load a chip spec: YAML with locations -> JSON Schema -> semantic checks -> frozen model.

`load_spec` either returns a `ChipSpec` or raises `SpecErrors` listing every problem of
the file, each located as ``FILE:LINE:COL: PATH: MESSAGE``. Bad input never produces a
traceback: an unexpected exception while loading still becomes a located error.
"""
from __future__ import annotations

import difflib
import functools
import hashlib
import json
import os
import re
import warnings
from importlib import resources
from pathlib import Path
from typing import Any

from . import model, triton_catalog
from .model import FLOATING_DTYPES
from .errors import SpecError, SpecErrors
from .yaml_loader import MAX_BYTES, YamlDocument, format_path, load_yaml_bytes

SCHEMA_FILE = "chip-spec.schema.json"

# torch's built-in device types (c10::DeviceType names, as torch.device parses them) plus
# a few reserved names; a privateuse1 backend may not take any of them.
BUILTIN_DEVICE_TYPES = frozenset({
    "cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga",
    "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone", "metal",
    "privateuse1", "mkl", "sparse", "quantized",
})


@functools.lru_cache(maxsize=1)
def load_schema() -> dict:
    """The chip spec JSON Schema (draft 2020-12) shipped with the generator."""
    text = resources.files(__package__).joinpath("schema", SCHEMA_FILE).read_text(encoding="utf-8")
    return json.loads(text)


@functools.lru_cache(maxsize=1)
def _validator():
    import jsonschema
    schema = load_schema()
    cls = jsonschema.Draft202012Validator
    cls.check_schema(schema)
    return cls(schema)


def is_builtin_device_type(name: str) -> bool:
    """True if ``name`` is a device type torch itself defines (cpu, cuda, meta, ...)."""
    if name in BUILTIN_DEVICE_TYPES:
        return True
    try:
        import torch
        if name == torch._C._get_privateuse1_backend_name():
            return False   # this very backend, already registered in this process
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.device(name)
        return True
    except Exception:
        return False


# --------------------------------------------------------------------------- messages

_PATTERN_WHAT = {
    r"^[a-z][a-z0-9_]{0,30}$": "a lowercase identifier of at most 31 characters (a-z, 0-9, _; starting with a letter)",
    r"^[a-z][a-z_]{0,30}$": "a lowercase name of letters and '_' of at most 31 characters (torch's device "
                            "strings take no digits)",
    r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$": "a name of letters, digits, '_', '.', '-' (at most 64 characters)",
    r"^[A-Za-z_][A-Za-z0-9_]*$": "a C identifier",
    r"^[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*$": "a C++ namespace (like vendor::ops)",
    r"^(?!.*(^|/)\.\.(/|$))[A-Za-z0-9_./-]+\.(h|hpp|hh)$": "a header path ending in .h, .hpp or .hh, without '..'",
    r"^lib[A-Za-z0-9_.+-]+\.so(\.[0-9]+)*$": "a shared library file name (like libfoo.so or libfoo.so.1)",
    r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$": "a linker name (like foo for -lfoo)",
    r"^[0-9]+\.[0-9]+$": "a \"MAJOR.MINOR\" version",
    r"^[A-Z_][A-Z0-9_]*$": "an environment variable name (A-Z, 0-9, _)",
    r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)?$": "an aten op name (name or name.overload)",
    r"^[^\x00\n\r]+$": "a path on one line",
    r"^[A-Za-z0-9_.,=:+-][A-Za-z0-9_.,=:+/-]{0,199}$": "a command-line argument of letters, digits and _.,=:+-/ "
                                                     "(no spaces, quotes or shell characters)",
    r"^[^\x00\n\r]+\.(cpp|cc|cxx)$": "a C++ source path on one line, ending in .cpp, .cc or .cxx",
}

_TYPE_NAMES = {"object": "a mapping", "array": "a list", "string": "a string", "integer": "an integer",
               "number": "a number", "boolean": "a boolean", "null": "null"}


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _short(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return _describe(value)
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "null"
    return repr(value)


def _nearest(word: str, choices) -> str | None:
    m = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return m[0] if m else None


def _did_you_mean(word: str, choices) -> str:
    m = _nearest(word, choices)
    return f" (did you mean '{m}'?)" if m else ""


def _unwrap_nullable(e) -> list:
    """`oneOf: [X, null]` (an overlay entry or null): report why the value is not an X."""
    branches = e.validator_value if e.validator == "oneOf" else None
    if isinstance(branches, list) and {"type": "null"} in branches and e.instance is not None:
        index = next(i for i, branch in enumerate(branches) if branch != {"type": "null"})
        inner = [c for c in e.context if c.relative_schema_path and c.relative_schema_path[0] == index]
        if inner:
            return inner
    return [e]


def _schema_errors(doc: YamlDocument) -> list[SpecError]:
    errors = [inner for e in _validator().iter_errors(doc.data) for inner in _unwrap_nullable(e)]
    # A misspelled key also makes its key "missing": report only the misspelling.
    suggested: set[tuple] = set()
    for e in errors:
        if e.validator == "additionalProperties" and isinstance(e.instance, dict):
            allowed = set(e.schema.get("properties", {}))
            for key in e.instance:
                if key not in allowed and (m := _nearest(key, allowed)) is not None:
                    suggested.add((tuple(e.absolute_path), m))
    out: list[SpecError] = []
    for e in errors:
        path = tuple(e.absolute_path)
        kind = e.validator
        val = e.validator_value
        inst = e.instance
        schema = e.schema if isinstance(e.schema, dict) else {}
        if kind == "additionalProperties" and isinstance(inst, dict):
            allowed = set(schema.get("properties", {}))
            for key in inst:
                if key in allowed:
                    continue
                hint = "allowed keys: " + ", ".join(schema.get("properties", {})) if allowed else None
                out.append(doc.error(path + (key,), f"unknown key '{key}'{_did_you_mean(key, allowed)}",
                                     hint=hint, at="key", shown_path=path))
        elif kind == "required" and isinstance(inst, dict):
            for key in val:
                if key not in inst and (path, key) not in suggested:
                    out.append(doc.error(path, f"missing required key '{key}'", at="key"))
        elif "propertyNames" in e.schema_path:
            what = "op name" if path and path[-1] == "ops" else "key"
            out.append(doc.error(path + (inst,), f"invalid {what} '{inst}': must be "
                                 + _PATTERN_WHAT.get(val, f"matching {val}") if kind == "pattern"
                                 else f"invalid key '{inst}'", at="key", shown_path=path))
        elif kind == "type":
            types = val if isinstance(val, list) else [val]
            want = " or ".join(_TYPE_NAMES.get(t, t) for t in types)
            hint = None
            if "string" in types and isinstance(inst, (int, float)) and not isinstance(inst, bool):
                hint = f"quote it: \"{doc.scalars.get(path, inst)}\""
            got = _describe(inst)
            if isinstance(inst, (int, float)) and not isinstance(inst, bool) and path in doc.scalars:
                got = f"{got.split(' (')[0]} ({doc.scalars[path]})"   # as written: 2.10, not 2.1
            out.append(doc.error(path, f"expected {want}, got {got}", hint=hint))
        elif kind == "enum":
            allowed = [str(v) for v in val]
            msg = f"invalid value {_short(inst)} (expected one of: {', '.join(allowed)})"
            if isinstance(inst, str):
                m = _nearest(inst, allowed)
                if m:
                    msg = f"invalid value {inst!r} (did you mean '{m}'? expected one of: {', '.join(allowed)})"
            out.append(doc.error(path, msg))
        elif kind == "const":
            if path == ("spec_version",):
                out.append(doc.error(path, f"unsupported spec_version {_short(inst)} (this torchfl-gen "
                                     f"reads spec_version {val})"))
            else:
                out.append(doc.error(path, f"must be {_short(val)}, got {_short(inst)}"))
        elif kind == "pattern":
            what = _PATTERN_WHAT.get(val, f"matching the pattern {val}")
            out.append(doc.error(path, f"{_short(inst)} is not {what}"))
        elif kind == "maxItems":
            out.append(doc.error(path, f"has more than {val} items"))
        elif kind == "minItems":
            out.append(doc.error(path, "must not be empty" if val == 1 else f"needs at least {val} items"))
        elif kind == "minProperties":
            if len(path) == 2 and path[0] == "ops":
                out.append(doc.error(path, "an op entry needs 'kernel' and/or 'fallback'"))
            else:
                out.append(doc.error(path, "must not be empty"))
        elif kind == "uniqueItems" and isinstance(inst, list):
            seen: list = []
            for i, item in enumerate(inst):
                if item in seen:
                    out.append(doc.error(path + (i,), f"duplicate item {_short(item)}"))
                else:
                    seen.append(item)
        elif kind == "maxLength":
            out.append(doc.error(path, f"is longer than {val} characters"))
        elif kind == "minLength":
            out.append(doc.error(path, "must not be empty" if val == 1 else f"is shorter than {val} characters"))
        elif kind in ("minimum", "maximum"):
            out.append(doc.error(path, f"{_short(inst)} is out of range (must be {'>=' if kind == 'minimum' else '<='} {val})"))
        else:
            out.append(doc.error(path, e.message))
    return out


# --------------------------------------------------------------------------- semantics

def _get(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def _op_errors(doc: YamlDocument, ops: dict, prefix: tuple) -> tuple[list[SpecError], tuple | None]:
    """Checks of op entries (the spec's `ops`, or a driver overlay's) against the running torch."""
    from . import torch_ops

    out: list[SpecError] = []
    first_kernel_path = None
    op_re = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)?$")
    for op, entry in ops.items():
        if not op_re.match(op):
            continue   # reported by the schema
        if torch_ops.lookup(op) is None:
            s = torch_ops.suggest(op)
            out.append(doc.error((*prefix, op), f"unknown aten op '{op}'"
                                 + (f" (did you mean '{s}'?)" if s else ""), at="key", shown_path=prefix))
        elif not torch_ops.in_running_torch(op):
            out.append(doc.error((*prefix, op), f"aten op '{op}' is in torchgen's native_functions.yaml "
                                 "but not in the running torch", at="key", shown_path=prefix,
                                 hint="torch and torchgen disagree; reinstall torch"))
        elif torch_ops.is_composite_implicit(op):
            out.append(doc.error((*prefix, op), f"aten op '{op}' is CompositeImplicitAutograd: it decomposes "
                                 "before it reaches a backend; map the ops it decomposes into",
                                 at="key", shown_path=prefix))
        if not isinstance(entry, dict):
            continue  # null in a driver overlay: the op is removed
        if entry.get("kernel") is not None and first_kernel_path is None:
            first_kernel_path = (*prefix, op, "kernel")
        if entry.get("require") == "vendor":
            if "kernel" not in entry:
                out.append(doc.error((*prefix, op, "require"), "'require: vendor' needs a 'kernel'",
                                     at="key", hint="name the vendor kernel, or drop 'require'"))
            elif isinstance(entry.get("fallback"), list) and entry["fallback"]:
                out.append(doc.error((*prefix, op, "fallback"), "'require: vendor' forbids a fallback",
                                     at="key"))
        chain = entry.get("fallback")
        if isinstance(chain, list) and "triton" in chain and torch_ops.lookup(op) is not None:
            SUPPORTED_OPS = triton_catalog.load().ops
            if op not in SUPPORTED_OPS:
                i = chain.index("triton")
                out.append(doc.error((*prefix, op, "fallback", i),
                                     f"the shared Triton library has no kernel for '{op}'"
                                     + _did_you_mean(op, SUPPORTED_OPS),
                                     hint="drop 'triton' from this chain, or give the op a vendor kernel"))
    return out, first_kernel_path


def _driver_version_errors(doc: YamlDocument, data: dict, ops: dict) -> list[SpecError]:
    """The overlays of `driver.versions`: their versions, ops and dtypes."""
    from . import torch_ops

    out: list[SpecError] = []
    versions = _get(data, "driver", "versions")
    if not isinstance(versions, dict):
        return out
    default = _get(data, "driver", "version")
    for version, overlay in versions.items():
        path = ("driver", "versions", version)
        if not re.fullmatch(r"[0-9]+\.[0-9]+", version):
            continue  # reported by the schema
        if version == default:
            out.append(doc.error(path, f"'{version}' is driver.version itself", at="key",
                                 hint="an overlay describes another driver version"))
        elif int(version.partition(".")[2]) >= 100:
            out.append(doc.error(path, f"minor version of '{version}' must be below 100 "
                                 "(it is encoded as MAJOR*1000 + MINOR*10)", at="key"))
        if not isinstance(overlay, dict):
            continue
        overlay_ops = overlay.get("ops")
        if isinstance(overlay_ops, dict):
            errors, _ = _op_errors(doc, overlay_ops, path + ("ops",))
            out += errors
            for op, entry in overlay_ops.items():
                if entry is None and op not in ops and torch_ops.lookup(op) is not None:
                    out.append(doc.error(path + ("ops", op), f"'{op}' is removed for driver {version} but "
                                         "`ops` does not name it", at="key"))
            if any(isinstance(e, dict) and e.get("kernel") for e in overlay_ops.values()) and "kernels" not in data:
                out.append(doc.error(path + ("ops",), "an op has a kernel but the spec has no 'kernels' section",
                                     at="key"))
        overlay_dtypes = overlay.get("dtypes")
        amp_dtypes = _get(data, "amp", "dtypes")
        if isinstance(overlay_dtypes, list) and isinstance(amp_dtypes, list):
            for dt in amp_dtypes:
                if isinstance(dt, str) and dt not in overlay_dtypes:
                    out.append(doc.error(path + ("dtypes",), f"amp dtype '{dt}' is not among driver {version}'s "
                                         "dtypes", hint="list it, or drop it from amp.dtypes"))
    return out


def _semantic_errors(doc: YamlDocument, base: Path | None = None) -> list[SpecError]:
    """Checks the schema cannot express; `base` is the spec's folder (paths are relative to it)."""
    data = doc.data if isinstance(doc.data, dict) else {}
    out: list[SpecError] = []

    native = _get(data, "chip", "integration") == "native"
    if native:
        out += _native_errors(doc, data)
    name = _get(data, "chip", "name")
    if isinstance(name, str) and not native and is_builtin_device_type(name):
        out.append(doc.error(("chip", "name"), f"'{name}' is a built-in torch device type",
                             hint="choose a name torch does not define itself"))

    version = _get(data, "driver", "version")
    if isinstance(version, str) and re.fullmatch(r"[0-9]+\.[0-9]+", version):
        if int(version.partition(".")[2]) >= 100:
            out.append(doc.error(("driver", "version"), f"minor version of '{version}' must be below 100 "
                                 "(it is encoded as MAJOR*1000 + MINOR*10)"))

    out += _native_section_misplaced(doc, data)
    ops = data.get("ops")
    first_kernel_path = None
    if isinstance(ops, dict):
        errors, first_kernel_path = _op_errors(doc, ops, ("ops",))
        out += errors
    out += _driver_version_errors(doc, data, ops if isinstance(ops, dict) else {})

    if base is not None:
        out += _path_errors(doc, data, base)
    kernels = data.get("kernels")
    if isinstance(kernels, dict) and isinstance(kernels.get("sources"), list) and base is not None:
        for i, src in enumerate(kernels["sources"]):
            if (isinstance(src, str) and re.fullmatch(r"[^\x00\n\r]+\.(cpp|cc|cxx)", src)
                    and not Path(os.path.normpath(base / src)).is_file()):
                out.append(doc.error(("kernels", "sources", i), f"kernel source '{src}' does not exist "
                                     f"(looked in {base / src})"))

    if first_kernel_path is not None and "kernels" not in data:
        out.append(doc.error(first_kernel_path, "op has a kernel but the spec has no 'kernels' section",
                             at="key", hint="add a top-level 'kernels' section naming the vendor kernel library"))

    dtypes = data.get("dtypes")
    if isinstance(dtypes, list) and dtypes and all(isinstance(d, str) for d in dtypes) \
            and not set(dtypes) & set(FLOATING_DTYPES):
        out.append(doc.error(("dtypes",), "the chip lists no floating dtype; autograd, optimizers and the "
                             "generated tests compute in one",
                             hint="add one of " + ", ".join(FLOATING_DTYPES)))
    amp = data.get("amp")
    if isinstance(amp, dict):
        amp_dtypes = amp.get("dtypes")
        if isinstance(dtypes, list) and isinstance(amp_dtypes, list):
            for i, dt in enumerate(amp_dtypes):
                if isinstance(dt, str) and dt not in dtypes:
                    out.append(doc.error(("amp", "dtypes", i), f"amp dtype '{dt}' is not in dtypes"))
        default = amp.get("default")
        if isinstance(default, str) and isinstance(amp_dtypes, list) and default not in amp_dtypes:
            out.append(doc.error(("amp", "default"), f"amp default '{default}' is not one of amp.dtypes"))
        out += _amp_op_errors(doc, amp)

    dist = data.get("distributed")
    if isinstance(dist, dict):
        backend = dist.get("backend")
        if isinstance(backend, str) and backend in TORCH_DIST_BACKENDS:
            out.append(doc.error(("distributed", "backend"), f"'{backend}' is one of torch.distributed's own "
                                 "backends", hint="name the chip's library (e.g. '<chip>ccl'); list the names "
                                 "it stands in for under 'replaces'"))
    return out


# Sections a native chip has no use for: torch itself drives it and dispatches its ops.
NATIVE_UNUSED = {
    "driver": "torch loads the GPU's driver itself",
    "kernels": "torch's own kernels run the ops",
    "ops": "torch's own kernels run the ops",
    "fallback": "every op has torch's own kernel",
    "distributed": "name torch's backend under native.collective",
}


# Spec fields holding paths, relative to the spec's folder.
PATH_FIELDS = (("driver", "search_paths"), ("kernels", "include_dirs"), ("kernels", "library_dirs"),
               ("kernels", "sources"))


def spec_root(base: Path) -> Path:
    """The folder a spec's paths must stay in: the one above the spec's own (the project: a
    spec lives in its `specs/` folder, the vendor SDK beside it)."""
    return base.resolve().parent


def _path_errors(doc: YamlDocument, data: dict, base: Path) -> list[SpecError]:
    """A spec is untrusted input: its paths are relative and stay inside its project, links
    included, so a spec cannot point a build at files elsewhere on the machine."""
    out = []
    root = spec_root(base)
    for section, key in PATH_FIELDS:
        items = _get(data, section, key)
        if not isinstance(items, list):
            continue
        for i, item in enumerate(items):
            if not isinstance(item, str) or not item or "\0" in item:
                continue  # the schema reports it
            where = (section, key, i)
            if os.path.isabs(item) or item.startswith("~"):
                out.append(doc.error(where, f"path '{item}' must be relative to the spec's folder",
                                     hint=f"write it relative to {base}"))
                continue
            lexical = Path(os.path.normpath(base.resolve() / item))
            if not _inside(lexical, root):
                out.append(doc.error(where, f"path '{item}' must stay inside {root} (the folder above the "
                                     "spec's own)", hint="keep the SDK inside the spec's project"))
            elif not _inside(lexical.resolve(), root):
                out.append(doc.error(where, f"path '{item}' leaves {root} through a symbolic link "
                                     f"(it resolves to {lexical.resolve()})"))
    return out


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _native_errors(doc: YamlDocument, data: dict) -> list[SpecError]:
    out = [doc.error((key,), f"'{key}' does not apply to a native chip ({why})", at="key",
                     hint="remove it, or use integration: privateuse1 to generate a backend")
           for key, why in NATIVE_UNUSED.items() if key in data]
    chip = data.get("chip")
    if isinstance(chip, dict) and "capability" in chip:
        out.append(doc.error(("chip", "capability"), "a native chip's capability comes from its torch build; "
                             "chip.capability would not be used", at="key", hint="remove it"))
    if "native" not in data:
        return out
    amp = data.get("amp")
    if isinstance(amp, dict):
        for key in AMP_OP_LISTS:
            if key in amp:
                out.append(doc.error(("amp", key), f"a native chip autocasts with torch's own op lists; "
                                     f"amp.{key} would not be applied", at="key", hint="remove it"))
    return out


def _native_section_misplaced(doc: YamlDocument, data: dict) -> list[SpecError]:
    if "native" in data and _get(data, "chip", "integration") != "native":
        return [doc.error(("native",), "'native' applies only to chip.integration: native", at="key")]
    return []


# torch.distributed's own backend names; a chip's backend may only replace them.
TORCH_DIST_BACKENDS = frozenset({"undefined", "gloo", "nccl", "mpi", "ucc", "xccl", "fake", "threaded", "hccl"})

AMP_OP_LISTS = ("lower_precision_ops", "fp32_ops", "promote_ops")


def _amp_op_errors(doc: YamlDocument, amp: dict) -> list[SpecError]:
    """Every op of the amp lists: a functional aten op, in at most one list."""
    from . import torch_ops
    from torchgen.model import SchemaKind

    out: list[SpecError] = []
    first: dict[str, str] = {}
    op_re = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)?$")
    for key in AMP_OP_LISTS:
        ops = amp.get(key)
        if not isinstance(ops, list):
            continue
        for i, op in enumerate(ops):
            if not isinstance(op, str) or not op_re.match(op):
                continue   # reported by the schema
            path = ("amp", key, i)
            f = torch_ops.lookup(op)
            if f is None:
                s = torch_ops.suggest(op)
                out.append(doc.error(path, f"unknown aten op '{op}'" + (f" (did you mean '{s}'?)" if s else "")))
            elif f.func.kind() != SchemaKind.functional:
                out.append(doc.error(path, f"aten op '{op}' writes to its arguments ({f.func.kind().name}): "
                                     "autocast casts only functional ops",
                                     hint="name the functional overload"))
            elif op in first:
                out.append(doc.error(path, f"aten op '{op}' is already in amp.{first[op]}",
                                     hint="an op has one casting policy"))
            else:
                first[op] = key
    return out


# --------------------------------------------------------------------------- model

def _abs_paths(items, base: Path) -> tuple[Path, ...]:
    return tuple(Path(os.path.normpath(base / p)) for p in items)


def _overlay_for(doc: YamlDocument, driver_version: str | None) -> tuple[str, tuple, dict | None]:
    """(version, path of its overlay, overlay) for the build asked for; raises when undeclared."""
    drv = doc.data["driver"]
    versions = drv.get("versions") or {}
    if driver_version is None or driver_version == drv["version"]:
        return drv["version"], ("ops",), None
    if driver_version not in versions:
        declared = ", ".join([drv["version"]] + sorted(versions, key=_version_key))
        line, col = doc.value_loc(("driver", "version"))
        raise SpecErrors([SpecError(doc.file, line, col, "driver.version",
                                    f"driver version '{driver_version}' is not declared (this spec builds: "
                                    f"{declared}); add it under driver.versions")])
    return driver_version, ("driver", "versions", driver_version, "ops"), versions[driver_version] or {}


def _version_key(version: str) -> tuple[int, int]:
    major, _, minor = version.partition(".")
    return int(major), int(minor)


def _build_native(doc: YamlDocument, source: Path, display: str, raw: bytes,
                  driver_version: str | None) -> model.NativeSpec:
    d = doc.data
    if driver_version is not None:
        line, col = doc.value_loc(("chip", "integration"))
        raise SpecErrors([SpecError(doc.file, line, col, "chip.integration",
                                    f"a native chip has no driver versions to build (asked for '{driver_version}')")])
    chip, native = d["chip"], d["native"]
    coll, mon, amp = native["collective"], native.get("monitor"), d.get("amp")
    return model.NativeSpec(
        spec_version=d["spec_version"],
        source=source,
        source_display=display,
        spec_sha256=hashlib.sha256(raw).hexdigest(),
        chip=model.Chip(name=chip["name"], vendor=chip["vendor"], integration="native",
                        description=chip.get("description", "")),
        device_type=native["device_type"],
        torch_build=native["torch_build"],
        dtypes=tuple(d["dtypes"]),
        collective=model.Collective(backend=coll["backend"], library=coll["library"],
                                    init_method=coll.get("init_method", "tcp"),
                                    unsupported_options=tuple(coll.get("unsupported_options", ()))),
        monitor=model.Monitor(command=tuple(mon["command"]), parser=mon["parser"],
                              visible_devices_env=mon.get("visible_devices_env")) if mon else None,
        amp=model.Amp(dtypes=tuple(amp["dtypes"]), default=amp["default"]) if amp else None,
    )


def _build(doc: YamlDocument, source: Path, display: str, raw: bytes,
           driver_version: str | None = None) -> model.ChipSpec | model.NativeSpec:
    from . import torch_ops

    d = doc.data
    if d["chip"].get("integration") == "native":
        return _build_native(doc, source, display, raw, driver_version)
    version, overlay_path, overlay = _overlay_for(doc, driver_version)
    base = source.parent
    chip = d["chip"]
    drv = d["driver"]
    hooks = drv["hooks"]
    k = d.get("kernels")
    kernels = None
    if k is not None:
        kernels = model.Kernels(
            namespace=k["namespace"],
            headers=tuple(k["headers"]),
            include_dirs=_abs_paths(k.get("include_dirs", []), base),
            libraries=tuple(k.get("libraries", [])),
            library_dirs=_abs_paths(k.get("library_dirs", []), base),
            sources=_abs_paths(k.get("sources", []), base),
            toolkit=k.get("toolkit", "none"),
        )
    # op -> (entry, where it is written): the spec's ops, then the driver overlay's.
    entries = {name: (entry, ("ops", name)) for name, entry in (d.get("ops") or {}).items()}
    for name, entry in ((overlay or {}).get("ops") or {}).items():
        if entry is None:
            entries.pop(name, None)
        else:
            entries[name] = (entry, overlay_path + (name,))
    ops = []
    for name, (entry, where) in entries.items():
        ops.append(model.OpEntry(
            name=name,
            kernel=entry.get("kernel"),
            fallback=tuple(entry.get("fallback", ())),
            require_vendor=entry.get("require") == "vendor",
            signature=torch_ops.signature(name),
            line=doc.key_loc(where)[0],
        ))
    fb = d.get("fallback") or {}
    amp = d.get("amp")
    dist = d.get("distributed")
    return model.ChipSpec(
        spec_version=d["spec_version"],
        source=source,
        source_display=display,
        spec_sha256=hashlib.sha256(raw).hexdigest(),
        chip=model.Chip(
            name=chip["name"],
            vendor=chip["vendor"],
            integration=chip.get("integration", "privateuse1"),
            description=chip.get("description", ""),
            capability=tuple(int(part) for part in chip.get("capability", "0.0").split(".")),
        ),
        driver=model.Driver(
            libraries=tuple(drv["libraries"]),
            search_paths=_abs_paths(drv.get("search_paths", []), base),
            home_env=drv.get("home_env"),
            version=version,
            versions=tuple([drv["version"]] + sorted(drv.get("versions") or {}, key=_version_key)),
            version_encoding=drv.get("version_encoding", "cuda"),
            status=model.DriverStatus(**{f: drv["status"][f] for f in (
                "success", "not_ready", "out_of_memory", "launch_failure", "device_lost", "timeout")
                if f in drv["status"]}),
            memcpy_kinds=model.MemcpyKinds(**{f: drv["memcpy_kinds"][f] for f in (
                "host_to_host", "host_to_device", "device_to_host", "device_to_device")}),
            hooks=tuple((h, hooks[h]) for h in model.REQUIRED_HOOKS),
        ),
        kernels=kernels,
        dtypes=tuple((overlay or {}).get("dtypes") or d["dtypes"]),
        ops=tuple(ops),
        fallback=model.FallbackPolicy(default=tuple(fb.get("default", ("cpu",))), warn=fb.get("warn", "once"),
                                      triton=fb.get("triton", "compile")),
        amp=_amp(amp) if amp is not None else None,
        distributed=model.Distributed(
            backend=dist["backend"],
            replaces=tuple(dist.get("replaces", ())),
            unsupported_options=tuple(dist.get("unsupported_options", ())),
            init_method=dist.get("init_method", "tcp"),
            staging=dist.get("staging", "gloo"),
        ) if dist is not None else None,
        triton_catalog=triton_catalog.load(),
    )


def _amp(amp: dict) -> model.Amp:
    """The amp section, each op list defaulting to PyTorch's CUDA list of the installed torch."""
    from . import amp_lists

    defaults = {"lower_precision_ops": amp_lists.default_lower_precision_ops,
                "fp32_ops": amp_lists.default_fp32_ops, "promote_ops": amp_lists.default_promote_ops}
    named = {op for key in AMP_OP_LISTS for op in amp.get(key, ())}
    # An op the spec names in one list leaves the defaulted ones: one policy per op.
    lists = {key: tuple(amp[key]) if key in amp else tuple(op for op in defaults[key]() if op not in named)
             for key in AMP_OP_LISTS}
    return model.Amp(dtypes=tuple(amp["dtypes"]), default=amp["default"], **lists)


def _internal(display: str, stage: str, e: Exception) -> SpecErrors:
    return SpecErrors([SpecError(display, 1, 1, "", f"internal error while {stage}: {type(e).__name__}: {e}",
                                 hint="this is a torchfl-gen bug; please report it with the spec")])


def parse_spec_bytes(raw: bytes, source: str | Path, display: str | None = None,
                     driver_version: str | None = None) -> model.ChipSpec:
    """Validate spec bytes as if read from ``source``; raises SpecErrors.

    ``driver_version``: build the spec for this driver version (its `driver.versions`
    overlay applied); default `driver.version`."""
    source = Path(os.path.normpath(Path(source).absolute()))
    shown = display if display is not None else str(source)
    try:
        doc = load_yaml_bytes(raw, shown)
    except SpecErrors:
        raise
    except Exception as e:   # never a traceback for bad input
        raise _internal(shown, "reading YAML", e) from e
    if not isinstance(doc.data, dict):
        line, col = doc.value_loc(())
        raise SpecErrors([SpecError(shown, line, col, "", "a spec must be a YAML mapping, got "
                                    + _describe(doc.data))])
    errors: list[SpecError] = []
    try:
        errors += _schema_errors(doc)
    except Exception as e:
        errors += _internal(shown, "validating against the schema", e).errors
    try:
        errors += _semantic_errors(doc, source.parent)
    except Exception as e:
        errors += _internal(shown, "checking the spec", e).errors
    if errors:
        raise SpecErrors(errors)
    try:
        return _build(doc, source, shown, raw, driver_version)
    except SpecErrors:
        raise
    except Exception as e:
        raise _internal(shown, "building the spec model", e) from e


def load_spec(path: str | Path, display: str | None = None, driver_version: str | None = None) -> model.ChipSpec:
    """Load and validate the chip spec at ``path``.

    ``display`` is how the file is named in messages (default: ``path`` as given).
    Raises `SpecErrors` with every problem found, ordered by position.
    """
    shown = display if display is not None else str(path)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError as e:
        raise SpecErrors([SpecError(shown, 1, 1, "", f"cannot read spec: {e.strerror or e}")]) from None
    return parse_spec_bytes(raw, path, shown, driver_version)


__all__ = ["load_spec", "parse_spec_bytes", "load_schema", "is_builtin_device_type",
           "BUILTIN_DEVICE_TYPES", "format_path", "SpecError", "SpecErrors"]
