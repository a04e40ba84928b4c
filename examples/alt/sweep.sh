#!/usr/bin/env bash
# Stage 2+3, train and decode: one fairseq Transformer per (T, label smoothing, SEM weight) with
# tempered_ce, validation BLEU every --interval updates, early stopping (--patience validations),
# average of the last 10 checkpoints, greedy and beam at the training temperature; then per direction
# T_opt (dev greedy BLEU), beam/lenpen tuned on dev for T_opt and T=1, test BLEU (dev without a test
# split), paired significance, greedy vs beam 4 vs beam 10 timing. --variants adds other models
# (ct_transformer, sact_transformer, lstm, sact_lstm), trained the same way at the primary LS and SEM
# (at each T; ct_transformer at T=1 only) and tested against the T=1 transformer.
#
# Usage: examples/alt/sweep.sh DIRECTION... [--preset base|small|mini] [--temperatures 1,2,3,4,5]
#            [--label-smoothing 0.1[,0.2,...]] [--sem-weights 0[,0.1,...]] [--work runs/alt]
#            [--variants transformer[,ct_transformer,...]] [--seed 1[,2,...]]
#            [--jobs N] [--gpus 0,1,2,3 [--gpus-per-run G]] [--slurm [--slurm-args "..."]]
#            [--dry-run | --check] [-- extra fairseq-train options]
# Re-running the same command resumes: finished runs are skipped, interrupted ones continue from
# their last checkpoint. All options: ctemp-alt-sweep run --help; examples/alt/README.md.
set -euo pipefail
{  # read whole before it runs: a checkout changed meanwhile (git pull) leaves a running script as it began
source "$(dirname "$0")/common.sh"
exec "$python" -m fairseq_ctemp.cli.alt_sweep run "$@"
exit
}
