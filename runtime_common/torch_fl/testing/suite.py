"""The pytest setup of every generated chip suite, written once.

A chip's tests/conftest.py calls `configure(...)` with its spec module, then star-imports this
module's hooks and fixtures. The chip must be there (no silent skips); test_opinfo.py (the
OpInfo sweep, torch_fl.testing.opinfo) is collected only when asked and writes its results as
JSON Lines; every run appends a record for `torchfl-gen compat`.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
import torch
from torch_fl import env

__all__ = [
    "chip_available", "fallback_stats", "opinfo_record", "pytest_collection_modifyitems", "pytest_configure",
    "pytest_ignore_collect", "pytest_itemcollected", "pytest_runtest_makereport", "pytest_runtest_setup",
    "pytest_sessionfinish", "pytest_terminal_summary",
]


@dataclass(frozen=True)
class ChipSuite:
    """A chip suite's facts: its spec module and the dtypes the generator chose for it
    (generator/render.py, SuiteDtypes)."""
    spec: ModuleType                    # the generated package's spec.py
    tests_dir: Path                     # the suite's folder
    build_command: str                  # what installs the backend, for the error when it is missing
    float_dtype: str = "float32"        # the dtype tests compute in: float32, else the chip's first float
    byte_dtype: str = "uint8"           # a one-byte dtype of the chip (else float_dtype)
    convert_dtype: str | None = None    # a second dtype for converting copies (None: the chip has one)
    atol: float = 1e-5                  # the autograd checks' tolerance in float_dtype
    set_default_dtype: bool = False     # no float32 on the chip: torch's default becomes float_dtype

    def package(self) -> ModuleType:
        return importlib.import_module(self.spec.__name__.rpartition(".")[0])

    def backend(self) -> ModuleType:
        """The chip's C++ extension (`<package>._C`)."""
        return importlib.import_module(self.spec.__name__.rpartition(".")[0] + "._C")


_configured: ChipSuite | None = None


def configure(spec: ModuleType, tests_dir: Path, build_command: str, **dtypes) -> None:
    """Called by the chip's conftest.py before anything else of its suite is imported; `dtypes`
    are ChipSuite's dtype fields."""
    global _configured
    _configured = ChipSuite(spec, Path(tests_dir), build_command, **dtypes)


def chip() -> ChipSuite:
    if _configured is None:
        raise RuntimeError("torch_fl.testing.suite is not configured: a chip suite's conftest.py calls configure()")
    return _configured


def pytest_configure(config):
    config.addinivalue_line("markers", "vendor_op(name): checks the vendor kernel of one aten op")
    if not hasattr(torch, chip().spec.CHIP):
        # Autoload is off, or left the chip out beside a native accelerator (torch_fl.coexistence):
        # the suite asks for its chip, as a script would.
        chip().package()._register()
    if chip().set_default_dtype:
        # The chip has no float32: tensors made without a dtype must be of its float to live on it.
        torch.set_default_dtype(getattr(torch, chip().float_dtype))


@pytest.fixture(scope="session", autouse=True)
def chip_available():
    name = chip().spec.CHIP
    module = getattr(torch, name, None)
    assert module is not None, f"the {name} backend is not installed ({chip().build_command})"
    assert module.is_available(), f"no {name} device: {chip().package().load_error()}"
    module.init()


@pytest.fixture
def fallback_stats():
    """Per-test op -> path -> calls."""
    _C = chip().backend()
    _C.reset_fallback_stats()
    return _C.fallback_stats


# -- the OpInfo sweep (test_opinfo.py): collected only when asked, results as JSON Lines --------

OPINFO_FILE = "test_opinfo.py"


def _opinfo_named(config):
    """Whether the command line names test_opinfo.py (or one of its tests) explicitly."""
    import os
    from pathlib import Path

    here = (chip().tests_dir / OPINFO_FILE).resolve()
    for arg in config.args:
        path = Path(str(arg).split("::")[0])
        if not path.is_absolute():
            path = Path(config.invocation_params.dir) / path
        if path.resolve() == here:
            return True
    return False


def pytest_ignore_collect(collection_path, config):
    """test_opinfo.py sweeps all of op_db: only with TORCH_FL_OPINFO=full|sample or when named."""
    import os

    if collection_path.name != OPINFO_FILE:
        return None
    wanted = env.get("OPINFO", "").strip().lower()
    if wanted in ("full", "sample"):
        return None
    if wanted in ("", ) and _opinfo_named(config):
        return None
    return True


def _opinfo_results_path():
    import os
    from pathlib import Path

    return Path(env.get("OPINFO_RESULTS") or Path(".torchfl") / f"opinfo-{chip().spec.CHIP}.jsonl")


@pytest.fixture
def opinfo_record(request):
    """What test_opinfo records for one test; conftest writes it with the outcome."""
    record = {"op": None, "variant": "", "dtype": None, "outcome": None, "message": "", "paths": {}, "samples": 0}
    request.node._opinfo_record = record
    return record


def _short(excinfo):
    text = str(excinfo.value).strip().splitlines()
    first = next((line for line in text if line.strip()), "")
    return f"{excinfo.type.__name__}: {first}"[:300]


def _marker_path():
    path = _opinfo_results_path()
    return path.with_name(path.name + ".running")


def _recorded_line(record, recorded):
    return {"chip": chip().spec.CHIP, "recorded": recorded, "torch": torch.__version__,
            **record, "paths": {op: dict(sorted(p.items())) for op, p in sorted(record["paths"].items())}}


