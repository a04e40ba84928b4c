# Sourced by the recipes that train into a SAVE_DIR (language_model/train.sh through common.sh,
# sact/train.sh, softmax_tempering/train_and_decode.sh; language_model/evaluate.sh) and by SACT's
# data preparations; needs the sourcing script's die().

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

# lock_save_dir SAVE_DIR: the calling script, and all it starts (they inherit the lock's file
# descriptor, 9), hold SAVE_DIR/.lock until the last of them ends, however it ends: the kernel
# releases the lock then, so a lock file left behind never blocks a rerun. A second recipe on the
# same SAVE_DIR (or a training left going by a killed recipe) is refused before any work, rather than
# trained into the same checkpoints and log at once, with exit status 75 (EX_TEMPFAIL: the run is
# not failed but another's; ptb_converged_experiment.sh leaves it to that recipe).
lock_save_dir() {
  local status=0 holder
  check_folder SAVE_DIR "$1"
  mkdir -p "$1"
  exec 9<> "$1/.lock"  # (read and write: not emptied before the lock is ours)
  python3 -c 'import fcntl, sys
try:
    fcntl.flock(9, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    sys.exit(3)' || status=$?
  if [ "$status" = 3 ]; then
    holder=$(cat "$1/.lock" 2> /dev/null || true)
    (die "SAVE_DIR $1 is in use by ${holder:-another process} or what it started: wait for it to end, or stop it and run again") || exit 75
  fi
  [ "$status" = 0 ] || die "SAVE_DIR $1: could not lock $1/.lock"
  printf 'pid %s on %s\n' "$$" "${HOSTNAME:-$(uname -n)}" > "$1/.lock"
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
