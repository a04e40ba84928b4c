#!/usr/bin/env bash
# IWSLT'15 English-Vietnamese (TED), the paper's En-Vi setting: the Stanford NMT preprocessing
# (tokenized, truecased), train / tst2012 (dev) / tst2013 (test), word-level vocabularies of the
# paper's sizes (17.7K English, 7K Vietnamese words), binarized for fairseq.
#
# Usage: examples/sact/prepare_iwslt15_en_vi.sh DEST [LOCAL_DIR]
#   LOCAL_DIR: a directory with any of {train,tst2012,tst2013}.{en,vi} (e.g. a copy with only tst2012
#              and tst2013). Files it lacks are downloaded from
#              https://nlp.stanford.edu/projects/nmt/data/iwslt15.en-vi/ into DEST/raw.
# Env:   NWORDS_SRC (17700), NWORDS_TGT (7000): vocabulary sizes (fairseq-preprocess --nwords*)
# Writes DEST/raw/*.{en,vi} and DEST/bin (valid = tst2012, test = tst2013). A finished step is never
# redone or overwritten (delete its output to redo it); a DEST prepared with other NWORDS_* is
# refused (DEST/prepare_options.txt).
set -euo pipefail
{  # read whole before it runs: a checkout changed meanwhile (git pull) leaves a running script as it began
[ $# -ge 1 ] || { sed -n '2,/^set -euo/{/^#/p;}' "$0"; exit 2; }
dest=$1 local_dir=${2:-}
die() { echo "prepare_iwslt15_en_vi.sh: error: $*" >&2; exit 2; }
source "$(dirname "$0")/../run_options.sh"  # check_folder, check_prepare_options
[ -z "$local_dir" ] || [ -d "$local_dir" ] || die "LOCAL_DIR $local_dir: no such directory"
check_folder DEST "$dest"
check_prepare_options "$dest" "NWORDS_SRC=${NWORDS_SRC:-17700} NWORDS_TGT=${NWORDS_TGT:-7000}"
url=https://nlp.stanford.edu/projects/nmt/data/iwslt15.en-vi
mkdir -p "$dest/raw"
for split in train tst2012 tst2013; do
  for lang in en vi; do
    f=$split.$lang
    [ -f "$dest/raw/$f" ] && continue
    if [ -n "$local_dir" ] && [ -f "$local_dir/$f" ]; then
      tr -d '\r' < "$local_dir/$f" > "$dest/raw/$f.tmp"
    else
      echo "IWSLT'15: downloading $url/$f"
      curl -fL --retry 3 -o "$dest/raw/$f.tmp" "$url/$f"
    fi
    mv "$dest/raw/$f.tmp" "$dest/raw/$f"
  done
done
wc -l "$dest"/raw/*.{en,vi}
for split in train tst2012 tst2013; do
  [ "$(wc -l < "$dest/raw/$split.en")" = "$(wc -l < "$dest/raw/$split.vi")" ] \
    || { echo "$split.en and $split.vi differ in length" >&2; exit 1; }
done
if [ ! -f "$dest/bin/dict.vi.txt" ]; then
  rm -rf "$dest/bin.tmp"
  fairseq-preprocess --source-lang en --target-lang vi --trainpref "$dest/raw/train" \
    --validpref "$dest/raw/tst2012" --testpref "$dest/raw/tst2013" \
    --nwordssrc "${NWORDS_SRC:-17700}" --nwordstgt "${NWORDS_TGT:-7000}" \
    --destdir "$dest/bin.tmp" --workers "${WORKERS:-4}"
  mv "$dest/bin.tmp" "$dest/bin"
fi
echo "IWSLT'15 en-vi ready: $dest/bin (valid = tst2012, test = tst2013)"
exit
}
