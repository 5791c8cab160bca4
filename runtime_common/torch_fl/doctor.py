"""The doctor: the troubleshooting list, automated.

    python -m torch_fl doctor [--json] [--backend NAME] [--script train.py [-- ARGS]]
    torchfl-gen doctor ...                                  (the same)
    report = torch_fl.doctor.check_model(model, inputs)     # from Python; print(report.text())

Environment: every installed backend (entry points `torch_fl.backends`; other `torch.backends`
entries and a CUDA/ROCm torch too), whether it loads and why not (the loader's dlerror text),
the loaded driver's version against the one the backend was built for, its devices. Each
generated backend is probed in a fresh interpreter: a process holds one PrivateUse1 backend
only, and a broken driver must not take the doctor down.

Workload (a script, run in this process until its second optimizer step, or one step of a
model): modules whose parameters or buffers are on another device than their inputs (named by
module path), a model whose parameters span devices, the CPU fallbacks counted during one
training step (`torch_fl.fallback_stats()`), `torch.cuda.amp` / autocast("cuda") /
GradScaler("cuda") on a machine whose work runs elsewhere, and `torch.backends.cudnn` settings
that do something other than what they seem to on the chip.
"""
from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import runpy
import subprocess
import sys
import traceback
from dataclasses import asdict, dataclass, field
from importlib import metadata

EXIT_PROBLEMS = 7  # the doctor found at least one error
STATUSES = ("error", "warn", "ok", "info")


@dataclass
class Finding:
    check: str      # "backend", "driver", "version", "devices", "compile", "placement", "fallbacks", "amp", "cudnn", "run"
    status: str     # one of STATUSES
    subject: str    # what it is about: a backend, a module, a setting
    message: str
    hint: str | None = None
    details: dict = field(default_factory=dict)


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    sections: dict[str, list[int]] = field(default_factory=dict)  # section title -> finding indexes

    def add(self, section: str, finding: Finding) -> None:
        self.sections.setdefault(section, []).append(len(self.findings))
        self.findings.append(finding)

    def extend(self, section: str, findings) -> None:
        for finding in findings:
            self.add(section, finding)

    def count(self, status: str) -> int:
        return sum(f.status == status for f in self.findings)

    @property
    def ok(self) -> bool:
        return self.count("error") == 0

    def as_dict(self) -> dict:
        return {"ok": self.ok, "errors": self.count("error"), "warnings": self.count("warn"),
                "sections": {title: [asdict(self.findings[i]) for i in indexes]
                             for title, indexes in self.sections.items()}}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=1)

    def text(self) -> str:
        import torch

        lines = [f"torch_fl doctor: torch {torch.__version__}, Python {platform.python_version()}, "
                 f"{platform.system()} {platform.machine()}"]
        for title, indexes in self.sections.items():
            lines.append(f"\n{title}")
            for finding in (self.findings[i] for i in indexes):
                lines.append(f"  {finding.status:<6} {finding.check:<10} {finding.subject}: {finding.message}")
                if finding.hint:
                    lines.append(f"         {'':<10} -> {finding.hint}")
        lines.append(f"\n{self.count('error')} error(s), {self.count('warn')} warning(s)")
        return "\n".join(lines)


# -- environment ---------------------------------------------------------------------------------

