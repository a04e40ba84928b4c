#!/usr/bin/env bash
# Train one SACT / baseline LSTM translator (architecture sact_lstm) on binarized data.
#
# Usage: examples/sact/train.sh DATA_BIN SAVE_DIR VARIANT [extra fairseq-train args...]
#   VARIANT: sact           tau_t = lambda ** tanh(w_c.c_(t-1) + u_s.s_t)   (the paper; SACT_LAMBDA)
#            sact_released  tau_t = lambda ** dropout(tanh(MLP([s_t; c_(t-1)])))   (the authors' code)
#            none           plain attention (the baseline)
#            fixed:TAU      a fixed attention temperature, e.g. fixed:0.8 (the paper's ablation)
# Env:   SRC (en), TGT (vi), ARCH (sact_lstm_iwslt_en_vi: the paper's 512-d, dropout 0.4),
#        SACT_LAMBDA (sact and sact_released only; default of the model: e), LR (3e-4, the authors'
#        value), BATCH_SIZE (64, the paper), CLIP_NORM (10, the paper), MAX_EPOCH (30), MAX_UPDATE
#        (0: no cap), DECAY_FROM (12: lr x 0.8 per epoch from this epoch, as the authors' code),
#        SEED (1), EVAL_BLEU (1: validation BLEU picks checkpoint_best.pt; 0: validation loss does),
#        BPE (EVAL_BLEU=1 only: sentencepiece for the ALT data, empty for word-level IWSLT),
#        PATIENCE (10), DEVICE_ARGS (e.g. --cpu or --fp16)
#        DRY_RUN=1 checks the training command with fairseq-train's parser, prints it and stops
#        (nothing is written)
# Training runs fairseq-train through ctemp-train, which carries the --patience count in the
# checkpoints: it resumes from SAVE_DIR/checkpoint_last.pt and stops where the uninterrupted run
# would have stopped; a finished run is left as it is.
# The log is appended to SAVE_DIR/train.log. SAVE_DIR/run_options.txt records the variant,
# architecture, languages, seed, learning rate, batch size, lambda, clip norm, decay start,
# checkpoint selection (EVAL_BLEU, BPE) and extra arguments of the run: once it holds a checkpoint,
# a re-run with others is refused, not trained on in the same run (MAX_EPOCH, MAX_UPDATE and
# PATIENCE may change: they say only where it stops). While it trains (and while a training it
# started runs on after it was killed) SAVE_DIR/.lock refuses a second train.sh in SAVE_DIR.
set -euo pipefail
{  # read whole before it runs: a checkout changed meanwhile (git pull) leaves a running script as it began
[ $# -ge 3 ] || { sed -n '2,/^set -euo/{/^#/p;}' "$0"; exit 2; }
data=$1 save=$2 variant=$3
shift 3
here=$(cd "$(dirname "$0")/../.." && pwd)
user_dir=${USER_DIR:-$here/fairseq_ctemp}
die() { echo "train.sh: error: $*" >&2; exit 2; }
source "$here/examples/run_options.sh"  # check_run_options, lock_save_dir
eval_bleu=${EVAL_BLEU:-1}
case $eval_bleu in 0|1) ;; *) die "EVAL_BLEU must be 1 or 0, got '$eval_bleu'" ;; esac
[ "$eval_bleu" = 1 ] || [ -z "${BPE:-}" ] || die "BPE is for validation BLEU: it goes with EVAL_BLEU=1 only"
[ -z "${SACT_LAMBDA:-}" ] || case $variant in sact|sact_released) ;;
  *) die "SACT_LAMBDA is only used by the sact and sact_released variants, not $variant" ;; esac

case $variant in
  sact|sact_released) temperature=(--attention-temperature "$variant" ${SACT_LAMBDA:+--sact-lambda "$SACT_LAMBDA"}) ;;
  none) temperature=(--attention-temperature none) ;;
  fixed:*) tau=${variant#fixed:}
    [[ $tau =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$ ]] && awk -v t="$tau" 'BEGIN { exit !(t > 0) }' \
      || die "VARIANT fixed:TAU needs a number TAU > 0, got '$tau'"
    temperature=(--attention-temperature fixed --fixed-attention-temperature "$tau") ;;
  *) echo "unknown VARIANT '$variant' (sact, sact_released, none or fixed:TAU)" >&2; exit 2 ;;
esac
selection=()
if [ "$eval_bleu" = 1 ]; then
  selection=(--eval-bleu --eval-bleu-args '{"beam": 1, "max_len_a": 1.5, "max_len_b": 10}'
             --eval-bleu-detok space ${BPE:+--eval-bleu-remove-bpe "$BPE"}
             --best-checkpoint-metric bleu --maximize-best-checkpoint-metric)
fi
command=(ctemp-train "$data" --user-dir "$user_dir" --task translation -s "${SRC:-en}" -t "${TGT:-vi}"
  --arch "${ARCH:-sact_lstm_iwslt_en_vi}" "${temperature[@]}"
  --criterion cross_entropy --optimizer adam --lr "${LR:-3e-4}" --clip-norm "${CLIP_NORM:-10}"
  --lr-scheduler fixed --force-anneal "${DECAY_FROM:-12}" --lr-shrink 0.8
  --batch-size "${BATCH_SIZE:-64}" --max-epoch "${MAX_EPOCH:-30}" --max-update "${MAX_UPDATE:-0}"
  --seed "${SEED:-1}" "${selection[@]}" --patience "${PATIENCE:-10}" --no-epoch-checkpoints
  --save-dir "$save" --log-format simple --log-interval 50 ${DEVICE_ARGS:-} "$@")
if [ -n "${DRY_RUN:-}" ]; then  # fairseq-train's parser takes it (a misspelt option, LR=abc: refused)
  python=$([ -x "$here/.venv/bin/python" ] && echo "$here/.venv/bin/python" || echo python3)
  PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" "$python" -m fairseq_ctemp.training_options train.sh \
    "${command[@]:1}" || exit 2
  printf '%q ' "${command[@]}"; echo
  exit 0
fi
options="variant=$variant arch=${ARCH:-sact_lstm_iwslt_en_vi} src=${SRC:-en} tgt=${TGT:-vi} seed=${SEED:-1} \
lr=${LR:-3e-4} batch_size=${BATCH_SIZE:-64} sact_lambda=${SACT_LAMBDA:-} clip_norm=${CLIP_NORM:-10} \
decay_from=${DECAY_FROM:-12} eval_bleu=$eval_bleu bpe=${BPE:-} extra:${*:+ $*}"
lock_save_dir "$save"  # one recipe at a time in a SAVE_DIR
check_run_options "$save" "$options"
"${command[@]}" 2>&1 | tee -a "$save/train.log"
exit
}
