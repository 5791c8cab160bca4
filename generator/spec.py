"""Load a chip spec: YAML with locations -> JSON Schema -> semantic checks -> frozen model.

`load_spec` either returns a `ChipSpec` or raises `SpecErrors` listing every problem of
the file, each located as ``FILE:LINE:COL: PATH: MESSAGE``. Bad input never produces a
traceback: an unexpected exception while loading still becomes a located error.

This module holds the entry points and builds the model; the schema's messages come from
`schema_errors`, the semantic checks from `checks`, path containment from `paths`.
"""
from __future__ import annotations

import contextvars
import hashlib
import os
from pathlib import Path

from . import defaults, limits, model, triton_catalog
# Looked up at call time under this name, so that a test can make the checks fail.
from .checks import semantic_errors as _semantic_errors
from .checks.amp import AMP_OP_LISTS
from .errors import SpecError, SpecErrors
from .paths import abs_paths
from .schema_errors import describe, schema_errors
from .yaml_loader import YamlDocument, load_yaml_bytes, read_file

# Re-exported: callers import these from here.
from .checks.chip import BUILTIN_DEVICE_TYPES, is_builtin_device_type  # noqa: F401
from .schema_errors import load_schema  # noqa: F401
from .yaml_loader import format_path  # noqa: F401


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


# The composite specs being loaded (their members load inside): a member naming one of them
# would never finish.
_composites_loading: contextvars.ContextVar[frozenset[Path]] = contextvars.ContextVar(
    "torchfl_composites_loading", default=frozenset())


def _build_composite(doc: YamlDocument, source: Path, display: str, raw: bytes,
                     driver_version: str | None) -> model.CompositeSpec:
    """Each member loaded as a spec of its own (its errors reported in its own file, under one
    located at its entry here), then what members of one composite may not share."""
    d = doc.data
    if driver_version is not None:
        raise SpecErrors([doc.error(("chip", "integration"), "a composite chip builds its members' default driver "
                                    f"versions; there is no driver version '{driver_version}' to build")])
    errors: list[SpecError] = []
    members: list[tuple[int, model.ChipSpec]] = []
    loading = _composites_loading.get() | {source}
    for i, entry in enumerate(d["composite"]["members"]):
        where = ("composite", "members", i)
        relative, skip_triton = (entry, False) if isinstance(entry, str) else (entry["spec"], True)
        path = Path(os.path.normpath(source.parent / relative))
        shown = os.path.normpath(os.path.join(os.path.dirname(display), relative))
        if path in loading:
            errors.append(doc.error(where, f"member '{relative}' is this composite itself, or includes it"))
            continue
        if not path.is_file():
            errors.append(doc.error(where, f"member spec '{relative}' does not exist ({path})",
                                    hint="name a chip spec file, relative to this spec's folder"))
            continue
        token = _composites_loading.set(loading)
        try:
            member = load_spec(path, shown)
        except SpecErrors as e:
            errors.append(doc.error(where, f"member spec '{relative}' has {len(e.errors)} error(s), listed "
                                    "with its own file name"))
            errors += e.errors
            continue
        finally:
            _composites_loading.reset(token)
        if not isinstance(member, model.ChipSpec):
            errors.append(doc.error(where, f"member '{relative}' is a {member.chip.integration} chip; a composite's "
                                    "members are privateuse1 chips (their drivers and kernels are what it joins)"))
            continue
        members.append((i, member.without_triton() if skip_triton else member))
    errors += _member_conflicts(doc, d["chip"]["name"], members)
    if errors:
        raise SpecErrors(errors)
    chip = d["chip"]
    digest = hashlib.sha256(raw)
    for _, member in members:
        digest.update(bytes.fromhex(member.spec_sha256))
    return model.CompositeSpec(
        spec_version=d["spec_version"],
        source=source,
        source_display=display,
        spec_sha256=digest.hexdigest(),
        chip=model.Chip(name=chip["name"], vendor=chip["vendor"], integration="composite",
                        description=chip.get("description", "")),
        members=tuple(member for _, member in members),
    )


