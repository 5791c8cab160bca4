"""`torchfl-gen build` times per spec: cold (empty build cache, package not installed)
and no-op (everything up to date), each a fresh process as a user runs it.

  python bench/build_times.py specs/npu.yaml --out bench/results/build_times-npu.json
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402


def build(spec: Path, env: dict, install: bool, output: Path | None) -> float:
    start = time.perf_counter()
    extra = [] if install else ["--no-install", "--output", str(output)]
    proc = subprocess.run([sys.executable, "-m", "torchfl_gen", "build", str(spec), *extra], env=env,
                          capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        # The compiler's own errors, from the build log (it lives in the throw-away cache).
        log = re.search(r"full log: (\S+)", proc.stderr)
        errors = ""
        if log and Path(log[1]).is_file():
            lines = Path(log[1]).read_text(errors="replace").splitlines()
            errors = "\n".join(l for l in lines if "error" in l.lower() and "Error compiling" not in l)[-12000:]
        sys.exit(f"bench/build_times.py: build of {spec} failed:\n{proc.stderr[-3000:]}\n"
                 f"compiler errors:\n{errors}")
    return elapsed


def main(argv=None):
    p = _common.parser(__doc__)
    p.add_argument("specs", nargs="+", type=Path)
    p.add_argument("--noop-runs", type=int, default=3)
    p.add_argument("--no-install", action="store_true",
                   help="build wheels into a temporary folder instead of installing (chips that cannot be "
                        "installed beside another PrivateUse1 backend); no-op is then a rebuild with nothing to compile")
    args = p.parse_args(argv)
    from torchfl_gen.cli import _load

    results, rows = {}, []
    for spec_path in args.specs:
        spec = _load(str(spec_path))
        if not args.no_install:
            subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", spec.chip.distribution],
                           capture_output=True)
        with tempfile.TemporaryDirectory(prefix="torchfl-bench-cache-") as cache:
            env = dict(os.environ, TORCH_FL_CACHE_DIR=cache)
            output = Path(cache) / "pkg"
            cold = build(spec_path, env, not args.no_install, output)
            noop = [build(spec_path, env, not args.no_install, output) for _ in range(args.noop_runs)]
        results[str(spec_path)] = {"cold_s": cold, "noop_s": _common.median(noop), "noop_runs": noop,
                                   "jobs": int(os.environ.get("MAX_JOBS", os.cpu_count() or 1))}
        rows.append([str(spec_path), cold, _common.median(noop)])
    _common.emit("build_times", {"results": results, "install": not args.no_install}, rows,
                 ["spec", "cold s", "no-op s"], args.out)


if __name__ == "__main__":
    main()
