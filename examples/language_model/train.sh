#!/usr/bin/env bash
# Train one language-model variant on a prepared corpus (prepare.sh), with ct_cross_entropy.
#
# Usage: examples/language_model/train.sh DATASET VARIANT SAVE_DIR [extra fairseq-train args...]
#   DATASET  ptb | wikitext-2 | wikitext-103     (reads DATA_BIN, default data-bin/DATASET)
#   VARIANT  softmax      single softmax, no temperature (--ct-normalization none)
#            constant-T   single softmax at a constant temperature T > 0, e.g. constant-2
#            ct           single softmax with contextual temperature (AAAI paper, Eq. 4-6)
#            mos          Mixture of Softmaxes, no temperature            (ptb, wikitext-2 only)
#            ct-mos       Mixture of Softmaxes with contextual temperature (ptb, wikitext-2 only)
#            mos-constant-T  Mixture of Softmaxes at a constant temperature T > 0 (ptb, wikitext-2
#                         only): the fixed temperature a CT-MoS's tau may settle at, e.g. mos-constant-2
# Env (defaults per dataset, see README.md):
#   ARCH               architecture (ptb: ct_lstm_lm = AWD-LSTM for single-softmax variants,
#                      mos_lstm_lm_ptb / ct_mos_lstm_lm_ptb for MoS; wikitext-2: same with _wt2 and
#                      the AWD-LSTM WT2 dropouts; wikitext-103: ct_transformer_lm_wt103)
#   OPTIMIZER          sgd (LSTMs) | adam (wikitext-103); LR (sgd: 30, MoS 20; adam: 2.5e-4)
#   MAX_EPOCH (ptb/wt2: 500), MAX_UPDATE (wt103: 200000; 0 = no limit), PATIENCE (ptb/wt2: 20 epochs)
#   MAX_TOKENS (tokens per batch per device), TOKENS_PER_SAMPLE (BPTT length: 70; wt103: 512)
#   SCHEDULER          the whole --lr-scheduler option block (ptb/wt2: reduce_lr_on_plateau, lr x 0.25
#                      after a validation without improvement; wt103: cosine with 4000 warm-up updates)
#   SEED (1), LOG_INTERVAL (100), DEVICE_ARGS (e.g. --cpu, or --fp16 on GPUs)
#   DRY_RUN=1          check the training command with fairseq-train's parser, print it and stop
#                      (nothing is written)
# Extra arguments are appended last, so they override any default above (e.g. --lr-scheduler ...).
# Logs go to SAVE_DIR/train.log (--log-format json, appended); each start adds a line to
# SAVE_DIR/command.txt (the environment that sets its speed, the command, the machine, the
# checkout's commit).
# Training runs fairseq-train through ctemp-train, which carries the --patience count in the
# checkpoints: re-running resumes from SAVE_DIR/checkpoint_last.pt and stops where the uninterrupted
# run would have stopped; a finished run (SAVE_DIR/train.done) is skipped. SAVE_DIR/run_options.txt
# records the dataset, variant, architecture, seed, optimiser, learning-rate schedule (with
# MAX_UPDATE: fairseq's cosine schedule takes its period from it), batch and extra arguments of the
# run: once it holds a checkpoint, a re-run with others is refused (MAX_EPOCH and PATIENCE may
# change: they say only where it stops). While it trains (and while a training it started runs on
# after it was killed) SAVE_DIR/.lock refuses a second train.sh or evaluate.sh in SAVE_DIR.
set -euo pipefail
{  # read whole before it runs: a checkout changed meanwhile (git pull) leaves a running script as it began
usage() { sed -n '2,/^set -euo/{/^#/p;}' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 3 ] || usage
dataset=$1 variant=$2 save=$3
shift 3
source "$(dirname "$0")/common.sh"
check_dataset "$dataset"
data=${DATA_BIN:-data-bin/$dataset}

# Variant -> output head and temperature.
constant() {  # PREFIX: the options of VARIANT PREFIXconstant-T, T a number > 0
  local t=${variant#"$1"constant-}
  [[ $t =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)$ ]] && awk "BEGIN{exit !($t > 0)}" ||
    die "bad variant '$variant': $1constant-T needs a number T > 0, e.g. $1constant-2"
  ct=(--ct-normalization constant --ct-constant "$t")
}
case $variant in
  softmax) head=softmax ct=(--ct-normalization none) ;;
  constant-*) head=softmax; constant "" ;;
  ct) head=softmax ct=(--ct-normalization softmax) ;;
  mos) head=mos ct=(--ct-normalization none) ;;
  ct-mos) head=mos ct=(--ct-normalization softmax) ;;
  mos-constant-*) head=mos; constant mos- ;;
  *) die "unknown variant '$variant' (expected softmax, constant-T, ct, mos, ct-mos or mos-constant-T)" ;;
