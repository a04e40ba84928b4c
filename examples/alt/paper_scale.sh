#!/usr/bin/env bash
# The paper-scale ALT sweep on one CUDA machine, start to finish in one go: data (a test split carved
# from train where the copy has none), every run trained, averaged, decoded and calibrated there,
# finalize (T_opt, tuned beam, significance, timing, post-hoc t*), the result tables, and then the
# results alone (JSON, CSV, Markdown, PNG, logs; no checkpoints, no data) packed into
# RESULTS/alt-results.tar.gz. Several runs can share a GPU (--runs-per-gpu): small models leave
# much of it idle.
#
# Usage: examples/alt/paper_scale.sh DIRECTION... --local DIR --results DIR [--work runs/alt]
#            [--carve-test 1000] [--runs-per-gpu K] [--wheels DIR] [run_all.sh / sweep options]
#            [-- fairseq-train options]
#   --local DIR       the ALT copy, DIR/{train,dev[,test]}.<lang>; with test files they are the test
#                     split (pass --carve-test 0), else --carve-test N (default 1000) carves one
#   --results DIR     where alt-results.tar.gz goes (created; an existing archive is refused)
#   --runs-per-gpu K  runs at a time on each visible GPU (default 1; not with --gpus or --cpu)
#   --wheels DIR      first install what python lacks from the wheels in DIR (offline machines)
#   --deadline S      stop the work after S seconds (a machine held for a fixed time, a job's time
#                     limit) and pack what has finished into RESULTS/alt-results-partial.tar.gz
#                     (replaced by each later stop), exit status 3; the same command resumes
#   anything else goes to run_all.sh, then to the sweep: --preset (default base), --temperatures,
#   --variants, --seed, --interval, --patience, --average, --grid-beams, --gpus, --fp16, ...
# Example, the En->Vi row of the paper-scale results on one GPU, five runs side by side:
#   examples/alt/paper_scale.sh en-vi --local path/to/alt --results out --temperatures 1,2,3,4,5 \
#       --runs-per-gpu 5 --fp16
# Re-running the same command resumes; the archive is written only when everything has finished.
set -euo pipefail
{  # read whole before it runs: a checkout changed meanwhile (git pull) leaves a running script as it began
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
rest=() results="" wheels="" deadline="" per_gpu=1 per_gpu_given=0 carve=1000 work=${ALT_WORK:-runs/alt} gpus=0 preset=0
while [ $# -gt 0 ]; do
  case $1 in
    --) rest+=("$@"); break ;;
    --results) results=$2; shift 2 ;;
    --wheels) wheels=$2; shift 2 ;;
    --deadline) deadline=$2; shift 2 ;;
    --runs-per-gpu) per_gpu=$2; per_gpu_given=1; shift 2 ;;
    --carve-test) carve=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --gpus|--gpus=*|--cpu) gpus=1; rest+=("$1"); shift ;;
    --preset|--preset=*) preset=1; rest+=("$1"); shift ;;
    *) rest+=("$1"); shift ;;
  esac
done
die() { echo "paper_scale.sh: error: $*" >&2; exit 2; }
[ -n "$results" ] || die "--results DIR is required (where the archive of the results goes)"
[ $per_gpu_given = 0 ] || [ $gpus = 0 ] || die "--runs-per-gpu is for every visible GPU: not with --gpus (repeat an id there: 0,0) or --cpu"
[[ $per_gpu =~ ^[1-9][0-9]*$ ]] || die "--runs-per-gpu must be an integer >= 1, got '$per_gpu'"
[[ $carve =~ ^[0-9]+$ ]] || die "--carve-test must be an integer >= 0, got '$carve'"
[[ -z $deadline || $deadline =~ ^[1-9][0-9]*$ ]] || die "--deadline must be whole seconds >= 1, got '$deadline'"
[ -z "$wheels" ] || [ -d "$wheels" ] || die "--wheels $wheels: no such directory"
[ ! -e "$results" ] || [ -d "$results" ] || die "--results $results is a file, not a directory"
[ ! -e "$results/alt-results.tar.gz" ] || die "$results/alt-results.tar.gz exists; give another --results"
mkdir -p "$results" 2> /dev/null || die "--results $results cannot be made (a file on its path, or no permission)"
results=$(cd "$results" && pwd)
archive=$results/alt-results.tar.gz archive_partial=$results/alt-results-partial.tar.gz
if [ -n "$wheels" ]; then
  site=$work/site-packages  # the wheels' packages, for this and every child process
  "$python" -m pip install -q --no-index --no-deps --no-compile --target "$site" "$wheels"/*.whl
  PYTHONPATH=$PYTHONPATH:$(cd "$site" && pwd)
  export PYTHONPATH
fi
options=(--work "$work")
[ "$carve" = 0 ] || options+=(--carve-test "$carve")
[ $preset = 1 ] || options+=(--preset base)
if [ $gpus = 0 ]; then  # every visible GPU, --runs-per-gpu times
  ids=$("$python" -c "import torch; print(','.join(str(i) for i in range(torch.cuda.device_count())))")
  [ -n "$ids" ] || die "no CUDA device visible to $python (give --cpu, or --gpus)"
  slots=()
  for id in ${ids//,/ }; do for _ in $(seq "$per_gpu"); do slots+=("$id"); done; done
  options+=(--gpus "$(IFS=,; echo "${slots[*]}")")
fi
# options after -- stay last: run_all.sh hands them to fairseq-train
split=${#rest[@]}
for i in "${!rest[@]}"; do [ "${rest[$i]}" != "--" ] || { split=$i; break; }; done
pack() {  # the results only: every file but checkpoints, binarised data, subword models and wheels
  local dirs=()
  for d in sweep results; do [ ! -d "$work/$d" ] || dirs+=("$d"); done
  (cd "$work" && find "${dirs[@]}" -type f \
    \( -name '*.json' -o -name '*.csv' -o -name '*.md' -o -name '*.png' -o -name '*.log' -o -name '*.hyp' \
       -o -name '*.ref' -o -name '*.txt' \) -print0 | tar --null -czf "$1.part" -T -)
  mv "$1.part" "$1"
}
all=("$here/run_all.sh" "${rest[@]:0:$split}" "${options[@]}" "${rest[@]:$split}")
if [ -z "$deadline" ]; then
  "${all[@]}"
else  # in its own process group, so that the deadline stops the sweep and every run it started
  setsid "${all[@]}" &
  pid=$! end=$((SECONDS + deadline))
  while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 1; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- -"$pid" 2>/dev/null || true
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -KILL -- -"$pid" 2>/dev/null || true
    wait "$pid" || true
    [ -d "$work/sweep" ] || [ -d "$work/results" ] || { echo "paper_scale.sh: --deadline $deadline s reached before any run started; nothing to pack" >&2; exit 3; }
    pack "$archive_partial"
    echo "paper_scale.sh: --deadline $deadline s reached: what has finished is in $archive_partial; the same command resumes" >&2
    exit 3
  fi
  wait "$pid"
fi
pack "$archive"
echo "results: $archive ($(du -h "$archive" | cut -f1))"
exit
}
