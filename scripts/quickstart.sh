#!/usr/bin/env bash
# From a fresh machine to a model trained on the simulated NPU:
# install torch-fl (torch pinned to the CPU wheel), build the simulated SDK,
# generate + compile + install the npu backend from specs/npu.yaml, train.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --disable-pip-version-check -q "torch==2.13.0" "triton==3.6.0"
python3 -m pip install --disable-pip-version-check -q -e ".[test]"
bash simnpu/build.sh
python3 -m torchfl_gen build specs/npu.yaml
python3 examples/train_resnet_stem.py --device npu --strict
