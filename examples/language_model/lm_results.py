#!/usr/bin/env python3
"""Results of the language-model recipes: tables and learning curves from train.sh / evaluate.sh outputs.

  lm_results.py plot  --logs RUN/train.log ... [--labels ...] [--x update|epoch] [--metric ppl] --output curves.png
      validation perplexity (or another valid_* metric) against updates or epochs, one line per run,
      from fairseq's --log-format json logs (train.sh tees them into SAVE_DIR/train.log); with
      --csv FILE.csv also the points, and per epoch the learning rate it trained at.
  lm_results.py table --runs RUNS_DIR --variants softmax ct ... [--eval-suffix _checkpoint_last] --output PREFIX
      PREFIX.md and PREFIX.csv: per variant (RUNS_DIR/<variant>): valid / test perplexity, the
      evaluation guards (evaluated tokens, largest |log sum p| of eval_{valid,test}SUFFIX.json from
      evaluate.sh), parameters, whether early stopping ended the run, its epochs and best epoch,
      updates, training time (and on which devices), the epochs at which a resumed run went on,
      and the final training tau statistics.
  lm_results.py tau --dumps RUN/tau_test.tsv ... [--labels ...] --output PREFIX
      PREFIX.md and PREFIX.csv: tau statistics of CT models over a text, from their
      ``ctemp-ct-analysis dump`` TSVs: mean over the vocabulary, tau of the target token (mean, std,
      5th / 95th percentiles), smallest and largest tau of any word at any position.
  lm_results.py protocols --runs RUNS_DIR --variants softmax --output FILE.md
      test perplexity of the same checkpoint under different eval-lm block / context settings
      (RUNS_DIR/<variant>/protocol_<block>_<context>/eval_test_checkpoint_last.json).

  lm_results.py compare --runs RUNS_DIR --variants softmax mos ... [--subset test] --output PREFIX
      PREFIX.md and PREFIX.csv: each variant's perplexity against the first's, with a paired
      bootstrap over the subset's sentences (evaluate.sh's eval_SUBSET.sentences.tsv): the ratio of
      the perplexities, its 95 % interval and the two-sided p-value of "no difference".
  lm_results.py seeds --table PREFIX.csv [MORE.csv ...] [--baseline softmax] --output PREFIX_seeds
      PREFIX_seeds.md and .csv: with the seed as the unit, each row's test perplexity over its
      seeds (the runs variant@N of a table; no @: seed 1), and each row against the baseline:
      the ratio of the geometric means and Welch's t-test on the per-seed log perplexities
      (one seed on either side: no test; fewer than 3 seeds on either side, or p >= 0.05:
      inconclusive).

Every command refuses to write over an existing output before any work (--force: replace them, as
the recipes' results steps do when they rebuild their tables from the runs).

For the temperatures themselves (tau per position, heat maps) see ctemp-ct-analysis.
"""

import argparse
import collections
import csv
import glob
import json
import math
import os
import re
import statistics
import sys

from fairseq_ctemp import logs


def curve(path, x_key, metric):
    """[(x, y)] of valid_<metric> against valid_num_updates / epoch; a resumed run's repeated
    points keep the latest value."""
    points = {}
    for record in logs.read(path, "valid"):
        x = record.get("valid_num_updates" if x_key == "update" else "epoch")
        y = record.get(f"valid_{metric}")
        if x is not None and y is not None:
            points[float(x)] = float(y)
    return sorted(points.items())


def per_epoch(train, key):
    """{epoch: its value of `key`} from a log's end-of-epoch train records, e.g. train_lr (the
    learning rate it trained at) or train_clip (the % of its updates --clip-norm shortened); a resumed
    run's repeated epoch keeps the latest."""
    return {int(r["epoch"]): r[key] for r in train if key in r and "epoch" in r}


def line_style(label, row_names):
    """(colour, line style) of a run's curve: the colour is its row's (the label before @), the
    style its seed's (@N; no @: seed 1)."""
    row, _, seed = label.partition("@")
    styles = ["-", "--", "-.", ":"]
    return f"C{row_names.index(row) % 10}", styles[(int(seed) - 1 if seed.isdigit() else 0) % len(styles)]


