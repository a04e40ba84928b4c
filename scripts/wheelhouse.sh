#!/usr/bin/env bash
# Wheels for a set-up on a machine without internet access (a GPU node, say), built on one with it.
#
# Usage: scripts/wheelhouse.sh DIR PYTHON [PACKAGE ...]
#   DIR      the folder to write (refused if it exists)
#   PYTHON   an interpreter of the target's Python version (e.g. python3.12): it builds fairseq's wheel
#            (its Cython and C extensions only, scripts/strip_torch_extensions.py: no torch needed)
#            and fetches or builds each PACKAGE's wheel for that version
#   PACKAGE  what the target's environment lacks of scripts/setup_venv.sh's list, dependencies
#            included (each is fetched without its own); docs/gpu.md names the list for one image
# Then on the target, in a venv that has its own torch (setup_venv.sh keeps it):
#   PIP_NO_INDEX=1 PIP_FIND_LINKS=DIR FAIRSEQ_SPEC=DIR/fairseq_fixed-...whl scripts/setup_venv.sh VENV
set -euo pipefail
{  # read whole before it runs: a checkout changed meanwhile (git pull) leaves a running script as it began
die() { echo "wheelhouse.sh: error: $*" >&2; exit 2; }
[ $# -ge 2 ] || { sed -n '2,/^set -euo/{/^#/p;}' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
out=$1 python=$2
shift 2
[ ! -e "$out" ] || die "$out exists: name a new folder"
command -v "$python" > /dev/null || die "PYTHON '$python' is not a command"
"$python" -c 'import venv' 2> /dev/null || die "PYTHON '$python' does not run or has no venv module"
source "$root/scripts/versions.sh"
# The sdist is fetched with the set-up's venv: pip reads its metadata by running setup.py, which
# imports torch.
bash "$root/scripts/setup_venv.sh" > /dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
partial=$work/wheels
mkdir "$partial"
"$root/.venv/bin/python" -m pip download -q --no-deps --no-binary :all: --no-build-isolation \
  "$FAIRSEQ_DEFAULT" -d "$work/sdist"
tar -xzf "$work"/sdist/*.tar.gz -C "$work/sdist"
src=$(echo "$work"/sdist/*/)
"$root/.venv/bin/python" "$root/scripts/strip_torch_extensions.py" "$src/setup.py"
"$python" -m venv "$work/build"
build="$work/build/bin/python -m pip"
$build install -q -U pip setuptools wheel numpy cython
$build wheel -q --no-build-isolation --no-deps "$src" -w "$partial"
for package in "$@"; do
  # A binary wheel for the target's version where the registry has one, else one built here
  # (pure-Python sdists such as antlr4-python3-runtime).
  $build download -q --no-deps --only-binary :all: "$package" -d "$partial" 2> /dev/null \
    || $build wheel -q --no-deps "$package" -w "$partial" \
    || die "no wheel for '$package' on $("$python" --version)"
done
mv "$partial" "$out"
ls "$out"
exit
}
