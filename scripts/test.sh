#!/usr/bin/env bash
# Every test: the project's own (generator, SDK, runtime, end to end) and the
# suite generated for the npu chip. Run scripts/quickstart.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m torchfl_gen check
# The OpInfo sweep's CI sample: OpInfos that passed in the committed full sweep
# (docs/ops/npu.json); the full sweep is docs/ops/README.md's command.
# Two worker processes (the CI machine has two cores; most tests are single-threaded Python),
# a test file to a worker: a file's module fixtures (the variant chips it builds) are built once.
# A test that hangs fails at 20 minutes (the slowest takes under 2), after pyproject.toml's
# faulthandler_timeout has printed its stacks at 10, and the run goes on.
TORCH_FL_OPINFO=sample TORCH_FL_OPINFO_SAMPLE=40 python3 -m pytest tests generated/npu/tests -q --durations=30 \
  -n 2 --dist loadfile --timeout=1200 --timeout-method=signal "$@"