_PROBE = r"""
import json, sys
out = {"registered": False}
try:
    import torch
    import importlib, importlib.util
    module = importlib.import_module(sys.argv[1])
    out["version"] = getattr(module, "__version__", None)
    out["spec"] = module.spec.SPEC_SOURCE
    out["built_driver"] = module.spec.DRIVER_VERSION
    out["driver_libraries"] = list(module.spec.DRIVER_LIBRARIES)
    module._register()
    out["registered"] = True
    out["error"] = module.load_error()
    if out["error"] is None:
        from torch_fl._api import _version_text
        out["libraries"] = list(module._C._driver_libraries())
        out["runtime_driver"] = _version_text(module._C._driver_version(), module.spec.DRIVER_VERSION_SCALES)
        device_module = getattr(torch, module.spec.CHIP)
        out["devices"] = [device_module.get_device_name(i) for i in range(device_module.device_count())]
        out["dist_backend"] = getattr(module.spec, "DIST_BACKEND", "")
        out["inductor"] = getattr(module.spec, "INDUCTOR", "none")
        out["triton_mode"] = module.spec.TRITON_MODE
        out["triton_installed"] = importlib.util.find_spec("triton") is not None
        if getattr(module.spec, "DIST_LIBRARY", ()):
            out["collective_library"] = list(module.spec.DIST_LIBRARY)
            try:
                out["collective_paths"] = list(module._C._collective_library())
            except Exception as exc:
                out["collective_error"] = str(exc)
except BaseException as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
print("TORCH_FL_PROBE " + json.dumps(out))
"""

_MISMATCH = re.compile(r"reports version (\S+), but this backend was built for driver (\S+?);")


def probe_backend(name: str, package: str, timeout: float = 300) -> dict:
    """What a fresh interpreter with only `package` loaded finds out about it."""
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")  # this backend only, no other one first
    proc = subprocess.run([sys.executable, "-c", _PROBE, package], capture_output=True, text=True,
                          timeout=timeout, env=env)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("TORCH_FL_PROBE "):
            return json.loads(line[len("TORCH_FL_PROBE "):])
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"registered": False, "error": f"the probe of {package} died (exit {proc.returncode}): {tail}"}


def _generated_findings(name: str, package: str, probe: dict) -> list[Finding]:
    found = Finding("backend", "ok", name, f"{package} {probe.get('version') or '?'}"
                    + (f" (spec {probe['spec']})" if probe.get("spec") else ""))
    error = probe.get("error")
    if error is None:
        runtime, built = probe["runtime_driver"], probe["built_driver"]
        out = [found, Finding("driver", "ok", name, f"loaded {', '.join(probe['libraries'])}")]
        same = runtime == built
        out.append(Finding("version", "ok" if same else "error", name,
                           f"driver {runtime}, backend built for {built}",
                           details={"driver": runtime, "built_for": built}))
        devices = probe.get("devices", [])
        out.append(Finding("devices", "ok" if devices else "error", name,
                           f"{len(devices)} device(s)" + (f": {'; '.join(devices)}" if devices else ""),
                           None if devices else "the driver loads but reports no device",
                           {"devices": devices}))
        out.extend(_collective_findings(name, probe))
        out.extend(_compile_findings(name, probe))
        return out
    if "version mismatch" in error:
        match = _MISMATCH.search(error)
        runtime, built = match.groups() if match else (None, probe.get("built_driver"))
        return [found, Finding("version", "error", name, f"driver {runtime or '?'}, backend built for {built}",
                               error, {"driver": runtime, "built_for": built, "error": error})]
    if "cannot load driver library" in error or "cannot open shared object file" in error:
        library = ", ".join(probe.get("driver_libraries", [])) or "the driver library"
        return [found, Finding("driver", "error", name, f"{library} does not load: {error}",
                               "install the vendor driver/SDK, or point the spec's home variable at it",
                               {"error": error})]
    if not probe.get("registered"):
        step = "imported" if "version" not in probe else "registered"
        return [Finding("backend", "error", name, f"{package} cannot be {step}: {error}", details={"error": error})]
    return [found, Finding("driver", "error", name, error, details={"error": error})]


