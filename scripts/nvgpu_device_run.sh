#!/usr/bin/env bash
# Builds the nvgpu backend on a CUDA machine, runs its generated suite, then the
# benchmarks. Usage: scripts/nvgpu_device_run.sh OUTDIR [STAGE...]
# Stages: setup build test bench (default: all). Logs and results JSON land in OUTDIR.
set -u
out=${1:?usage: scripts/nvgpu_device_run.sh OUTDIR [STAGE...]}
shift
stages=${*:-setup build test bench}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
has() { [[ " $stages " == *" $1 "* ]]; }

if has setup; then
  # A machine without a package registry: wheels carried in .whl/ (docs/nvgpu.md).
  if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
  python3 -m pip install -q --no-build-isolation --no-deps -e . || exit 1
fi
[ -d /tmp/site ] && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}

if has build; then
  # Cold and no-op `torchfl-gen build specs/nvgpu.yaml`; leaves the backend installed.
  timeout 400 python3 bench/build_times.py specs/nvgpu.yaml --noop-runs 2 --out "$out/build_times-nvgpu.json" \
    2>&1 | tee "$out/build.log"
  [ "${PIPESTATUS[0]}" = 0 ] || exit 1
fi

if has test; then
  # PYTEST_ARGS: extra pytest arguments, e.g. -k to select tests.
  timeout "${TEST_TIMEOUT:-300}" python3 -X faulthandler -m pytest generated/nvgpu/tests -q -p no:cacheprovider -rf \
    ${PYTEST_ARGS:-} 2>&1 | tee "$out/tests.log"
fi

if has bench; then
  {
    timeout 260 python3 bench/resnet50.py --out "$out/resnet50.json"
    timeout 120 python3 bench/triton_kernels.py --out "$out/triton_kernels.json"
    timeout 60 python3 bench/op_overhead.py --pair nvgpu:cuda --out "$out/op_overhead-nvgpu.json"
    timeout 60 python3 bench/allocator.py --chip nvgpu --native cuda --out "$out/allocator-nvgpu.json"
  } 2>&1 | tee "$out/bench.log"
fi
