#!/usr/bin/env bash
# Beam-search one checkpoint on one subset and score it with sacrebleu (BLEU and chrF).
#
# Usage: examples/sact/evaluate.sh DATA_BIN SAVE_DIR SUBSET REFERENCE [decoding options...]
#   SUBSET:    the binarized subset to translate (valid, test)
#   REFERENCE: the plain-text reference of that subset, one sentence a line (\r is stripped)
#   decoding options: fairseq-generate's that fairseq's Python API takes here (translate_subset.py)
# Decodes through fairseq's Python API (translate_subset.py: fairseq-generate's generator, at the
# model's training temperature), then scores with sacrebleu.
# Env:   SRC (en), TGT (vi), CHECKPOINT (checkpoint_best.pt), BEAM (5), LENPEN (1.0),
#        MAX_LEN_A (1.5), MAX_LEN_B (10): hypotheses are at most MAX_LEN_A * source length + MAX_LEN_B
#        tokens, BPE (sentencepiece for the ALT data: hypotheses are decoded before scoring; empty for
#        word-level data), TOKENIZE (sacrebleu's tokenizer, 13a), DEVICE_ARGS (e.g. --cpu)
# Writes SAVE_DIR/SUBSET.beamB.{log,hyp,json} (never overwritten: delete them to score again; the
# log holds what was decoded: sentences, temperature, decode seconds; a call with other options than
# SUBSET.beamB.options records is refused) and prints the sacrebleu JSON (BLEU, then chrF, with their
# signatures).
set -euo pipefail
{  # read whole before it runs: a checkout changed meanwhile (git pull) leaves a running script as it began
[ $# -ge 4 ] || { sed -n '2,/^set -euo/{/^#/p;}' "$0"; exit 2; }
data=$1 save=$2 subset=$3 ref=$4
shift 4
die() { echo "evaluate.sh: error: $*" >&2; exit 2; }
[ -d "$data" ] || die "DATA_BIN $data: no such directory"
[ -f "$ref" ] || die "REFERENCE $ref: no such file"
[ -f "$save/${CHECKPOINT:-checkpoint_best.pt}" ] || die "no checkpoint $save/${CHECKPOINT:-checkpoint_best.pt} (train first, or set CHECKPOINT)"
here=$(cd "$(dirname "$0")/../.." && pwd)
python=$([ -x "$here/.venv/bin/python" ] && echo "$here/.venv/bin/python" || echo python3)
beam=${BEAM:-5}
[[ $beam =~ ^[1-9][0-9]*$ ]] || die "BEAM must be a whole number >= 1, got '$beam'"  # (it names the outputs)
out=$save/$subset.beam$beam
# SAVE_DIR/SUBSET.beamB.options: what the outputs were made with (written with the hypotheses); a
# call with other options is refused, since the outputs would be given as its answer
options="checkpoint=${CHECKPOINT:-checkpoint_best.pt} data=$(cd "$data" && pwd) \
reference=$(cd "$(dirname "$ref")" && pwd)/$(basename "$ref") src=${SRC:-en} tgt=${TGT:-vi} lenpen=${LENPEN:-1.0} \
max_len_a=${MAX_LEN_A:-1.5} max_len_b=${MAX_LEN_B:-10} bpe=${BPE:-} tokenize=${TOKENIZE:-13a} options=$*"
if [ -f "$out.hyp" ] || [ -f "$out.json" ]; then
  [ -f "$out.options" ] || die "$out.hyp or .json has no $out.options (made before options were recorded): delete them to score again"
  [ "$(cat "$out.options")" = "$options" ] \
    || die "$out.* were made with '$(cat "$out.options")', not '$options': delete them to score again, or set BEAM or CHECKPOINT"
  [ ! "$save/${CHECKPOINT:-checkpoint_best.pt}" -nt "$out.options" ] \
    || die "$save/${CHECKPOINT:-checkpoint_best.pt} is newer than $out.* (trained on since): delete them to score it again"
fi

if [ ! -f "$out.hyp" ]; then
  rm -f "$out.hyp.tmp"  # this script's own, from an interrupted call
  PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" "$python" "$here/examples/sact/translate_subset.py" \
    "$data" "$save/${CHECKPOINT:-checkpoint_best.pt}" "$subset" "$beam" "${LENPEN:-1.0}" "$out.hyp.tmp" \
    -s "${SRC:-en}" -t "${TGT:-vi}" --max-len-a "${MAX_LEN_A:-1.5}" --max-len-b "${MAX_LEN_B:-10}" \
    --batch-size 64 ${BPE:+--post-process "$BPE"} ${DEVICE_ARGS:-} "$@" > "$out.log.tmp" 2>&1 \
    || { tail -20 "$out.log.tmp" >&2; exit 1; }
  mv "$out.log.tmp" "$out.log"
  printf '%s\n' "$options" > "$out.options"
  mv "$out.hyp.tmp" "$out.hyp"
fi
if [ ! -f "$out.json" ]; then
  tr -d '\r' < "$ref" > "$out.ref.tmp"
  [ "$(wc -l < "$out.hyp")" = "$(wc -l < "$out.ref.tmp")" ] \
    || { echo "$out.hyp and $ref differ in length" >&2; rm -f "$out.ref.tmp"; exit 1; }
  sacrebleu "$out.ref.tmp" -i "$out.hyp" -m bleu chrf -w 2 --tokenize "${TOKENIZE:-13a}" > "$out.json.tmp"
  rm -f "$out.ref.tmp"
  mv "$out.json.tmp" "$out.json"
fi
cat "$out.json"
exit
}
