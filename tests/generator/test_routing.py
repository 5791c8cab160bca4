"""One routing decision: the model decides each op's route (ChipSpec.route); the generated
table (spec.py's ROUTES), the runtime's reader (torch_fl.routes), `matrix` and the backend's
registrations must all agree with it, for every op of every spec. And the generator imports no
part of the runtime: what it needs (the Triton op catalog, the C++ sources) it reads as files.
"""
from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from torch_fl import routes
from torch_fl import triton_ops
from torchfl_gen import triton_catalog
from torchfl_gen.matrix import declared_path
from torchfl_gen.model import ChipSpec
from torchfl_gen.spec import load_spec

from e2e_helpers import ROOT, last_json_line, run_python

GENERATOR = ROOT / "generator"


def _builds():
    """(spec path, driver version or None, generated folder) of every privateuse1 package."""
    out = []
    for path in sorted((ROOT / "specs").glob("*.yaml")):
        spec = load_spec(path)
        if not isinstance(spec, ChipSpec):
            continue
        for version in spec.driver.versions or (spec.driver.version,):
            folder = spec.chip.name if version == spec.driver.default_version else f"{spec.chip.name}-driver{version}"
            out.append(pytest.param(path, version, folder, id=folder))
    return out


def _generated_spec_module(folder: str, package: str):
    """The committed generated spec.py, loaded as a plain module (no backend import)."""
    path = ROOT / "generated" / folder / package / "spec.py"
    module_spec = importlib.util.spec_from_file_location(f"_routing_{folder.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def _aten_op_names() -> set[str]:
    names = set()
    for qualified in torch._C._dispatch_get_all_op_names():
        if qualified.startswith("aten::"):
            names.add(qualified[len("aten::"):])
    return names


@pytest.mark.parametrize("spec_path,version,folder", _builds())
def test_every_place_routes_every_op_alike(spec_path, version, folder):
    spec = load_spec(spec_path, driver_version=version)
    table = _generated_spec_module(folder, spec.chip.package)
    ops = _aten_op_names() | set(triton_ops.SUPPORTED_OPS) | {op.name for op in spec.ops}
    disagree = []
    for op in sorted(ops):
        decided = spec.route(op)
        read = routes.route(table, op)
        if (read.kernel, read.chain, read.path) != (decided.kernel, decided.chain, decided.path) \
                or declared_path(spec, op) != read.path:
            disagree.append(f"{op}: model {decided}, table {read}, matrix {declared_path(spec, op)}")
        if decided.triton and decided.kernel is None and op not in routes.triton_ops(table):
            disagree.append(f"{op}: the model gives it to Triton, the router would not")
    assert not disagree, "\n".join(disagree[:20])


def test_the_catalog_the_generator_reads_is_the_runtimes():
    catalog = triton_catalog.load()
    assert catalog.ops == frozenset(triton_ops.SUPPORTED_OPS)
    assert catalog.compiled_only == triton_ops.COMPILED_ONLY
    assert len(catalog.ops) > 800


def test_catalog_errors_name_the_file():
    with pytest.raises(triton_catalog.CatalogError, match="x.yaml: 'compiled_only'"):
        triton_catalog.parse("families: {core: [a]}\ncompiled_only: [foreach]\n", "x.yaml")
    with pytest.raises(triton_catalog.CatalogError, match="x.yaml: 'families'"):
        triton_catalog.parse("families: [a]\n", "x.yaml")


def _runtime_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
        found += [f"{path.name}:{node.lineno}: {n}" for n in names if n.split(".")[0] == "torch_fl"]
    return found


def test_generator_source_imports_no_runtime_module():
    offenders = [hit for path in sorted(GENERATOR.rglob("*.py")) for hit in _runtime_imports(path)]
    assert not offenders, offenders


def test_generating_every_spec_loads_no_runtime_module(tmp_path):
    code = f"""
import json, sys
from pathlib import Path
import torchfl_gen.cli, torchfl_gen.build, torchfl_gen.matrix, torchfl_gen.coverage, torchfl_gen.docs_gen
from torchfl_gen.spec import load_spec
from torchfl_gen.render import render
for path in sorted(Path("specs").glob("*.yaml")):
    render(load_spec(path), Path({str(tmp_path)!r}) / path.stem)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "torch_fl")))
"""
    # Autoload off: `import torch` (the generator reads op schemas from it) would otherwise load
    # the installed backends, which are runtime.
    proc = run_python(code, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout[-2000:]


def test_the_npu_backend_registers_what_its_table_says():
    """The built backend's dispatcher: a kernel at PrivateUse1 for every vendor op and every op
    the table gives to Triton (Triton runs interpreted here). `copy_`'s vendor kernel is the
    exception by design: the runtime's _copy_from calls it (same-device copies)."""
    proc = run_python("""
import json, torch, torch_fl_npu
from torch_fl import routes
table = torch_fl_npu.spec
missing = [op for op, entry in table.ROUTES.items() if entry[4] in ("vendor", "triton") and op != "copy_"
           and not torch._C._dispatch_has_kernel_for_dispatch_key("aten::" + op, "PrivateUse1")]
print(json.dumps({"missing": missing, "served": sum(1 for e in table.ROUTES.values() if e[4] != "cpu")}))
""", env={"TRITON_INTERPRET": "1"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = last_json_line(proc.stdout)
    assert result["served"] > 700
    assert result["missing"] == []
