#!/usr/bin/env bash
# Issue #13 in one device command: the gpu-marked fast-path tests (captured step and rollout equal to the eager
# step, both envs, 512 games x 420 steps with resets), then the side-by-side throughput table against JaxMARL
# (scripts/gpu_env_table.py; rows most-needed first, every row written at once to $OUT/gpu-env-table.json).
# Runs on the bare GPU image (torch + jax, no torchrl/HLE: the code it runs imports neither). Before the run,
# on this machine: put JaxMARL's four wheels in .whl/ (../shared/notes/gpu-anchors.md) and carry .whl:
#   make device-carry    (the wheels into .whl/ and the anchors into .anchors/; both git-ignored)
# then, as two device calls on one warm machine (the first includes the machine's start):
#   run(command="bash scripts/env-gpu.sh tests", carry=[".whl"], timeout_s=360)
#   run(command="bash scripts/env-gpu.sh table", carry=[".whl"], timeout_s=600)
# (or "all" in one call when the budget allows: the tests compile eight times, the table several more).
# Budgets (seconds): TEST_S for the tests, TABLE_S for the table (its rows stop at TABLE_S - 60); TABLE_ARGS: more
# options of gpu_env_table.py (a CPU try: TABLE_ARGS="--device cpu --modes eager,compile --batches 4 --steps 4
# --no-rollouts").
set -uo pipefail
OUT=${OUT:-results/env-gpu}
PART=${1:-all}
TEST_S=${TEST_S:-300}
TABLE_S=${TABLE_S:-540}
. "$(dirname "$0")/device-env.sh"
if [ "$PART" != table ]; then
timeout "$TEST_S" $PY -m pytest -q -m gpu -o addopts="" -p no:cacheprovider \
  tests/deep/accel/test_gpu.py tests/deep/envs/hanabi/test_gpu.py tests/deep/envs/overcooked_v2/test_gpu.py \
  > "$OUT/gpu-tests.txt" 2>&1
echo "gpu tests: exit $? (details in $OUT/gpu-tests.txt)"; tail -15 "$OUT/gpu-tests.txt"
fi
[ "$PART" = tests ] && exit 0
eval "TABLE_ARGV=(${TABLE_ARGS:-})"  # split like a command line: quoted values lose their quotes
timeout "$TABLE_S" $PY scripts/gpu_env_table.py --out "$OUT" --budget-s $((TABLE_S - 60)) "${TABLE_ARGV[@]}" 2>&1 | tee "$OUT/table.log"
$PY scripts/gpu_env_table.py --markdown "$OUT/gpu-env-table.json" > "$OUT/gpu-env-table.md" 2>/dev/null || true