def plot(args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = args.labels or [os.path.basename(os.path.dirname(os.path.abspath(p))) for p in args.logs]
    if len(labels) != len(args.logs):
        sys.exit("lm_results.py: error: give one --labels entry per --logs file")
    from matplotlib.ticker import ScalarFormatter

    if args.csv and not args.csv.endswith(".csv"):
        sys.exit(f"lm_results.py: error: --csv {args.csv}: give a file name ending in .csv")
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    row_names = list(dict.fromkeys(label.partition("@")[0] for label in labels))
    plotted, rows = 0, []
    for path, label in zip(args.logs, labels):
        if not os.path.exists(path):
            sys.exit(f"lm_results.py: error: no log {path}")
        points = curve(path, args.x, args.metric)
        if not points:
            print(f"lm_results.py: warning: no valid_{args.metric} records in {path}", file=sys.stderr)
            continue
        train = logs.read(path, "train") if args.x == "epoch" else []
        lrs, clips = per_epoch(train, "train_lr"), per_epoch(train, "train_clip")
        rows += [
            {
                "run": label,
                args.x: int(x),
                f"valid_{args.metric}": y,
                "lr": lrs.get(int(x), ""),
                "clipped_percent": clips.get(int(x), ""),
            }
            for x, y in points
        ]
        xs, ys = zip(*points)
        color, linestyle = line_style(label, row_names)
        ax.plot(
            xs, ys, marker="o", markersize=3, linewidth=1.3, label=label, color=color, linestyle=linestyle
        )
        plotted += 1
    if not plotted:
        sys.exit("lm_results.py: error: nothing to plot (train with --log-format json and keep the log)")
    ax.set_xlabel("updates" if args.x == "update" else "epoch")
    ax.set_ylabel(f"validation {args.metric}")
    if args.metric == "ppl":
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(ScalarFormatter())
        ax.tick_params(axis="y", which="minor", labelsize=7)
    if args.title:
        ax.set_title(args.title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    fig.savefig(args.output)
    print(f"wrote {args.output}")
    if args.csv:
        write_csv(
            args.csv[: -len(".csv")], ["run", args.x, f"valid_{args.metric}", "lr", "clipped_percent"], rows
        )
        print(f"wrote {args.csv}")


def read_json(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


# fairseq-train logs its configuration once at each start: a resumed run's log has one per process.
PROCESS_START = re.compile(r"(?m)^.*\| fairseq_cli\.train \| \{'_name'.*$")
ON_CPU = re.compile(r"'cpu': (True|False)")  # common.cpu in that configuration


def training_seconds_by_device(log_text):
    """fairseq's train_wall summed over the epochs a run kept, across resumes, per device ("cpu",
    "gpu", or None where the configuration does not say): {device: seconds}. train_wall counts from
    the start of each process (so a resumed run's "done training in" covers its last part only):
    within each process, an epoch took the difference to the one before. An epoch trained again
    after an interruption counts once, as its latest record."""
    starts = list(PROCESS_START.finditer(log_text))
    bounds = [0] + [m.start() for m in starts] + [len(log_text)]
    configs = [""] + [m.group(0) for m in starts]
    per_epoch = {}  # epoch -> (device, seconds)
    for config, begin, end in zip(configs, bounds, bounds[1:]):
        cpu = ON_CPU.search(config)
        device = None if cpu is None else "cpu" if cpu.group(1) == "True" else "gpu"
        previous = 0.0
        for record in logs.parse(log_text[begin:end], "train"):
            if "train_wall" in record:
                per_epoch[int(record["epoch"])] = device, float(record["train_wall"]) - previous
                previous = float(record["train_wall"])
    by_device = {}
    for device, seconds in per_epoch.values():
        by_device[device] = by_device.get(device, 0.0) + seconds
    return {device: round(seconds) for device, seconds in by_device.items()}


def training_seconds(log_text):
    """The training time of all devices together (training_seconds_by_device), None without records."""
    by_device = training_seconds_by_device(log_text)
    return sum(by_device.values()) if by_device else None


def devices_text(by_device):
    """CPU, GPU, or for a run that moved: "GPU 565 s + CPU 8,012 s" (in the order trained)."""
    names = [(device or "?").upper() for device in by_device]
    if len(names) == 1:
        return None if None in by_device else names[0]
    return " + ".join(f"{name} {seconds:,} s" for name, seconds in zip(names, by_device.values())) or None


# fairseq-train's line when it resumes: the epoch is the one it goes on with (the next one after a
# checkpoint saved at an epoch's end)
RESUMED = re.compile(r"Loaded checkpoint \S+ \(epoch (\d+) @ \d+ updates\)")


def resumed_at(log_text):
    """The epochs at which the processes of a resumed run went on, in order ("28 29"), or None."""
    return " ".join(RESUMED.findall(log_text)) or None


# fairseq's line when it writes checkpoint_best.pt (the epoch is the one just validated)
BEST_SAVED = re.compile(r"Saved checkpoint \S*checkpoint_best\.pt \(epoch (\d+) @")


def best_epoch(log_text, valid):
    """The epoch of checkpoint_best.pt: the last one fairseq saved as best. fairseq compares the
    validation losses it logs, rounded to 3 decimals, and a tie counts as best (but not as an
    improvement for --patience), so among equal losses the latest is best. Without the save lines,
    that rule applied to valid ({epoch: logged valid loss})."""
    saved = BEST_SAVED.findall(log_text)
    if saved:
        return int(saved[-1])
    return min(valid, key=lambda epoch: (valid[epoch], -epoch))


def run_summary(run_dir, eval_suffix):
    log = os.path.join(run_dir, "train.log")
    row = {"variant": os.path.basename(run_dir)}
    for subset in ("valid", "test"):
        result = read_json(os.path.join(run_dir, f"eval_{subset}{eval_suffix}.json"))
        row[f"{subset}_ppl"] = round(result["ppl"], 2) if result else None
        row[f"{subset}_tokens"] = result["evaluated_tokens"] if result else None
        if result and subset == "test":
            row["eval_protocol"] = f"{result['tokens_per_sample']}/{result['context_window']}"
            row["test_max_log_normalizer"] = result.get("max_log_normalizer")  # older results lack it
    row.setdefault("eval_protocol", None)  # a run not evaluated yet
    row.setdefault("test_max_log_normalizer", None)
    row["params"] = row["updates"] = row["train_seconds"] = row["trained_on"] = None
    row["stopped_by"] = row["epochs"] = row["best_epoch"] = row["resumed_at"] = None
    row["train_ppl"] = row["tau_mean"] = row["tau_min"] = row["tau_max"] = row["clipped_percent"] = None
    row["ar_tar"] = None
    row["commit"] = commits(run_dir)
    if os.path.exists(log):
        with open(log, errors="replace") as f:
            text = f.read()
        params = re.findall(r"num\. (?:shared )?model params: ([\d,]+)", text)
        if params:
            row["params"] = int(params[-1].replace(",", ""))
        row["stopped_by"] = "early stop" if logs.EARLY_STOP in text else "not early-stopped"
        valid = {}  # epoch -> valid_nll_loss, a resumed run's repeated epochs keeping the latest
        for record in logs.read(log, "valid"):
            if "valid_nll_loss" in record:
                valid[int(record["epoch"])] = record["valid_nll_loss"]
        if valid:
            row["epochs"] = max(valid)
            row["best_epoch"] = best_epoch(text, valid)
        by_device = training_seconds_by_device(text)
        row["train_seconds"] = sum(by_device.values()) if by_device else None
        row["trained_on"] = devices_text(by_device)
        row["resumed_at"] = resumed_at(text)
        inner = logs.read(log, "train_inner")
        if inner:
            last = inner[-1]
            row["updates"] = int(float(last.get("num_updates", 0)))
            row["train_ppl"] = float(last["ppl"]) if "ppl" in last else None
            for key in ("tau_mean", "tau_min", "tau_max"):
                row[key] = float(last[key]) if key in last else None
        train = logs.read(log, "train")
        if train and "train_num_updates" in train[-1]:
            row["updates"] = int(float(train[-1]["train_num_updates"]))
        row["clipped_percent"] = clipped_percent(train)
        row["ar_tar"] = ar_tar_weights(text)
    return row


# the end of each start's line in a run's command.txt (train.sh)
STARTED_FROM = re.compile(r" # commit (\S+)$")


def commits(run_dir):
    """The commits of the checkout that each start of a run trained from, in order, each once
    ("7b1843f", or "a1 b2" for a run resumed from another; "?" for a start from before train.sh
    recorded them), or None where no start recorded one (or there is no command.txt)."""
    path = os.path.join(run_dir, "command.txt")
    if not os.path.exists(path):
        return None
    with open(path, errors="replace") as f:
        found = [m.group(1) if (m := STARTED_FROM.search(line)) else "?" for line in f if line.strip()]
    return " ".join(dict.fromkeys(found)) if set(found) - {"?"} else None


AR_TAR_WEIGHTS = re.compile(
    r"'activation_regularization': ([^,}]+).*?'temporal_activation_regularization': ([^,}]+)"
)


def ar_tar_weights(log_text):
    """The AR and TAR weights of a run's latest configuration in its log ("2.0/1.0"), or None."""
    configs = PROCESS_START.findall(log_text)
    found = AR_TAR_WEIGHTS.search(configs[-1]) if configs else None
    return f"{found.group(1)}/{found.group(2)}" if found else None


def clipped_percent(train):
    """The share of updates whose gradient --clip-norm shortened, in % over the epochs a run kept
    (fairseq's train_clip of each epoch, the latest record of an epoch trained again; the epochs of
    a language-modelling run have the same number of updates), or None without it. A loss scale
    other than 1 reaches the optimizer through this (Adam itself ignores a constant factor, but for
    its ε)."""
    clips = per_epoch(train, "train_clip")
    return round(statistics.fmean(clips.values()), 1) if clips else None


COLUMNS = [
    "variant",
    "valid_ppl",
    "test_ppl",
    "valid_tokens",
    "test_tokens",
    "eval_protocol",
    "test_max_log_normalizer",
    "params",
    "stopped_by",
    "epochs",
    "best_epoch",
    "updates",
    "train_seconds",
    "trained_on",
    "resumed_at",
    "train_ppl",
    "tau_mean",
    "tau_min",
    "tau_max",
    "clipped_percent",
    "ar_tar",
    "commit",
]


def write_csv(prefix, columns, rows):
    """PREFIX.csv with these columns (its directory made if needed)."""
    os.makedirs(os.path.dirname(os.path.abspath(prefix)) or ".", exist_ok=True)
    with open(prefix + ".csv", "w", newline="") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows(rows)


def fmt(value):
    if value is None:
        return "–"
    if isinstance(value, float):
        if 0 < abs(value) < 1e-3:
            return f"{value:.1e}"
        return f"{value:.2f}" if abs(value) >= 10 else f"{value:.5g}"
    if isinstance(value, int) and value >= 10000:
        return f"{value:,}"
    return str(value)


def table(args):
    rows = []
    for variant in args.variants:
        run_dir = os.path.join(args.runs, variant)
        if not os.path.isdir(run_dir):
            print(f"lm_results.py: warning: no run {run_dir}", file=sys.stderr)
            continue
        rows.append(run_summary(run_dir, args.eval_suffix))
    if not rows:
        sys.exit("lm_results.py: error: no runs found")
    write_csv(args.output, COLUMNS, rows)
    header = [
        "variant",
        "valid ppl",
        "test ppl",
        "valid tokens",
        "test tokens",
        "eval blocks/context",
        "test max abs log Σp",
        "params",
        "stopped by",
        "epochs",
        "best epoch",
        "updates",
        "train time (s)",
        "trained on",
        "resumed at epoch",
        "last train ppl",
        "train τ mean",
        "τ min",
        "τ max",
        "updates clipped (%)",
        "AR/TAR weights",
        "commit",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(fmt(row[c]) for c in COLUMNS) + " |")
    with open(args.output + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def protocols(args):
    lines = [
        "| variant | eval-lm --tokens-per-sample | --context-window | scored per block | test ppl | evaluated tokens |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    found = 0
    for variant in args.variants:
        run_dir = os.path.join(args.runs, variant)
        results = [
            read_json(p)
            for p in glob.glob(os.path.join(run_dir, "protocol_*", "eval_test_checkpoint_last.json"))
        ]
        main = read_json(os.path.join(run_dir, "eval_test_checkpoint_last.json"))
        results = [r for r in results + [main] if r]
        for r in sorted(
            results, key=lambda r: (r["tokens_per_sample"] - r["context_window"], r["context_window"])
        ):
            lines.append(
                f"| {variant} | {r['tokens_per_sample']} | {r['context_window']} | "
                f"{r['tokens_per_sample'] - r['context_window']} | {r['ppl']:.2f} | {r['evaluated_tokens']:,} |"
            )
            found += 1
    if not found:
        sys.exit("lm_results.py: error: no protocol results found")
    with open(args.output, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


TAU_COLUMNS = [
    "variant",
    "positions",
    "tau_mean_over_vocabulary",
    "tau_target_mean",
    "tau_target_std",
    "tau_target_p5",
    "tau_target_p95",
    "tau_min",
    "tau_max",
    "tau_argmax_is_target",
    "tau_argmax_words",
]


def argmax_words(words, k=5):
    """The k words that most often have the largest tau, with their share of the positions."""
    counts = collections.Counter(words)
    return ", ".join(f"{w} {n / len(words):.0%}" for w, n in counts.most_common(k))


def tau(args):
    """tau statistics of CT models over a text, from their ctemp-ct-analysis dump TSVs."""
    import numpy as np

    labels = args.labels or [os.path.basename(os.path.dirname(os.path.abspath(p))) for p in args.dumps]
    if len(labels) != len(args.dumps):
        sys.exit("lm_results.py: error: give one --labels entry per --dumps file")
    rows = []
    for path, label in zip(args.dumps, labels):
        if not os.path.exists(path):
            sys.exit(f"lm_results.py: error: no dump {path} (ctemp-ct-analysis dump --output {path} ...)")
        with open(path, newline="") as f:
            records = list(csv.DictReader(f, delimiter="\t"))
        if not records:
            sys.exit(f"lm_results.py: error: {path} has no positions")
        column = {
            key: np.array([float(r[key]) for r in records])
            for key in ("tau_target", "tau_mean", "tau_min", "tau_max")
        }
        target = column["tau_target"]
        # dumps written before ctemp-ct-analysis had the column: None
        argmax = [r["tau_argmax"] for r in records] if "tau_argmax" in records[0] else None
        on_target = None if argmax is None else [a == r["target"] for a, r in zip(argmax, records)]
        rows.append(
            {
                "variant": label,
                "positions": len(records),
                "tau_mean_over_vocabulary": float(column["tau_mean"].mean()),
                "tau_target_mean": float(target.mean()),
                "tau_target_std": float(target.std()),
                "tau_target_p5": float(np.percentile(target, 5)),
                "tau_target_p95": float(np.percentile(target, 95)),
                "tau_min": float(column["tau_min"].min()),
                "tau_max": float(column["tau_max"].max()),
                "tau_argmax_is_target": None if argmax is None else float(np.mean(on_target)),
                "tau_argmax_words": None if argmax is None else argmax_words(argmax),
            }
        )
    write_csv(args.output, TAU_COLUMNS, rows)
    header = [
        *("variant", "positions", "mean_v τ", "τ(target) mean", "std", "5 %", "95 %", "min τ", "max τ"),
        *("largest τ on the target", "words with the largest τ (share of positions)"),
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    lines += ["| " + " | ".join(fmt(row[c]) for c in TAU_COLUMNS) + " |" for row in rows]
    with open(args.output + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


COMPARE_COLUMNS = [
    "baseline",
    "variant",
    "ppl_baseline",
    "ppl_variant",
    "ppl_ratio",
    "ratio_low",
    "ratio_high",
    "p_value",
    "sentences",
    "samples",
]


def read_sentences(path):
    """(NLL in nats, tokens) per sentence, as numpy arrays, from evaluate.sh's sentences TSV."""
    import numpy as np

    if not os.path.exists(path):
        sys.exit(f"lm_results.py: error: no {path} (evaluate.sh writes it; run it again for an older result)")
    with open(path) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return np.array([float(r["nll_nats"]) for r in rows]), np.array([int(r["tokens"]) for r in rows])


def paired_bootstrap(nll_a, nll_b, tokens, samples, seed):
    """Resample the sentences with replacement `samples` times; per resample, the difference of the
    per-token NLL (nats) of b and a. Returns (ppl ratio b / a, its 2.5 and 97.5 percentiles, the
    two-sided p-value of a difference of 0: twice the smaller share of resamples on either side)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    diffs = []
    for start in range(0, samples, 500):  # 500 resamples at a time: bounded memory
        idx = rng.integers(0, len(tokens), size=(min(500, samples - start), len(tokens)))
        diffs.append((nll_b[idx].sum(1) - nll_a[idx].sum(1)) / tokens[idx].sum(1))
    diffs = np.concatenate(diffs)
    observed = (nll_b.sum() - nll_a.sum()) / tokens.sum()
    p = min(1.0, 2 * min(float((diffs <= 0).mean()), float((diffs >= 0).mean())))
    low, high = np.percentile(diffs, [2.5, 97.5])
    return float(np.exp(observed)), float(np.exp(low)), float(np.exp(high)), p


def compare(args):
    """Each variant's perplexity against the first's, paired over the subset's sentences."""
    import numpy as np

    if len(args.variants) < 2:
        sys.exit("lm_results.py: error: --variants needs a baseline and at least one variant to compare")
    if args.samples < 100:
        sys.exit(f"lm_results.py: error: --samples must be >= 100, got {args.samples}")
    name = f"eval_{args.subset}.sentences.tsv"
    scored = {v: read_sentences(os.path.join(args.runs, v, name)) for v in args.variants}
    baseline = args.variants[0]
    nll_a, tokens = scored[baseline]
    rows = []
    for variant in args.variants[1:]:
        nll_b, tokens_b = scored[variant]
        if not np.array_equal(tokens, tokens_b):
            sys.exit(
                f"lm_results.py: error: {variant} and {baseline} were not scored on the same sentences ({name})"
            )
        ratio, low, high, p = paired_bootstrap(nll_a, nll_b, tokens, args.samples, args.seed)
        rows.append(
            {
                "baseline": baseline,
                "variant": variant,
                "ppl_baseline": float(np.exp(nll_a.sum() / tokens.sum())),
                "ppl_variant": float(np.exp(nll_b.sum() / tokens.sum())),
                "ppl_ratio": ratio,
                "ratio_low": low,
                "ratio_high": high,
                "p_value": p,
                "sentences": len(tokens),
                "samples": args.samples,
            }
        )
    write_csv(args.output, COMPARE_COLUMNS, rows)
    header = [
        "baseline",
        "variant",
        f"{args.subset} ppl, baseline",
        "variant",
        "ppl ratio",
        "95 % interval",
        "p",
        "sentences",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * 2 + ["---:"] * 6) + "|"]
    for r in rows:
        p = f"< {1 / r['samples']:g}" if r["p_value"] == 0 else f"{r['p_value']:.3g}"
        lines.append(
            f"| {r['baseline']} | {r['variant']} | {r['ppl_baseline']:.2f} | {r['ppl_variant']:.2f} | "
            f"{r['ppl_ratio']:.4f} | {r['ratio_low']:.4f}–{r['ratio_high']:.4f} | {p} | {r['sentences']:,} |"
        )
    with open(args.output + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


# A row decides against the baseline only from this many seeds on each side: with two, Welch's test
# has about two degrees of freedom and rests on spreads that two points cannot show
MIN_SEEDS_TO_DECIDE = 3


def seeds(args):
    """Each row over its seeds, and against the baseline with the seed as the unit (Welch)."""
    import numpy as np

    by_row = seed_log_perplexities(args.table)
    if args.baseline not in by_row:
        sys.exit(
            f"lm_results.py seeds: error: --baseline {args.baseline} is not a row of {' '.join(args.table)}"
        )
    base = np.array([by_row[args.baseline][s] for s in sorted(by_row[args.baseline])])
    rows = []
    for variant, logs_by_seed in by_row.items():
        values = np.array([logs_by_seed[s] for s in sorted(logs_by_seed)])
        row = {
            "variant": variant,
            "seeds": " ".join(map(str, sorted(logs_by_seed))),
            "test_ppl_geomean": math.exp(values.mean()),
            "test_ppl_min": math.exp(values.min()),
            "test_ppl_max": math.exp(values.max()),
            "ratio_to_baseline": math.exp(values.mean() - base.mean()),
        }
        row.update(seed_test(values, base) if variant != args.baseline else {"verdict": "baseline"})
        rows.append(row)
    write_csv(args.output, SEED_COLUMNS, rows)
    lines = seeds_markdown(rows, args.baseline)
    with open(args.output + ".md", "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def seed_log_perplexities(tables):
    """{row: {seed: log test perplexity}} from run tables; exits on a seed given twice or on runs
    trained with different AR/TAR weights."""
    by_row = collections.defaultdict(dict)
    settings = collections.defaultdict(list)  # AR/TAR weights -> the runs trained with them
    for path in tables:  # several tables: runs made in different places (one seed each)
        for variant, seed, ppl, ar_tar in seed_rows(path):
            if seed in by_row[variant]:
                sys.exit(f"lm_results.py seeds: error: --table {path}: {variant} seed {seed} is there twice")
            by_row[variant][seed] = math.log(ppl)
            if ar_tar:  # (tables written before the column existed do not say)
                settings[ar_tar].append(f"{variant}@{seed}")
    if len(settings) > 1:
        trained = "; ".join(f"{weights}: {' '.join(runs)}" for weights, runs in settings.items())
        sys.exit(
            f"lm_results.py seeds: error: --table {' '.join(tables)}: runs trained with different "
            f"AR/TAR weights ({trained}): compare each setting in a seeds table of its own"
        )
    return by_row


def seed_test(values, base):
    """Welch's t-test of one row's per-seed log perplexities against the baseline's, and its verdict."""
    import numpy as np
    from scipy import stats

    if len(values) < 2 or len(base) < 2:
        return {"verdict": "no test: one seed"}
    if np.ptp(values) == 0 and np.ptp(base) == 0:  # Welch's t would be infinite (or NaN)
        return {"verdict": "no test: no spread over the seeds"}
    test = stats.ttest_ind(values, base, equal_var=False)
    if min(len(values), len(base)) < MIN_SEEDS_TO_DECIDE:
        verdict = f"inconclusive: fewer than {MIN_SEEDS_TO_DECIDE} seeds"
    elif test.pvalue >= 0.05:
        verdict = "inconclusive"
    else:
        verdict = "lower" if values.mean() < base.mean() else "higher"
    return {
        "welch_t": float(test.statistic),
        "welch_df": float(test.df),
        "p_value": float(test.pvalue),
        "verdict": verdict,
    }


def seeds_markdown(rows, baseline):
    lines = [
        f"Test perplexity over seeds (geometric mean, range), against {baseline} with the seed as "
        "the unit: Welch's t-test on the per-seed log perplexities.",
        "",
        f"| row | seeds | test ppl (geometric mean) | range | ratio to {baseline} | Welch t | df | p | verdict |",
        "|---|---|---:|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['variant']} | {r['seeds']} | {r['test_ppl_geomean']:.2f} | {r['test_ppl_min']:.2f}–"
            f"{r['test_ppl_max']:.2f} | {r['ratio_to_baseline']:.4f} | {fmt(r.get('welch_t'))} | "
            f"{fmt(r.get('welch_df'))} | {fmt(r.get('p_value'))} | {r['verdict']} |"
        )
    return lines


def seed_rows(path):
    """(row, seed, test perplexity, AR/TAR weights or None) of each run of a `table` CSV; one-line
    errors for a file that is not one."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            runs = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError) as e:
        sys.exit(f"lm_results.py seeds: error: --table {path}: {getattr(e, 'strerror', None) or e}")
    if not runs or not {"variant", "test_ppl"} <= set(runs[0]):
        sys.exit(
            f"lm_results.py seeds: error: --table {path} is not a table of `lm_results.py table` (columns variant, test_ppl)"
        )
    rows = []
    for n, run in enumerate(runs, 2):
        variant, _, seed = run["variant"].partition("@")
        where = f"lm_results.py seeds: error: --table {path} line {n}: {run['variant']!r}"
        if not (seed or "1").isdigit():
            sys.exit(f"{where}: a run is named VARIANT or VARIANT@SEED, SEED an integer")
        try:
            ppl = float(run["test_ppl"])
        except ValueError:
            ppl = math.nan
        if not (math.isfinite(ppl) and ppl >= 1):
            sys.exit(f"{where} has no test perplexity >= 1 (got {run['test_ppl']!r})")
        seed = int(seed or 1)
        rows.append((variant, seed, ppl, run.get("ar_tar")))
    return rows


SEED_COLUMNS = [
    "variant",
    "seeds",
    "test_ppl_geomean",
    "test_ppl_min",
    "test_ppl_max",
    "ratio_to_baseline",
    "welch_t",
    "welch_df",
    "p_value",
    "verdict",
]


def build_parser():
    """The subcommands: plot, table, tau, protocols, compare, seeds (each with --force)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--force", action="store_true", help="replace existing outputs (a results step that rebuilds them)"
    )

    def command(name, **kwargs):
        return sub.add_parser(name, parents=[common], **kwargs)

    p = command("plot", help="validation curves from fairseq json logs -> PNG")
    p.add_argument("--logs", nargs="+", required=True)
    p.add_argument("--labels", nargs="+")
    p.add_argument("--x", choices=["update", "epoch"], default="epoch")
    p.add_argument("--metric", default="ppl", help="valid_<metric> to plot (ppl, nll_loss, tau_mean, ...)")
    p.add_argument("--title")
    p.add_argument("--output", required=True)
    p.add_argument(
        "--csv",
        help="also write the points (per epoch also the lr and the %% of updates clipped) to this .csv file",
    )
    p.set_defaults(func=plot)
    t = command("table", help="results table (markdown + CSV) of several runs")
    t.add_argument("--runs", required=True)
    t.add_argument("--variants", nargs="+", required=True)
    t.add_argument(
        "--eval-suffix",
        default="",
        help="'' for eval_test.json, _checkpoint_last for eval_test_checkpoint_last.json",
    )
    t.add_argument("--output", required=True, help="output prefix: writes PREFIX.md and PREFIX.csv")
    t.set_defaults(func=table)
    u = command("tau", help="tau statistics of CT models (markdown + CSV) from ct-analysis dumps")
    u.add_argument("--dumps", nargs="+", required=True, help="ctemp-ct-analysis dump TSVs, one per model")
    u.add_argument("--labels", nargs="+", help="one label per dump (default: its directory's name)")
    u.add_argument("--output", required=True, help="output prefix: writes PREFIX.md and PREFIX.csv")
    u.set_defaults(func=tau)
    r = command("protocols", help="test ppl of one checkpoint under several eval-lm settings")
    r.add_argument("--runs", required=True)
    r.add_argument("--variants", nargs="+", required=True)
    r.add_argument("--output", required=True)
    r.set_defaults(func=protocols)
    c = command("compare", help="perplexities against the first variant's, paired bootstrap over sentences")
    c.add_argument("--runs", required=True)
    c.add_argument("--variants", nargs="+", required=True, help="the baseline first, then the variants")
    c.add_argument("--subset", default="test")
    c.add_argument("--samples", type=int, default=10000, help="bootstrap resamples (default %(default)s)")
    c.add_argument("--seed", type=int, default=1)
    c.add_argument("--output", required=True, help="output prefix: writes PREFIX.md and PREFIX.csv")
    c.set_defaults(func=compare)
    d = command("seeds", help="each row over its seeds, and against a baseline with the seed as the unit")
    d.add_argument(
        "--table",
        nargs="+",
        required=True,
        help="the CSV of `table` (runs named variant@SEED); several: their runs together, each seed of a row once",
    )
    d.add_argument("--baseline", default="softmax")
    d.add_argument("--output", required=True, help="output prefix: writes PREFIX.md and PREFIX.csv")
    d.set_defaults(func=seeds)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    taken = [path for path in outputs(args) if os.path.lexists(path)]
    if taken and not args.force:
        sys.exit(
            f"lm_results.py {args.command}: error: {taken[0]} exists; refusing to overwrite it (--force)"
        )
    args.func(args)


def outputs(args):
    """The files a command writes."""
    if args.command == "plot":
        return [args.output] + ([args.csv] if args.csv else [])
    if args.command == "protocols":
        return [args.output]
    return [args.output + ".md", args.output + ".csv"]


if __name__ == "__main__":
    main()
