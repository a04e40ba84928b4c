# The two commands of the README: `make demo` and `make test`. Both set up .venv first if needed.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup demo test lint bench
setup:
	@bash scripts/setup_venv.sh $(VENV)

demo: setup
	$(PY) scripts/quickstart.py

# Test files run in parallel (pytest-xdist); a file's tests stay in one worker, so its fixtures
# (trained toy models) are built once. `make test TEST_WORKERS=0` runs them one after another.
TEST_WORKERS ?= 2
test: setup
	$(PY) -m pytest tests -n $(TEST_WORKERS) --dist loadfile

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

bench: setup
	$(PY) benchmarks/bench_tempered_ce.py