def _compile_findings(name: str, probe: dict) -> list[Finding]:
    """What torch.compile's default backend (Inductor) does with the chip's graphs (docs/compile.md)."""
    inductor = probe.get("inductor")
    if inductor is None:   # a backend generated before the compile section
        return []
    if inductor == "none":
        return [Finding("compile", "info", name, "Inductor refuses the chip by name (compile.inductor: none); "
                        "torch.compile(model, backend='aot_eager') runs its graphs with the chip's own kernels")]
    if not probe.get("triton_installed"):
        return [Finding("compile", "warn", name, "Inductor writes Triton kernels for the chip (compile.inductor: "
                        "triton), but Triton is not installed: torch.compile(model) fails",
                        "install triton (torch's CUDA wheels bring it), or compile with backend='aot_eager'")]
    how = ("run by Triton's interpreter on the host (fallback.triton: interpret): right answers, not speed"
           if probe.get("triton_mode") == "interpret" else "compiled by Triton for the chip")
    return [Finding("compile", "ok", name, f"Inductor's Triton kernels, {how}")]


def _collective_findings(name: str, probe: dict) -> list[Finding]:
    """How the chip's torch.distributed backend moves data: its collective library, loaded now,
    or gloo staging on the host."""
    backend = probe.get("dist_backend")
    if not backend:
        return []
    if "collective_library" not in probe:
        return [Finding("collectives", "info", name, f"{backend} stages every collective through gloo on host "
                        "memory (the spec names no distributed.library)")]
    if "collective_error" in probe:
        return [Finding("collectives", "error", name, f"{backend}: {', '.join(probe['collective_library'])} does "
                        f"not load: {probe['collective_error']}",
                        "install the vendor's collective library beside its driver (or on the loader path); "
                        f"until then init_process_group(backend='{backend}') fails",
                        {"error": probe["collective_error"]})]
    return [Finding("collectives", "ok", name, f"{backend} over {', '.join(probe['collective_paths'])}",
                    details={"libraries": probe["collective_paths"]})]


def check_environment(only: str | None = None) -> list[Finding]:
    import torch

    findings = []
    generated = sorted(metadata.entry_points(group="torch_fl.backends"), key=lambda e: e.name)
    names = {e.name for e in generated}
    native = sorted(metadata.entry_points(group="torch_fl.native"), key=lambda e: e.name)
    native_names = {e.name for e in native}
    if only is not None and only not in names | native_names:
        return [Finding("backend", "error", only, f"no installed backend named '{only}'",
                        f"installed: {sorted(names | native_names) or 'none'}; build one with torchfl-gen build SPEC")]
    if len(generated) > 1:
        listed = ", ".join(f"{e.name} ({e.value})" for e in generated)
        findings.append(Finding("backend", "warn", "torch_fl", f"{len(generated)} generated backends installed: {listed}",
                                "a process holds one PrivateUse1 backend: `import torch` autoloads them all and the "
                                "second aborts the process; set TORCH_DEVICE_BACKEND_AUTOLOAD=0 and call "
                                "torch_fl_<chip>._register() for the one to use, or uninstall the others",
                                {"backends": [e.name for e in generated]}))
    for entry in generated:
        if only in (None, entry.name):
            findings.extend(_generated_findings(entry.name, entry.value, probe_backend(entry.name, entry.value)))
    if only is None:
        for entry in metadata.entry_points(group="torch.backends"):
            if entry.name not in names:
                findings.append(Finding("backend", "info", entry.name, f"out-of-tree backend {entry.value} "
                                        "(torch.backends entry point, not from torchfl-gen)"))
    from . import chips
    from ._api import _probe_native

    for entry in native:
        if only in (None, entry.name):
            info = _probe_native(entry)
            if info.available:
                findings.append(Finding("devices", "ok", entry.name, f"native chip on torch's {info.driver_version} "
                                        f"build: {info.device_count} device(s)"))
            elif info.driver_version is not None:  # the right build, no device
                findings.append(Finding("devices", "warn", entry.name, f"native chip: {info.error}",
                                        "no device visible (driver, or the *_VISIBLE_DEVICES variable)"))
            else:
                findings.append(Finding("backend", "info", entry.name, f"native chip not driven here: {info.error}"))
    build = chips.torch_build()
    if only is None and build is not None and not any(chips.native_chips()[e.name].TORCH_BUILD == build
                                                      for e in native):
        findings.append(Finding("backend", "warn", build, f"torch is a {build} build but no torch_fl package "
                                "describes its GPUs: torch_fl.amp, distributed and monitor know nothing of them",
                                "install the native spec's package: torchfl-gen build specs/<chip>.yaml "
                                "(specs/cuda.yaml, specs/hip.yaml)"))
    if not generated and only is None:
        findings.append(Finding("backend", "warn", "torch_fl", "no generated backend installed",
                                "build one: torchfl-gen build specs/<chip>.yaml"))
    findings.extend(_coexistence_findings(sorted(names)))
    return findings


