#!/usr/bin/env bash
# Small-scale PTB comparison on a CPU: one small model, one fixed budget for all.
#
# Usage: examples/language_model/ptb_small_experiment.sh
# Variants (same model, optimiser, seed and --max-update): softmax, constant-{0.5,1,2,4}, ct, and
# (unless SKIP_MOS=1) mos and ct-mos with MOS_COMPONENTS softmaxes, then constant-4+noscale (a
# VARIANT+noscale is VARIANT trained with --no-loss-scaling). Each is trained with train.sh
# and its final checkpoint (checkpoint_last.pt, the model at the budget) evaluated with evaluate.sh
# on PTB valid and test (protocol 140/70); then the softmax run is also evaluated on test with other
# eval-lm block/context settings (PROTOCOLS) to show how much the protocol moves the numbers.
# Env: EXP_DIR (runs/ptb_small: data-bin/ptb and runs/<variant>), PTB_DIR (a local copy of PTB's
#      ptb.{train,valid,test}.txt; without it prepare.sh downloads PTB),
#      MAX_UPDATE (200), LR (3e-3), VARIANTS (all of the above, in that order), MOS_COMPONENTS (2: mos,
#      ct-mos), CT_RANK (100: ct, ct-mos), RESULTS (examples/language_model/results/ptb_small),
#      DEVICE_ARGS (--cpu)
# Results: RESULTS.md / RESULTS.csv (the table), RESULTS_protocols.md, and
#          examples/language_model/img/ptb_small_valid_curves.png (learning curves).
# Every step that has finished is skipped, so re-running only does what is missing. Every variant
# (train.sh's dry run) and protocol is checked before any data are prepared or runs trained.
# Run it with OMP_NUM_THREADS=1 for the timings in README.md (one thread, one run at a time).
set -euo pipefail
{  # read whole before it runs: a checkout changed meanwhile (git pull) leaves a running script as it began
[ $# -eq 0 ] || { sed -n '2,/^set -euo/{/^#/p;}' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
exp=${EXP_DIR:-runs/ptb_small}
export DATA_BIN=$exp/data-bin/ptb DEVICE_ARGS=${DEVICE_ARGS---cpu}
results=${RESULTS:-$here/results/ptb_small}
max_update=${MAX_UPDATE:-200}
die() { echo "ptb_small_experiment.sh: error: $*" >&2; exit 2; }
case ${SKIP_MOS:-0} in 0|1) ;; *) die "SKIP_MOS must be 0 or 1, got '$SKIP_MOS'" ;; esac
[ "${SKIP_MOS:-0}" = 0 ] || [ -z "${VARIANTS:-}" ] ||
  die "SKIP_MOS acts on the default VARIANTS only: with VARIANTS, leave mos and ct-mos out of it"
variants=${VARIANTS:-softmax constant-1 constant-0.5 constant-2 constant-4 ct}
[ "${SKIP_MOS:-0}" = 1 ] || [ -n "${VARIANTS:-}" ] || variants="$variants mos ct-mos"
[ -n "${VARIANTS:-}" ] || variants="$variants constant-4+noscale"

# The small model: tied 200-dim embeddings, LSTMs 400-200, light AWD-LSTM regularisation (the budget
# is a fraction of an epoch), Adam with linear decay to 0 over the budget, BPTT 70, batch 20 x 70.
model=(--embed-dim 200 --lstm-hidden-sizes 400,200 --dropout 0.2 --dropout-input 0.2
       --dropout-hidden 0.1 --dropout-embedding 0 --weight-dropout 0.2)
head_sizes() {  # VARIANT: the head sizes it reads (the other heads refuse them)
  case $1 in ct|ct-mos) echo --ct-rank "${CT_RANK:-100}" ;; esac
  case $1 in mos|ct-mos) echo --mos-components "${MOS_COMPONENTS:-2}" ;; esac
}
validation=(--validate-interval-updates 50 --max-valid-steps 10 --no-epoch-checkpoints)
train() {  # train.sh of variant $1 (with DRY_RUN=1 its checks alone: nothing is written)
  local scaling=()
  [[ $1 == *+noscale ]] && scaling=(--no-loss-scaling)
  ARCH=ct_lstm_lm OPTIMIZER=adam LR=${LR:-3e-3} MAX_UPDATE=$max_update MAX_EPOCH=0 PATIENCE=-1 \
    MAX_TOKENS=1400 TOKENS_PER_SAMPLE=70 SEED=1 LOG_INTERVAL=25 \
    SCHEDULER="--lr-scheduler polynomial_decay --warmup-updates 20 --total-num-update $max_update" \
    bash "$here/train.sh" ptb "${1%+noscale}" "$exp/runs/$1" "${model[@]}" $(head_sizes "${1%+noscale}") \
    "${validation[@]}" "${scaling[@]}" > /dev/null
}
protocols=${PROTOCOLS:-70/0 70/35 280/210}
for p in $protocols; do  # checked before any work, as every variant below
  [[ $p =~ ^([1-9][0-9]*)/([0-9]+)$ ]] && [ "${BASH_REMATCH[2]}" -lt "${BASH_REMATCH[1]}" ] ||
    die "PROTOCOLS: bad entry '$p' (expected TOKENS_PER_SAMPLE/CONTEXT_WINDOW, the window the smaller, e.g. 70/35)"
done
for variant in $variants; do DRY_RUN=1 train "$variant"; done
bash "$here/prepare.sh" ptb ${PTB_DIR:+"$PTB_DIR"}

for variant in $variants; do
  save=$exp/runs/$variant
  train "$variant"
  for subset in valid test; do
    CHECKPOINT=checkpoint_last.pt bash "$here/evaluate.sh" "$save" ptb "$subset" > /dev/null
  done
done

# How the eval-lm protocol (block length / context window) moves the perplexity of the same model.
for variant in softmax; do
  [[ " $variants " == *" $variant "* ]] || continue
  for p in $protocols; do
    out=$exp/runs/$variant/protocol_${p%/*}_${p#*/}
    mkdir -p "$out"
    [ -f "$out/checkpoint_last.pt" ] || ln -s ../checkpoint_last.pt "$out/checkpoint_last.pt"
    TOKENS_PER_SAMPLE=${p%/*} CONTEXT_WINDOW=${p#*/} CHECKPOINT=checkpoint_last.pt \
      bash "$here/evaluate.sh" "$out" ptb test > /dev/null
  done
done

mkdir -p "$(dirname "$results")" "$here/img"
python=$([ -x "$here/../../.venv/bin/python" ] && echo "$here/../../.venv/bin/python" || echo python3)
export PYTHONPATH="$here/../..${PYTHONPATH:+:$PYTHONPATH}"  # lm_results.py imports this checkout's fairseq_ctemp
"$python" "$here/lm_results.py" table --runs "$exp/runs" --variants $variants \
  --eval-suffix _checkpoint_last --output "$results" --force
"$python" "$here/lm_results.py" protocols --runs "$exp/runs" --variants softmax \
  --output "${results}_protocols.md" --force
"$python" "$here/lm_results.py" plot --logs $(for v in $variants; do echo "$exp/runs/$v/train.log"; done) \
  --labels $variants --x update --title "PTB, small LSTM, $max_update updates: partial valid set (15k tokens)" \
  --output "$here/img/ptb_small_valid_curves.png" --force
exit
}
