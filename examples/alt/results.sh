#!/usr/bin/env bash
# Stage 4, results: Table 1 (T_opt vs T=1, greedy / tuned beam, significance, timing), Tables 3/4
# (T x LS x SEM), every run, as markdown + CSV, and PNG plots (BLEU vs T, entropy, gradient norm).
#
# Usage: examples/alt/results.sh [--work runs/alt] [--out WORK/results] [--experiments NAME,...] [--variants V,...]
set -euo pipefail
{  # read whole before it runs: a checkout changed meanwhile (git pull) leaves a running script as it began
[ "${1:-}" = "" ] && set -- --work "${ALT_WORK:-runs/alt}"
source "$(dirname "$0")/common.sh"
exec "$python" -m fairseq_ctemp.cli.alt_results "$@"
exit
}
