"""Composite chip specs (`chip.integration: composite`, docs/multichip.md): loading specs/hybrid.yaml,
what the model derives from the members, and every refusal, located.

Composite texts are parsed as if they were files in specs/ (their members are the real specs
there); nothing is written into the repository.
"""
from __future__ import annotations

import pytest

from torchfl_gen.errors import SpecErrors
from torchfl_gen.model import ChipSpec, CompositeSpec
from torchfl_gen.spec import load_spec, parse_spec_bytes
from spec_helpers import ROOT

HEAD = """spec_version: 1
chip:
  name: duo
  vendor: torch_fl
  integration: composite
"""


def _parse(text: str) -> CompositeSpec:
    return parse_spec_bytes(text.encode(), ROOT / "specs" / "duo.yaml", "specs/duo.yaml")


def _errors(text: str) -> list[str]:
    with pytest.raises(SpecErrors) as caught:
        _parse(text)
    return [str(e) for e in caught.value.errors]


def test_hybrid_joins_two_vendors_chips():
    spec = load_spec(ROOT / "specs" / "hybrid.yaml", "specs/hybrid.yaml")
    assert isinstance(spec, CompositeSpec) and all(isinstance(m, ChipSpec) for m in spec.members)
    assert [m.chip.name for m in spec.members] == ["npu", "vpu"]
    assert [m.kernels.namespace for m in spec.members] == ["simnpu::ops", "simvpu::ops"]
    assert "float64" in spec.dtypes and "float64" not in spec.members[1].dtypes  # each chip keeps its own
    assert (spec.amp.dtypes, spec.amp.default) == (("float16",), "float16")  # what both autocast to
    assert spec.triton_mode == "interpret" and spec.compile.inductor == "none"


def test_a_composite_says_nothing_its_members_say():
    lines = _errors(HEAD + "composite:\n  members: [npu.yaml, vpu.yaml]\ndtypes: [float32]\n")
    assert lines == ["specs/duo.yaml:8:1: dtypes: 'dtypes' does not apply to a composite chip: each member's own "
                     "spec says it"]


def test_composite_section_belongs_to_composites():
    text = (ROOT / "specs" / "vpu.yaml").read_text() + "composite:\n  members: [npu.yaml, edge.yaml]\n"
    with pytest.raises(SpecErrors) as caught:
        parse_spec_bytes(text.encode(), ROOT / "specs" / "vpu2.yaml", "specs/vpu2.yaml")
    assert any("'composite' applies only to chip.integration: composite" in str(e) for e in caught.value.errors)


def test_members_are_needed_and_at_least_two():
    assert any("composite" in line and "required" in line for line in _errors(HEAD))
    assert any("members" in line for line in _errors(HEAD + "composite:\n  members: [npu.yaml]\n"))


def test_a_missing_member_is_named_at_its_entry():
    assert _errors(HEAD + "composite:\n  members: [npu.yaml, tpu.yaml]\n") == [
        f"specs/duo.yaml:7:23: composite.members[1]: member spec 'tpu.yaml' does not exist "
        f"({ROOT / 'specs' / 'tpu.yaml'})"]


def test_a_member_outside_the_project_is_refused():
    lines = _errors(HEAD + "composite:\n  members: [npu.yaml, ../../elsewhere/chip.yaml]\n")
    assert any("composite.members[1]: path '../../elsewhere/chip.yaml' must stay inside" in line for line in lines)


def test_a_member_s_errors_are_reported_in_its_own_file():
    member = "../runtime_common/torch_fl/triton_ops/ops.yaml"  # YAML, but no chip spec
    lines = _errors(HEAD + f"composite:\n  members: [npu.yaml, {member}]\n")
    assert lines[0].startswith("specs/duo.yaml:7:23: composite.members[1]: member spec "
                               f"'{member}' has ") and lines[0].endswith("error(s), listed with its own file name")
    assert all(line.startswith("runtime_common/torch_fl/triton_ops/ops.yaml:") for line in lines[1:]) and lines[1:]


