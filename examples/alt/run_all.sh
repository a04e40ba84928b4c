#!/usr/bin/env bash
# All stages for one or more directions: prepare.sh -> sweep.sh -> results.sh.
#
# Usage: examples/alt/run_all.sh DIRECTION... [data options] [sweep options] [-- fairseq-train options]
#   data options (prepare.sh): --release PATH | --local DIR | --download, --drop-incomplete,
#                              --spm-model-type T, --workers N
#   shared:                    --work W, --subwords spm|bpe, --vocab N, --train-subset N, --carve-test N
#   anything else goes to sweep.sh (--preset, --temperatures, --variants, --seed, --jobs, --gpus,
#                              --slurm, --dry-run, ...)
# Example (the mini experiment on the local En-Vi copy):
#   examples/alt/run_all.sh en-vi --local path/to/alt --preset mini --jobs 5
# With --dry-run nothing is prepared or started: the corpus is checked and the plan printed.
# Otherwise the sweep's options are checked (its --check: the GPUs and sbatch too) before any data
# are prepared.
# Re-run the same command to resume. With --slurm it stops after submitting the jobs: run
# results.sh when they are done.
set -euo pipefail
{  # read whole before it runs: a checkout changed meanwhile (git pull) leaves a running script as it began
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
dirs=() data=() shared=() sweep=() dry=0 slurm=0 work=${ALT_WORK:-runs/alt}
is_direction() { [[ $1 =~ ^[a-z]{2,3}-[a-z]{2,3}$ ]]; }
while [ $# -gt 0 ]; do
  case $1 in
    --) sweep+=("$@"); break ;;
    --release|--local|--spm-model-type|--workers) data+=("$1" "$2"); shift 2 ;;
    --release=*|--local=*|--spm-model-type=*|--workers=*|--download|--drop-incomplete) data+=("$1"); shift ;;
    --work) work=$2; shift 2 ;;
    --work=*) work=${1#--work=}; shift ;;
    --subwords|--vocab|--train-subset|--carve-test) shared+=("$1" "$2"); shift 2 ;;
    --subwords=*|--vocab=*|--train-subset=*|--carve-test=*) shared+=("$1"); shift ;;
    --dry-run) dry=1; sweep+=("$1"); shift ;;
    --slurm) slurm=1; sweep+=("$1"); shift ;;
    -*) sweep+=("$1"); shift
        if [ $# -gt 0 ] && [[ $1 != -* ]] && ! is_direction "$1"; then sweep+=("$1"); shift; fi ;;
    *) is_direction "$1" || { echo "run_all.sh: error: '$1' is not a direction (like en-vi)" >&2; exit 2; }
       dirs+=("$1"); shift ;;
  esac
done
[ ${#dirs[@]} -gt 0 ] || usage
if [ $dry = 1 ]; then
  echo "== dry run: checking the corpus (nothing is written)"
  check=() download=0 i=0
  while [ $i -lt ${#data[@]} ]; do
    case ${data[$i]} in
      --download) download=1 ;;
      --spm-model-type|--workers) i=$((i + 1)) ;;
      --spm-model-type=*|--workers=*) ;;
      *) check+=("${data[$i]}") ;;
    esac
    i=$((i + 1))
  done
  if [ $download = 1 ]; then echo "(--download: the release would be fetched first)"
  else "$python" -m fairseq_ctemp.cli.alt_data check "${dirs[@]}" ${check[@]+"${check[@]}"}; fi
else
  # the sweep's options checked before any data are prepared (--check writes nothing; the data
  # it warns are not prepared yet are stage 1's)
  if ! out=$("$here/sweep.sh" "${dirs[@]}" --check --work "$work" ${shared[@]+"${shared[@]}"} \
      ${sweep[@]+"${sweep[@]}"} 2>&1 > /dev/null); then
    grep -v "^warning: .* is not prepared: run ctemp-alt-data prepare" <<< "$out" >&2
    exit 2
  fi
  echo "== stage 1: data"
  "$here/prepare.sh" "${dirs[@]}" --work "$work" ${data[@]+"${data[@]}"} ${shared[@]+"${shared[@]}"}
fi
echo "== stage 2-3: sweep"
"$here/sweep.sh" "${dirs[@]}" --work "$work" ${shared[@]+"${shared[@]}"} ${sweep[@]+"${sweep[@]}"}
if [ $dry = 0 ] && [ $slurm = 0 ]; then
  echo "== stage 4: results"
  "$here/results.sh" --work "$work"
fi
exit
}
