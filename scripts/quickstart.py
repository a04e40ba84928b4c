#!/usr/bin/env python
"""Quickstart demo (`make demo`): softmax tempering on a synthetic low-resource task, on CPU.

1. writes a small synthetic translation corpus (ctemp-toy-translation, no download);
2. trains the same tiny Transformer twice with --criterion tempered_ce: T=1 (plain label-smoothed
   cross-entropy) and T=HOT (softmax tempering), with fairseq-train and --user-dir fairseq_ctemp,
   its resume made exact (CTEMP_EXACT_RESUME=1: an interrupted demo, run again, ends at the
   numbers of an uninterrupted one);
3. averages each run's last checkpoints (ctemp-average-checkpoints);
4. decodes the test set greedy and with beam 5 at each model's training temperature and scores it
   with sacrebleu (ctemp-greedy-vs-beam), then prints one table.

Everything goes to ./quickstart/ (or --workdir). A finished step is reused, never overwritten, so
re-running prints the table again; delete the folder to start over.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
BIN_DIR = os.path.dirname(sys.executable)

MODEL = (
    "--arch transformer --encoder-layers 2 --decoder-layers 2 --encoder-embed-dim 128 "
    "--decoder-embed-dim 128 --encoder-ffn-embed-dim 256 --decoder-ffn-embed-dim 256 "
    "--encoder-attention-heads 4 --decoder-attention-heads 4 --share-all-embeddings "
    "--dropout 0.2"
).split()
OPTIMISATION = (
    "--optimizer adam --adam-betas (0.9,0.98) --lr 2e-3 --lr-scheduler inverse_sqrt "
    "--warmup-updates 100 --max-tokens 2000 --seed 1 --cpu --log-format simple "
    "--log-interval 1000 --keep-last-epochs 5 --num-workers 0"
).split()

# A source word translates to one or two target words (toy_data), so no reference is longer than
# 2 x (source tokens + EOS) + 2: an undertrained model's hypotheses stop there, not at fairseq's 200.
MAX_LEN_A, MAX_LEN_B = 2, 2
TRAIN_PAIRS = 3000  # --train-pairs' default
DECODING = ["--cpu", "--batch-size", "100", "--num-workers", "0"]
DECODING += ["--max-len-a", str(MAX_LEN_A), "--max-len-b", str(MAX_LEN_B)]


def run(command, log_path=None, show=lambda line: False, env=None):
    """Run a command (with `env` added to the environment); stream the lines `show` selects,
    keep the whole output in log_path."""
    print("$ " + " ".join([*(f"{k}={v}" for k, v in (env or {}).items()), *command]), flush=True)
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
    )
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if show(line):
            print("    " + line.rstrip().split(" | INFO | ")[-1], flush=True)
    if proc.wait() != 0:
        sys.stdout.write("".join(lines[-40:]))
        raise SystemExit(f"failed: {' '.join(command)}")
    if log_path:
        with open(log_path, "a", encoding="utf-8") as f:
            f.writelines(lines)


def check_options(parser, args):
    """Before any work: the options, and that a reused --workdir was made by this script with the
    same --epochs and --train-pairs (its finished steps are reused; other models would be compared
    silently)."""
    low, high = 0.01, 100.0  # tempered_ce's range (fairseq_ctemp/criterions/checks.py)
    if not low <= args.temperature <= high or args.temperature == 1:
        parser.error(
            f"--temperature must be in [{low:g}, {high:g}] and not 1 (the baseline), got {args.temperature:g}"
        )
    if args.epochs < 1:
        parser.error(f"--epochs must be >= 1, got {args.epochs}")  # fairseq reads 0 as "no limit"
    if args.train_pairs < 10:
        parser.error(f"--train-pairs must be >= 10, got {args.train_pairs}")
    if os.path.exists(args.workdir) and not os.path.isdir(args.workdir):
        parser.error(f"--workdir {args.workdir} is a file, not a directory")
    options = os.path.join(args.workdir, "quickstart.json")
    if os.path.exists(options):
        made = made_with(parser, options)
        for name in ("epochs", "train_pairs"):
            if made[name] != getattr(args, name):
                parser.error(
                    f"--workdir {args.workdir} has models of --{name.replace('_', '-')} "
                    f"{made[name]}: use that, or another --workdir"
                )
    elif os.path.isdir(args.workdir) and [
        n for n in os.listdir(args.workdir) if not n.startswith("quickstart.json.")
    ]:
        parser.error(  # its raw/ or T1/ would be taken for finished steps
            f"--workdir {args.workdir} has files this script did not write (no quickstart.json): "
            "give a new or empty directory"
        )
    else:
        from fairseq_ctemp import outputs  # (a copy cut short by a kill is left as quickstart.json.tmpPID)

        outputs.write_json(options, {"epochs": args.epochs, "train_pairs": args.train_pairs})


def made_with(parser, path):
    """The options recorded in a --workdir's quickstart.json. One written before --train-pairs
    existed records --epochs alone: its models were made with 3000 pairs."""
    try:
        with open(path, encoding="utf-8") as f:
            made = json.load(f)
    except (OSError, ValueError) as e:
        parser.error(f"{path} is not a quickstart.json this script wrote ({e}): use another --workdir")
    made = {"train_pairs": 3000, **made} if isinstance(made, dict) else {}
    if not all(type(made.get(name)) is int for name in ("epochs", "train_pairs")):
        parser.error(f"{path} does not record --epochs and --train-pairs: use another --workdir")
    return made


def make_once(path, make):
    """make(PATH.part), then rename it to PATH: PATH exists only when the step finished. A PATH.part
    left by an interrupted run of this script is removed first (it wrote it)."""
    if os.path.exists(path):
        return
    part = path + ".part"
    if os.path.isdir(part):
        shutil.rmtree(part)
    make(part)
    os.replace(part, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workdir",
        default=os.path.join(REPO, "quickstart"),
        help="where the corpus, checkpoints and results go (default: quickstart/ of the checkout)",
    )
    parser.add_argument("--temperature", type=float, default=4.0, help="T of the tempered model")
    parser.add_argument(
        "--epochs",
        type=int,
        default=25,
        help="epochs per model; the last min(5, epochs) epoch checkpoints are averaged",
    )
    parser.add_argument(
        "--train-pairs",
        type=int,
        default=TRAIN_PAIRS,
        help="synthetic training pairs (validation and test: a tenth each)",
    )
    args = parser.parse_args()
    check_options(parser, args)
    work = args.workdir
    raw, data = os.path.join(work, "raw"), os.path.join(work, "data-bin")
    make_once(raw, lambda destdir: corpus(destdir, args.train_pairs))
    make_once(data, lambda destdir: preprocess(raw, destdir))
    averaged = min(5, args.epochs)  # the last epoch checkpoints kept (--keep-last-epochs 5)
    rows = []
    for temperature in (1.0, args.temperature):
        save_dir = os.path.join(work, f"T{temperature:g}")
        average = train_and_average(data, save_dir, temperature, args.epochs, averaged)
        rows.append((temperature, decode(raw, data, save_dir, average, temperature)))
    print_table(rows, averaged)
    summary = write_summary(os.path.join(work, "results.json"), args, rows)
    print(
        f"Measured on {summary['cpu']} ({summary['cpu_capability']}, {summary['threads']} threads), torch {summary['torch']}: {work}/results.json"
    )
    print(against_kept(summary))
    print(f"Everything is in {work}/ (train.log, checkpoints, hypotheses: see greedy_vs_beam.json)")


def corpus(destdir, train_pairs):
    from fairseq_ctemp.toy_data import write_corpus

    sizes = (("train", train_pairs), ("valid", train_pairs // 10), ("test", train_pairs // 10))
    print(
        "== 1. synthetic corpus: " + " / ".join(f"{n} {split}" for split, n in sizes) + " sentence pairs",
        flush=True,
    )
    write_corpus(destdir, sizes)


def preprocess(raw, destdir):
    from fairseq_ctemp.preprocess import fairseq_preprocess

    preprocess_args = [
        *("--source-lang", "src", "--target-lang", "tgt"),
        *("--trainpref", f"{raw}/train", "--validpref", f"{raw}/valid", "--testpref", f"{raw}/test"),
        *("--destdir", destdir, "--joined-dictionary", "--workers", "1"),
    ]
    print("$ fairseq-preprocess " + " ".join(preprocess_args), flush=True)
    fairseq_preprocess(preprocess_args)  # in this process; its log: preprocess.log in destdir


def train_and_average(data, save_dir, temperature, epochs, averaged):
    """fairseq-train with tempered_ce at `temperature`, then the average of its last epoch
    checkpoints (skipped when the average is there); returns the average's path."""
    from fairseq_ctemp import exact_resume
    from fairseq_ctemp.cli import average_checkpoints

    average = os.path.join(save_dir, f"checkpoint_avg{averaged}.pt")
    if os.path.exists(average):
        return average
    print(
        f"== 2. train with tempered_ce, T={temperature:g} ({epochs} epochs; one line per epoch)", flush=True
    )
    os.makedirs(save_dir, exist_ok=True)
    train = [os.path.join(BIN_DIR, "fairseq-train"), data, "--user-dir", os.path.join(REPO, "fairseq_ctemp")]
    train += [*MODEL, *OPTIMISATION, "--criterion", "tempered_ce", "--softmax-temperature", str(temperature)]
    train += ["--label-smoothing", "0.1", "--max-epoch", str(epochs), "--save-dir", save_dir]
    run(
        train,
        log_path=os.path.join(save_dir, "train.log"),
        show=lambda line: "| valid | epoch" in line,
        env={exact_resume.ENV: "1"},  # resumed after an interruption: the same batches and numbers
    )
    # ctemp-average-checkpoints, through the function its console script calls
    average_args = ["--inputs", save_dir, "--num-epoch-checkpoints", str(averaged), "--output", average]
    print("$ ctemp-average-checkpoints " + " ".join(average_args), flush=True)
    average_checkpoints.main(average_args)
    return average


