# Sourced by the ALT recipes: the checkout's Python (its .venv if there is one) with the venv's
# console scripts (fairseq-*) first on PATH, and this checkout's fairseq_ctemp first on PYTHONPATH
# (the recipes run its commands as python -m fairseq_ctemp.cli.alt_*).
alt_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$alt_here/../.." && pwd)
if [ -n "${PYTHON:-}" ]; then python=$PYTHON
elif [ -x "$repo/.venv/bin/python" ]; then python=$repo/.venv/bin/python
else python=$(command -v python3 || command -v python); fi
PATH=$(dirname "$python"):$PATH
PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH}
export PATH PYTHONPATH
usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'; exit 2; }
case ${1:-} in ""|-h|--help) usage ;; esac
