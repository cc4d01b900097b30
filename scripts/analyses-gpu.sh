#!/usr/bin/env bash
# The paper's three analyses at full scale, for a CUDA machine (every stage resumes: rerun after a kill).
#
# 1. Overcooked V2 cross-play distribution ("XP score distribution"): the population protocol on
#    grounded_coord_simple with the official CNN + GRU (conv 128, GRU 128) at 256 envs x 256 steps, 64
#    minibatches; P = 5 agents, each ER agent k = 12 self-play seeds, l = 16 symmetries by Algorithm 3
#    (xp-max) out of CANDIDATES, m = 3 OP seeds. The IPPO population (the best self-play seed of each agent)
#    is the paper's baseline of 5 IPPO agents. Then the histogram of both populations' pairwise XP.
# 2. OP-optimality preservation ("Preserves OP Optimality") and 3. conditional action matrices
#    ("Interpretability") on the Hanabi-Full run of scripts/table1-gpu.sh (5 OP^Phi policies per agent with
#    its 11 sp-max-reg symmetries; the best cross-play agent of each population). Run that script first, or
#    set HANABI to its output folder; the Hanabi steps are skipped when the folder has no table1.json.
#
# Budgets are per seed / per candidate: the paper trains Overcooked seeds for 3e7 steps and runs each
# discovery inner loop for 1.5e8; raise or lower them to the device time at hand.
set -euo pipefail
OC=${OC:-results/table1-overcooked-gpu}
HANABI=${HANABI:-results/table1-hanabi-full}
SP_STEPS=${SP_STEPS:-30000000}
OP_STEPS=${OP_STEPS:-30000000}
DISC_STEPS=${DISC_STEPS:-150000000}
CANDIDATES=${CANDIDATES:-32}
GAMES=${GAMES:-1000}
.venv/bin/ers-deep table1 --env overcooked-v2 --agents 5 --k 12 --candidates "$CANDIDATES" --top 16 --m 3 \
    --algorithm xp-max --num-envs 256 --num-steps 256 --minibatches 64 --hidden 128 --conv 128 \
    --sp-steps "$SP_STEPS" --op-steps "$OP_STEPS" --discovery-steps "$DISC_STEPS" --games "$GAMES" \
    --device cuda --out "$OC" --json > "$OC.table1.json"
.venv/bin/ers-deep xp-distribution --populations "IPPO=$OC:ippo,ER (xp-max)=$OC:op-er" \
    --out "$OC/analysis" --json > "$OC.xp-distribution.json"
.venv/bin/ers-deep action-matrix --table1 "$OC" --games "$GAMES" --json > "$OC.action-matrix.json"
if [[ -f "$HANABI/table1.json" ]]; then
    .venv/bin/ers-deep action-matrix --table1 "$HANABI" --games 10000 --json > "$HANABI.action-matrix.json"
    .venv/bin/ers-deep xp-distribution --table1 "$HANABI" --json > "$HANABI.xp-distribution.json"
    for agent in "$HANABI"/agent-*; do
        .venv/bin/ers-deep op-preservation --discovery "$agent/discovery-sp-max-reg" --pool "$agent/op-er" \
            --games 5000 --out "$agent/analysis" --json > "$agent.op-preservation.json"
    done
fi
