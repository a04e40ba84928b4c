#!/usr/bin/env bash
# PTB language models trained to convergence on a CPU: every run ends by fairseq's early stopping
# on validation perplexity (not by a fixed budget), then is scored on valid and test.
#
# Usage: examples/language_model/ptb_converged_experiment.sh [train|status|results]
#   train    (default) trains and evaluates every variant of VARIANTS in EXP_DIR, JOBS runs at a
#            time (default 1); re-running resumes unfinished runs from their checkpoint_last.pt and
#            skips finished ones. Stop it by its own process id (kill PID, or Ctrl-C) or with pkill
#            -f: it stops its runs first (a TERM to one of its per-run subshells stops that run).
#            A run another recipe trains (its SAVE_DIR lock held) is left to it, not counted failed
#   status   where each run of VARIANTS stands (evaluated, trained, training now, unfinished,
#            not started), with its epochs, best and last validation perplexity, learning rate and
#            patience count; while train runs too (lm_results.py status; nothing is written)
#   results  the table (RESULTS.md / .csv), each row against softmax with a paired bootstrap over
#            the test sentences (RESULTS_compare.md / .csv; the rows of a further seed N also
#            against softmax@N: RESULTS_compare_seedN) and the validation curves
#            (RESULTS_valid_curves.png, points and learning rates in .csv) of the runs that have
#            finished; for the CT models among them, tau over the test text
#            (ctemp-ct-analysis): statistics (RESULTS_tau.md / .csv) and tau against sentence position
#            (RESULTS_tau_positions.png / .csv); each row over its seeds (with those of
#            EARLIER_TABLES) against softmax, the seed as the unit (RESULTS_seeds.md / .csv), and
#            against mos, constant-2 and mos-constant-2 where they are rows (RESULTS_seeds_vs_mos,
#            RESULTS_seeds_vs_constant-2, RESULTS_seeds_vs_mos-constant-2: CT-MoS against MoS, CT
#            and CT-MoS against the constant at the bottom of their tau's range). Run again into
#            the same RESULTS, it rebuilds the files of the results step before it, and refuses, before any work, where RESULTS holds files of the set
#            that it would not write again (a mix of two results); the files are moved into place
#            once all are written (a step that fails leaves the earlier ones as they were)
# Variants: softmax, constant-T (a fixed temperature T, loss scaled by T), ct (contextual
#   temperature), mos, ct-mos and mos-constant-T (MOS_COMPONENTS softmaxes), each optionally
#   suffixed @SEED for another seed (default seed 1), e.g. "ct@2". The default list is the comparison's first pass.
# Env: JOBS (1: runs trained side by side, each a process of its own; on a GPU several small runs
#      use it better than one, see docs/gpu.md; on a CPU set OMP_NUM_THREADS so that JOBS x threads
#      fits the cores),
#      EXP_DIR (runs/ptb_converged: data-bin/ptb and runs/<variant>), PTB_DIR (a local copy of
#      ptb.{train,valid,test}.txt; without it prepare.sh downloads PTB), VARIANTS,
#      EMBED_DIM (128), HIDDEN_SIZES (256,128), CT_RANK (64: ct, ct-mos), MOS_COMPONENTS (2: mos,
#      ct-mos), LR (3e-3),
#      PATIENCE (3: epochs without a better validation loss before stopping),
#      MAX_EPOCH (80, a safety net: a run that reaches it is reported as not converged; the softmax
#      run still improved at epoch 27, so 40 was too few),
#      RESULTS (examples/language_model/results/ptb_converged), DEVICE_ARGS (--cpu),
#      AR_TAR (on; off: every run without AR and TAR, --activation-regularization 0
#      --temporal-activation-regularization 0, by default in EXP_DIR runs/ptb_converged_no_ar_tar
#      and RESULTS .../ptb_converged_no_ar_tar: the comparison of the temperature rows without the
#      regularisers the loss scale leaves unscaled; a run directory trained otherwise is refused),
#      CLIP (on: every run clips its gradient norm at 0.25; off, with AR_TAR=off: no clipping, so a
#      constant loss scale (T of constant-T) reaches training nowhere, Adam's steps being blind to a
#      constant factor of the loss: the comparison of the temperature alone; by default in EXP_DIR
#      and RESULTS ..._no_clip. Refused with AR and TAR, which the scale leaves unscaled, for ct and
#      ct-mos, whose scale, their mean tau, changes with every batch; EARLIER_TABLES must be tables of
#      unclipped runs, which record their clip norm 0),
#      EARLIER_TABLES (results step: the RESULTS.csv tables of runs of the same comparison made in
#      another EXP_DIR, e.g. on a machine that is gone; the seeds tables count their runs too, each
#      seed of a row once; the other files hold this EXP_DIR's runs alone)
# Schedule: Adam, one validation per epoch (fairseq's reduce-on-plateau only sees end-of-epoch
# validations), lr x 0.5 after an epoch without improvement; interrupted runs resume from the last
# finished epoch with their early-stopping count (train.sh trains with ctemp-train), so they stop
# where they would have stopped uninterrupted. The checkpoint with the best validation loss
# (checkpoint_best.pt) is evaluated with evaluate.sh's protocol (140/70, every test token scored
# once; token count, zero probabilities and normalisation checked).
# Run it with OMP_NUM_THREADS=1: the sizes above were chosen for about two hours of one thread of a
# 2-core x86 CPU per run; the runs need longer (see examples/language_model/README.md).
set -euo pipefail
{  # read whole before it runs: a checkout changed meanwhile (git pull) leaves a running script as it began
usage() { sed -n '2,/^set -euo/{/^#/p;}' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
die() { echo "ptb_converged_experiment.sh: error: $*" >&2; exit 2; }
log() { echo "ptb_converged_experiment.sh: $*" >&2; }
[ $# -le 1 ] || usage
step=${1:-train}
case $step in train|status|results) ;; -h|--help) usage ;; *) die "unknown step '$step' (expected train, status or results)" ;; esac
here=$(cd "$(dirname "$0")" && pwd)
ar_tar=${AR_TAR:-on}
case $ar_tar in
  on) name=ptb_converged regularizers=() setting= ;;
  off) name=ptb_converged_no_ar_tar regularizers=(--activation-regularization 0 --temporal-activation-regularization 0)
       setting=", without AR and TAR" ;;
  *) die "AR_TAR must be on or off, got '$ar_tar'" ;;
