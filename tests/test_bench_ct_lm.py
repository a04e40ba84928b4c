"""Smoke test of benchmarks/bench_ct_lm.py at toy sizes: it runs and prints every model and ratio
(no assertion on speed: this only checks that the benchmark still works)."""
import os
import re
import sys

import pytest

BENCH_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


@pytest.fixture
def bench_ct_lm(monkeypatch):
    monkeypatch.syspath_prepend(BENCH_DIR)
    import bench_ct_lm
    return bench_ct_lm


def test_bench_ct_lm_smoke(bench_ct_lm, capsys):
    import logging

    import torch
    threads = torch.get_num_threads()
    try:
        bench_ct_lm.main(["--device", "cpu", "--vocab", "300", "--layers", "1", "--dim", "32", "--ffn", "64",
                          "--heads", "2", "--tokens-per-sample", "32", "--max-tokens", "128",
                          "--ct-rank", "8", "--rounds", "1", "--warmup", "0", "--batches", "1",
                          "--threads", "1"])
    finally:  # main() sets these process-wide
        torch.set_num_threads(threads)
        logging.disable(logging.NOTSET)
    out = capsys.readouterr().out
    assert out.startswith("command: bench_ct_lm.main(")
    assert "cutoffs=18,90" in out  # 2000,10000 scaled to the vocabulary
    for name, label in (("A", "stock"), ("B", "ct-ada"), ("C", "ct-full"), ("D", "ada-noT")):
        assert re.search(rf"^{name} = {label} ", out, re.M), name
        row = re.search(rf"^{name} {label} +(\d+) \[ *\d+ \.\. *\d+\] +(\d+) +([\d.]+) +([\d.]+)$", out, re.M)
        assert row, f"no result row for {name}:\n{out}"
        assert float(row.group(3)) > 0  # peak MiB
    for ratio in ("B/A", "C/A", "B/C", "D/A", "B/D"):
        assert re.search(rf"^RATIO {ratio} +[\d.]+x +[\d.]+x +[\d.]+x \[", out, re.M), f"{ratio}:\n{out}"
    assert "target >= 0.8:" in out


def test_bench_ct_lm_options(bench_ct_lm):
    args = bench_ct_lm.parse_args(["--device", "cpu", "--vocab", "33278", "--models", "a,b"])
    assert args.cutoffs == "2000,10000" and args.models == ["A", "B"] and args.fp16 is False
    with pytest.raises(SystemExit):
        bench_ct_lm.parse_args(["--device", "cpu", "--models", "A,E"])
    with pytest.raises(SystemExit):
        bench_ct_lm.parse_args(["--device", "cpu", "--fp16"])