def _coexistence_findings(chips: list[str]) -> list[Finding]:
    """A generated chip beside a native accelerator (torch_fl.coexistence): left out at import,
    or registered, in which case backward over the native device's tensors is refused."""
    import torch

    from . import coexistence

    native = coexistence.native_accelerators()
    if not native or not chips:
        return []
    devices = ", ".join(native)
    registered = torch._C._get_privateuse1_backend_name()
    if registered in chips:
        return [Finding("coexistence", "warn", registered,
                        f"registered beside {devices}: torch takes '{registered}' as its one accelerator, so backward "
                        f"over {devices} tensors is refused in this process ({coexistence.UPSTREAM_ISSUE})",
                        f"run {devices} training in a process without the chip: `import torch` leaves it out there "
                        f"unless {coexistence.ENV} or torch_fl.init(chips=[...]) asks for it",
                        {"native": list(native), "chip": registered})]
    return [Finding("coexistence", "info", ", ".join(chips),
                    f"beside {devices}: `import torch` leaves the chip(s) unregistered, so {devices} work is "
                    f"untouched; ask for one with torch_fl.init(chips=[...]), torch_fl.set_default_device(<chip>) or "
                    f"{coexistence.ENV}=<chip>", None, {"native": list(native)})]


# -- workload ------------------------------------------------------------------------------------


def _user_frame() -> str:
    """file:line of the first caller outside torch, torch_fl and decorator plumbing."""
    skip = ("/torch/", "/torch_fl/", "/typing_extensions.py", "/contextlib.py", "/functools.py", "<frozen")
    for frame in reversed(traceback.extract_stack()[:-2]):
        path = frame.filename.replace(os.sep, "/")
        if not any(part in path for part in skip):
            return f"{frame.filename}:{frame.lineno}"
    return "?"