esac
clip=${CLIP:-on}
case $clip in
  on) clipping=() ;;
  off)
    [ "$ar_tar" = off ] || die "CLIP=off needs AR_TAR=off: AR and TAR are added unscaled, so the loss scale would still act"
    name=${name}_no_clip setting="$setting, without gradient clipping" clipping=(--clip-norm 0) ;;
  *) die "CLIP must be on or off, got '$clip'" ;;
esac
exp=${EXP_DIR:-runs/$name}
export DATA_BIN=$exp/data-bin/ptb DEVICE_ARGS=${DEVICE_ARGS---cpu}
results=${RESULTS:-$here/results/$name}
variants=${VARIANTS:-softmax ct mos ct-mos constant-0.5 constant-2}
jobs=${JOBS:-1}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || die "JOBS must be a whole number >= 1, got '$jobs'"
for run in $variants; do  # checked before any work
  [[ $run =~ ^(softmax|ct|mos|ct-mos|(mos-)?constant-([0-9]+\.?[0-9]*|\.[0-9]+))(@[0-9]+)?$ ]] &&
    { [ -z "${BASH_REMATCH[3]}" ] || awk -v t="${BASH_REMATCH[3]}" 'BEGIN { exit !(t > 0) }'; } ||
    die "VARIANTS: bad entry '$run' (expected softmax, ct, mos, ct-mos, constant-T or mos-constant-T with T > 0, optionally @SEED)"
  if [ "$clip" = off ] && [[ $run == ct* ]]; then
    die "CLIP=off: $run's loss scale, its mean tau, changes with every batch, which Adam does not ignore (only softmax, mos and constant-T have a constant one)"
  fi
