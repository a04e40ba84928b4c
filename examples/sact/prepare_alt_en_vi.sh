#!/usr/bin/env bash
# ALT (Asian Language Treebank) English-Vietnamese for the SACT recipes: strip the CRLF line endings,
# train one sentencepiece BPE model per language, encode, binarize (one data-bin serves en->vi and
# vi->en: fairseq's translation task finds train.en-vi.* for -s vi -t en too).
#
# Usage: examples/sact/prepare_alt_en_vi.sh DEST [LOCAL_DIR]
#   LOCAL_DIR: a directory with train.{en,vi} and dev.{en,vi} (test.{en,vi} optional), e.g.
#              path/to/alt. Without it (or if it lacks them) the official NICT release is
#              downloaded into DEST/download and split with the official URL-{train,dev,test} lists.
# Env:   SPM_VOCAB (8000: per-language sentencepiece vocabulary), PYTHON (python)
# Writes DEST/raw/{train,dev[,test]}.{en,vi} (plain text, no \r), DEST/spm.{en,vi}.model,
#        DEST/spm/*.{en,vi} (encoded) and DEST/bin (fairseq-preprocess; dev is the "valid" subset).
# A finished step is never redone or overwritten (delete its output to redo it); a DEST prepared
# with another SPM_VOCAB is refused (DEST/prepare_options.txt).
set -euo pipefail
{  # read whole before it runs: a checkout changed meanwhile (git pull) leaves a running script as it began
[ $# -ge 1 ] || { sed -n '2,/^set -euo/{/^#/p;}' "$0"; exit 2; }
dest=$1 local_dir=${2:-}
die() { echo "prepare_alt_en_vi.sh: error: $*" >&2; exit 2; }
source "$(dirname "$0")/../run_options.sh"  # check_folder, check_prepare_options
[ -z "$local_dir" ] || [ -d "$local_dir" ] || die "LOCAL_DIR $local_dir: no such directory"
check_folder DEST "$dest"
python=${PYTHON:-python}
vocab=${SPM_VOCAB:-8000}
"$python" -c "import sentencepiece" 2> /dev/null ||  # before any step: it makes the subwords
  die "sentencepiece cannot be imported by $python (PYTHON): pip install sentencepiece"
check_prepare_options "$dest" "SPM_VOCAB=$vocab"
nict=https://www2.nict.go.jp/astrec-att/member/mutiyama/ALT
mkdir -p "$dest/raw"

have_local() { [ -n "$local_dir" ] && for f in train.en train.vi dev.en dev.vi; do [ -f "$local_dir/$f" ] || return 1; done; }

if [ ! -f "$dest/raw/train.vi" ]; then
  if have_local; then
    echo "ALT: using the local copy in $local_dir"
    for f in "$local_dir"/{train,dev,test}.{en,vi}; do
      [ -f "$f" ] && tr -d '\r' < "$f" > "$dest/raw/$(basename "$f").tmp" && mv "$dest/raw/$(basename "$f").tmp" "$dest/raw/$(basename "$f")"
    done
  else
    echo "ALT: no local copy; downloading the NICT release into $dest/download"
    mkdir -p "$dest/download"
    (cd "$dest/download"
     [ -f ALT-Parallel-Corpus-20191206.zip ] || curl -fL -o ALT-Parallel-Corpus-20191206.zip "$nict/ALT-Parallel-Corpus-20191206.zip"
     for s in train dev test; do [ -f "URL-$s.txt" ] || curl -fL -o "URL-$s.txt" "$nict/URL-$s.txt"; done
     unzip -qo ALT-Parallel-Corpus-20191206.zip)
    # data_XX.txt lines: "SNT.<url id>.<sentence id>\t<text>"; URL-<split>.txt lines: "URL.<url id>\t<url>"
    "$python" - "$dest/download" "$dest/raw" <<'EOF'
import os, sys
src, out = sys.argv[1:]
corpus = os.path.join(src, "ALT-Parallel-Corpus-20191206")
split_of = {}
for split in ("train", "dev", "test"):
    for line in open(os.path.join(src, f"URL-{split}.txt"), encoding="utf-8"):
        split_of[line.split("\t")[0].strip().split(".")[1]] = split
texts = {}
for lang in ("en", "vi"):
    for line in open(os.path.join(corpus, f"data_{lang}.txt"), encoding="utf-8"):
        key, _, text = line.rstrip("\r\n").partition("\t")
        texts.setdefault(key, {})[lang] = text.strip()
files = {(s, l): open(os.path.join(out, f"{s}.{l}.tmp"), "w", encoding="utf-8")
         for s in ("train", "dev", "test") for l in ("en", "vi")}
for key in sorted(texts, key=lambda k: tuple(int(x) for x in k.split(".")[1:])):
    pair, split = texts[key], split_of.get(key.split(".")[1])
    if split is None or "en" not in pair or "vi" not in pair:
        continue
    for lang in ("en", "vi"):
        files[split, lang].write(pair[lang] + "\n")
for (s, l), f in files.items():
    f.close()
    os.replace(f.name, os.path.join(out, f"{s}.{l}"))
EOF
  fi
fi
wc -l "$dest"/raw/*.{en,vi}

for lang in en vi; do
  if [ ! -f "$dest/spm.$lang.model" ]; then
    "$python" -c "import sys, sentencepiece as spm
spm.SentencePieceTrainer.train(input=sys.argv[1], model_prefix=sys.argv[2], vocab_size=int(sys.argv[3]),
    model_type='bpe', character_coverage=1.0, input_sentence_size=2000000, shuffle_input_sentence=True,
    seed_sentencepiece_size=1000000, num_threads=1, minloglevel=2)" \
      "$dest/raw/train.$lang" "$dest/spm.$lang.tmp" "$vocab"
    mv "$dest/spm.$lang.tmp.vocab" "$dest/spm.$lang.vocab" && mv "$dest/spm.$lang.tmp.model" "$dest/spm.$lang.model"
  fi
done

mkdir -p "$dest/spm"
for split in train dev test; do
  for lang in en vi; do
    [ -f "$dest/raw/$split.$lang" ] && [ ! -f "$dest/spm/$split.$lang" ] || continue
    "$python" -c "import sys, sentencepiece as spm
sp = spm.SentencePieceProcessor(model_file=sys.argv[1])
with open(sys.argv[2], encoding='utf-8') as f, open(sys.argv[3], 'w', encoding='utf-8') as out:
    for line in f:
        out.write(' '.join(sp.encode(line.rstrip('\n'), out_type=str)) + '\n')" \
      "$dest/spm.$lang.model" "$dest/raw/$split.$lang" "$dest/spm/$split.$lang.tmp"
    mv "$dest/spm/$split.$lang.tmp" "$dest/spm/$split.$lang"
  done
done

if [ ! -f "$dest/bin/dict.vi.txt" ]; then
  rm -rf "$dest/bin.tmp"  # an interrupted run's, which would mix with this one's files
  test_pref=()
  [ -f "$dest/spm/test.en" ] && test_pref=(--testpref "$dest/spm/test")
  fairseq-preprocess --source-lang en --target-lang vi --trainpref "$dest/spm/train" \
    --validpref "$dest/spm/dev" "${test_pref[@]}" --destdir "$dest/bin.tmp" --workers 1
  mv "$dest/bin.tmp" "$dest/bin"
fi
echo "ALT en-vi ready: $dest/bin (dev = valid subset$([ -f "$dest/spm/test.en" ] && echo ', test' || echo '; no test split'))"
exit
}
