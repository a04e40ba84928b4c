#!/usr/bin/env bash
# The paper's En-Vi comparison (Lin et al., EMNLP 2018, Table 2 and Figure 1) on IWSLT'15: the
# attention-LSTM baseline, SACT, and fixed attention temperatures 0.8-1.2, all with architecture
# sact_lstm_iwslt_en_vi (512-d, 2 layers, dropout 0.4), Adam, clip-norm 10, 64 sentences a batch.
# Each variant is trained (validation BLEU picks checkpoint_best.pt, early stopping), then beam-5
# decoded on tst2012 (valid) and tst2013 (test) and scored with sacrebleu --tokenize none: the data
# are already tokenized, so this is the tokenized BLEU the paper reports.
#
# Usage: examples/sact/run_iwslt15_en_vi.sh WORK_DIR [LOCAL_DIR]
# Env:   VARIANTS ("none sact fixed:0.8 fixed:0.9 fixed:1.0 fixed:1.1 fixed:1.2"; also sact_released),
#        DEVICE_ARGS (e.g. --fp16 on a GPU, --cpu without one), and train.sh's (MAX_EPOCH, LR, ...).
#        Fan out over GPUs: run this once to prepare the data (VARIANTS=none), then one instance per
#        GPU with CUDA_VISIBLE_DEVICES=i VARIANTS="..."; multi-GPU training of one variant: pass
#        fairseq's --distributed-world-size N through train.sh's extra arguments (EXTRA_TRAIN_ARGS).
# Writes WORK_DIR/data, WORK_DIR/<variant>/ and WORK_DIR/summary.txt; finished steps are skipped.
# Every variant is checked (train.sh's dry run) before any data are prepared or runs trained.
set -euo pipefail
{  # read whole before it runs: a checkout changed meanwhile (git pull) leaves a running script as it began
[ $# -ge 1 ] || { sed -n '2,/^set -euo/{/^#/p;}' "$0"; exit 2; }
work=$1 local_dir=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
variants=${VARIANTS:-none sact fixed:0.8 fixed:0.9 fixed:1.0 fixed:1.1 fixed:1.2}
train() {  # train.sh of variant $1 (with DRY_RUN=1 its checks alone: nothing is written)
  SRC=en TGT=vi ARCH=${ARCH:-sact_lstm_iwslt_en_vi} BPE= \
    bash "$here/train.sh" "$work/data/bin" "$work/${1/:/}" "$1" ${EXTRA_TRAIN_ARGS:-}
}
for variant in $variants; do DRY_RUN=1 train "$variant" > /dev/null; done  # all, before any work
bash "$here/prepare_iwslt15_en_vi.sh" "$work/data" "$local_dir"
for variant in $variants; do
  save=$work/${variant/:/}
  train "$variant"
  for subset in valid:tst2012 test:tst2013; do
    SRC=en TGT=vi BPE= TOKENIZE=none \
      bash "$here/evaluate.sh" "$work/data/bin" "$save" "${subset%%:*}" "$work/data/raw/${subset#*:}.vi" > /dev/null
  done
done
export PYTHONPATH="$here/../..${PYTHONPATH:+:$PYTHONPATH}"  # summarize.py reads the logs with this fairseq_ctemp
{ python "$here/summarize.py" "$work" test 5 $variants; echo
  python "$here/summarize.py" "$work" valid 5 $variants; } | tee "$work/summary.txt"
exit
}