done
if [ "$step" = train ]; then  # the model and schedule settings too (fairseq would refuse them run by run)
  whole() { [[ $2 =~ ^[0-9]+$ ]] && [ "$((10#$2))" -ge "$3" ] || die "$1 must be a whole number >= $3, got '$2'"; }
  whole EMBED_DIM "${EMBED_DIM:-128}" 1
  whole CT_RANK "${CT_RANK:-64}" 1
  whole MOS_COMPONENTS "${MOS_COMPONENTS:-2}" 1
  whole PATIENCE "${PATIENCE:-3}" 1
  whole MAX_EPOCH "${MAX_EPOCH:-80}" 1
  [[ ${HIDDEN_SIZES:-256,128} =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] ||
    die "HIDDEN_SIZES must be whole numbers >= 1 separated by commas (e.g. 256,128), got '$HIDDEN_SIZES'"
  awk -v x="${LR:-3e-3}" 'BEGIN { exit !(x == x + 0 && x > 0) }' || die "LR must be a number > 0, got '$LR'"
fi
# one process per run directory: an entry twice would train it twice at once
repeated=$(printf '%s\n' $variants | sort | uniq -d | tr '\n' ' ')
[ -z "$repeated" ] || die "VARIANTS: ${repeated% } given more than once"

for run in $variants; do  # a run directory trained with the other AR_TAR or CLIP is not used
  save=$exp/runs/$run
  for setting in ar_tar clip; do
    trained= wanted=${!setting}
    [ -f "$save/$setting" ] && trained=$(cat "$save/$setting")
    [ -z "$trained" ] && [ -f "$save/checkpoint_last.pt" ] && trained=on  # runs from before the setting
    if [ -n "$trained" ] && [ "$trained" != "$wanted" ]; then
      die "$save was trained with ${setting^^}=$trained, not $wanted: use another EXP_DIR"
    fi
  done
done

train_one() {  # RUN: trained to early stopping, then evaluated on valid and test (in a subshell of
  # its own, which a TERM stops with its step: pkill -f hits it too)
  local run=$1 variant=${1%@*} seed=1 save=$exp/runs/$1
  [[ $run == *@* ]] && seed=${run#*@}
  trap '[ -z "${step:-}" ] || kill_tree "$step"; exit 143' TERM
  mkdir -p "$save" && echo "$ar_tar" > "$save/ar_tar" && echo "$clip" > "$save/clip"
  ARCH=ct_lstm_lm OPTIMIZER=adam LR=${LR:-3e-3} MAX_UPDATE=0 MAX_EPOCH=${MAX_EPOCH:-80} \
    PATIENCE=${PATIENCE:-3} MAX_TOKENS=1400 TOKENS_PER_SAMPLE=70 SEED=$seed LOG_INTERVAL=50 \
    SCHEDULER="--lr-scheduler reduce_lr_on_plateau --lr-shrink 0.5 --lr-patience 0" \
    run_step bash "$here/train.sh" ptb "$variant" "$save" "${model[@]}" $(head_sizes "$variant") \
    "${regularizers[@]}" "${schedule[@]}" "${clipping[@]}" > /dev/null
  for subset in valid test; do
    run_step bash "$here/evaluate.sh" "$save" ptb "$subset" > /dev/null
  done
}
run_step() {  # COMMAND...: run in the background and waited for, so that a TERM runs the trap at
  # once (bash defers a trap until a foreground child ends)
  "$@" &
  step=$!
  wait "$step"
}
reap_finished() {  # the runs that have ended leave pids; the failed ones go to failed, those
  # another recipe holds (the SAVE_DIR lock's exit status 75) to elsewhere
  local i status
  for i in "${!pids[@]}"; do
    kill -0 "${pids[$i]}" 2> /dev/null && continue
    status=0 && wait "${pids[$i]}" || status=$?
    case $status in
      0) log "${names[$i]} finished" ;;
      75) elsewhere+=("${names[$i]}"); log "${names[$i]} is in use by another recipe: left to it" ;;
      *) failed+=("${names[$i]}"); log "${names[$i]} failed (exit $status; see $exp/runs/${names[$i]}/train.log)" ;;
    esac
    unset "pids[$i]" "names[$i]"
  done
}
wait_for_fewer_than() {  # N: until fewer than N runs are running
  while [ ${#pids[@]} -ge "$1" ]; do sleep 1; reap_finished; done
}
kill_tree() {  # a run's processes, children first (background jobs of a script ignore Ctrl-C)
  local child
  for child in $(pgrep -P "$1"); do kill_tree "$child"; done
  kill -TERM "$1" 2> /dev/null || true
}

python=$([ -x "$here/../../.venv/bin/python" ] && echo "$here/../../.venv/bin/python" || echo python3)
if [ "$step" = status ]; then
  exec "$python" "$here/lm_results.py" status --runs "$exp/runs" --variants $variants
fi

if [ "$step" = train ]; then
  bash "$here/prepare.sh" ptb ${PTB_DIR:+"$PTB_DIR"}
  model=(--embed-dim "${EMBED_DIM:-128}" --lstm-hidden-sizes "${HIDDEN_SIZES:-256,128}" --dropout 0.2
         --dropout-input 0.2 --dropout-hidden 0.1 --dropout-embedding 0 --weight-dropout 0.2)
  head_sizes() {  # VARIANT: the head sizes it reads (the other heads refuse them)
    case $1 in ct|ct-mos) echo --ct-rank "${CT_RANK:-64}" ;; esac
    case $1 in mos|ct-mos|mos-constant-*) echo --mos-components "${MOS_COMPONENTS:-2}" ;; esac
  }
  schedule=(--no-epoch-checkpoints)
  pids=() names=() failed=() elsewhere=()
  stop() { for pid in "${pids[@]}"; do kill_tree "$pid"; done; exit "$1"; }
  trap 'stop 130' INT
  trap 'stop 143' TERM
  for run in $variants; do
    wait_for_fewer_than "$jobs"
    train_one "$run" &
    pids+=($!) names+=("$run")
    log "started $run (${#pids[@]} of JOBS=$jobs running)"
  done
  wait_for_fewer_than 1
  [ ${#elsewhere[@]} -eq 0 ] ||
    echo "ptb_converged_experiment.sh: in use by another recipe, left to it: ${elsewhere[*]}" >&2
  [ ${#failed[@]} -eq 0 ] || die "run(s) that failed: ${failed[*]} (see $exp/runs/RUN/train.log)"
  exit 0
fi

earlier=(${EARLIER_TABLES:-})
variants_of() { tail -n +2 "$1" | cut -d, -f1; }  # the run names of a RESULTS.csv table
for table in "${earlier[@]}"; do  # checked before any work
  [ -f "$table" ] || die "EARLIER_TABLES: no file $table"
  [ "$(head -c 8 "$table")" = "variant," ] || die "EARLIER_TABLES: $table is not a table of lm_results.py table (RESULTS.csv)"
  # the seeds step refuses runs of different clip norms, but takes a table without the column as it
  # is: one from before it was recorded, whose runs were clipped
  header=$(head -n 1 "$table" | tr -d '\r')
  [ "$clip" = on ] || [[ ,$header, == *,clip_norm,* ]] ||
    die "CLIP=off: EARLIER_TABLES $table does not record its runs' clip norm (a table of clipped runs)"
done
finished=() unfinished=()
for run in $variants; do
  if [ -f "$exp/runs/$run/eval_test.json" ]; then finished+=("$run"); else unfinished+=("$run"); fi
done
[ ${#finished[@]} -gt 0 ] || die "no finished run of VARIANTS ($variants) in $exp/runs (the status step says where each stands)"
# the results are of the finished runs alone: say which are left out
[ ${#unfinished[@]} -eq 0 ] ||
  echo "ptb_converged_experiment.sh: not finished, left out of the results: ${unfinished[*]}" >&2
for table in "${earlier[@]}"; do  # each seed of a row once (ct and ct@1 are one run)
  for run in $(variants_of "$table"); do
    for done_run in "${finished[@]}"; do
      [ "${run%@1}" != "${done_run%@1}" ] || die "EARLIER_TABLES: $table has $run, a run of $exp/runs too"
    done
  done
done
# what this step writes, decided before any work: the table; the seeds tables of the baselines that
# are rows (with those of EARLIER_TABLES); the comparisons paired over the test sentences, when
# softmax is the first run; the curves; tau of the CT runs
rows=$( (printf '%s\n' "${finished[@]}"; for table in "${earlier[@]}"; do variants_of "$table"; done) |
  sed 's/@.*//' | sort -u)
baselines=()
for baseline in softmax mos constant-2 mos-constant-2; do
  if grep -qx -- "$baseline" <<< "$rows"; then baselines+=("$baseline"); fi
done
seeds_name() { echo "_seeds$([ "$1" = softmax ] || echo "_vs_$1")"; }  # BASELINE: its table's
same_seed() {  # N: the finished runs of seed N but softmax@N
  local run
  for run in "${finished[@]}"; do
    if [[ $run == *@$1 && $run != softmax@$1 ]]; then echo "$run"; fi
  done
}
paired=() compare_seeds=()
if [ ${#finished[@]} -gt 1 ] && [ "${finished[0]}" = softmax ]; then
  paired=("${finished[@]}")
  for seed in $(printf '%s\n' "${finished[@]}" | sed -n 's/.*@//p' | sort -un); do
    if [ -f "$exp/runs/softmax@$seed/eval_test.json" ] && [ -n "$(same_seed "$seed")" ]; then
      compare_seeds+=("$seed")
    fi
  done
fi
ct_runs=()
for run in "${finished[@]}"; do
  case ${run%@*} in ct|ct-mos) ct_runs+=("$run") ;; esac
done
text=${PTB_DIR:-$exp/data-bin/ptb.raw}/ptb.test.txt
[ ${#ct_runs[@]} -eq 0 ] || [ -f "$text" ] ||
  die "no $text for the tau analysis of ${ct_runs[*]}: set PTB_DIR to the directory of ptb.test.txt"
# its files, RESULTS followed by each of these names
planned=(.{md,csv} _valid_curves.{png,csv})
for baseline in "${baselines[@]}"; do planned+=("$(seeds_name "$baseline")".{md,csv}); done
[ ${#paired[@]} -eq 0 ] || planned+=(_compare.{md,csv})
for seed in "${compare_seeds[@]}"; do planned+=("_compare_seed$seed".{md,csv}); done
[ ${#ct_runs[@]} -eq 0 ] || planned+=(_tau.{md,csv} _tau_positions.{png,csv})
# the step rebuilds its files; one of the set that it would not write again (an earlier step's from
# other runs, or one written by hand) would be left beside them, a mix of two results: refused
set_name='^(\.(md|csv)|_(seeds(_vs_(mos|constant-2|mos-constant-2))?|compare(_seed[0-9]+)?|tau)\.(md|csv)|_(valid_curves|tau_positions)\.(png|csv))$'
planned_has() { local name; for name in "${planned[@]}"; do [ "$name" != "$1" ] || return 0; done; return 1; }
stale=()
for file in "$results".* "$results"_*; do
  name=${file#"$results"}
  if [ -e "$file" ] && [[ $name =~ $set_name ]] && ! planned_has "$name"; then stale+=("$file"); fi
done
[ ${#stale[@]} -eq 0 ] || die "RESULTS $results has files of its set that this step (runs: ${finished[*]})" \
  "would not write again: ${stale[*]}; move them away or choose another RESULTS"

# written into a fresh folder beside RESULTS, moved into place once all are written: a step that
# fails leaves the files of the one before it as they were, not a mix of the two
mkdir -p "$(dirname "$results")"
stage=$(mktemp -d "$(dirname "$results")/.$(basename "$results").XXXXXX")
trap 'rm -rf "$stage"' EXIT
out=$stage/$(basename "$results")
"$python" "$here/lm_results.py" table --runs "$exp/runs" --variants "${finished[@]}" --output "$out"
# each row over its seeds, and against softmax with the seed as the unit (Welch's t-test); then the
# papers' own comparisons: CT-MoS against MoS (Wang et al.'s claim), CT and CT-MoS against the
# constant tau = 2 at the bottom of their range (RESULTS_seeds_vs_BASELINE)
for baseline in "${baselines[@]}"; do
  "$python" "$here/lm_results.py" seeds --table "${earlier[@]}" "$out.csv" --baseline "$baseline" \
    --output "$out$(seeds_name "$baseline")" > /dev/null
done
# each finished row against the softmax one, paired over the test sentences (a result evaluated
# before evaluate.sh wrote sentences gets them now), and the rows of each further seed N against
# softmax@N (RESULTS_compare_seedN)
if [ ${#paired[@]} -gt 0 ]; then
  for run in "${paired[@]}"; do bash "$here/evaluate.sh" "$exp/runs/$run" ptb test > /dev/null; done
  "$python" "$here/lm_results.py" compare --runs "$exp/runs" --variants "${paired[@]}" --output "${out}_compare"
fi
for seed in "${compare_seeds[@]}"; do
  "$python" "$here/lm_results.py" compare --runs "$exp/runs" --variants "softmax@$seed" $(same_seed "$seed") \
    --output "${out}_compare_seed$seed"
done
"$python" "$here/lm_results.py" plot --logs $(for v in "${finished[@]}"; do echo "$exp/runs/$v/train.log"; done) \
  --labels "${finished[@]}" --x epoch --title "PTB, LSTM to early stopping$setting: validation perplexity" \
  --output "${out}_valid_curves.png" --csv "${out}_valid_curves.csv" > /dev/null  # (its "wrote": the stage's)

# tau of the CT models over the test text: statistics, and tau against sentence position
if [ ${#ct_runs[@]} -gt 0 ]; then
  analysis=("$python" -m fairseq_ctemp.cli.ct_analysis)
  export PYTHONPATH="$here/../..${PYTHONPATH:+:$PYTHONPATH}"  # this checkout's fairseq_ctemp
  dumps=() checkpoints=()
  for run in "${ct_runs[@]}"; do
    dump=$exp/runs/$run/tau_test.tsv checkpoints+=("$exp/runs/$run/checkpoint_best.pt") dumps+=("$dump")
    [ -f "$dump" ] || "${analysis[@]}" dump --path "$exp/runs/$run/checkpoint_best.pt" --data "$DATA_BIN" \
      --text "$text" --output "$dump" --cpu
  done
  "$python" "$here/lm_results.py" tau --dumps "${dumps[@]}" --labels "${ct_runs[@]}" --output "${out}_tau"
  "${analysis[@]}" positions --path "${checkpoints[@]}" --labels "${ct_runs[@]}" --data "$DATA_BIN" --text "$text" \
    --stats target min max --cpu --title "PTB test$setting: tau against sentence position" \
    --output "${out}_tau_positions.png" > /dev/null
fi
for name in "${planned[@]}"; do
  mv -f "$out$name" "$results$name"
  echo "wrote $results$name"
done
exit
}
