#!/usr/bin/env bash
# Create (or reuse) a virtualenv with CPU torch, fairseq and this plugin, without ever letting pip
# resolve torch/torchaudio itself (that would pull a multi-GB CUDA build). A torch already in the venv
# (a GPU user's CUDA build, README "GPU set-up") is kept: every later install is constrained to it.
#
# Usage: scripts/setup_venv.sh [VENV_DIR]      (default: .venv inside the checkout)
# Env:   TORCH_SPEC   torch requirement to install if torch is missing (default torch==2.13.0)
#        FAIRSEQ_SPEC fairseq distribution (default: scripts/versions.sh, the Python 3.11 fork)
set -euo pipefail
{  # read whole before it runs: a checkout changed meanwhile (git pull) leaves a running script as it began
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/versions.sh"
venv=${1:-$root/.venv}
stamp=$venv/.fairseq_ctemp_installed
# Re-run when pyproject.toml changed after the last successful set-up.
if [ -f "$stamp" ] && [ "$stamp" -nt "$root/pyproject.toml" ] && [ "$stamp" -nt "$0" ]; then
  exit 0
fi
py=${PYTHON:-python3}
echo "== setting up $venv (first time takes ~6 min: fairseq compiles its extensions) =="
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
pip="$venv/bin/python -m pip"
$pip install -q -U pip setuptools wheel
# torch first, and only if absent: a GPU user installs their own CUDA torch before running this.
if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  $pip install "${TORCH_SPEC:-torch==2.13.0}"
fi
# From here on pip must keep that torch: a constraint makes it fail rather than replace it.
keep_torch=$venv/.fairseq_ctemp_keep_torch.txt
"$venv/bin/python" -c "import torch; print('torch==' + torch.__version__)" > "$keep_torch"
export PIP_CONSTRAINT=$keep_torch
$pip install -q numpy cython
# fairseq-fixed and HTA declare what is left out on purpose (torchaudio, cffi; jupyterlab): each install
# from here on would end with pip's "ERROR: pip's dependency resolver ..." about them, exit 0.
install="$pip install --no-warn-conflicts"
if ! "$venv/bin/python" -c "import fairseq" 2>/dev/null; then
  # --no-deps: fairseq-fixed declares torchaudio, which would drag in a CUDA torch.
  # --no-build-isolation: build against the torch installed above, not a freshly downloaded one.
  $install --no-build-isolation --no-deps "${FAIRSEQ_SPEC:-$FAIRSEQ_DEFAULT}"
fi
# fairseq's real runtime deps (scikit-learn: `import fairseq` needs it) plus ours.
$install -q "hydra-core==1.3.2" "omegaconf==2.3.0" regex sacrebleu tqdm bitarray packaging \
  scikit-learn sentencepiece subword-nmt matplotlib tensorboard pytest "pytest-xdist>=3.8" ruff
# torchmetrics (the tests' reference ECE) declares torch: --no-deps, with its one other dependency.
$install -q --no-deps torchmetrics lightning-utilities
# Holistic Trace Analysis (benchmarks/trace_report.py) declares jupyterlab and pytest for its
# notebooks and its own tests: --no-deps, with the libraries its analyses import. TRACE_ANALYSIS=0
# leaves it out (an offline GPU machine: make gpu-check runs the CUDA tests, which do not use it).
if [ "${TRACE_ANALYSIS:-1}" != 0 ]; then
  $install -q "pandas<3" plotly pydot psutil  # HTA 0.5 is written for pandas 2
  $install -q --no-deps "HolisticTraceAnalysis==0.5.0"
fi
# The plugin itself, editable, never resolving dependencies (see pyproject.toml).
$install -q --no-deps --no-build-isolation -e "$root"
"$venv/bin/python" -c "import fairseq, fairseq_ctemp, torch; print('fairseq', fairseq.__version__, '| torch', torch.__version__)"
touch "$stamp"
exit
}