class _Recorder:
    """Watches a workload: module/input devices, AMP constructions, the first training step."""

    def __init__(self, stop_after_steps: int | None = None):
        self.placement: dict[str, dict] = {}   # module key -> finding details
        self.amp: list[dict] = []
        self.steps = 0
        self.stop_after_steps = stop_after_steps
        self.window: tuple[dict, dict] | None = None  # fallback stats at the start/end of one step
        self._start_stats: dict | None = None
        self._handles = []
        self._patched = []

    # devices at module boundaries
    def _pre_forward(self, module, args):
        import torch
        from torch.utils import _pytree as pytree

        if torch.compiler.is_compiling() or getattr(module, "_torch_fl_placed", None) is not None:
            return  # traced by torch.compile: stay out; placed: the policy moves its inputs after this hook
        # 0-dim CPU tensors mix with any device in PyTorch: they say nothing about placement
        inputs = {t.device for t in pytree.tree_leaves(args) if isinstance(t, torch.Tensor)
                  and not (t.dim() == 0 and t.device.type == "cpu")}
        if not inputs:
            return
        own = [(n, t) for n, t in list(module.named_parameters(recurse=False)) + list(module.named_buffers(recurse=False))
               if t is not None]
        for name, tensor in own:
            key = f"{id(module)}.{name}"
            if tensor.device in inputs or key in self.placement:
                continue
            from .autograd_check import describe_parameter

            kind = "parameter" if name in module._parameters else "buffer"
            described = describe_parameter(tensor) if kind == "parameter" else None
            self.placement[key] = {
                "what": described or f"{kind} '{name}' of a {type(module).__name__}",
                "tensor_device": str(tensor.device),
                "input_devices": sorted(str(d) for d in inputs), "module": type(module).__name__}

    # AMP
    def _watch_amp(self):
        import torch

        recorder = self
        for cls, arg in ((torch.amp.autocast_mode.autocast, "device_type"), (torch.amp.grad_scaler.GradScaler, "device")):
            original = cls.__init__

            def init(self, *args, __original=original, __cls=cls, __arg=arg, **kwargs):
                device = args[0] if args else kwargs.get(__arg, "cuda" if __cls is torch.amp.grad_scaler.GradScaler else None)
                use = {"api": f"{type(self).__module__}.{type(self).__name__}", "device": device, "where": _user_frame()}
                for seen in recorder.amp:  # once per call site, counted
                    if all(seen[k] == use[k] for k in use):
                        seen["count"] += 1
                        break
                else:
                    recorder.amp.append(use | {"count": 1})
                __original(self, *args, **kwargs)

            cls.__init__ = init
            self._patched.append((cls, original))

    # one optimizer step
    def _stats(self):
        from ._api import fallback_stats

        return fallback_stats()

    def _step_post(self, optimizer, args, kwargs):
        self.steps += 1
        now = self._stats()
        if self.steps == 1:
            self.window = (self._start_stats or {}, now)  # setup + the first step, until a second one
        elif self.steps == 2:
            self.window = (self.window[1], now)  # exactly one iteration: zero_grad, forward, backward, step
        if self.stop_after_steps is not None and self.steps >= self.stop_after_steps:
            raise _StopWorkload()

    def __enter__(self):
        import torch
        from torch.optim.optimizer import register_optimizer_step_post_hook

        from . import autograd_check

        autograd_check.install()
        self._start_stats = self._stats()
        self._handles.append(torch.nn.modules.module.register_module_forward_pre_hook(self._pre_forward))
        self._handles.append(register_optimizer_step_post_hook(self._step_post))
        self._watch_amp()
        return self

    def __exit__(self, *exc):
        for handle in self._handles:
            handle.remove()
        for cls, original in self._patched:
            cls.__init__ = original
        if self.window is None:
            self.window = (self._start_stats or {}, self._stats())
        return isinstance(exc[1], _StopWorkload)


class _StopWorkload(BaseException):
    """Raised from the optimizer hook once enough steps ran (a BaseException: scripts catching
    Exception around their loop must not swallow it)."""


