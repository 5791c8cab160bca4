#!/usr/bin/env bash
# System packages CI adds beside the README's two commands: Debian's HIP runtime
# (headers and libamdhip64), against which tests/e2e/test_hip_pu1.py compiles, links and
# loads the backend of specs/hip_pu1.yaml. No AMD GPU is needed (docs/hip.md).
set -euo pipefail

if [ -e /usr/include/hip/hip_runtime_api.h ]; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q --no-install-recommends libamdhip64-dev >/dev/null \
    || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q --no-install-recommends libamdhip64-dev >/dev/null; }
test -e /usr/include/hip/hip_runtime_api.h
