#!/usr/bin/env bash
# Stage 1, data: the official ALT train/dev/test split of each direction's language pair, normalised,
# checked, sentencepiece (or subword-nmt BPE) vocabularies of 8,192 per language, fairseq-preprocess.
#
# Usage: examples/alt/prepare.sh DIRECTION... [--release PATH | --local DIR | --download]
#            [--work runs/alt] [--subwords spm|bpe] [--vocab 8192] [--train-subset N] [--drop-incomplete]
#   DIRECTION     en-vi, vi-en, ja-en, ... (both directions of a pair share one data directory)
#   --release     ALT-Parallel-Corpus-20191206.zip or its unzipped directory, with URL-{train,dev,test}.txt
#   --local       an already split copy: DIR/{train,dev[,test]}.<lang> (e.g. path/to/alt)
#   --download    fetch the release from NICT into WORK/download
# Env:   ALT_RELEASE / ALT_LOCAL (instead of the flags), ALT_WORK (default runs/alt)
# Output: WORK/data/<pair>.<spm8192|...>/{raw,sub,tok,bin,prepare.json}. Finished steps are skipped,
# never overwritten. Details: examples/alt/README.md, ctemp-alt-data prepare --help.
set -euo pipefail
{  # read whole before it runs: a checkout changed meanwhile (git pull) leaves a running script as it began
source "$(dirname "$0")/common.sh"
exec "$python" -m fairseq_ctemp.cli.alt_data prepare "$@"
exit
}
