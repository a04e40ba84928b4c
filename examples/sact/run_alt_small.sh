#!/usr/bin/env bash
# The small-scale CPU experiment of docs/sact.md: ALT En->Vi, baseline vs SACT (and any other
# variants) with the same budget: same small model, data, seed, batches and --max-update; scored by
# sacrebleu on the ALT dev set (the local ALT copy has no test split), beam 5, checkpoint_last.pt.
#
# Usage: examples/sact/run_alt_small.sh WORK_DIR [LOCAL_ALT_DIR]
# Env:   VARIANTS ("none sact"; see train.sh: sact, sact_released, none, fixed:TAU), MAX_UPDATE (420),
#        SPM_VOCAB (4000), THREADS (1: OMP/MKL threads per run),
#        INIT_FROM (a finished WORK_DIR of this script with a smaller MAX_UPDATE: each variant continues
#        from its checkpoint_last.pt, on its data, instead of starting again; fairseq resumes exactly)
# Writes WORK_DIR/data (prepare_alt_en_vi.sh; not with INIT_FROM), WORK_DIR/<variant>/ (train.log,
# time.txt, valid.beam5.{hyp,json}) and WORK_DIR/summary.txt. Finished steps are skipped, never redone.
# Every variant is checked (train.sh's dry run) before any data are prepared or runs trained.
set -euo pipefail
{  # read whole before it runs: a checkout changed meanwhile (git pull) leaves a running script as it began
[ $# -ge 1 ] || { sed -n '2,/^set -euo/{/^#/p;}' "$0"; exit 2; }
work=$1 local_dir=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
export OMP_NUM_THREADS=${THREADS:-1} MKL_NUM_THREADS=${THREADS:-1}
variants=${VARIANTS:-none sact}
data=${INIT_FROM:-$work}/data
small=(--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 256 --encoder-hidden-size 128
       --decoder-embed-dim 256 --decoder-hidden-size 256 --decoder-out-embed-dim 256 --dropout 0.3
       --lr 1e-3 --num-workers 0 --cpu)
train() {  # train.sh of variant $1 (with DRY_RUN=1 its checks alone: nothing is written)
  SRC=en TGT=vi ARCH=sact_lstm EVAL_BLEU=0 MAX_UPDATE=${MAX_UPDATE:-420} MAX_EPOCH=100 \
    bash "$here/train.sh" "$data/bin" "$work/${1/:/}" "$1" "${small[@]}"
}
for variant in $variants; do DRY_RUN=1 train "$variant" > /dev/null; done  # all, before any work
SPM_VOCAB=${SPM_VOCAB:-4000} bash "$here/prepare_alt_en_vi.sh" "$data" "$local_dir"

for variant in $variants; do
  save=$work/${variant/:/}
  if [ ! -f "$save/time.txt" ]; then
    mkdir -p "$save"
    if [ -n "${INIT_FROM:-}" ] && [ ! -f "$save/checkpoint_last.pt" ]; then
      cp "$INIT_FROM/${variant/:/}/checkpoint_last.pt" "$save/checkpoint_last.pt"
    fi
    start=$(date +%s)
    TIMEFORMAT="wall %R s, user %U s, sys %S s"
    { time train "$variant" > /dev/null ; } 2> "$save/time.tmp"
    echo "started $(date -d @"$start" '+%F %T'), $(cat "$save/time.tmp")" > "$save/time.txt"
    rm -f "$save/time.tmp"
  fi
  SRC=en TGT=vi CHECKPOINT=checkpoint_last.pt BPE=sentencepiece DEVICE_ARGS=--cpu \
    bash "$here/evaluate.sh" "$data/bin" "$save" valid "$data/raw/dev.vi" > /dev/null
done
# summarize.py reads the logs with this checkout's fairseq_ctemp
PYTHONPATH="$here/../..${PYTHONPATH:+:$PYTHONPATH}" python "$here/summarize.py" "$work" valid 5 $variants \
  | tee "$work/summary.txt"
exit
}
