#!/usr/bin/env bash
# The OpInfo sweep of a chip's generated suite in N processes side by side, each resuming
# past ops that crash it, merged into .torchfl/opinfo-<chip>.jsonl for `torchfl-gen matrix`.
# Usage: scripts/opinfo_sweep.sh CHIP [SHARDS]   (TORCH_FL_OPINFO_DTYPES and the other
# TORCH_FL_OPINFO_* settings of docs/ops/README.md pass through)
set -u
chip=${1:?usage: scripts/opinfo_sweep.sh CHIP [SHARDS]}
shards=${2:-2}
cd "$(dirname "$0")/.."
mkdir -p .torchfl
export TORCH_FL_OPINFO=full
run_shard() {
  local i=$1 results=".torchfl/opinfo-$chip.shard$1.jsonl"
  TORCH_FL_OPINFO_SHARD="$i/$shards" TORCH_FL_OPINFO_RESULTS="$results" \
    python3 -m pytest "generated/$chip/tests/test_opinfo.py" -q -p no:randomly -p no:cacheprovider > "$results.log" 2>&1
  while [ -e "$results.running" ]; do  # the process died in an op: go on past it
    TORCH_FL_OPINFO_SHARD="$i/$shards" TORCH_FL_OPINFO_RESULTS="$results" TORCH_FL_OPINFO_RESUME=1 \
      python3 -m pytest "generated/$chip/tests/test_opinfo.py" -q -p no:randomly -p no:cacheprovider >> "$results.log" 2>&1
  done
}
for ((i = 0; i < shards; i++)); do run_shard "$i" & done
wait
cat .torchfl/opinfo-"$chip".shard*.jsonl > ".torchfl/opinfo-$chip.jsonl"
tail -n 1 .torchfl/opinfo-"$chip".shard*.jsonl.log
