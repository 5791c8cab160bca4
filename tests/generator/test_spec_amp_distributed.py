"""The spec's amp op lists and distributed section: defaults, the model, located errors.

Bad specs are text edits of specs/npu.yaml; error positions are computed from the
edited text, so the assertions pin line *and* column of the offending item.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from torchfl_gen import amp_lists
from torchfl_gen.render import render
from torchfl_gen.spec import load_spec
from spec_helpers import NPU, NPU_TEXT, edit, errors_of, write

F = "specs/npu.yaml"
AMP_HEAD = "amp:\n  dtypes: [float16, bfloat16]\n  default: float16\n"


def _at(text: str, needle: str) -> tuple[int, int]:
    """1-based line and column of the only occurrence of `needle`."""
    assert text.count(needle) == 1, needle
    i = text.index(needle)
    return text.count("\n", 0, i) + 1, i - text.rfind("\n", 0, i)


def _with_amp(lines: str) -> str:
    return edit((AMP_HEAD, AMP_HEAD + lines))


def test_amp_lists_default_to_cudas():
    spec = load_spec(NPU)
    header = Path(amp_lists.header_path()).read_text()
    assert "#define AT_FORALL_LOWER_PRECISION_FP(_)" in header
    assert spec.amp.lower_precision_ops == amp_lists.cuda_lists()["lower_precision_fp"]
    assert {"mm", "conv2d", "linear", "conv_transpose2d.input", "_convolution.deprecated"} <= set(
        spec.amp.lower_precision_ops)
    assert {"exp", "pow.Tensor_Scalar", "softmax.int", "sum", "norm.Scalar", "mse_loss"} <= set(spec.amp.fp32_ops)
    assert set(spec.amp.promote_ops) == {"addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "vdot",
                                         "grid_sampler", "index_put", "tensordot", "scatter_add"}
    lists = (spec.amp.lower_precision_ops, spec.amp.fp32_ops, spec.amp.promote_ops)
    assert sum(map(len, lists)) == len(set().union(*lists)), "an op in two lists"


def test_generated_autocast_registration_follows_the_lists(tmp_path):
    spec = load_spec(write(tmp_path, _with_amp("  lower_precision_ops: [mm, conv_transpose2d.input]\n"
                                               "  fp32_ops: [softmax.int, exp]\n")))
    cpp = render(spec, tmp_path / "generated" / "npu")["csrc/autocast.cpp"]
    assert "KERNEL_PRIVATEUSEONE(mm, lower_precision_fp)" in cpp
    assert "KERNEL_PRIVATEUSEONE(conv_transpose2d, input, lower_precision_fp)" in cpp
    assert "KERNEL_PRIVATEUSEONE(softmax, int, fp32_set_opt_dtype)" in cpp   # CUDA's policy for softmax
    assert "KERNEL_PRIVATEUSEONE(exp, fp32)" in cpp
    assert "KERNEL_PRIVATEUSEONE(addmm," not in cpp   # the spec's list replaces CUDA's
    assert "KERNEL_PRIVATEUSEONE(addcmul, promote)" in cpp   # promote_ops not given: CUDA's
    assert spec.amp.fp32_ops == ("softmax.int", "exp")


def test_binary_cross_entropy_ban_unless_the_spec_lists_it(tmp_path):
    ban = 'm.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy")'
    assert ban in render(load_spec(NPU), tmp_path / "generated" / "npu")["csrc/autocast.cpp"]
    spec = load_spec(write(tmp_path, _with_amp("  fp32_ops: [binary_cross_entropy]\n")))
    cpp = render(spec, tmp_path / "generated" / "npu")["csrc/autocast.cpp"]
    assert ban not in cpp and "KERNEL_PRIVATEUSEONE(binary_cross_entropy, fp32)" in cpp


def test_an_op_named_in_one_list_leaves_the_defaulted_others(tmp_path):
    spec = load_spec(write(tmp_path, _with_amp("  fp32_ops: [mm]\n")))
    assert spec.amp.fp32_ops == ("mm",)
    assert "mm" not in spec.amp.lower_precision_ops and "addmm" in spec.amp.lower_precision_ops


def test_unknown_amp_op_is_located(tmp_path):
    text = _with_amp("  lower_precision_ops: [mm, conv2dd]\n")
    line, col = _at(text, "conv2dd")
    assert errors_of(tmp_path, text) == [
        f"{F}:{line}:{col}: amp.lower_precision_ops[1]: unknown aten op 'conv2dd' (did you mean 'conv2d'?)"]


def test_amp_op_that_writes_its_arguments(tmp_path):
    text = _with_amp("  fp32_ops: [exp_]\n")
    line, col = _at(text, "exp_]")
    assert errors_of(tmp_path, text) == [
        f"{F}:{line}:{col}: amp.fp32_ops[0]: aten op 'exp_' writes to its arguments (inplace): "
        "autocast casts only functional ops"]


def test_amp_op_in_two_lists(tmp_path):
    text = _with_amp("  lower_precision_ops: [mm]\n  promote_ops: [cross, mm]\n")
    line, col = _at(text, "cross, mm")
    assert errors_of(tmp_path, text) == [
        f"{F}:{line}:{col + len('cross, ')}: amp.promote_ops[1]: aten op 'mm' is already in amp.lower_precision_ops"]


def test_amp_op_list_must_be_a_list_of_op_names(tmp_path):
    text = _with_amp("  promote_ops: [cross, 'not an op']\n")
    line, col = _at(text, "'not an op'")
    assert errors_of(tmp_path, text) == [
        f"{F}:{line}:{col}: amp.promote_ops[1]: 'not an op' is not an aten op name (name or name.overload)"]


def test_distributed_section_in_the_model():
    d = load_spec(NPU).distributed
    assert (d.backend, d.replaces, d.init_method) == ("npuccl", ("nccl",), "tcp")
    assert "is_high_priority_stream" in d.unsupported_options
    lib = d.library
    assert lib.libraries == ("libsimnpu_ccl.so",) and lib.unique_id_bytes == 128
    assert (lib.status.success, lib.status.in_progress, lib.status.remote_error, lib.status.timeout) == (0, 7, 6, 8)
    assert dict(lib.dtypes)["float32"] == 7 and dict(lib.dtypes)["bfloat16"] == 9
    assert lib.reduce_ops == (("sum", 0), ("prod", 1), ("max", 2), ("min", 3), ("avg", 4))
    assert lib.symbol("all_reduce") == "simcclAllReduce" and lib.symbol("get_last_error") == "simcclGetLastError"


def test_the_collective_library_generates_its_bindings(tmp_path):
    files = render(load_spec(NPU), tmp_path / "generated" / "npu")
    cpp = files["csrc/collectives.cpp"]
    assert "char internal[128];" in cpp                      # the id struct, passed by value
    assert '{"all_reduce", "simcclAllReduce", reinterpret_cast<void**>(&api.all_reduce)},' in cpp
    assert '{"comm_init_rank", "simcclCommInitRank", &comm_init_rank_symbol},' in cpp
    assert "d.dtypes.emplace_back(c10::ScalarType::BFloat16, 9);" in cpp
    assert "DIST_LIBRARY = ('libsimnpu_ccl.so',)" in files["torch_fl_npu/spec.py"]
    assert "DIST_STAGING = ''" in files["torch_fl_npu/spec.py"]
    # a chip without a library: no bindings, gloo staging
    staged = load_spec(write(tmp_path, NPU_TEXT[:NPU_TEXT.index("  library:")] + "  staging: gloo\n"))
    staged_files = render(staged, tmp_path / "generated" / "npu2")
    assert "csrc/collectives.cpp" not in staged_files
    assert "DIST_STAGING = 'gloo'" in staged_files["torch_fl_npu/spec.py"]


def test_the_librarys_environment_and_dtype_table_reach_the_backend(tmp_path):
    """nvgpu's NCCL: NVLink multicast off unless the user set it; the library's dtypes exported."""
    nvgpu = load_spec(Path(NPU).parent / "nvgpu.yaml")
    assert nvgpu.distributed.library.environment == (("NCCL_NVLS_ENABLE", "0"),)
    files = render(nvgpu, tmp_path / "generated" / "nvgpu")
    assert 'd.environment.emplace_back("NCCL_NVLS_ENABLE", "0");' in files["csrc/collectives.cpp"]
    assert ("DIST_LIBRARY_DTYPES = ('int8', 'uint8', 'int32', 'int64', 'float16', 'float32', 'float64', "
            "'bfloat16', 'bool',)") in files["torch_fl_nvgpu/spec.py"]
    assert load_spec(NPU).distributed.library.environment == ()


@pytest.mark.parametrize("variable", ["LD_PRELOAD", "PATH", "PYTHONPATH", "TORCH_FL_NPU_HOME", "CUDA_VISIBLE_DEVICES"])
def test_the_librarys_environment_may_not_steer_the_process(tmp_path, variable):
    text = edit(("    reduce_ops: {sum: 0,", f"    environment: {{{variable}: x}}\n    reduce_ops: {{sum: 0,"))
    line, col = _at(text, f"{variable}: x")
    assert errors_of(tmp_path, text) == [
        f"{F}:{line}:{col}: distributed.library.environment.{variable}: '{variable}' steers the whole process "
        "(the loader, the shell, Python, torch or the driver), not the collective library"]


@pytest.mark.parametrize("entry, field", [("nccl_debug: INFO", "nccl_debug"), ("'A B': x", "A B"),
                                          ('SIMCCL_X: "a\\nb"', "SIMCCL_X")])
def test_the_librarys_environment_names_and_values_are_checked(tmp_path, entry, field):
    text = edit(("    reduce_ops: {sum: 0,", f"    environment: {{{entry}}}\n    reduce_ops: {{sum: 0,"))
    errors = errors_of(tmp_path, text)
    assert len(errors) == 1 and "distributed.library.environment" in errors[0], errors


def test_gloo_staging_beside_a_library_is_refused(tmp_path):
    text = edit(("  init_method: tcp\n  library:", "  init_method: tcp\n  staging: gloo\n  library:"))
    line, col = _at(text, "staging: gloo")
    assert errors_of(tmp_path, text) == [
        f"{F}:{line}:{col + len('staging: ')}: distributed.staging: 'staging' applies to a chip without a "
        "collective library; this spec names one (distributed.library)"]


def test_a_library_without_a_required_hook_is_refused(tmp_path):
    text = edit(("      group_end: simcclGroupEnd\n", ""))
    errors = errors_of(tmp_path, text)
    assert len(errors) == 1 and "distributed.library.hooks: missing required key 'group_end'" in errors[0], errors


def test_distributed_backend_may_not_be_torchs_own(tmp_path):
    text = edit(("  backend: npuccl", "  backend: gloo"))
    line, col = _at(text, "backend: gloo")
    assert errors_of(tmp_path, text) == [
        f"{F}:{line}:{col + len('backend: ')}: distributed.backend: 'gloo' is one of torch.distributed's own backends"]


def test_distributed_unknown_replaced_name_and_init_method(tmp_path):
    text = edit(("  replaces: [nccl]", "  replaces: [ncl]"), ("  init_method: tcp", "  init_method: tcpp"))
    l1, c1 = _at(text, "ncl]")
    l2, c2 = _at(text, "tcpp")
    assert errors_of(tmp_path, text) == [
        f"{F}:{l1}:{c1}: distributed.replaces[0]: invalid value 'ncl' (did you mean 'nccl'? expected one of: "
        "nccl, gloo, mpi, ucc, xccl, hccl)",
        f"{F}:{l2}:{c2}: distributed.init_method: invalid value 'tcpp' (did you mean 'tcp'? expected one of: "
        "tcp, env, file)"]


def test_distributed_needs_a_backend(tmp_path):
    text = edit(("  backend: npuccl\n", ""))
    line, col = _at(text, "distributed:")
    assert errors_of(tmp_path, text) == [f"{F}:{line}:{col}: distributed: missing required key 'backend'"]


def test_spec_without_distributed_generates_no_backend(tmp_path):
    start = NPU_TEXT.index("# The simulated NPU's collective library")
    spec = load_spec(write(tmp_path, NPU_TEXT[:start]))
    assert spec.distributed is None
    text = render(spec, tmp_path / "generated" / "npu")["torch_fl_npu/spec.py"]
    assert "DIST_BACKEND = ''" in text


def _header_with_redispatch_entries(tmp_path, extra: str) -> Path:
    """The installed autocast header with `extra` appended to its redispatch list (as torch 2.11 has)."""
    text = Path(amp_lists.header_path()).read_text()
    marker = "#define AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(_)"
    assert text.count(marker) == 1
    header = tmp_path / "autocast_mode.h"
    header.write_text(text.replace(marker, marker + " \\\n" + extra))
    return header


def test_amp_lists_accept_torch_2_11s_dimname_norm(tmp_path, monkeypatch):
    entry = ('  _(ADD_NS(norm), "norm.names_ScalarOpt_dim", Tensor(const Tensor&, const std::optional<Scalar>&, '
             'DimnameList, bool), Tensor(const Tensor&, const std::optional<Scalar>&, DimnameList, bool, ScalarType), '
             'fp32_append_dtype) \\')
    header = _header_with_redispatch_entries(tmp_path, entry)
    monkeypatch.setattr(amp_lists, "header_path", lambda: str(header))
    amp_lists.cuda_lists.cache_clear()
    try:
        assert "norm.names_ScalarOpt_dim" in amp_lists.default_fp32_ops()
        spec = load_spec(NPU, display=F)
        autocast = render(spec, tmp_path / "pkg")["csrc/autocast.cpp"]
        assert ('at::norm, "norm.names_ScalarOpt_dim", Tensor(const Tensor&, const std::optional<Scalar>&, '
                'at::DimnameList, bool)') in autocast
    finally:
        amp_lists.cuda_lists.cache_clear()


def test_amp_lists_refuse_an_unknown_redispatch_entry(tmp_path, monkeypatch):
    header = _header_with_redispatch_entries(tmp_path, '  _(ADD_NS(frob), "frob.Scalar", T(), T(), fp32_append_dtype) \\')
    monkeypatch.setattr(amp_lists, "header_path", lambda: str(header))
    amp_lists.cuda_lists.cache_clear()
    try:
        with pytest.raises(RuntimeError, match=r"lists \['frob.Scalar'\], which torchfl-gen does not know"):
            amp_lists.cuda_lists()
    finally:
        amp_lists.cuda_lists.cache_clear()
