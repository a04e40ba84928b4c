# Sourced by the recipes that train into a SAVE_DIR (language_model/train.sh through common.sh,
# sact/train.sh, softmax_tempering/train_and_decode.sh) and by SACT's data preparations; needs the
# sourcing script's die().

# check_run_options SAVE_DIR OPTIONS: a run directory keeps the options it was started with
# (SAVE_DIR/run_options.txt); once it holds a checkpoint, a re-run with others is refused, not trained
# on in the same run. Until then (a start that failed) the record is written anew.
check_run_options() {
  local file=$1/run_options.txt
  check_folder SAVE_DIR "$1"
  if [ ! -f "$1/checkpoint_last.pt" ]; then
    mkdir -p "$1" && printf '%s\n' "$2" > "$file"
  elif [ -f "$file" ] && [ "$(cat "$file")" != "$2" ]; then
    die "SAVE_DIR $1 was started with '$(cat "$file")', not '$2': give another SAVE_DIR"
  fi
}

# check_folder NAME PATH: a folder the recipe writes, refused now (not when its first file is
# written) where it cannot be made: the nearest existing folder of its path must be writable.
check_folder() {
  local above=$2
  while [ ! -e "$above" ] && [ ! -L "$above" ]; do above=$(dirname "$above"); done
  [ -d "$above" ] && [ -w "$above" ] || die "$1 $2 cannot be made: $above is not a folder that can be written to"
}

# check_prepare_options DEST OPTIONS: a data directory keeps the options its steps were made with
# (DEST/prepare_options.txt); a re-run with others is refused before any step, since its finished
# steps would be reused as they are.
check_prepare_options() {
  local file=$1/prepare_options.txt
  if [ -f "$file" ]; then
    [ "$(cat "$file")" = "$2" ] || die "DEST $1 was prepared with '$(cat "$file")', not '$2': give another DEST"
  else
    mkdir -p "$1" && printf '%s\n' "$2" > "$file"
  fi
}
