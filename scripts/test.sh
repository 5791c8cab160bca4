#!/usr/bin/env bash
# Every test: the project's own (generator, SDK, runtime, end to end) and the
# suite generated for the npu chip. Run scripts/quickstart.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m torchfl_gen check
python3 -m pytest tests generated/npu/tests -q "$@"