def _cudnn_settings() -> dict:
    import torch

    return {"torch.backends.cudnn.enabled": torch.backends.cudnn.enabled,
            "torch.backends.cudnn.benchmark": torch.backends.cudnn.benchmark,
            "torch.backends.cudnn.deterministic": torch.backends.cudnn.deterministic,
            "torch.backends.cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
            "torch.backends.cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32}


_CUDNN_MEANING = {
    "torch.backends.cudnn.deterministic": (True, "warn",
        "is True, but cuDNN is not used on {devices}: it makes nothing deterministic there",
        "use torch.use_deterministic_algorithms(True) (and seed every device) for reproducible runs"),
    "torch.backends.cudnn.benchmark": (True, "warn",
        "is True, but there is no cuDNN autotuner on {devices}: it has no effect there", None),
    "torch.backends.cudnn.enabled": (False, "warn",
        "is False: that only disables cuDNN; {devices} kernels are unaffected", None),
    "torch.backends.cuda.matmul.allow_tf32": (True, "info",
        "is True: applies to CUDA matmuls only; {devices} computes fp32 matmuls at the chip's own precision", None),
}


def _workload_findings(recorder: _Recorder, devices: set[str], error: str | None) -> list[Finding]:
    import torch

    findings = []
    for details in recorder.placement.values():
        findings.append(Finding(
            "placement", "error", details["what"],
            f"on {details['tensor_device']}, but the module's input is on {', '.join(details['input_devices'])}",
            f"move it with the module (.to({details['input_devices'][0]!r}) after adding every submodule), "
            "or place it on purpose with torch_fl.placement.DevicePlacementPolicy", details))
    if not recorder.placement:
        findings.append(Finding("placement", "ok", "modules", "every module's parameters and buffers are on its "
                                "inputs' device"))
    before, after = recorder.window
    cpu = {}
    for op, paths in after.items():
        calls = paths.get("cpu", 0) - before.get(op, {}).get("cpu", 0)
        if calls > 0:
            cpu[op] = calls
    step = "one training step" if recorder.steps >= 2 else ("the setup and first step" if recorder.steps
                                                            else "the run (no optimizer step seen)")
    if cpu:
        top = ", ".join(f"{op} ({n})" for op, n in sorted(cpu.items(), key=lambda kv: (-kv[1], kv[0]))[:8])
        findings.append(Finding("fallbacks", "warn", "cpu fallbacks", f"{sum(cpu.values())} call(s) of {len(cpu)} op(s) "
                                f"ran on the CPU during {step}: {top}",
                                "add vendor kernels or Triton routes for them (torchfl-gen coverage SPEC --script ...)",
                                {"ops": cpu, "steps_seen": recorder.steps}))
    else:
        findings.append(Finding("fallbacks", "ok", "cpu fallbacks", f"none during {step}",
                                details={"ops": {}, "steps_seen": recorder.steps}))
    cuda_usable = torch.cuda.is_available()
    chips = sorted(d for d in devices if not d.startswith(("cpu", "cuda", "meta")))
    for use in recorder.amp:
        if use["device"] == "cuda" and (not cuda_usable or chips):
            runs_on = ", ".join(chips) or "the CPU (no CUDA device here)"
            findings.append(Finding("amp", "error", use["api"], f"{'GradScaler' if 'GradScaler' in use['api'] else 'autocast'} for 'cuda' at {use['where']} "
                                    f"({use['count']}x), "
                                    f"but the work runs on {runs_on}: it does nothing for those tensors",
                                    "use torch_fl.amp.autocast() / torch_fl.amp.GradScaler() (the current device), "
                                    "or torch.autocast(device_type=<chip>) / torch.amp.GradScaler(<chip>)", use))
    chips_text = ", ".join(chips) or "this machine (no CUDA)"
    if chips or not cuda_usable:
        for setting, value in _cudnn_settings().items():
            meaning = _CUDNN_MEANING.get(setting)
            if meaning and value == meaning[0]:  # the trigger values are not torch's defaults
                findings.append(Finding("cudnn", meaning[1], setting, meaning[2].format(devices=chips_text), meaning[3],
                                        {"value": value}))
    if error is not None:
        findings.append(Finding("run", "error", "workload", f"failed: {error}"))
    return findings


def check_model(model, inputs, loss_fn=None) -> Report:
    """One forward and backward of model(*inputs) (loss: loss_fn(output) or the sum of the outputs)."""
    import torch

    from .coverage import _sum_outputs

    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    report = Report()
    devices: dict[str, list[str]] = {}
    for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
        devices.setdefault(str(tensor.device), []).append(name)
    placed = getattr(model, "_torch_fl_placement", None)
    if len(devices) > 1 and placed is None:
        main = max(devices, key=lambda d: len(devices[d]))
        for device, names in sorted(devices.items()):
            if device != main:
                report.add("Model", Finding("placement", "error", ", ".join(names[:6]) + (" ..." if len(names) > 6 else ""),
                                            f"on {device}, while {len(devices[main])} other tensor(s) are on {main}",
                                            f"model.to({main!r}), or a torch_fl.placement.DevicePlacementPolicy "
                                            "for a deliberate split", {"device": device, "names": names}))
    error = None
    with _Recorder() as recorder:
        try:
            out = model(*inputs)
            loss = loss_fn(out) if loss_fn is not None else _sum_outputs(out)
            if loss is not None:
                loss.backward()
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
    used = set(devices) | {str(t.device) for t in inputs if isinstance(t, torch.Tensor)}
    report.extend("Model", _workload_findings(recorder, used, error))
    return report


def check_script(path: str, args: list[str] | None = None) -> Report:
    """Run the script (as __main__, in this process) until its second optimizer step, watching it."""
    import torch

    report = Report()
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [path, *(args or [])]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    error = None
    allocations_before = _allocations()
    # The script's own prints go to stderr: stdout carries the report (JSON with --json).
    with _Recorder(stop_after_steps=2) as recorder, contextlib.redirect_stdout(sys.stderr):
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as exit_:
            if exit_.code not in (None, 0):
                error = f"SystemExit({exit_.code!r})"
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        finally:
            sys.argv, sys.path[:] = saved_argv, saved_path
    chip = torch._C._get_privateuse1_backend_name()
    used = {f"{chip}"} if _allocations() > allocations_before else set()
    used |= {d["tensor_device"] for d in recorder.placement.values()}
    report.extend(f"Script {path}", _workload_findings(recorder, used, error))
    return report


def _allocations() -> int:
    """How many allocations the generated chip's allocator has served (all devices)."""
    import torch

    chip = torch._C._get_privateuse1_backend_name()
    module = getattr(torch, chip, None)
    if chip == "privateuseone" or module is None or not hasattr(module, "memory_stats"):
        return 0
    try:
        return sum(module.memory_stats(i).get("allocation.all.allocated", 0) for i in range(module.device_count()))
    except Exception:
        return 0


def _register_one(backend: str | None, findings: list[Finding]) -> None:
    """With autoload off (TORCH_DEVICE_BACKEND_AUTOLOAD=0) nothing holds PrivateUse1 yet: register
    the chosen backend, else the first healthy one, so the script finds its device."""
    import importlib

    import torch

    if torch._C._get_privateuse1_backend_name() != "privateuseone":
        return
    from . import coexistence

    if backend is None and coexistence.native_accelerators():
        return  # beside a native accelerator a chip waits to be asked: the script asks, or --backend does
    healthy = [f.subject for f in findings if f.check == "devices" and f.status == "ok"]
    chosen = backend or next(iter(healthy), None)
    for entry in metadata.entry_points(group="torch_fl.backends"):
        if entry.name == chosen:
            try:
                importlib.import_module(entry.value)._register()
            except Exception:  # the environment findings already say why
                pass
            return


def run(*, backend: str | None = None, script: str | None = None, script_args: list[str] | None = None) -> Report:
    """The whole doctor: environment, then the script when one is given."""
    report = Report()
    report.extend("Backends", check_environment(backend))
    if script is not None:
        _register_one(backend, report.findings)
        workload = check_script(script, script_args)
        for title, indexes in workload.sections.items():
            report.extend(title, [workload.findings[i] for i in indexes])
    return report


def main(argv: list[str] | None = None) -> int:
    """`python -m torch_fl doctor ...`: exit 0 when healthy, EXIT_PROBLEMS when an error was found."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m torch_fl doctor", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--backend", help="check only this backend (device type)")
    parser.add_argument("--script", help="run this training script (until its second optimizer step) and check it")
    parser.add_argument("script_args", nargs="*", help="arguments for the script (after --)")
    args = parser.parse_args(argv)
    if args.script is not None and not os.path.isfile(args.script):
        print(f"error: --script {args.script}: no such file", file=sys.stderr)
        return 2
    report = run(backend=args.backend, script=args.script, script_args=args.script_args)
    print(report.to_json() if args.json else report.text())
    if not report.ok:
        print(f"error: the doctor found {report.count('error')} problem(s)", file=sys.stderr)
        return EXIT_PROBLEMS
    return 0
