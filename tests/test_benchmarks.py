"""Smoke tests of the three benchmarks at toy sizes: each runs and prints every model and ratio
(no assertion on speed: this only checks that the benchmarks still work)."""

import os
import re

import pytest

BENCH_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


@pytest.fixture
def benchmarks(monkeypatch):
    """The three benchmark modules by name (they live in benchmarks/, not in the package)."""
    monkeypatch.syspath_prepend(BENCH_DIR)
    import bench_ct_lm
    import bench_sact
    import bench_tempered_ce

    return {"bench_ct_lm": bench_ct_lm, "bench_sact": bench_sact, "bench_tempered_ce": bench_tempered_ce}


@pytest.fixture
def bench_ct_lm(benchmarks):
    return benchmarks["bench_ct_lm"]


def run_main(bench, argv, capsys):
    import logging

    import torch

    threads = torch.get_num_threads()
    try:
        bench.main(
            [
                "--device",
                "cpu",
                "--vocab",
                "300",
                "--layers",
                "1",
                "--dim",
                "32",
                "--rounds",
                "1",
                "--warmup",
                "0",
                "--batches",
                "1",
                "--threads",
                "1",
                *argv,
            ]
        )
    finally:  # main() sets these process-wide
        torch.set_num_threads(threads)
        logging.disable(logging.NOTSET)
    return capsys.readouterr().out


def test_bench_tempered_ce_smoke(benchmarks, capsys):
    out = run_main(
        benchmarks["bench_tempered_ce"], ["--ffn", "64", "--heads", "2", "--max-tokens", "256"], capsys
    )
    assert "A = --criterion label_smoothed_cross_entropy" in out
    assert "B = --criterion tempered_ce --softmax-temperature 4.0" in out
    for label in ("stock", "tempered"):
        assert re.search(rf"^{label} +\d+ \[ *\d+ \.\. *\d+\] +\d+ +[\d.]+ +[\d.]+$", out, re.M), (
            f"{label}:\n{out}"
        )
    assert re.search(
        r"^RATIO tempered/stock: words/s [\d.]+x \(target >= 0.97: (OK|MISSED)\) \| "
        r"peak memory [\d.]+x",
        out,
        re.M,
    ), out


def test_bench_sact_smoke(benchmarks, capsys):
    out = run_main(
        benchmarks["bench_sact"],
        [
            "--max-tokens",
            "256",
            "--beam",
            "2",
            "--gen-sentences",
            "8",
            "--gen-batch-size",
            "4",
            "--gen-len",
            "5",
        ],
        capsys,
    )
    for label, arch in (
        ("stock", "--arch lstm"),
        ("none", "--arch sact_lstm --attention-temperature none"),
        ("sact", "--arch sact_lstm --attention-temperature sact"),
    ):
        assert re.search(rf"^{label} +{re.escape(arch)}", out, re.M), f"{label}:\n{out}"
        assert re.search(rf"^{label} +\d+ \[ *\d+ \.\. *\d+\] +\d+ +[\d.]+ \[", out, re.M), f"{label}:\n{out}"
    assert re.search(
        r"^RATIO sact/stock: training words/s [\d.]+x \(target >= 0.85: (OK|MISSED)\) \| "
        r"beam-2 sentences/s [\d.]+x",
        out,
        re.M,
    ), out


@pytest.mark.parametrize("name", ["bench_sact", "bench_tempered_ce"])
def test_benchmarks_refuse_fp16_without_cuda(benchmarks, name):
    args = benchmarks[name].parse_args(["--device", "cpu"])
    assert args.device == "cpu" and args.fp16 is False and args.vocab == 8000  # the CPU defaults
    with pytest.raises(SystemExit):
        benchmarks[name].parse_args(["--device", "cpu", "--fp16"])


def test_bench_ct_lm_smoke(bench_ct_lm, capsys):
    out = run_main(
        bench_ct_lm,
        ["--ffn", "64", "--heads", "2", "--tokens-per-sample", "32", "--max-tokens", "128", "--ct-rank", "8"],
        capsys,
    )
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