def _member_conflicts(doc: YamlDocument, name: str, members: list[tuple[int, model.ChipSpec]]) -> list[SpecError]:
    """What two members of one process may not share: a device name, a vendor's symbols (the
    kernel namespace, the driver libraries), the Triton mode."""
    out: list[SpecError] = []
    seen: dict[str, tuple[str, str]] = {}  # what -> (member, how it is shown)

    def claim(i: int, member: model.ChipSpec, key: str, shown: str, why: str) -> None:
        if key in seen:
            other, _ = seen[key]
            out.append(doc.error(("composite", "members", i), f"members {other} and {member.chip.name} {why} {shown}",
                                 hint=WHY_DISTINCT))
        else:
            seen[key] = (member.chip.name, shown)

    for i, member in members:
        if member.chip.name == name:
            out.append(doc.error(("composite", "members", i), f"member {member.chip.name} has the composite's own "
                                 "name; the composite's device type must differ from its members'"))
        claim(i, member, "chip:" + member.chip.name, f"'{member.chip.name}'", "are both named")
        if member.kernels is not None:
            claim(i, member, "namespace:" + member.kernels.namespace, f"'{member.kernels.namespace}'",
                  "share the kernel namespace")
        for library in member.driver.libraries:
            claim(i, member, "library:" + library, f"'{library}'", "share the driver library")
    modes = {(member.chip.name, mode) for _, member in members if (mode := model._triton_mode(member))}
    if len({mode for _, mode in modes}) > 1:
        out.append(doc.error(("composite", "members"), "members run the Triton step in different modes ("
                             + ", ".join(f"{chip}: {mode}" for chip, mode in sorted(modes))
                             + "); one process runs Triton one way",
                             hint="make their fallback.triton agree, or take one member's Triton step out: "
                                  "`{spec: <file>, triton: skip}`"))
    return out


WHY_DISTINCT = ("two chips of one vendor's SDK cannot share a process (their symbols would bind to one "
                "library); a composite joins chips of different vendors")


def _build(doc: YamlDocument, source: Path, display: str, raw: bytes,
           driver_version: str | None = None) -> model.ChipSpec | model.NativeSpec | model.CompositeSpec:
    from . import torch_ops

    d = defaults.filled(doc.data, load_schema())  # the schema's defaults: no literal default below
    if d["chip"]["integration"] == "native":
        return _build_native(doc, source, display, raw, driver_version)
    if d["chip"]["integration"] == "composite":
        return _build_composite(doc, source, display, raw, driver_version)
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
            include_dirs=abs_paths(k.get("include_dirs", []), base),
            libraries=tuple(k.get("libraries", [])),
            library_dirs=abs_paths(k.get("library_dirs", []), base),
            sources=abs_paths(k.get("sources", []), base),
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
            dtypes=tuple(entry["dtypes"]) if "dtypes" in entry else None,
        ))
    fb = d["fallback"]
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
            search_paths=abs_paths(drv.get("search_paths", []), base),
            home_env=drv.get("home_env"),
            version=version,
            versions=tuple([drv["version"]] + sorted(drv.get("versions") or {}, key=_version_key)),
            version_encoding=drv.get("version_encoding", "cuda"),
            shares_memory_with=drv.get("shares_memory_with"),
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
        fallback=model.FallbackPolicy(default=tuple(fb["default"]), warn=fb["warn"], triton=fb["triton"]),
        amp=_amp(amp) if amp is not None else None,
        compile=model.Compile(inductor=d["compile"]["inductor"]),
        distributed=model.Distributed(
            backend=dist["backend"],
            replaces=tuple(dist.get("replaces", ())),
            unsupported_options=tuple(dist.get("unsupported_options", ())),
            init_method=dist["init_method"],
            staging=dist["staging"],
            library=_collective_library(dist["library"]) if "library" in dist else None,
        ) if dist is not None else None,
        triton_catalog=triton_catalog.load(),
    )


def _collective_library(lib: dict) -> model.CollectiveLibrary:
    from .collective_abi import COLLECTIVE_HOOKS, REDUCE_OPS

    return model.CollectiveLibrary(
        libraries=tuple(lib["libraries"]),
        unique_id_bytes=lib["unique_id_bytes"],
        status=model.CollectiveStatus(**{f: lib["status"][f] for f in (
            "success", "in_progress", "remote_error", "timeout") if f in lib["status"]}),
        dtypes=tuple(lib["dtypes"].items()),
        reduce_ops=tuple((op, lib["reduce_ops"][op]) for op in REDUCE_OPS if op in lib["reduce_ops"]),
        hooks=tuple((h, lib["hooks"][h]) for h in COLLECTIVE_HOOKS if h in lib["hooks"]),
        environment=tuple(lib.get("environment", {}).items()),
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
    with limits.validation():
        return _parse(raw, source, shown, driver_version)


def _parse(raw: bytes, source: Path, shown: str, driver_version: str | None) -> model.ChipSpec:
    try:
        doc = load_yaml_bytes(raw, shown)
    except SpecErrors:
        raise
    except Exception as e:   # never a traceback for bad input
        raise _internal(shown, "reading YAML", e) from e
    if not isinstance(doc.data, dict):
        line, col = doc.value_loc(())
        raise SpecErrors([SpecError(shown, line, col, "", "a spec must be a YAML mapping, got "
                                    + describe(doc.data))])
    errors: list[SpecError] = []
    try:
        errors += schema_errors(doc)
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
    return parse_spec_bytes(read_file(path, shown, "spec"), path, shown, driver_version)


__all__ = ["load_spec", "parse_spec_bytes", "load_schema", "is_builtin_device_type",
           "BUILTIN_DEVICE_TYPES", "format_path", "SpecError", "SpecErrors"]
