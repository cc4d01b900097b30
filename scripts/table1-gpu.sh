#!/usr/bin/env bash
# The paper's Hanabi population protocol (Table 1 and Table 2) at full scale, for a CUDA machine:
# 5 agents per population, k = 6 self-play seeds each, 64 candidate symmetries by Algorithm 2 (sp-max-reg,
# composing with the agent's own sp-max symmetries), l = 11 kept, m = 5 OP seeds, Hanabi-Full with the
# official 512-wide net at 1024 envs x 128 steps. Every stage resumes: rerun the same command after a kill.
# Budgets are per seed / per candidate; raise them as device time allows (the paper trains far longer).
set -euo pipefail
OUT=${OUT:-results/table1-hanabi-full}
SP_STEPS=${SP_STEPS:-200000000}
OP_STEPS=${OP_STEPS:-200000000}
DISC_STEPS=${DISC_STEPS:-50000000}
COMMON=(--env hanabi --preset Hanabi-Full --agents 5 --k 6 --candidates 64 --top 11 --m 5
        --num-envs 1024 --num-steps 128 --hidden 512 --sp-steps "$SP_STEPS" --op-steps "$OP_STEPS"
        --discovery-steps "$DISC_STEPS" --discovery-lr 1e-5 --games 5000 --device cuda --out "$OUT")
.venv/bin/ers-deep table1 --algorithm sp-max-reg "${COMMON[@]}" --json > "$OUT.table1.json"
.venv/bin/ers-deep table2 --algorithms sp-max,sp-max-reg "${COMMON[@]}" --json > "$OUT.table2.json"
