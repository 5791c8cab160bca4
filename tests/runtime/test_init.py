"""torch_fl.init(): discovery through entry points, the probe of each backend, DEBUG log."""
from __future__ import annotations

import torch

from e2e_helpers import last_json_line, run_python

PROBE = """
    import json, logging, torch, torch_fl
    logging.basicConfig(level=logging.DEBUG, format="%(name)s %(message)s")
    info = torch_fl.init()
    npu = info["npu"]
    native = {name: [entry.kind, entry.available, entry.error] for name, entry in info.items() if name != "npu"}
    print(json.dumps({"names": sorted(info), "native": native, "kind": npu.kind, "available": npu.available,
                      "count": npu.device_count, "built": npu.driver_version, "runtime": npu.runtime_version,
                      "libraries": list(npu.libraries), "error": npu.error}))
"""


def test_init_probes_the_driver_and_logs_each_step(native_packages):
    proc = run_python(PROBE, env={"SIMNPU_DEVICE_COUNT": "3"})
    assert proc.returncode == 0, proc.stderr
    info = last_json_line(proc.stdout)
    # The native chips' packages are installed (the fixture); on a CPU torch they are listed, unavailable.
    assert native_packages == ["cuda", "hip"] and info["names"] == ["cuda", "hip", "npu"]
    cpu_build = f"this torch ({torch.__version__}) is a CPU build"
    assert info["native"] == {name: ["native", False, f"needs a {name} build of torch; {cpu_build}"]
                              for name in ("cuda", "hip")}
    assert info["kind"] == "generated" and info["available"] and info["count"] == 3
    assert info["built"] == info["runtime"] == "2.1"
    assert [path.rsplit("/", 1)[-1] for path in info["libraries"]] == ["libsimnpu_runtime.so"]
    log = [line for line in proc.stderr.splitlines() if line.startswith("torch_fl ")]
    expected = ["entry points torch_fl.backends: ['npu']", "found backend npu -> torch_fl_npu",
                "torch_fl_npu registered as torch.npu", f"npu driver loaded from {info['libraries'][0]}, version 2.1 "
                "(built for 2.1)", "npu driver: loaded; 3 device(s)", "other torch.backends entry points: none",
                f"native cuda unavailable: needs a cuda build of torch; {cpu_build}",
                f"native hip unavailable: needs a hip build of torch; {cpu_build}", "autograd device check installed (custom Function backwards)"]
    assert [line.removeprefix("torch_fl torch_fl: ") for line in log] == expected


def test_init_reports_a_mismatched_driver_without_raising():
    proc = run_python(PROBE, env={"SIMNPU_DRIVER_VERSION_OVERRIDE": "2.0"})
    assert proc.returncode == 0, proc.stderr
    info = last_json_line(proc.stdout)
    assert not info["available"] and info["count"] == 0 and info["runtime"] is None
    assert info["error"].startswith("driver version mismatch") and "reports version 2.0" in info["error"]
    assert "npu driver: driver version mismatch" in proc.stderr


def test_a_failed_registration_is_reported_with_its_first_cause():
    # Triton's interpreter needs numpy: without it the `triton` step cannot be set up at import.
    # The backend must then say so every time it is asked, not "already registered".
    proc = run_python("""
        import sys
        sys.modules["numpy"] = None      # as on a machine without numpy
        import json, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import torch
        import torch_fl
        info = torch_fl.init()["npu"]
        print(json.dumps({"available": info.available, "error": info.error,
                          "warned": [str(w.message) for w in caught if "could not be loaded" in str(w.message)]}))
    """)
    assert proc.returncode == 0, proc.stderr
    data = last_json_line(proc.stdout)
    assert not data["available"]
    assert "numpy" in data["warned"][0]
    assert "failed earlier in this process" in data["error"] and "numpy" in data["error"], data["error"]
