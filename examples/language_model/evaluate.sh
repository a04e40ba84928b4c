#!/usr/bin/env bash
# Perplexity of a trained model with fairseq-eval-lm, with a fixed protocol and a token-count check.
#
# Usage: examples/language_model/evaluate.sh SAVE_DIR DATASET [SUBSET]
#   SUBSET  test (default) | valid | train
# Env: DATA_BIN (data-bin/DATASET), CHECKPOINT (checkpoint_best.pt, relative to SAVE_DIR),
#      TOKENS_PER_SAMPLE and CONTEXT_WINDOW (ptb/wikitext-2: 140 and 70; wikitext-103: 512 and 400),
#      MAX_TOKENS (eval batch, 8000), DEVICE_ARGS (--cpu when no GPU is visible)
# Protocol: fairseq-eval-lm cuts the SUBSET stream (one </s> per line) into blocks of
#   TOKENS_PER_SAMPLE - CONTEXT_WINDOW tokens that are scored, each preceded by up to CONTEXT_WINDOW
#   already-scored tokens as context; every token is scored exactly once. An LSTM starts every block
#   from a zero state (no state is carried across blocks), so its context is at most CONTEXT_WINDOW +
#   the block. Perplexity = 2^(mean base-2 NLL), unaffected by the training loss scale.
# Checks that the number of evaluated tokens equals the corpus count recorded by prepare.sh
# (DATA_BIN/counts.tsv: tokens + one </s> per line; PTB test: 82,430), that none has probability 0
# (fairseq-eval-lm would leave it out) and that every distribution the scores come from sums to 1
# over the vocabulary (fairseq_ctemp.lm_eval), and fails otherwise.
# Writes SAVE_DIR/eval_SUBSET.json (with CHECKPOINT other than checkpoint_best.pt:
# eval_SUBSET_<checkpoint name>.json), the full log next to it, and eval_SUBSET.sentences.tsv: each
# line's NLL (nats) and tokens, what lm_results.py compare resamples. An existing result is kept
# (refused when asked for another dataset, TOKENS_PER_SAMPLE or CONTEXT_WINDOW than it records, or
# when older than the checkpoint); a result without its sentences file gets one (the evaluation is
# rerun and must give its perplexity). Refused while SAVE_DIR is trained or evaluated by another
# recipe (SAVE_DIR/.lock: see train.sh).
set -euo pipefail
{  # read whole before it runs: a checkout changed meanwhile (git pull) leaves a running script as it began
usage() { sed -n '2,/^set -euo/{/^#/p;}' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 2 ] && [ $# -le 3 ] || usage
save=$1 dataset=$2 subset=${3:-test}
source "$(dirname "$0")/common.sh"
check_dataset "$dataset"
case $subset in train|valid|test) ;; *) die "unknown subset '$subset' (expected test, valid or train)" ;; esac
data=${DATA_BIN:-data-bin/$dataset}
checkpoint=${CHECKPOINT:-checkpoint_best.pt}
case $dataset in
  wikitext-103) tps=${TOKENS_PER_SAMPLE:-512} context=${CONTEXT_WINDOW:-400} ;;
  *) tps=${TOKENS_PER_SAMPLE:-140} context=${CONTEXT_WINDOW:-70} ;;
esac
check_count TOKENS_PER_SAMPLE "$tps" 1
check_count CONTEXT_WINDOW "$context" 0
check_count MAX_TOKENS "${MAX_TOKENS:-8000}" 1
tps=$((10#$tps)) context=$((10#$context))  # (as recorded: 070 is 70)
[ "$context" -lt "$tps" ] || die "CONTEXT_WINDOW ($context) must be smaller than TOKENS_PER_SAMPLE ($tps)"
name=eval_$subset
[ "$checkpoint" = checkpoint_best.pt ] || name=${name}_$(basename "$checkpoint" .pt)
result=$save/$name.json sentences=$save/$name.sentences.tsv
[ ! -d "$save" ] || lock_save_dir "$save"  # not while SAVE_DIR trains, nor two evaluations at once
if [ -f "$result" ]; then  # kept only as the answer to the same protocol, else refused
  asked="dataset=$dataset TOKENS_PER_SAMPLE=$tps CONTEXT_WINDOW=$context"
  made=$("$(python_bin)" -c 'import json, sys
try:
    r = json.load(open(sys.argv[1]))
    print("dataset=%s TOKENS_PER_SAMPLE=%s CONTEXT_WINDOW=%s" % (r["dataset"], r["tokens_per_sample"], r["context_window"]))
except (ValueError, KeyError, TypeError) as e:  # (not JSON, or not an evaluation record)
    sys.exit("%s: %s" % (type(e).__name__, e))' "$result" 2>&1) \
    || die "$result is not an evaluation record ($made): restore it, or move it away to evaluate again"
  [ "$made" = "$asked" ] || die "$result was evaluated with '$made', not '$asked': move it away, or give another SAVE_DIR or CHECKPOINT"
  [ ! "$save/$checkpoint" -nt "$result" ] \
    || die "$save/$checkpoint is newer than $result (trained on since): move $result away to evaluate it again"
fi
if [ -f "$result" ] && [ -f "$sentences" ]; then
  log "$result exists; not re-evaluating:"; cat "$result"; exit 0
fi
[ -f "$result" ] || [ ! -f "$sentences" ] \
  || die "$sentences exists without $result (an interrupted evaluation?): move it away to evaluate again"
[ -f "$save/$checkpoint" ] || die "no checkpoint $save/$checkpoint (train first, or set CHECKPOINT)"
[ -f "$data/$subset.idx" ] || die "no $subset split in $data (run prepare.sh $dataset first, or set DATA_BIN)"
expected=$(awk -v s="$subset" '$1 == s {print $3}' "$data/counts.tsv" 2>/dev/null || true)
[ -n "$expected" ] || die "$data/counts.tsv has no count for '$subset' (was $data made by prepare.sh?)"
device=${DEVICE_ARGS-}
auto_device=$([ -n "${DEVICE_ARGS+set}" ] && echo 0 || echo 1)  # 1: --cpu when no GPU is visible

eval_args=("$data" --user-dir "$user_dir" --path "$save/$checkpoint"
  --gen-subset "$subset" --tokens-per-sample "$tps" --context-window "$context"
  --max-tokens "${MAX_TOKENS:-8000}" --num-workers 0 $device)
log_file=$save/$name.log
only_sentences=$([ -f "$result" ] && echo 1 || echo 0)
[ "$only_sentences" = 0 ] || log_file=$save/$name.sentences.log  # the first evaluation's log is kept
# fairseq-eval-lm through its Python API (fairseq_ctemp.lm_eval): typed results and the count of
# scored tokens, not its log text.
PYTHONPATH="$repo_root${PYTHONPATH:+:$PYTHONPATH}" "$(python_bin)" "$lm_here/eval_checkpoint.py" "$result" \
  "$expected" "$dataset" "$subset" "$save/$checkpoint" "$tps" "$context" "$auto_device" "${eval_args[@]}" \
  > "$log_file" 2>&1 || {
    last=$(tail -n 1 "$log_file")  # eval_checkpoint.py's own refusal: that line alone
    case $last in "evaluate.sh: error: "*) echo "$last (log: $log_file)" >&2; exit 1 ;; esac
    tail -20 "$log_file" >&2; die "evaluation failed (log: $log_file)"
  }
[ "$only_sentences" = 0 ] || log "wrote $sentences ($result kept)"
cat "$result"
exit
}