def test_two_chips_of_one_vendor_s_sdk_cannot_share_a_process():
    lines = _errors(HEAD + "composite:\n  members: [npu.yaml, fpgacard.yaml]\n")
    assert lines == ["specs/duo.yaml:7:23: composite.members[1]: members npu and fpgacard share the kernel "
                     "namespace 'simnpu::ops'"]


def test_a_native_member_is_refused():
    lines = _errors(HEAD + "composite:\n  members: [npu.yaml, cuda.yaml]\n")
    assert lines == ["specs/duo.yaml:7:23: composite.members[1]: member 'cuda.yaml' is a native chip; a "
                     "composite's members are privateuse1 chips (their drivers and kernels are what it joins)"]


def test_a_composite_cannot_include_itself_or_another_composite():
    assert _errors(HEAD + "composite:\n  members: [npu.yaml, duo.yaml]\n") == [
        "specs/duo.yaml:7:23: composite.members[1]: member 'duo.yaml' is this composite itself, or includes it"]
    lines = _errors(HEAD + "composite:\n  members: [npu.yaml, hybrid.yaml]\n")
    assert lines == ["specs/duo.yaml:7:23: composite.members[1]: member 'hybrid.yaml' is a composite chip; a "
                     "composite's members are privateuse1 chips (their drivers and kernels are what it joins)"]


def test_a_composite_takes_a_name_of_its_own():
    text = HEAD.replace("name: duo", "name: vpu") + "composite:\n  members: [npu.yaml, vpu.yaml]\n"
    assert any("member vpu has the composite's own name" in line for line in _errors(text))


def test_members_run_triton_one_way():
    lines = _errors(HEAD + "composite:\n  members: [npu.yaml, nvgpu.yaml]\n")
    assert lines == ["specs/duo.yaml:7:12: composite.members: members run the Triton step in different modes "
                     "(npu: interpret, nvgpu: compile); one process runs Triton one way"]


def test_a_composite_has_no_driver_versions_to_build():
    with pytest.raises(SpecErrors) as caught:
        parse_spec_bytes((HEAD + "composite:\n  members: [npu.yaml, vpu.yaml]\n").encode(), ROOT / "specs" / "duo.yaml",
                         "specs/duo.yaml", driver_version="2.0")
    assert "builds its members' default driver versions" in str(caught.value.errors[0])


def test_gpunpu_joins_the_gpu_and_the_npu_without_the_npu_s_triton():
    spec = load_spec(ROOT / "specs" / "gpunpu.yaml", "specs/gpunpu.yaml")
    nvgpu, npu = spec.members
    alone = load_spec(ROOT / "specs" / "npu.yaml", "specs/npu.yaml")
    assert spec.triton_mode == "compile" and spec.compile.inductor == "none"  # the NPU takes no Inductor Triton
    assert npu.fallback.default == ("cpu",) and alone.fallback.default == ("triton", "cpu")
    assert all(not route.triton and "triton" not in route.chain for route in npu.routes)
    assert npu.route("mm").chain == ("cpu",) and alone.route("mm").chain == ("triton", "cpu")
    assert npu.route("mm").kernel == alone.route("mm").kernel == "mm"   # its vendor kernels stay
    assert any(route.triton for route in nvgpu.routes)


def test_a_member_s_triton_step_is_skipped_where_written():
    spec = _parse(HEAD + "composite:\n  members: [nvgpu.yaml, {spec: npu.yaml, triton: skip}]\n")
    assert spec.members[1].fallback.default == ("cpu",)
    lines = _errors(HEAD + "composite:\n  members: [nvgpu.yaml, {spec: npu.yaml, triton: off}]\n")
    assert lines and all(line.startswith("specs/duo.yaml:7:") and "composite.members[1]" in line for line in lines)
    lines = _errors(HEAD + "composite:\n  members: [nvgpu.yaml, {spec: ../../elsewhere/chip.yaml, triton: skip}]\n")
    assert any("composite.members[1].spec: path '../../elsewhere/chip.yaml' must stay inside" in line for line in lines)