def _opinfo_state(config):
    """The open results file: truncated, or with TORCH_FL_OPINFO_RESUME=1 appended to."""
    import datetime
    import os

    state = config.stash.get(_OPINFO_KEY, None)
    if state is None:
        path = _opinfo_results_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        recorded = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
        resume = env.get("OPINFO_RESUME") == "1" and path.is_file()
        if resume:
            recorded = config.stash.get(_RESUME_KEY, {}).get("recorded") or recorded
        state = {"file": path.open("a" if resume else "w", encoding="utf-8"), "path": path, "recorded": recorded}
        config.stash[_OPINFO_KEY] = state
    return state


def _write_opinfo(config, record):
    import json

    state = _opinfo_state(config)
    state["file"].write(json.dumps(_recorded_line(record, state["recorded"]), sort_keys=True) + "\n")
    state["file"].flush()
    _marker_path().unlink(missing_ok=True)


def pytest_collection_modifyitems(session, config, items):
    """TORCH_FL_OPINFO_RESUME=1: continue a sweep whose process died (a crash in one op): tests
    already in the results file are deselected, and the one that was running when the process
    died is recorded as outcome "crash"."""
    import json
    import os

    if env.get("OPINFO_RESUME") != "1" or not _opinfo_results_path().is_file():
        return
    done, recorded = set(), None
    for line in _opinfo_results_path().read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            done.add((r["op"], r.get("variant") or "", r["dtype"]))
            recorded = recorded or r.get("recorded")
    config.stash[_RESUME_KEY] = {"recorded": recorded}
    marker = _marker_path()
    if marker.is_file():
        crashed = json.loads(marker.read_text(encoding="utf-8"))
        key = (crashed["op"], crashed["variant"], crashed["dtype"])
        if key not in done:
            _write_opinfo(config, {"op": key[0], "variant": key[1], "dtype": key[2], "outcome": "crash",
                                   "message": "the test process died in this test (e.g. a segfault)",
                                   "paths": {}, "samples": 0})
            done.add(key)
    keep, drop = [], []
    for item in items:
        key = getattr(item, "_opinfo_key", None)
        (drop if key is not None and key in done else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_itemcollected(item):
    callspec = getattr(item, "callspec", None)
    if item.path.name == OPINFO_FILE and callspec is not None and "info" in callspec.params:
        info = callspec.params["info"]
        item._opinfo_key = (info.name, info.variant_test_name, callspec.params["dtype_name"])


def pytest_runtest_setup(item):
    """Note the running test, so that a sweep can resume past a crash (TORCH_FL_OPINFO_RESUME=1)."""
    import json

    key = getattr(item, "_opinfo_key", None)
    if key is not None:
        _opinfo_state(item.config)
        _marker_path().write_text(json.dumps({"op": key[0], "variant": key[1], "dtype": key[2]}), encoding="utf-8")


_OPINFO_KEY = pytest.StashKey()
_RESUME_KEY = pytest.StashKey()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    record = getattr(item, "_opinfo_record", None)
    if record is None or record.get("_written"):
        return
    if call.when == "setup" and report.passed:
        return
    if call.when == "teardown" and report.passed:
        return
    if report.passed:
        record["outcome"] = record["outcome"] or "pass"
    elif report.skipped:
        record["outcome"], record["message"] = "skipped", str(report.longrepr)[:300]
    else:
        is_assert = call.excinfo is not None and call.excinfo.errisinstance(AssertionError)
        record["outcome"] = "fail" if is_assert else "error"
        record["message"] = _short(call.excinfo) if call.excinfo is not None else "failed"
    record["_written"] = True
    _write_opinfo(item.config, {k: v for k, v in record.items() if not k.startswith("_")})


def pytest_terminal_summary(terminalreporter, config):
    state = config.stash.get(_OPINFO_KEY, None)
    if state is not None:
        state["file"].close()
        terminalreporter.write_line(f"OpInfo results: {state['path']} (torchfl-gen matrix {chip().spec.SPEC_SOURCE})")


# -- a record of this run for the driver x torch compatibility matrix (torchfl-gen compat) ----

def pytest_sessionfinish(session, exitstatus):
    """Appends {chip, driver, torch, machine, passed, failed} to .torchfl/suite-<chip>.jsonl."""
    import datetime
    import json
    import platform
    from pathlib import Path

    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    here = chip().tests_dir.resolve()  # count this suite's tests only, not others of the session

    def ours(report) -> bool:
        nodeid = getattr(report, "nodeid", "")
        return bool(nodeid) and (session.config.rootpath / nodeid.split("::")[0]).resolve().is_relative_to(here)

    counts = {key: sum(1 for r in reporter.stats.get(key, []) if ours(r))
              for key in ("passed", "failed", "error", "skipped")}
    if not counts["passed"] + counts["failed"] + counts["error"]:
        return
    try:
        spec = chip().spec
        machine = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"{platform.machine()} CPU host"
        record = {"kind": "suite", "chip": spec.CHIP, "driver": spec.DRIVER_VERSION, "torch": torch.__version__,
                  "python": platform.python_version(), "machine": machine, "passed": counts["passed"],
                  "failed": counts["failed"], "errors": counts["error"], "skipped": counts["skipped"],
                  "selection": " ".join(str(a) for a in session.config.args),
                  "date": datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()}
        path = Path(".torchfl") / f"suite-{spec.CHIP}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, sort_keys=True) + "\n")
    except Exception as error:  # noqa: BLE001 - a record must never fail the suite
        print(f"note: could not record this run for torchfl-gen compat: {error}")
