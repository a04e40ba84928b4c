"""Shared helpers: run the real fairseq CLIs with --user-dir on tiny generated data."""
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUGIN_DIR = os.path.join(REPO, "fairseq_ctemp")
BIN_DIR = os.path.dirname(sys.executable)

# A transformer small enough that a few epochs on the toy corpus take seconds on 2 CPU cores.
TINY_TRANSFORMER = [
    "--arch", "transformer", "--encoder-layers", "1", "--decoder-layers", "1",
    "--encoder-embed-dim", "32", "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64",
    "--decoder-ffn-embed-dim", "64", "--encoder-attention-heads", "2",
    "--decoder-attention-heads", "2", "--share-all-embeddings",
]
TRAIN_DEFAULTS = [
    "--cpu", "--optimizer", "adam", "--lr", "3e-3", "--lr-scheduler", "inverse_sqrt",
    "--warmup-updates", "10", "--max-tokens", "2000", "--seed", "1", "--log-format", "json",
    "--log-interval", "1", "--num-workers", "0",
]
# Untrained models decode up to 200 tokens per sentence; bound it so generation stays fast.
FAST_DECODE = ["--cpu", "--batch-size", "64", "--max-len-a", "1.2", "--max-len-b", "10"]


def cli(name):
    path = os.path.join(BIN_DIR, name)
    return path if os.path.exists(path) else name


def run_cli(name, *args, cwd=None, env=None, check=True):
    """Run a console command; returns its CompletedProcess with stdout+stderr merged in .stdout."""
    full_env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
    full_env.update(env or {})
    proc = subprocess.run([cli(name), *map(str, args)], cwd=cwd, env=full_env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if check and proc.returncode != 0:
        raise AssertionError(f"{name} failed ({proc.returncode}):\n{proc.stdout[-6000:]}")
    return proc


def json_log_records(output, kind):
    """fairseq --log-format json lines of one kind ("train", "valid", "train_inner")."""
    records = []
    for line in output.splitlines():
        marker = f"| {kind} | "
        if marker in line and "{" in line:
            records.append(json.loads(line[line.index("{"):]))
    return records


def hypotheses(generate_output):
    """{sentence id: (score, hypothesis)} from fairseq-generate's H- lines."""
    result = {}
    for line in generate_output.splitlines():
        if line.startswith("H-"):
            key, score, text = line.split("\t")
            result[int(key[2:])] = (float(score), text)
    return result


@pytest.fixture(scope="session")
def toy_data(tmp_path_factory):
    """A binarized toy translation corpus (src -> tgt) and an LM corpus on its target side."""
    from fairseq_ctemp.cli.toy_translation import write_corpus

    root = tmp_path_factory.mktemp("toy")
    raw = root / "raw"
    write_corpus(str(raw), (("train", 800), ("valid", 80), ("test", 80)), vocab=150)
    run_cli("fairseq-preprocess", "--source-lang", "src", "--target-lang", "tgt",
            "--trainpref", raw / "train", "--validpref", raw / "valid", "--testpref", raw / "test",
            "--destdir", root / "bin", "--joined-dictionary", "--workers", "1")
    run_cli("fairseq-preprocess", "--only-source", "--trainpref", raw / "train.tgt",
            "--validpref", raw / "valid.tgt", "--testpref", raw / "test.tgt",
            "--destdir", root / "lm-bin", "--workers", "1")
    return {"raw": raw, "bin": root / "bin", "lm_bin": root / "lm-bin"}
