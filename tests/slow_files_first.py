"""The order in which scripts/test.sh's two workers take test files (pytest-xdist, --dist loadfile).

xdist hands out files with the most tests first, so the files of one to three slow tests (a chip
built in a module fixture, a multi-process run) came last, and the run ended on them with the
other worker idle. Here the slowest known file still waiting goes next; the others keep xdist's
order. Seconds per file as measured on the 2-core CI host (`bash scripts/test.sh --durations=0`,
setup and calls summed, 2026-12-07); a file not listed counts as fast.
"""
from __future__ import annotations

import pytest

SLOW_FILES = {
    "tests/e2e/test_chip_shapes.py": 245,
    "tests/runtime/test_collectives.py": 140,
    "tests/e2e/test_e2e_chains.py": 115,
    "tests/e2e/test_real_clients.py": 105,
    "tests/triton_ops/test_triton_linalg_complex.py": 100,
    "tests/e2e/test_e2e_npu.py": 85,
    "tests/triton_ops/test_triton_linalg.py": 77,
    "tests/e2e/test_composite.py": 77,
    "tests/generator/test_spec_hostile.py": 75,
    "generated/npu/tests/test_opinfo.py": 70,
    "tests/triton_ops/test_triton_select.py": 69,
    "tests/runtime/test_exit_drain.py": 68,
    "tests/triton_ops/test_triton_ops.py": 67,
    "tests/triton_ops/test_triton_foreach.py": 66,
    "tests/runtime/test_coverage.py": 59,
    "tests/runtime/test_device_ordering.py": 57,
    "tests/triton_ops/test_triton_nn.py": 57,
    "tests/runtime/test_faults.py": 56,
    "tests/e2e/test_driver_versions.py": 55,
    "generated/npu/tests/test_vendor_ops.py": 50,
    "generated/npu/tests/test_compile.py": 49,
    "tests/runtime/test_concurrency.py": 47,
    "tests/generator/test_generate.py": 47,
    "tests/e2e/test_bench.py": 46,
    "tests/triton_ops/test_triton_index.py": 38,
    "tests/e2e/test_hip_pu1.py": 37,
    "tests/generator/test_spec_fuzz.py": 35,
    "tests/runtime/test_doctor.py": 34,
    "tests/runtime/test_random_on_chip.py": 33,
    "tests/runtime/test_distributed.py": 29,
}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None  # xdist's own scheduler
    from xdist.scheduler import LoadFileScheduling

    class SlowFilesFirst(LoadFileScheduling):
        def _assign_work_unit(self, node):
            slowest = max(self.workqueue, key=lambda scope: SLOW_FILES.get(scope, 0))
            self.workqueue.move_to_end(slowest, last=False)
            super()._assign_work_unit(node)

    return SlowFilesFirst(config, log)
