# Sourced by the language-model recipes: paths, tools and error helpers.
lm_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$lm_here/../.." && pwd)
user_dir=$repo_root/fairseq_ctemp
script_name=$(basename "$0")

# PyTorch's huge pages and glibc's heap settings: faster CPU steps, the same numbers; a value the
# caller set wins (why, and who else reads them: fairseq_ctemp/cpu_allocator.env)
while IFS='=' read -r allocator_name allocator_value; do
  case $allocator_name in ''|'#'*) continue ;; esac
  [ -n "${!allocator_name:-}" ] || export "$allocator_name=$allocator_value"
done < "$user_dir/cpu_allocator.env"
unset allocator_name allocator_value

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

source "$lm_here/../run_options.sh"  # check_run_options, check_folder, lock_save_dir

# check_count NAME VALUE MIN: VALUE is a whole number >= MIN, else the error names NAME
check_count() {
  [[ $2 =~ ^[0-9]+$ ]] && [ "$((10#$2))" -ge "$3" ] || die "$1 must be a whole number >= $3, got '$2'"
}

check_dataset() {
  case $1 in ptb|wikitext-2|wikitext-103) ;; *) die "unknown dataset '$1' (expected ptb, wikitext-2 or wikitext-103)" ;; esac
}
