# The two commands of the README: `make demo` and `make test`. Both set up .venv first if needed.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup demo test bench
setup:
	@bash scripts/setup_venv.sh $(VENV)

demo: setup
	$(PY) scripts/quickstart.py

test: setup
	$(PY) -m pytest tests

bench: setup
	$(PY) benchmarks/bench_tempered_ce.py
