#!/usr/bin/env bash
# Builds the nvgpu backend on a CUDA machine, runs its generated suite, then the
# benchmarks. Usage: scripts/nvgpu_device_run.sh OUTDIR [STAGE...]
# Stages: setup build install test random collectives coexist compile composite fast attention native triton bench sweep models npu
# (default: all but install, collectives, coexist, compile, composite, attention, sweep, models and npu;
# install is a plain build, for a run that needs the backend but not the build times). Logs and results JSON land in OUTDIR.
set -u
out=${1:?usage: scripts/nvgpu_device_run.sh OUTDIR [STAGE...]}
shift
stages=${*:-setup build test random fast native triton bench}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
has() { [[ " $stages " == *" $1 "* ]]; }
# PACK=FILE: after each stage, OUTDIR packed into one archive (the device tool brings back
# a few files only, and whatever was packed before a timeout still comes back).
pack() {
  if [ -n "${PACK:-}" ]; then
    mkdir -p "$out/records" && cp .torchfl/*.jsonl "$out/records/" 2>/dev/null  # compat records
    tar czf "$PACK" -C "$out" .
  fi
}
trap pack EXIT

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
  pack
fi

if has install; then
  python3 -m torchfl_gen build specs/nvgpu.yaml 2>&1 | tail -3 | tee "$out/install.log"
  [ "${PIPESTATUS[0]}" = 0 ] || exit 1
fi

if has test; then
  # PYTEST_ARGS: extra pytest arguments, e.g. -k to select tests.
  # The device machine lends one GPU: the two-device test is reported skipped there.
  TORCH_FL_TEST_ONE_DEVICE=1 timeout "${TEST_TIMEOUT:-300}" python3 -X faulthandler -m pytest generated/nvgpu/tests -q -p no:cacheprovider -rf \
    ${PYTEST_ARGS:-} 2>&1 | tee "$out/tests.log"
  pack
fi

if has random; then
  # Random numbers drawn on the chip (the Triton random family, compiled), through torch's API;
  # scaled_dot_product_attention on the fused vendor kernel (its dropout on the chip's generator).
  TEST_CHIP=nvgpu timeout "${RANDOM_TIMEOUT:-300}" python3 -m pytest --noconftest tests/runtime/test_random_on_chip.py \
    tests/runtime/test_attention_on_chip.py -q \
    -p no:cacheprovider -rf 2>&1 | tee "$out/random.log"
  pack
fi

if has collectives; then
  # nvgpu's collectives on NCCL, one rank (one GPU): every collective and dtype against exact
  # references, FSDP2 with a distributed checkpoint, and all_reduce library vs gloo staging;
  # first doctor's word on the library (it opens libnccl.so.2 and reports its path).
  python3 -m torch_fl doctor --backend nvgpu 2>&1 | tee "$out/doctor.log"
  for mode in collectives fsdp; do
    mkdir -p "$out/$mode"
    TEST_CHIP=nvgpu timeout 150 python3 -m torch.distributed.run --nproc_per_node=1 --master_addr=127.0.0.1 \
      --master_port=$((29500 + RANDOM % 1000)) tests/runtime/collectives_worker.py $mode "/tmp/$mode-ranks" \
      2>&1 | tail -20 | tee "$out/$mode.log"
    cp "/tmp/$mode-ranks/rank0.json" "$out/$mode/rank0.json" 2>/dev/null
  done
  timeout 150 python3 bench/collectives.py --chip nvgpu --ranks 1 --iters 20 --out "$out/collectives-nvgpu-1rank.json" \
    2>&1 | tee "$out/collectives-bench.log"
  pack
fi

if has coexist; then
  # Do no harm (torch_fl.coexistence): with torch-fl-nvgpu installed, the same script trains on
  # native cuda (the chip left out at import) and on nvgpu (asked for by set_default_device), in
  # separate processes; a cuda backward in a process that asked for nvgpu is refused by name.
  { python3 -m torch_fl doctor 2>&1 | grep -iE "coexist|nvgpu" ;
    timeout 120 python3 examples/train_resnet_stem.py --device cuda --epochs 1 ;
    timeout 120 python3 examples/train_resnet_stem.py --device nvgpu --epochs 1 ;
    timeout 60 python3 -c "import torch, torch_fl; print('nvgpu registered at import:', hasattr(torch, 'nvgpu'))
x = torch.ones(3, device='cuda', requires_grad=True); (x * 2).sum().backward(); print('cuda backward ok', x.grad.tolist())
torch_fl.init(chips=['nvgpu'])
try:
    (torch.ones(3, device='cuda', requires_grad=True) * 2).sum().backward(); print('UNEXPECTED: no error')
except torch_fl.coexistence.NativeBackwardError as e: print('refused:', str(e)[:160])" ;
    # Copies between nvgpu and cuda (device to device: specs/nvgpu.yaml shares_memory_with).
    timeout 300 python3 -m pytest generated/nvgpu/tests/test_device.py -k native_device -q -p no:cacheprovider -rfs ; } \
    2>&1 | tee "$out/coexist.log"
  pack
fi

if has compile; then
  # torch.compile on nvgpu (compile.inductor: triton): the compile suite (aot_eager and Inductor),
  # then a few models of the sweep compiled (compiled nvgpu against compiled cuda) and eager.
  TORCH_FL_TEST_ONE_DEVICE=1 timeout "${COMPILE_TIMEOUT:-240}" python3 -m pytest generated/nvgpu/tests/test_compile.py -q \
    -p no:cacheprovider -rfsx 2>&1 | tee "$out/compile.log"
  pack
  for mode in default none; do
    timeout "${COMPILE_MODELS_TIMEOUT:-240}" python3 bench/models.py --chip nvgpu --native cuda --compile $mode \
      ${COMPILE_MODELS_ARGS:---size realistic --precision fp32 --models gpt2 llama bert vit resnet18 --steps 8 --warmup 3} \
      --out "$out/models-compile-$mode.json" 2>&1 | tail -12 | tee "$out/models-compile-$mode.log"
    pack
  done
fi

if has composite; then
  # The GPU and the simulated NPU in one process (specs/gpunpu.yaml: nvgpu + npu, the NPU's
  # Triton step skipped): the composite's generated suite and the seed's hybrid model both ways.
  { SIMNPU_JOBS=$(nproc) bash simnpu/build.sh >/dev/null && python3 -m torchfl_gen build specs/gpunpu.yaml &&
    timeout 300 python3 -m pytest generated/gpunpu/tests -v -p no:cacheprovider -rfs &&
    timeout 120 python3 examples/hybrid_two_chips.py --chip gpunpu --embedding npu:0 --transformer nvgpu:0 &&
    timeout 120 python3 examples/hybrid_two_chips.py --chip gpunpu --embedding nvgpu:0 --transformer npu:1; } \
    2>&1 | tee "$out/composite.log"
  pack
fi

if has fast; then
  # Pointwise, foreach and program Triton launches replayed from C++ (torch_fl/_triton_fast.py) against the
  # Python launch and native CUDA, and float division with integer results (compiled Triton divides
  # approximately); the simulated-NPU tests of those files run in CI.
  # --noconftest: the suite's conftest is for the simulated NPU; tests/ on the path for e2e_helpers.
  PYTHONPATH=tests${PYTHONPATH:+:$PYTHONPATH} timeout "${FAST_TIMEOUT:-300}" python3 -m pytest --noconftest tests/triton_ops/test_triton_fast.py \
    tests/triton_ops/test_triton_fast_foreach.py tests/triton_ops/test_triton_fast_program.py \
    tests/triton_ops/test_triton_division.py -k "not npu" -q \
    -p no:cacheprovider -rfs 2>&1 | tee "$out/fast.log"
  pack
fi

if has attention; then
  # The Triton attention family against CUDA's memory-efficient kernel (ATTENTION_ARGS: --tune
  # times the float32 blocks first).
  timeout "${ATTENTION_TIMEOUT:-240}" python3 bench/attention.py --chip nvgpu --native cuda ${ATTENTION_ARGS:-} \
    --out "$out/attention-nvgpu.json" 2>&1 | tee "$out/attention.log"
  pack
fi

if has native; then
  # The native cuda chip (specs/cuda.yaml): torch_fl's facts, autocast and nvidia-smi on the GPU.
  { python3 -m torchfl_gen build specs/cuda.yaml && timeout 120 python3 -m pytest generated/cuda/tests -q -p no:cacheprovider -rs; } \
    2>&1 | tee "$out/native.log"
  pack
fi

if has triton; then
  # The Triton kernel tests with the kernels compiled for the GPU (no interpreter), in
  # shards side by side: most of their time is compiling kernels, one core each.
  export TORCH_FL_TRITON_TEST_DEVICE=cuda
  shards=$(mktemp -d)
  # test_zz_* check that the tests of a whole file exercised every op: true of the test
  # suite, not of the device, and not of one shard; CI runs them under the interpreter.
  python3 -m pytest --noconftest --co -q -p no:cacheprovider tests/triton_ops/test_triton_{ops,fft,nn,index,linalg,foreach,optim,launch,special,select,complex,linalg_complex}.py \
    | grep '::' | grep -v '::test_zz_' > "$shards/ids"
  split -n "r/${TRITON_SHARDS:-14}" "$shards/ids" "$shards/shard-"
  for shard in "$shards"/shard-*; do
    xargs -a "$shard" -d '\n' timeout "${TRITON_TIMEOUT:-420}" python3 -m pytest --noconftest -v \
      -p no:cacheprovider -rf > "$shard.log" 2>&1 &
  done
  wait
  unset TORCH_FL_TRITON_TEST_DEVICE
  cat "$shards"/shard-*.log > "$out/triton-cuda.log"
  grep -hE '^(FAILED|ERROR)|^=+ .*(passed|failed)' "$shards"/shard-*.log
  rm -r "$shards"
  pack
fi

if has bench; then
  # BENCHES: which of them (default all); packed after each, so a run cut short keeps the rest.
  for b in ${BENCHES:-resnet50 triton_kernels op_overhead allocator profile_op}; do
    case $b in
      resnet50) timeout 260 python3 bench/resnet50.py --out "$out/resnet50.json" ;;
      triton_kernels) timeout 120 python3 bench/triton_kernels.py --out "$out/triton_kernels.json" ;;
      op_overhead) timeout 90 python3 bench/op_overhead.py --pair nvgpu:cuda --out "$out/op_overhead-nvgpu.json" ;;
      allocator) timeout 60 python3 bench/allocator.py --chip nvgpu --native cuda --out "$out/allocator-nvgpu.json" ;;
      profile_op) timeout 120 python3 bench/profile_op.py --chip nvgpu --native cuda --calls 1000 --out "$out/profile-nvgpu.txt" ;;
      *) echo "unknown bench: $b" >&2; exit 2 ;;
    esac 2>&1 | tee -a "$out/bench.log"
    pack
  done
fi

if has sweep; then
  # The OpInfo sweep over every spec dtype (docs/ops/README.md), merged for `torchfl-gen matrix`.
  timeout "${SWEEP_TIMEOUT:-420}" bash scripts/opinfo_sweep.sh nvgpu "${SWEEP_SHARDS:-15}" 2>&1 | tail -16 | tee "$out/sweep.log"
  cat .torchfl/opinfo-nvgpu.shard*.jsonl > .torchfl/opinfo-nvgpu.jsonl && gzip -c .torchfl/opinfo-nvgpu.jsonl > "$out/opinfo-nvgpu.jsonl.gz"
  pack
fi

if has models; then
  # The real-model sweep, nvgpu vs cuda (MODELS_ARGS: its size, models, precisions).
  timeout "${MODELS_TIMEOUT:-540}" python3 bench/models.py --chip nvgpu --native cuda ${MODELS_ARGS:---size small} \
    --out "$out/models.json" 2>&1 | tee "$out/models.log"
  pack
fi

if has npu; then
  # The simulated NPU built against this machine's torch (a compat record for its version).
  # One PrivateUse1 backend per process: the nvgpu backend is uninstalled first.
  python3 -m pip uninstall -q -y torch-fl-nvgpu 2>/dev/null
  { SIMNPU_JOBS=$(nproc) bash simnpu/build.sh && python3 -m torchfl_gen build specs/npu.yaml \
    && TORCH_FL_TEST_ONE_DEVICE= TORCH_FL_OPINFO=sample TORCH_FL_OPINFO_SAMPLE=40 timeout "${NPU_TIMEOUT:-420}" \
       python3 -m pytest generated/npu/tests -q -p no:cacheprovider -rf; } 2>&1 | tee "$out/npu.log"
  pack
fi