def decode(raw, data, save_dir, average, temperature):
    """The GreedyVsBeam of the average on the test set (greedy_vs_beam.json; read when there)."""
    from fairseq_ctemp.greedy_vs_beam import GreedyVsBeam, Request, run_greedy_vs_beam

    result_path = os.path.join(save_dir, "greedy_vs_beam.json")
    if os.path.exists(result_path):
        with open(result_path, encoding="utf-8") as f:
            return GreedyVsBeam.from_dict(json.load(f))
    print(f"== 3. decode the test set greedy and beam 5 at T={temperature:g}", flush=True)
    request = Request(
        data,
        average,
        beam=5,
        subset="test",
        extra_args=DECODING,
        ref=os.path.join(raw, "test.tgt"),
        json_path=result_path,
    )
    # in this process: the first batch is decoded once untimed, so greedy pays no start-up
    return run_greedy_vs_beam(request, verbose=False)


def print_table(rows, averaged):
    print(
        "\nSoftmax tempering on the synthetic task (test set, sacrebleu; average of the last "
        f"{averaged} epoch checkpoints):\n"
    )
    print(
        "| training T | greedy BLEU | beam-5 BLEU | greedy chrF | beam-5 chrF | greedy s | beam-5 s | greedy speed-up |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for temperature, r in rows:
        g, b = r.systems["greedy"], r.systems["beam"]
        print(
            f"| {temperature:g} | {g.bleu:.2f} | {b.bleu:.2f} | {g.chrf:.2f} | "
            f"{b.chrf:.2f} | {g.decode_seconds:.2f} | {b.decode_seconds:.2f} | "
            f"{r.speedup:.2f}x |"
        )
    print(f"\nBLEU signature: {rows[0][1].signatures['bleu']}")


KEPT = os.path.join(REPO, "examples", "quickstart", "results")
SCORES = ("greedy", "beam5")


# what makes two runs print the same digits: torch's kernels differ by instruction set (on one CPU
# model, ATEN_CPU_CAPABILITY=avx2 changes them), so a kept file that does not record it, from before
# it was recorded, is compared with none
SAME = ("command", "cpu", "cpu_capability", "threads", "torch")


def against_kept(summary):
    """One line: how the table compares with the kept result of the same command, CPU model,
    instruction set, thread count and torch (examples/quickstart/results), if there is one."""
    for name in sorted(os.listdir(KEPT)):
        with open(os.path.join(KEPT, name), encoding="utf-8") as f:
            kept = json.load(f)
        if all(kept.get(key) == summary[key] for key in SAME):
            where = os.path.relpath(os.path.join(KEPT, name), REPO)
            if rounded_scores(kept) == rounded_scores(summary):
                return f"BLEU and chrF as kept for this CPU model in {where}"
            return f"BLEU or chrF differ from those kept for this CPU model in {where}: not expected"
    return (
        f"No kept result of this command for {summary['cpu']} ({summary['cpu_capability']}, "
        f"{summary['threads']} threads, torch {summary['torch']}): BLEU differs between CPU models "
        "and instruction sets (examples/quickstart/README.md)"
    )


def rounded_scores(summary):
    return [[round(row[s][k], 2) for s in SCORES for k in ("bleu", "chrf")] for row in summary["rows"]]


def write_summary(path, args, rows):
    """The table as a result file (written once: a rerun reuses the finished steps, so it would
    write the same numbers; an existing file is left as it is)."""
    import torch

    from fairseq_ctemp import host

    summary = {
        "command": "python scripts/quickstart.py "
        + f"--temperature {args.temperature:g} --epochs {args.epochs} --train-pairs {args.train_pairs}",
        "cpu": host.cpu_model(),
        "cpu_capability": host.cpu_capability(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "rows": [
            {
                "training_temperature": temperature,
                "greedy": {k: getattr(r.systems["greedy"], k) for k in ("bleu", "chrf", "decode_seconds")},
                "beam5": {k: getattr(r.systems["beam"], k) for k in ("bleu", "chrf", "decode_seconds")},
                "greedy_speedup": r.speedup,
                "bleu_signature": r.signatures["bleu"],
            }
            for temperature, r in rows
        ],
    }
    if not os.path.exists(path):
        from fairseq_ctemp import outputs

        outputs.write_json(path, summary)
    return summary


if __name__ == "__main__":
    main()
