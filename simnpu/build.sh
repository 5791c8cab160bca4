#!/usr/bin/env bash
# Build the simulated NPU SDK into simnpu/build/lib (configure once, then incremental).
#   bash simnpu/build.sh            # runtime + kernels
#   SIMNPU_BUILD_KERNELS=OFF bash simnpu/build.sh   # runtime only (no torch needed)
#   SIMNPU_VERSION=2.0 bash simnpu/build.sh         # compile in another driver version
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD="$HERE/build"
PY="${PYTHON:-python3}"
KERNELS="${SIMNPU_BUILD_KERNELS:-ON}"
VERSION="${SIMNPU_VERSION:-2.1}"

# One build of this folder at a time: two at once (a test run's workers, say) would race
# cmake's regeneration and relink a library the other is linking against.
mkdir -p "$BUILD"
exec 9>"$BUILD/.build.lock"
flock 9

args=(-DSIMNPU_BUILD_KERNELS="$KERNELS" -DSIMNPU_VERSION="$VERSION" -DSIMNPU_BUILD_TESTS="${SIMNPU_BUILD_TESTS:-OFF}")
if [[ "$KERNELS" == ON ]]; then
  # ask torch once, cache in the build dir
  if [[ ! -f "$BUILD/torch.env" ]]; then
    "$PY" - > "$BUILD/torch.env.tmp" <<'PYEOF'
import os, torch
from torch.utils import cpp_extension
inc = ";".join(cpp_extension.include_paths())
lib = os.path.join(os.path.dirname(torch.__file__), "lib")
print(f"TORCH_INC='{inc}'")
print(f"TORCH_LIB='{lib}'")
print(f"TORCH_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}")
major, minor = (int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
print(f"TORCH_CXX_STANDARD={20 if (major, minor) >= (2, 14) else 17}")  # 2.14's headers require C++20
PYEOF
    mv "$BUILD/torch.env.tmp" "$BUILD/torch.env"
  fi
  # shellcheck disable=SC1091
  source "$BUILD/torch.env"
  args+=(-DSIMNPU_TORCH_INCLUDE_DIRS="$TORCH_INC" -DSIMNPU_TORCH_LIB_DIR="$TORCH_LIB" -DSIMNPU_TORCH_CXX11_ABI="$TORCH_ABI"
         -DSIMNPU_CXX_STANDARD="${TORCH_CXX_STANDARD:-17}")
fi

stamp="$BUILD/.configured.$(echo "${args[*]}" | md5sum | cut -c1-12)"
if [[ ! -f "$BUILD/build.ninja" || ! -f "$stamp" ]]; then
  cmake -S "$HERE" -B "$BUILD" -G Ninja "${args[@]}" >/dev/null
  rm -f "$BUILD"/.configured.*
  touch "$stamp"
fi
cmake --build "$BUILD" -j "${SIMNPU_JOBS:-2}"
