#!/usr/bin/env bash
# Softmax tempering on your own binarized translation data, end to end:
#   train (tempered_ce, validation BLEU, early stopping) -> average the last checkpoints ->
#   greedy vs beam at the training temperature, scored with sacrebleu.
#
# Usage: examples/softmax_tempering/train_and_decode.sh DATA_BIN SAVE_DIR [T] [extra fairseq-train args...]
# Env:   ARCH (transformer), LABEL_SMOOTHING (0.1), SEM_WEIGHT (0), MAX_EPOCH (100), PATIENCE (10),
#        MAX_TOKENS (4096), LR (5e-4), AVERAGE (10 checkpoints), BEAM (5), DEVICE_ARGS (e.g. --cpu or --fp16),
#        GENERATE_ARGS (extra fairseq-generate options for the final decoding)
# A finished step is never redone or overwritten: re-running resumes training from
# SAVE_DIR/checkpoint_last.pt and skips averaging / scoring whose outputs exist. Training runs
# fairseq-train through ctemp-train, which carries the --patience count in the checkpoints: a resumed
# run stops where the uninterrupted one would have, and a run early stopping ended trains no more
# (plain fairseq-train would count its patience anew and train on past the averaged checkpoints).
# SAVE_DIR/run_options.txt records what the model is trained on (T, ARCH, LABEL_SMOOTHING,
# SEM_WEIGHT, LR, MAX_TOKENS, the extra arguments): once it holds a checkpoint, a re-run with others
# is refused, not trained on in the same run; SAVE_DIR/decode_options.txt what the average and the scores were made
# with (AVERAGE, BEAM, GENERATE_ARGS): a re-run with others is refused while they exist, and so is
# one that trains on past them (a larger MAX_EPOCH). While it works (and while a step it started
# runs on after it was killed) SAVE_DIR/.lock refuses a second train_and_decode.sh in SAVE_DIR.
# AVERAGE, BEAM and the final decoding's options (DEVICE_ARGS, GENERATE_ARGS) are checked first.
set -euo pipefail
{  # read whole before it runs: a checkout changed meanwhile (git pull) leaves a running script as it began
[ $# -ge 2 ] || { sed -n '2,/^set -euo/{/^#/p;}' "$0"; exit 2; }
data=$1 save=$2 temperature=${3:-4.0}
shift $(( $# >= 3 ? 3 : 2 ))
die() { echo "train_and_decode.sh: error: $*" >&2; exit 2; }
[ -d "$data" ] || die "DATA_BIN $data: no such directory"
awk -v t="$temperature" 'BEGIN { exit !(t == t + 0 && t >= 0.01 && t <= 100) }' \
  || die "T must be a number in [0.01, 100] (tempered_ce's range), got '$temperature'"
here=$(cd "$(dirname "$0")/../.." && pwd)
source "$here/examples/run_options.sh"  # check_run_options, lock_save_dir
user_dir=$here/fairseq_ctemp
average=${AVERAGE:-10}
[[ $average =~ ^[1-9][0-9]*$ ]] || die "AVERAGE must be a whole number >= 1, got '$average'"
[[ ${BEAM:-5} =~ ^[1-9][0-9]*$ ]] || die "BEAM must be a whole number >= 1, got '${BEAM:-5}'"
# the final decoding's options (ctemp-greedy-vs-beam's after --) checked now, not after the training
python=$([ -x "$here/.venv/bin/python" ] && echo "$here/.venv/bin/python" || echo python3)
[ -z "${DEVICE_ARGS:-}${GENERATE_ARGS:-}" ] || check=$(PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" "$python" \
  "$here/examples/softmax_tempering/check_decoding_options.py" --remove-bpe ${DEVICE_ARGS:-} ${GENERATE_ARGS:-} 2>&1) \
  || { echo "${check##*$'\n'}" >&2; exit 2; }  # its last line: fairseq's import logs before it
options="T=$temperature ARCH=${ARCH:-transformer} LABEL_SMOOTHING=${LABEL_SMOOTHING:-0.1} SEM_WEIGHT=${SEM_WEIGHT:-0} \
LR=${LR:-5e-4} MAX_TOKENS=${MAX_TOKENS:-4096} extra:${*:+ $*}"
lock_save_dir "$save"  # one recipe at a time in a SAVE_DIR: training, averaging and scoring
check_run_options "$save" "$options"
# what the average and the scores were made with (SAVE_DIR/decode_options.txt): a re-run with other
# ones is refused before any work, since the finished ones would be given as its answer
decode="AVERAGE=$average BEAM=${BEAM:-5} GENERATE_ARGS=${GENERATE_ARGS:-}"
if [ -f "$save/checkpoint_avg.pt" ] || [ -f "$save/greedy_vs_beam.json" ]; then
  made=$(cat "$save/decode_options.txt" 2>/dev/null || echo "no record")
  [ "$made" = "$decode" ] || die "SAVE_DIR $save was averaged and scored with '$made', not '$decode': \
move checkpoint_avg.pt, greedy_vs_beam.json and eval/ away to do them again"
fi

ctemp-train "$data" --user-dir "$user_dir" --save-dir "$save" \
  --arch "${ARCH:-transformer}" --share-decoder-input-output-embed \
  --criterion tempered_ce --softmax-temperature "$temperature" \
  --label-smoothing "${LABEL_SMOOTHING:-0.1}" --sem-weight "${SEM_WEIGHT:-0}" \
  --optimizer adam --adam-betas '(0.9,0.98)' --clip-norm 0.0 --lr "${LR:-5e-4}" \
  --lr-scheduler inverse_sqrt --warmup-updates 4000 --dropout 0.3 --weight-decay 0.0001 \
  --max-tokens "${MAX_TOKENS:-4096}" --max-epoch "${MAX_EPOCH:-100}" \
  --eval-bleu --eval-bleu-args '{"beam": 1}' --eval-bleu-remove-bpe \
  --best-checkpoint-metric bleu --maximize-best-checkpoint-metric --patience "${PATIENCE:-10}" \
  --keep-last-epochs "$average" --log-format simple --log-interval 100 \
  ${DEVICE_ARGS:-} "$@" 2>&1 | tee -a "$save.train.log"

# trained on since the average (a larger MAX_EPOCH or PATIENCE): it and the scores are of older checkpoints
[ ! -f "$save/checkpoint_avg.pt" ] || [ ! "$save/checkpoint_last.pt" -nt "$save/checkpoint_avg.pt" ] \
  || die "SAVE_DIR $save was trained on after checkpoint_avg.pt was made: move checkpoint_avg.pt, \
greedy_vs_beam.json and eval/ away to average and score the new checkpoints"
printf '%s\n' "$decode" > "$save/decode_options.txt"
if [ ! -f "$save/checkpoint_avg.pt" ]; then
  ctemp-average-checkpoints --inputs "$save" --num-epoch-checkpoints "$average" \
    --output "$save/checkpoint_avg.pt"
fi
if [ ! -f "$save/greedy_vs_beam.json" ]; then
  ctemp-greedy-vs-beam "$data" --checkpoint "$save/checkpoint_avg.pt" --beam "${BEAM:-5}" \
    --save-dir "$save/eval" --json "$save/greedy_vs_beam.json" -- --remove-bpe ${DEVICE_ARGS:-} ${GENERATE_ARGS:-}
fi
exit
}