esac

# Dataset presets. LSTMs: the AWD-LSTM / MoS papers' model sizes and dropouts; their optimiser
# (SGD then NT-ASGD, variable BPTT) is not in fairseq: plain SGD with gradient clipping 0.25 and
# reduce-on-plateau (lr x 0.25 after a validation without improvement) stands in for it.
case $dataset in
  ptb|wikitext-2)
    [ "$head" = mos ] && lr_default=20 || lr_default=30
    if [ "$dataset" = ptb ]; then
      mos_arch=mos_lstm_lm_ptb ct_mos_arch=ct_mos_lstm_lm_ptb
      preset=() tokens=1400            # AWD-LSTM: batch 20 x 70; MoS: 12 x 70
      [ "$head" = mos ] && tokens=840
    else
      mos_arch=mos_lstm_lm_wt2 ct_mos_arch=ct_mos_lstm_lm_wt2
      preset=(--dropout-input 0.65 --dropout-hidden 0.2)   # AWD-LSTM on WikiText-2 (ct_lstm_lm only)
      tokens=5600                      # AWD-LSTM: 80 x 70; MoS: 15 x 70
      [ "$head" = mos ] && tokens=1050
    fi
    case $variant in
      mos|mos-constant-*) arch_default=$mos_arch preset=() ;;
      ct-mos) arch_default=$ct_mos_arch preset=() ;;
      *) arch_default=ct_lstm_lm ;;
    esac
    [ -n "${ARCH:-}" ] && preset=()
    optimizer=${OPTIMIZER:-sgd} tokens_per_sample=${TOKENS_PER_SAMPLE:-70}
    max_epoch=${MAX_EPOCH:-500} max_update=${MAX_UPDATE:-0} patience=${PATIENCE:-20}
    scheduler=(--lr-scheduler reduce_lr_on_plateau --lr-shrink 0.25 --lr-patience 0)
    weight_decay=1.2e-6 ;;
  wikitext-103)
    [ "$head" = mos ] && die "variant '$variant' is not defined for wikitext-103 (267k words: the \
model uses an adaptive softmax; a Mixture of Softmaxes over the full vocabulary does not fit)"
    arch_default=ct_transformer_lm_wt103 preset=() head=adaptive lr_default=2.5e-4
    optimizer=${OPTIMIZER:-adam} tokens_per_sample=${TOKENS_PER_SAMPLE:-512} tokens=4096
    max_epoch=${MAX_EPOCH:-0} max_update=${MAX_UPDATE:-200000} patience=${PATIENCE:--1}
    scheduler=(--lr-scheduler cosine --warmup-updates 4000 --warmup-init-lr 1e-7)
    weight_decay=0 ;;
