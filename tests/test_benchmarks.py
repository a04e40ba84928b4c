"""Smoke tests of the three benchmarks at toy sizes: each runs and prints every model and ratio
(no assertion on speed: this only checks that the benchmarks still work)."""

import json
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


def read_json(path, out, ratio_pattern):
    """The --json results, with the words/s ratio the printed RATIO line shows."""
    with open(path) as f:
        result = json.load(f)
    printed = float(re.search(ratio_pattern, out, re.M).group(1))
    return result, printed


def test_bench_tempered_ce_smoke(benchmarks, capsys, tmp_path):
    out = run_main(
        benchmarks["bench_tempered_ce"],
        ["--ffn", "64", "--heads", "2", "--max-tokens", "256", "--json", str(tmp_path / "r.json")],
        capsys,
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
    result, printed = read_json(tmp_path / "r.json", out, r"^RATIO tempered/stock: words/s ([\d.]+)x")
    assert set(result["models"]) == {"stock", "tempered"} and result["cuda_max_memory_allocated_mib"] is None
    ratio = result["ratios"]["tempered/stock"]
    assert round(ratio["words_per_s"], 3) == printed and ratio["peak_memory"] > 0
    assert result["environment"]["device"] == "cpu" and result["config"]["vocab"] == 300


def test_bench_sact_smoke(benchmarks, capsys, tmp_path):
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
            "--json",
            str(tmp_path / "r.json"),
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
    result, printed = read_json(tmp_path / "r.json", out, r"^RATIO sact/stock: training words/s ([\d.]+)x")
    assert set(result["models"]) == {"stock", "none", "sact"}
    assert round(result["ratios"]["sact/stock"]["training_words_per_s"], 3) == printed
    assert set(result["ratios"]) == {"sact/stock", "sact/none"}


@pytest.mark.parametrize("name", ["bench_sact", "bench_tempered_ce"])
def test_benchmarks_refuse_fp16_without_cuda(benchmarks, name):
    args = benchmarks[name].parse_args(["--device", "cpu"])
    assert args.device == "cpu" and args.fp16 is False and args.vocab == 8000  # the CPU defaults
    with pytest.raises(SystemExit):
        benchmarks[name].parse_args(["--device", "cpu", "--fp16"])


def test_bench_ct_lm_smoke(bench_ct_lm, capsys, tmp_path):
    options = "--ffn 64 --heads 2 --tokens-per-sample 32 --max-tokens 128 --ct-rank 8".split()
    out = run_main(bench_ct_lm, [*options, "--json", str(tmp_path / "r.json")], capsys)
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
    result, printed = read_json(tmp_path / "r.json", out, r"^RATIO B/A +([\d.]+)x")
    assert list(result["models"]) == ["A stock", "B ct-ada", "C ct-full", "D ada-noT"]
    assert list(result["ratios"]) == ["B/A", "C/A", "B/C", "D/A", "B/D"]
    assert round(result["ratios"]["B/A"]["words_per_s"], 3) == printed
    verdict = re.search(r"^RATIO B/A .*target >= 0.8: (OK|MISSED)$", out, re.M).group(1)
    assert result["ratios"]["B/A"]["met"] == (verdict == "OK")


def test_benchmarks_refuse_an_existing_json_target_before_any_work(benchmarks, tmp_path, capsys):
    existing = tmp_path / "r.json"
    existing.write_text("{}")
    for bench in benchmarks.values():
        with pytest.raises(SystemExit):
            bench.parse_args(["--device", "cpu", "--json", str(existing)])
        assert f"--json {existing} exists; refusing to overwrite it" in capsys.readouterr().err
    assert existing.read_text() == "{}"


def test_bench_ct_lm_options(bench_ct_lm):
    args = bench_ct_lm.parse_args(["--device", "cpu", "--vocab", "33278", "--models", "a,b"])
    assert args.cutoffs == "2000,10000" and args.models == ["A", "B"] and args.fp16 is False
    with pytest.raises(SystemExit):
        bench_ct_lm.parse_args(["--device", "cpu", "--models", "A,E"])
    with pytest.raises(SystemExit):
        bench_ct_lm.parse_args(["--device", "cpu", "--fp16"])
