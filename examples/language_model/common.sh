# Sourced by the language-model recipes: paths, tools and error helpers.
lm_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$lm_here/../.." && pwd)
user_dir=$repo_root/fairseq_ctemp
script_name=$(basename "$0")

# PyTorch's transparent huge pages for its large CPU tensors: far fewer page faults on the
# tokens x vocabulary tensors of every step, the same numbers (docs/speed.md); a value set wins
export THP_MEM_ALLOC_ENABLE=${THP_MEM_ALLOC_ENABLE:-1}
# glibc keeps freed memory in its heap instead of mapping the tensors above 32 MB afresh at every
# step (and the kernel zeroing them): the same numbers, faster CPU steps (docs/speed.md); ignored
# by other C libraries. Keep both in step with fairseq_ctemp/alt/common.py's CPU_ALLOCATOR_ENV.
export MALLOC_MMAP_MAX_=${MALLOC_MMAP_MAX_:-0}
export MALLOC_TRIM_THRESHOLD_=${MALLOC_TRIM_THRESHOLD_:-4294967296}

die() { echo "$script_name: error: $*" >&2; exit 1; }
log() { echo "$script_name: $*" >&2; }

# A fairseq console script from PATH, else from the checkout's .venv.
tool() {
  if command -v "$1" >/dev/null 2>&1; then command -v "$1"
  elif [ -x "$repo_root/.venv/bin/$1" ]; then echo "$repo_root/.venv/bin/$1"
  else die "$1 not found: activate the venv that has fairseq (see README: Set-up)"; fi
}
python_bin() {
  if [ -x "$repo_root/.venv/bin/python" ]; then echo "$repo_root/.venv/bin/python"; else command -v python3; fi
}

check_dataset() {
  case $1 in ptb|wikitext-2|wikitext-103) ;; *) die "unknown dataset '$1' (expected ptb, wikitext-2 or wikitext-103)" ;; esac
}