esac
[ -n "${SCHEDULER:-}" ] && read -r -a scheduler <<< "$SCHEDULER"
case $optimizer in
  sgd) opt=(--optimizer sgd --lr "${LR:-$lr_default}") ;;
  adam)
    [ -z "${LR:-}" ] && [ "$dataset" != wikitext-103 ] && lr_default=1e-3
    opt=(--optimizer adam --adam-betas '(0.9,0.999)' --lr "${LR:-$lr_default}") ;;
  *) opt=(--optimizer "$optimizer" --lr "${LR:-$lr_default}") ;;
esac

command=("$(tool ctemp-train)" "$data" --user-dir "$user_dir" --task language_modeling
  --save-dir "$save" --arch "${ARCH:-$arch_default}" "${preset[@]}" --output-head "$head" "${ct[@]}"
  --criterion ct_cross_entropy --best-checkpoint-metric nll_loss
  "${opt[@]}" "${scheduler[@]}" --clip-norm 0.25 --weight-decay "$weight_decay"
  --tokens-per-sample "$tokens_per_sample" --sample-break-mode none
  --max-tokens "${MAX_TOKENS:-$tokens}" --required-batch-size-multiple 1
  --max-epoch "$max_epoch" --max-update "$max_update" --patience "$patience"
  --seed "${SEED:-1}" --log-format json --log-interval "${LOG_INTERVAL:-100}" --num-workers 0
  ${DEVICE_ARGS:-} "$@")
if [ -n "${DRY_RUN:-}" ]; then  # fairseq-train's parser takes it (a misspelt option, LR=abc: refused)
  PYTHONPATH="$repo_root${PYTHONPATH:+:$PYTHONPATH}" "$(python_bin)" -m fairseq_ctemp.training_options \
    "$script_name" "${command[@]:1}" || exit 2
  printf '%q ' "${command[@]}"; echo
  exit 0
fi

[ -f "$data/dict.txt" ] || die "no prepared corpus in $data (run: prepare.sh $dataset [DATA_DIR], or set DATA_BIN)"
lock_save_dir "$save"  # one recipe at a time in a SAVE_DIR
check_run_options "$save" "dataset=$dataset variant=$variant arch=${ARCH:-$arch_default} seed=${SEED:-1} \
${opt[*]} ${scheduler[*]} max_update=$max_update tokens_per_sample=$tokens_per_sample \
max_tokens=${MAX_TOKENS:-$tokens} extra:${*:+ $*}"
if [ -f "$save/train.done" ]; then
  log "$save is finished ($(cat "$save/train.done")); skipping training"
  exit 0
fi
mkdir -p "$save"
# the code that trains: this checkout's commit (provenance.py, run as a file: -I keeps the package's
# own modules off sys.path, and fairseq is not imported)
commit=$("$(python_bin)" -I "$user_dir/provenance.py")
# the machine: its CPU model and torch's instruction set (AVX2, AVX512) change the last digits
host=$("$(python_bin)" -I "$user_dir/host.py")
{  # each start of the run, with the environment that sets its speed (not its numbers), the machine
   # and the commit
  printf 'OMP_NUM_THREADS=%q THP_MEM_ALLOC_ENABLE=%q MALLOC_MMAP_MAX_=%q MALLOC_TRIM_THRESHOLD_=%q ' \
    "${OMP_NUM_THREADS:-}" "${THP_MEM_ALLOC_ENABLE:-}" "${MALLOC_MMAP_MAX_:-}" "${MALLOC_TRIM_THRESHOLD_:-}"
  printf '%q ' "${command[@]}"; echo "# host $host # commit $commit"
} >> "$save/command.txt"
log "training $dataset/$variant in $save (log: $save/train.log)"
start=$(date +%s)
"${command[@]}" 2>&1 | tee -a "$save/train.log"
[ -f "$save/checkpoint_last.pt" ] || die "training ended without $save/checkpoint_last.pt (see $save/train.log)"
echo "dataset=$dataset variant=$variant seconds=$(( $(date +%s) - start )) date=$(date -u +%FT%TZ)" > "$save/train.done"
exit
}
