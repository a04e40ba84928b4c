#!/usr/bin/env python
"""Softmax-tempering sweeps on ALT: train (tempered_ce, validation BLEU, early stopping) -> average
the last checkpoints -> greedy and beam at the training temperature, then per direction T_opt,
beam/length-penalty tuning, significance and decoding speed. Resumable; CPU, GPUs or SLURM.

    alt_sweep.py run en-vi [vi-en ...] [--preset base|small|mini] [--temperatures 1,2,3]
                 [--label-smoothing 0.1] [--sem-weights 0] [--jobs N] [--gpus 0,1 [--gpus-per-run G]]
                 [--slurm] [--dry-run] [-- extra fairseq-train options]
    alt_sweep.py run-one RUN_DIR [--cpu] [--threads K] [--gpus-per-run G]   (one run; SLURM tasks)
    alt_sweep.py finalize EXPERIMENT_DIR... [--cpu]                        (T_opt etc.; after the runs)

Layout: WORK/sweep/<src>-<tgt>.<preset>.<data tag>/ (an "experiment": experiment.json) with one
directory per run, T<T>-ls<eps>-sem<w>/ : config.json (its fairseq-train options), train.log
(fairseq's json log; appended on resume), checkpoints, train.json (how training ended),
checkpoint_avg.pt, eval/<valid|test>/ (ctemp-greedy-vs-beam: greedy and beam --eval-beam) and
run.json, written last. final/ holds T_opt's and T=1's tuned beam (dev grid), the significance tests
and the greedy / beam 4 / beam 10 timings; final.json is written last.

Resuming: run the same command again. Finished runs (run.json) are skipped, an interrupted run
resumes from its checkpoint_last.pt (fairseq) with the early-stopping count restored from its log,
interrupted averaging/decoding is redone from scratch, and every result file appears only complete.
A run directory is locked while a process works on it, so two sweeps never run the same run; the
processes a sweep starts die with it (even by kill -9). A run whose options differ from what its
directory was started with is refused. Every option is checked before anything is written.
"""

import argparse
import concurrent.futures
import contextlib
import datetime
import glob
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from alt_common import (
    PARENT_PID,
    PLUGIN_DIR,
    TEMPERATURE_RANGE,
    AltError,
    Lock,  # noqa: E402
    bleu_tokenize,
    data_dir,
    data_tag,
    die_with_parent,
    direction,
    fmt,
    fresh_dir,
    pair,
    prepared,
    read_json,
    run_main,
    say,
    tool,
    tool_env,
    write_json,
)

PAPER_T = [1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 3.0, 4.0, 5.0, 10.0]
PAPER_BEAMS = [2, 4, 6, 8, 10, 12]
PAPER_LENPENS = [0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4]
SCRIPT = os.path.abspath(__file__)

OPTIMIZER = [
    "--optimizer",
    "adam",
    "--adam-betas",
    "(0.9,0.98)",
    "--clip-norm",
    "0.0",
    "--lr-scheduler",
    "inverse_sqrt",
]
# Everything but the architecture, the batch and the learning rate; shared by the presets.
PRESETS = {
    "base": {
        "about": "Transformer base (6+6 layers, 512/2048, 8 heads; the paper's model), GPU",
        "train": [
            "--arch",
            "transformer",
            "--share-decoder-input-output-embed",
            "--dropout",
            "0.1",
            "--attention-dropout",
            "0.1",
            "--activation-dropout",
            "0.1",
            *OPTIMIZER,
            "--lr",
            "5e-4",
            "--warmup-updates",
            "4000",
            "--max-tokens",
            "4096",
        ],
        "interval": 1000,
        "patience": 10,
        "average": 10,
        "max_update": None,
        "log_interval": 100,
        "temperatures": PAPER_T,
        "grid_beams": PAPER_BEAMS,
        "grid_lenpens": PAPER_LENPENS,
        "eval_beam": 4,
        "speed_beams": [4, 10],
        "decode_batch": 128,
        "threads": None,
    },
    "small": {
        "about": "fairseq's transformer_iwslt_de_en (6+6 layers, 512/1024, 4 heads), dropout 0.3, GPU",
        "train": [
            "--arch",
            "transformer_iwslt_de_en",
            "--share-decoder-input-output-embed",
            "--dropout",
            "0.3",
            "--weight-decay",
            "0.0001",
            *OPTIMIZER,
            "--lr",
            "5e-4",
            "--warmup-updates",
            "4000",
            "--max-tokens",
            "4096",
        ],
        "interval": 1000,
        "patience": 10,
        "average": 10,
        "max_update": None,
        "log_interval": 100,
        "temperatures": PAPER_T,
        "grid_beams": PAPER_BEAMS,
        "grid_lenpens": PAPER_LENPENS,
        "eval_beam": 4,
        "speed_beams": [4, 10],
        "decode_batch": 128,
        "threads": None,
    },
    "mini": {
        "about": "CPU: 2+2 layers, 128/512, 4 heads, one thread per run, capped updates "
        "(on a 2-core CPU use it with small data, e.g. --vocab 2000 --train-subset 4000)",
        "train": [
            "--arch",
            "transformer",
            "--encoder-layers",
            "2",
            "--decoder-layers",
            "2",
            "--encoder-embed-dim",
            "128",
            "--decoder-embed-dim",
            "128",
            "--encoder-ffn-embed-dim",
            "512",
            "--decoder-ffn-embed-dim",
            "512",
            "--encoder-attention-heads",
            "4",
            "--decoder-attention-heads",
            "4",
            "--share-decoder-input-output-embed",
            "--dropout",
            "0.1",
            *OPTIMIZER,
            # a short warm-up and about half the Noam peak for d=128 (d^-0.5 * 200^-0.5 = 6e-3):
            # at 1e-3 the small-data runs were still far from early stopping after 900 updates
            "--lr",
            "3e-3",
            "--warmup-updates",
            "200",
            "--max-tokens",
            "2048",
            # greedy validation BLEU in batches of ~200 sentences: with the training batch
            # (~45) validating took as long as 100 updates on one thread
            "--max-tokens-valid",
            "8192",
            "--num-workers",
            "0",
        ],
        "interval": 100,
        "patience": 10,
        "average": 5,
        "max_update": 8000,
        "log_interval": 20,
        "temperatures": [1.0, 2.0, 3.0, 4.0, 5.0],
        "grid_beams": [2, 4, 6],
        "grid_lenpens": [0.6, 1.0, 1.4],
        "eval_beam": 4,
        "speed_beams": [4, 10],
        "decode_batch": 200,
        "threads": 1,
    },
}
MAX_LEN = ["--max-len-a", "2", "--max-len-b", "20"]  # bounds babbling of early/poor models (covers ALT)


def run_name(t, ls, sem):
    return f"T{fmt(t)}-ls{fmt(ls)}-sem{fmt(sem)}"


def float_list(text):
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def int_list(text):
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


# ----------------------------------------------------------------------------- logs


def log_records(path, kind):
    """fairseq --log-format json records of one kind ("train_inner", "valid") from a log, numbers
    as floats; a resumed run logs some updates twice: the later record wins."""
    marker = f"| {kind} | "
    records = {}
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if marker not in line or "{" not in line:
                continue
            try:
                raw = json.loads(line[line.index("{") :])
            except json.JSONDecodeError:
                continue  # a line cut by a kill
            record = {}
            for key, value in raw.items():
                try:
                    record[key.replace("valid_", "") if kind == "valid" else key] = float(value)
                except (TypeError, ValueError):
                    pass
            if "num_updates" in record:
                records[int(record["num_updates"])] = record
    return [records[k] for k in sorted(records)]


SAVED = re.compile(r"Saved checkpoint \S+ \(epoch \d+ @ (\d+) updates")


def training_summary(run_dir, patience):
    log = os.path.join(run_dir, "train.log")
    text = open(log, encoding="utf-8", errors="replace").read() if os.path.exists(log) else ""
    valid = [r for r in log_records(log, "valid") if "bleu" in r]
    reason = (
        "early stop"
        if "early stop since valid performance hasn't improved" in text
        else "max update"
        if "Stopping training due to num_updates" in text
        else "max epoch / other"
    )
    best = max(valid, key=lambda r: r["bleu"]) if valid else None
    return {
        "num_updates": int(valid[-1]["num_updates"]) if valid else 0,
        "stop_reason": reason,
        "patience": patience,
        "validations": len(valid),
        "best_valid_bleu": best["bleu"] if best else None,
        "best_valid_update": int(best["num_updates"]) if best else None,
        "valid_bleu": [[int(r["num_updates"]), r["bleu"]] for r in valid],
    }


def last_saved_update(run_dir, log_text):
    """The update a resumed run starts from. fairseq logs "Saved checkpoint" only after copying
    checkpoint_<e>_<u>.pt to checkpoint_last.pt, so after a kill during that copy the newest interval
    checkpoint (which repair_last_checkpoint resumes from) is not in the log yet."""
    found = [int(u) for u in SAVED.findall(log_text)][-1:]
    found += [int(re.search(r"_(\d+)\.pt$", p).group(1)) for p in interval_checkpoints(run_dir)[-1:]]
    return max(found) if found else None


def patience_state(run_dir):
    """(best BLEU, validations since it) over the validations up to checkpoint_last.pt's update,
    so that a resumed run stops where an uninterrupted one would (fairseq keeps this in memory)."""
    log = os.path.join(run_dir, "train.log")
    text = open(log, encoding="utf-8", errors="replace").read()
    last = last_saved_update(run_dir, text)
    if last is None:
        return None
    best, since = None, 0
    for record in log_records(log, "valid"):
        if record["num_updates"] > last or "bleu" not in record:
            continue
        if best is None or record["bleu"] > best:
            best, since = record["bleu"], 0
        else:
            since += 1
    return (last, best, since) if best is not None else None


# ----------------------------------------------------------------------------- one run


class RunFailed(Exception):
    pass


CHILDREN = set()  # running subprocesses, terminated if the sweep itself is stopped
CHILDREN_LOCK = threading.Lock()


def child_env(env):
    """env for a child process of this script: it dies with this process (die_with_parent)."""
    return dict(env, **{PARENT_PID: str(os.getpid())})


def call(command, env, log_path=None, what=None):
    """Run a command; its output goes to log_path (appended) or is returned. Raises RunFailed."""
    out = open(log_path, "a", encoding="utf-8") if log_path else subprocess.PIPE
    try:
        if log_path:
            out.write(f"# {datetime.datetime.now():%Y-%m-%d %H:%M:%S} $ {shlex.join(command)}\n")
            out.flush()
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, text=True)
        with CHILDREN_LOCK:
            CHILDREN.add(proc)
        output, _ = proc.communicate()
        with CHILDREN_LOCK:
            CHILDREN.discard(proc)
    finally:
        if log_path:
            out.close()
    if proc.returncode != 0:
        tail = (
            (output or "")
            if not log_path
            else "".join(open(log_path, encoding="utf-8", errors="replace").readlines()[-15:])
        )
        raise RunFailed(f"{what or command[0]} failed (exit {proc.returncode}):\n{tail.rstrip()}")
    return output


def device_args(device, training):
    """fairseq options for where a run goes: CPU, or the GPUs it was given (several: fairseq's own
    distributed training, one process per GPU)."""
    args = ["--cpu"] if device.get("cpu") else []
    if device.get("fp16") and not device.get("cpu"):
        args.append("--fp16")
    if training and not device.get("cpu") and device.get("gpus_per_run", 1) > 1:
        args += ["--distributed-world-size", str(device["gpus_per_run"])]
    return args


def greedy_vs_beam(exp, checkpoint, out_dir, device, subset, beam, grid=None):
    """ctemp-greedy-vs-beam (its Python API) into out_dir: greedy and `beam` (or the dev grid's best)
    on `subset`, written under a temporary name and renamed when complete; skipped when done."""
    if os.path.exists(os.path.join(out_dir, "result.json")):
        return moved_result(out_dir)
    data = prepared(exp["data"])
    raw = {
        "valid": os.path.join(data["raw"], f"dev.{exp['tgt']}"),
        "test": os.path.join(data["raw"], f"test.{exp['tgt']}"),
    }
    tmp = fresh_dir(out_dir + ".tmp")
    extra = (
        [
            "--source-lang",
            exp["src"],
            "--target-lang",
            exp["tgt"],
            "--remove-bpe",
            data["remove_bpe"],
            "--batch-size",
            str(exp["decode_batch"]),
            # a data-loader worker process costs a 5 s shutdown wait per in-process decoding
            "--num-workers",
            "0",
        ]
        + exp["decode_args"]
        + device_args(device, training=False)
    )
    say(
        f"  decoding {subset} with {os.path.join(*checkpoint.split(os.sep)[-3:])}: greedy and "
        + (f"beams {grid[0]} x lenpens {grid[1]} on dev" if grid else f"beam {beam}")
    )
    from fairseq_ctemp.cli import greedy_vs_beam as gvb  # torch and fairseq: only when decoding

    try:
        gvb.run_greedy_vs_beam(
            data["bin"],
            checkpoint,
            beam=beam,
            subset=subset,
            extra_args=extra,
            ref=raw[subset],
            tokenize=exp["bleu_tokenize"],
            grid_beams=grid[0] if grid else None,
            grid_lenpens=grid[1] if grid else None,
            dev_subset="valid",
            dev_ref=raw["valid"] if grid else None,
            save_dir=tmp,
            json_path=os.path.join(tmp, "result.json"),
            verbose=False,
        )
    except gvb.UsageError as e:
        raise RunFailed(f"ctemp-greedy-vs-beam: {e}") from None
    if os.path.isdir(out_dir):
        raise RunFailed(f"{out_dir} appeared while decoding; not replacing it")
    os.replace(tmp, out_dir)
    return moved_result(out_dir)


def moved_result(out_dir):
    """result.json names its files under the temporary directory they were written to."""
    result = read_json(os.path.join(out_dir, "result.json"))
    result["files"] = {k: os.path.join(out_dir, os.path.basename(p)) for k, p in result["files"].items()}
    return result


def system_row(result, name):
    s = result["systems"][name]
    return {
        k: s[k]
        for k in (
            "beam",
            "lenpen",
            "bleu",
            "chrf",
            "decode_seconds",
            "sentences_per_second",
            "decoding_temperature",
        )
    }


SAVED_FILE = re.compile(r"Saved checkpoint (\S+) \(epoch \d+ @ (\d+) updates")


def last_validation_checkpoints(run_dir, n):
    """The checkpoints of the run's last n validations, oldest first: checkpoint_E_U.pt by its
    name; checkpointE.pt (fairseq's name for a save at an epoch end) and checkpoint_last.pt by the
    update their save was logged at. RunFailed, naming what is missing, if any has none."""
    log = os.path.join(run_dir, "train.log")
    updates = [int(r["num_updates"]) for r in log_records(log, "valid")][-n:]
    if len(updates) < n:
        raise RunFailed(
            f"averaging needs the checkpoints of the last {n} validations (--average), but "
            f"{os.path.basename(run_dir)} validated {len(updates)} time(s): train longer "
            "(--max-update) or use a smaller --average in a new --work"
        )
    saved_at = {}  # file name -> update of its latest save
    with open(log, encoding="utf-8", errors="replace") as f:
        for path, update in SAVED_FILE.findall(f.read()):
            saved_at[os.path.basename(path)] = saved_at["checkpoint_last.pt"] = int(update)
    found = {}
    for path in interval_checkpoints(run_dir):
        found[int(re.search(r"_(\d+)\.pt$", path).group(1))] = path
    for name in sorted(saved_at, key=lambda name: name == "checkpoint_last.pt"):  # named ones first
        path = os.path.join(run_dir, name)
        if re.fullmatch(r"checkpoint(\d+|_last)\.pt", name) and os.path.exists(path):
            found.setdefault(saved_at[name], path)
    missing = [u for u in updates if u not in found]
    if missing:
        raise RunFailed(
            f"no checkpoint of the validation(s) at update(s) {', '.join(map(str, missing))} "
            f"in {run_dir}: refusing to average fewer than the last {n} validations "
            f"(updates {', '.join(map(str, updates))})"
        )
    return [found[u] for u in updates]


def interval_checkpoints(run_dir):
    """checkpoint_<epoch>_<update>.pt, oldest first."""
    return sorted(
        glob.glob(os.path.join(run_dir, "checkpoint_*_*.pt")),
        key=lambda p: int(re.search(r"_(\d+)\.pt$", p).group(1)),
    )


def repair_last_checkpoint(run_dir):
    """fairseq writes checkpoint_<e>_<u>.pt atomically, then copies it to checkpoint_last.pt (not
    atomically): after a kill during that copy, resume from the newest interval checkpoint."""
    found = interval_checkpoints(run_dir)
    last = os.path.join(run_dir, "checkpoint_last.pt")
    if not found:
        return
    newest = found[-1]
    # torch.save writes a zip archive: a truncated copy has no valid end of archive
    if (
        os.path.exists(last)
        and zipfile.is_zipfile(last)
        and os.path.getmtime(last) >= os.path.getmtime(newest)
    ):
        return
    say(
        f"{os.path.basename(run_dir)}: checkpoint_last.pt is missing, incomplete or older than "
        f"{os.path.basename(newest)} (interrupted save): resuming from the latter"
    )
    tmp = last + ".repair"
    shutil.copyfile(newest, tmp)
    os.replace(tmp, last)


def run_one(run_dir, device):
    """Train -> average -> decode one run; idempotent and resumable. Returns its run.json."""
    run_dir = os.path.abspath(run_dir)
    if os.path.exists(os.path.join(run_dir, "run.json")):
        return read_json(os.path.join(run_dir, "run.json"))
    config = read_json(os.path.join(run_dir, "config.json"))
    if config is None:
        raise RunFailed(f"{run_dir} has no config.json: plan it with `alt_sweep.py run` first")
    exp = load_experiment(os.path.dirname(run_dir))
    data = prepared(exp["data"])
    env = tool_env(device.get("threads"), device.get("extra_env"))
    with Lock(run_dir, RunFailed):
        train_json = os.path.join(run_dir, "train.json")
        if not os.path.exists(train_json):
            repair_last_checkpoint(run_dir)
            resume = (
                patience_state(run_dir)
                if os.path.exists(os.path.join(run_dir, "checkpoint_last.pt"))
                else None
            )
            command = [
                sys.executable,
                SCRIPT,
                "fairseq-train",
                data["bin"],
                "--user-dir",
                PLUGIN_DIR,
                "--source-lang",
                exp["src"],
                "--target-lang",
                exp["tgt"],
                "--save-dir",
                run_dir,
            ]
            command += config["train_args"] + device_args(device, training=True)
            train_env = child_env(env)
            if resume:
                last, best, since = resume
                train_env.update(ALT_PATIENCE_BEST=repr(best), ALT_PATIENCE_RUNS=str(since))
                say(
                    f"{config['name']}: resuming from checkpoint_last.pt (update {last}; best dev "
                    f"BLEU {best:g}, {since} validation(s) without improvement)"
                )
            start = datetime.datetime.now()
            call(command, train_env, os.path.join(run_dir, "train.log"), "fairseq-train")
            summary = training_summary(run_dir, exp["patience"])
            summary["finished"] = f"{datetime.datetime.now():%Y-%m-%d %H:%M:%S}"
            summary["last_session_seconds"] = (datetime.datetime.now() - start).total_seconds()
            write_json(train_json, summary)
        summary = read_json(train_json)
        average = os.path.join(run_dir, "checkpoint_avg.pt")
        average_json = os.path.join(run_dir, "average.json")
        if not os.path.exists(average_json):
            inputs = last_validation_checkpoints(run_dir, exp["average"])
            say(
                f"{config['name']}: averaging the checkpoints of the last {len(inputs)} validations: "
                + ", ".join(os.path.basename(p) for p in inputs)
            )
            if os.path.exists(average):
                os.remove(average)  # an average without average.json is from an interrupted try
            from fairseq_ctemp.cli import average_checkpoints

            try:  # ctemp-average-checkpoints, in this process (it writes atomically)
                average_checkpoints.write_average(inputs, average)
            except average_checkpoints.AverageError as e:
                raise RunFailed(f"ctemp-average-checkpoints: {e}") from None
            write_json(
                average_json, {"inputs": [os.path.basename(p) for p in inputs], "requested": exp["average"]}
            )
        evals = {}
        for subset in exp["subsets"]:
            result = greedy_vs_beam(
                exp, average, os.path.join(run_dir, "eval", subset), device, subset, exp["eval_beam"]
            )
            evals[subset] = {
                "greedy": system_row(result, "greedy"),
                "beam": system_row(result, "beam"),
                "signature": result["signatures"]["bleu"],
                "n_sentences": result["n_sentences"],
            }
        result = {
            "name": config["name"],
            "direction": f"{exp['src']}-{exp['tgt']}",
            "temperature": config["temperature"],
            "label_smoothing": config["label_smoothing"],
            "sem_weight": config["sem_weight"],
            "training": summary,
            "averaged": read_json(average_json)["inputs"],
            "eval": evals,
            "has_test": data["has_test"],
        }
        write_json(os.path.join(run_dir, "run.json"), result)
        return result


# ----------------------------------------------------------------------------- per direction


def finalize(exp_dir, device):
    """T_opt (best dev greedy BLEU among T != 1) and T=1 in the primary (LS, SEM) group: beam and
    length penalty tuned on dev, greedy and tuned beam on test (dev without a test split), paired
    significance (sacrebleu), greedy / beam timings. Returns final.json, or None if runs are missing."""
    exp_dir = os.path.abspath(exp_dir)
    exp = load_experiment(exp_dir)
    final_dir = os.path.join(exp_dir, "final")
    if os.path.exists(os.path.join(final_dir, "final.json")):
        return read_json(os.path.join(final_dir, "final.json"))
    ls, sem = exp["primary"]
    group = {}
    for path in glob.glob(os.path.join(exp_dir, "*", "config.json")):
        config = read_json(path)
        if config["label_smoothing"] == ls and config["sem_weight"] == sem:
            group[config["temperature"]] = os.path.dirname(path)
    if 1.0 not in group or len(group) < 2:
        say(
            f"{os.path.basename(exp_dir)}: no finalize: it needs T=1 and another T at label smoothing "
            f"{fmt(ls)}, SEM weight {fmt(sem)}"
        )
        return None
    runs = {t: read_json(os.path.join(d, "run.json")) for t, d in group.items()}
    missing = [os.path.basename(group[t]) for t, r in runs.items() if r is None]
    if missing:
        say(f"{os.path.basename(exp_dir)}: finalize waits for {', '.join(sorted(missing))}")
        return None
    tempered = {t: r for t, r in runs.items() if t != 1.0}
    t_opt = max(sorted(tempered), key=lambda t: tempered[t]["eval"]["valid"]["greedy"]["bleu"])
    subset = "test" if "test" in exp["subsets"] else "valid"
    os.makedirs(final_dir, exist_ok=True)
    with Lock(final_dir, RunFailed):
        systems, speed = {}, {}
        for label, t in (("untempered", 1.0), ("tempered", t_opt)):
            checkpoint = os.path.join(group[t], "checkpoint_avg.pt")
            tuned = greedy_vs_beam(
                exp,
                checkpoint,
                os.path.join(final_dir, f"tune-T{fmt(t)}"),
                device,
                subset,
                exp["eval_beam"],
                grid=(exp["grid_beams"], exp["grid_lenpens"]),
            )
            systems[label] = {
                "temperature": t,
                "greedy": system_row(tuned, "greedy"),
                "beam": system_row(tuned, "beam"),
                "files": tuned["files"],
                "grid": tuned["grid"],
                "signature": tuned["signatures"]["bleu"],
            }
            speed[label] = {"temperature": t, "greedy_seconds": tuned["systems"]["greedy"]["decode_seconds"]}
            for beam in exp["speed_beams"]:
                timed = greedy_vs_beam(
                    exp,
                    checkpoint,
                    os.path.join(final_dir, f"speed-T{fmt(t)}-beam{beam}"),
                    device,
                    subset,
                    beam,
                )
                speed[label][f"beam{beam}_seconds"] = timed["systems"]["beam"]["decode_seconds"]
                speed[label][f"greedy_seconds_with_beam{beam}"] = timed["systems"]["greedy"]["decode_seconds"]
        significance = {}  # sacrebleu's paired bootstrap resampling (1000 samples)
        comparisons = {
            "greedy": ("untempered", "greedy.hyp", "tempered", "greedy.hyp"),
            "beam": ("untempered", "beam.hyp", "tempered", "beam.hyp"),
            "tempered_greedy_vs_untempered_beam": ("untempered", "beam.hyp", "tempered", "greedy.hyp"),
        }
        for name, (base, base_file, other, other_file) in comparisons.items():
            path = os.path.join(final_dir, f"significance-{name}.json")
            if not os.path.exists(path):
                files = systems[base]["files"]
                from fairseq_ctemp.cli import greedy_vs_beam as gvb  # ctemp-greedy-vs-beam compare

                try:
                    write_json(
                        path,
                        gvb.compare_systems(
                            files["ref"],
                            files[base_file],
                            systems[other]["files"][other_file],
                            "bs",
                            None,
                            exp["bleu_tokenize"],
                        ),
                    )
                except gvb.UsageError as e:
                    raise RunFailed(f"significance test: {e}") from None
            significance[name] = read_json(path)
        result = {
            "direction": f"{exp['src']}-{exp['tgt']}",
            "experiment": os.path.basename(exp_dir),
            "preset": exp["preset"],
            "label_smoothing": ls,
            "sem_weight": sem,
            "t_opt": t_opt,
            "t_opt_chosen_by": "dev greedy BLEU among T != 1",
            "dev_greedy_bleu": {
                fmt(t): r["eval"]["valid"]["greedy"]["bleu"] for t, r in sorted(runs.items())
            },
            "scored_subset": subset,
            "tuned_on": "valid",
            "systems": systems,
            "speed": speed,
            "significance": significance,
        }
        write_json(os.path.join(final_dir, "final.json"), result)
        say(
            f"{os.path.basename(exp_dir)}: T_opt = {fmt(t_opt)}; {subset} BLEU greedy "
            f"{systems['tempered']['greedy']['bleu']:.2f} vs {systems['untempered']['greedy']['bleu']:.2f} (T=1), "
            f"tuned beam {systems['tempered']['beam']['bleu']:.2f} vs {systems['untempered']['beam']['bleu']:.2f}"
        )
        return result


def load_experiment(exp_dir):
    """experiment.json with "data" resolved to the data directory of the work directory exp_dir is
    in (stored relative to exp_dir). Older files store it absolute: a moved or copied work
    directory would then train on the original's data, so that is refused."""
    exp = read_json(os.path.join(exp_dir, "experiment.json"))
    if exp is None:
        raise RunFailed(f"{exp_dir} has no experiment.json: plan it with `alt_sweep.py run` first")
    exp["data"] = check_data_location(exp_dir, exp, RunFailed)
    return exp


def check_data_location(exp_dir, exp, error):
    """The data directory of an experiment; `error` if experiment.json names another one."""
    here = os.path.normpath(
        os.path.join(
            exp_dir, "..", "..", "data", f"{'-'.join(pair(exp['src'], exp['tgt']))}.{exp['data_tag']}"
        )
    )
    named = os.path.normpath(os.path.join(exp_dir, exp["data"]))
    if os.path.realpath(named) != os.path.realpath(here):
        raise error(
            f"{exp_dir}/experiment.json names the data {named}, not this work directory's {here} "
            f'(moved or copied?): set its "data" to "{os.path.relpath(here, exp_dir)}" if '
            "that is the data it was trained on"
        )
    return here


# ----------------------------------------------------------------------------- planning

# fairseq-train options the sweep sets itself (after --, fairseq would silently take the last one)
SWEEP_TRAIN_OPTIONS = {
    "--criterion": "each run's",
    "--softmax-temperature": "--temperatures",
    "--label-smoothing": "--label-smoothing",
    "--sem-weight": "--sem-weights",
    "--save-dir": "each run's directory",
    "--user-dir": "the plugin",
    "--source-lang": "the direction",
    "-s": "the direction",
    "--target-lang": "the direction",
    "-t": "the direction",
    "--seed": "--seed",
    "--patience": "--patience",
    "--max-update": "--max-update",
    "--validate-interval-updates": "--interval",
    "--save-interval-updates": "--interval",
    "--keep-interval-updates": "--average",
    "--log-format": "json, parsed by the recipes",
    "--log-interval": "--log-interval",
}


# fairseq-generate options every decoding sets (ctemp-greedy-vs-beam's OWN_OPTIONS and the sweep's)
DECODING_OPTIONS = (
    "--path",
    "--beam",
    "--lenpen",
    "--gen-subset",
    "--temperature",
    "--user-dir",
    "--results-path",
    "--quiet",
    "--batch-size",
    "--remove-bpe",
    "--source-lang",
    "--target-lang",
    "-s",
    "-t",
)


def check_settings(args, preset):
    """Every option of a sweep, including those only used after training (decoding, finalize),
    checked before anything is written or started. Returns (temperatures, scalar settings)."""
    temperatures = args.temperatures or preset["temperatures"]
    low, high = TEMPERATURE_RANGE
    for option, values, ok, allowed in (
        (
            "--temperatures",
            temperatures,
            lambda t: low <= t <= high,
            f"in [{low:g}, {high:g}] (tempered_ce's range)",
        ),
        ("--label-smoothing", args.label_smoothing, lambda e: 0 <= e < 1, "in [0, 1)"),
        ("--sem-weights", args.sem_weights, lambda w: 0 <= w <= 1, "in [0, 1]"),
    ):
        bad = [v for v in values if not ok(v)]
        if bad or not values:
            raise AltError(f"{option} must be {allowed}, got {', '.join(map(fmt, bad)) or 'no values'}")
        names = [fmt(v) for v in values]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise AltError(
                f"{option}: {', '.join(str(v) for v in values if fmt(v) in twice)} name the same "
                f"run ({', '.join(twice)}); give each value once"
            )
    scalar = {
        k: getattr(args, k) if getattr(args, k) is not None else preset[k]
        for k in (
            "interval",
            "patience",
            "average",
            "max_update",
            "eval_beam",
            "grid_beams",
            "grid_lenpens",
            "speed_beams",
            "log_interval",
            "decode_batch",
        )
    }
    for key, least in (
        ("interval", 1),
        ("patience", 1),
        ("average", 1),
        ("max_update", 0),
        ("eval_beam", 1),
        ("log_interval", 1),
        ("decode_batch", 1),
        ("jobs", 1),
        ("threads", 1),
        ("gpus_per_run", 1),
        ("slurm_cpus", 1),
    ):
        value = scalar[key] if key in scalar else getattr(args, key)
        if value is not None and value < least:
            raise AltError(f"--{key.replace('_', '-')} must be >= {least}, got {value}")
    for key in ("grid_beams", "speed_beams"):
        if (key == "grid_beams" and not scalar[key]) or any(b < 1 for b in scalar[key]):
            raise AltError(
                f"--{key.replace('_', '-')} must be integers >= 1, got "
                f"{','.join(map(str, scalar[key])) or 'none'}"
            )
    if not scalar["grid_lenpens"] or not all(0 < x < float("inf") for x in scalar["grid_lenpens"]):
        raise AltError(
            f"--grid-lenpens must be finite numbers > 0, got "
            f"{','.join(map(fmt, scalar['grid_lenpens'])) or 'none'}"
        )
    check_finalize_group(args, temperatures)
    check_decoding_options(args)
    for option in (arg.split("=")[0] for arg in args.fairseq_args):
        if option in SWEEP_TRAIN_OPTIONS:
            raise AltError(
                f"{option} after -- is set by the sweep ({SWEEP_TRAIN_OPTIONS[option]}); "
                "fairseq would silently use one value for every run"
            )
    return temperatures, scalar


def check_finalize_group(args, temperatures):
    """finalize compares T=1 with the other temperatures at the primary LS / SEM: the sweep must
    train them (else --no-finalize)."""
    if args.no_finalize:
        return
    for option, value, values, listed in (
        (
            "--primary-label-smoothing",
            args.primary_label_smoothing,
            args.label_smoothing,
            "--label-smoothing",
        ),
        ("--primary-sem-weight", args.primary_sem_weight, args.sem_weights, "--sem-weights"),
    ):
        if fmt(value) not in map(fmt, values):
            raise AltError(
                f"{option} {fmt(value)} is not among {listed} {','.join(map(fmt, values))}: finalize "
                "could not run; add it, or pass --no-finalize"
            )
    if "1" not in map(fmt, temperatures) or len(temperatures) < 2:
        raise AltError(
            f"finalize compares T=1 with the other temperatures: --temperatures "
            f"{','.join(map(fmt, temperatures))} needs 1 and another T (or pass --no-finalize)"
        )


def check_decoding_options(args):
    from sacrebleu.metrics import BLEU

    if args.sacrebleu_tokenize and args.sacrebleu_tokenize not in BLEU.TOKENIZERS:
        raise AltError(
            f"--sacrebleu-tokenize must be one of {', '.join(BLEU.TOKENIZERS)}, "
            f"got {args.sacrebleu_tokenize!r}"
        )
    if args.decode_args is None:
        return
    try:
        decode_args = shlex.split(args.decode_args)
    except ValueError as e:
        raise AltError(f"--decode-args {args.decode_args!r}: {e}") from None
    own = [a for a in decode_args if a.split("=")[0] in DECODING_OPTIONS]
    if own:
        raise AltError(
            f"--decode-args: {', '.join(own)} is set by the sweep (--eval-beam, --grid-*, "
            "--decode-batch, the data)"
        )


def plan(args):
    """Check every setting, then create / check experiment.json and each run's config.json (not in
    a dry run; nothing is written unless everything is valid). Returns
    [(exp_dir, exp, [(run_dir, config, state)])]."""
    preset = PRESETS[args.preset]
    temperatures, scalar = check_settings(args, preset)
    tag = data_tag(args.subwords, args.vocab, args.train_subset)
    experiments, writes = [], {}
    for text in args.directions:
        src, tgt = direction(text)
        ddir = os.path.abspath(data_dir(args.work, src, tgt, tag))
        data = prepared(ddir)
        if data is None:
            message = (
                f"{src}-{tgt}: {ddir} is not prepared: run examples/alt/prepare.sh {src}-{tgt} "
                f"--work {args.work}"
                + (f" --vocab {args.vocab}" if args.vocab != 8192 else "")
                + (f" --subwords {args.subwords}" if args.subwords != "spm" else "")
                + (f" --train-subset {args.train_subset}" if args.train_subset else "")
            )
            if not args.dry_run:
                raise AltError(message)
            say("warning: " + message)
            data = {
                "has_test": None,
                "remove_bpe": "sentencepiece" if args.subwords == "spm" else "subword_nmt",
            }
        exp_dir = os.path.abspath(os.path.join(args.work, "sweep", f"{src}-{tgt}.{args.preset}.{tag}"))
        if any(exp_dir == e[0] for e in experiments):
            continue  # the direction given twice
        exp = {
            "src": src,
            "tgt": tgt,
            "preset": args.preset,
            "data": os.path.relpath(ddir, exp_dir),
            "data_tag": tag,
            "subsets": ["valid", "test"] if data["has_test"] else ["valid"],
            "bleu_tokenize": args.sacrebleu_tokenize or bleu_tokenize(tgt),
            "decode_args": shlex.split(args.decode_args) if args.decode_args is not None else MAX_LEN,
            "primary": [args.primary_label_smoothing, args.primary_sem_weight],
            **scalar,
        }
        check_experiment(exp_dir, exp, writes)
        runs = []
        for t in temperatures:
            for ls in args.label_smoothing:
                for sem in args.sem_weights:
                    config = run_config(run_name(t, ls, sem), t, ls, sem, preset, scalar, data, args)
                    run_dir = os.path.join(exp_dir, config["name"])
                    old = read_json(os.path.join(run_dir, "config.json"))
                    if old is not None and old != config:
                        raise AltError(
                            f"{run_dir} was started with other fairseq-train options:\n  "
                            f"{shlex.join(old['train_args'])}\nnow:\n  {shlex.join(config['train_args'])}\n"
                            "use another --work, or the options it was started with"
                        )
                    if old is None:
                        writes[os.path.join(run_dir, "config.json")] = config
                    runs.append((run_dir, config, run_state(run_dir)))
        experiments.append((exp_dir, dict(exp, data=ddir), runs))
    if not args.dry_run:
        for path, obj in writes.items():
            write_json(path, obj)
    return experiments


def check_experiment(exp_dir, exp, writes):
    """An existing experiment.json must hold these settings (its data in this work directory);
    a new one is queued in `writes`."""
    existing = read_json(os.path.join(exp_dir, "experiment.json"))
    if existing is None:
        writes[os.path.join(exp_dir, "experiment.json")] = exp
        return
    check_data_location(exp_dir, existing, AltError)
    existing["data"] = exp["data"]  # the same directory, maybe named by an absolute path
    if existing != exp:
        diff = sorted(k for k in set(exp) | set(existing) if exp.get(k) != existing.get(k))
        raise AltError(
            f"{exp_dir} was started with other settings ({', '.join(diff)}: "
            f"{ {k: existing.get(k) for k in diff} }); use another --work or the same options"
        )


def run_config(name, t, ls, sem, preset, scalar, data, args):
    train_args = preset["train"] + [
        "--criterion",
        "tempered_ce",
        "--softmax-temperature",
        fmt(t),
        "--label-smoothing",
        fmt(ls),
        "--sem-weight",
        fmt(sem),
        "--eval-bleu",
        "--eval-bleu-args",
        json.dumps({"beam": 1, "max_len_a": float(MAX_LEN[1]), "max_len_b": int(MAX_LEN[3])}),
        "--eval-bleu-remove-bpe",
        data["remove_bpe"],
        "--best-checkpoint-metric",
        "bleu",
        "--maximize-best-checkpoint-metric",
        "--patience",
        str(scalar["patience"]),
        "--validate-interval-updates",
        str(scalar["interval"]),
        "--save-interval-updates",
        str(scalar["interval"]),
        "--keep-interval-updates",
        str(max(scalar["average"], 1)),
        # validate and save every `interval` updates only (not also at epoch ends)
        "--validate-interval",
        "1000000",
        "--save-interval",
        "1000000",
        "--no-epoch-checkpoints",
        "--seed",
        str(args.seed),
        "--log-format",
        "json",
        "--log-interval",
        str(scalar["log_interval"]),
    ]
    if scalar["max_update"]:
        train_args += ["--max-update", str(scalar["max_update"])]
    train_args += args.fairseq_args
    return {
        "name": name,
        "temperature": t,
        "label_smoothing": ls,
        "sem_weight": sem,
        "train_args": train_args,
    }


def run_state(run_dir):
    if os.path.exists(os.path.join(run_dir, "run.json")):
        r = read_json(os.path.join(run_dir, "run.json"))
        return f"done (dev greedy BLEU {r['eval']['valid']['greedy']['bleu']:.2f})"
    if os.path.exists(os.path.join(run_dir, "train.json")):
        return "trained; averaging / decoding to do"
    if os.path.exists(os.path.join(run_dir, "checkpoint_last.pt")):
        log = os.path.join(run_dir, "train.log")
        text = open(log, encoding="utf-8", errors="replace").read() if os.path.exists(log) else ""
        update = last_saved_update(run_dir, text)
        return (
            f"interrupted: resumes from checkpoint_last.pt (update {update if update is not None else '?'})"
        )
    return "to train"


def print_plan(experiments, args, device):
    where = (
        "SLURM: a job array of the runs to do, then one finalize job per direction"
        if args.slurm
        else f"GPUs {args.gpus}, {args.gpus_per_run} per run ({len(gpu_slots(args))} runs at a time)"
        if args.gpus
        else f"CPU, {args.jobs} run(s) at a time, {device.get('threads') or 'default'} thread(s) each"
    )
    print(f"plan ({'dry run: nothing is started' if args.dry_run else 'starting'}): {where}")
    for exp_dir, exp, runs in experiments:
        todo = [r for r in runs if not r[2].startswith("done")]
        shown = " and ".join({"valid": "dev", "test": "test"}[x] for x in exp["subsets"])
        print(
            f"\n{os.path.basename(exp_dir)}  ({exp_dir})\n  data {exp['data']}; scores "
            f"{shown}"
            + ("" if "test" in exp["subsets"] else " (no test split: dev numbers only)")
            + f"; sacrebleu tokenize={exp['bleu_tokenize']}\n  {len(runs)} runs, {len(todo)} to do:"
        )
        for _, config, state in runs:
            print(f"    {config['name']:<22} {state}")
        if todo:
            run_dir, config, _ = todo[0]
            print(
                f"  fairseq-train of {config['name']} (the others differ in T / LS / SEM):\n    "
                + shlex.join(
                    [
                        "fairseq-train",
                        exp["data"] + "/bin",
                        "--user-dir",
                        PLUGIN_DIR,
                        "--source-lang",
                        exp["src"],
                        "--target-lang",
                        exp["tgt"],
                        "--save-dir",
                        run_dir,
                    ]
                    + config["train_args"]
                    + device_args(device, True)
                )
            )
        print(
            f"  then per run: average the last {exp['average']} checkpoints; greedy and beam "
            f"{exp['eval_beam']} on {shown}"
        )
        print(
            f"  then finalize: T_opt by dev greedy BLEU (LS {fmt(exp['primary'][0])}, SEM "
            f"{fmt(exp['primary'][1])}); beams {exp['grid_beams']} x lenpens {exp['grid_lenpens']} "
            f"on dev for T_opt and T=1; paired bootstrap; timing of beams {exp['speed_beams']}"
        )


def gpu_slots(args):
    gpus = [g for g in args.gpus.split(",") if g.strip()]
    n = args.gpus_per_run
    if n < 1 or len(gpus) < n:
        raise AltError(f"--gpus-per-run {n} with {len(gpus)} GPU(s) in --gpus {args.gpus}")
    return [",".join(gpus[i : i + n]) for i in range(0, len(gpus) - n + 1, n)]


def child_options(device):
    """run-one / finalize options for a device."""
    options = ["--cpu"] if device.get("cpu") else ["--gpus-per-run", str(device.get("gpus_per_run", 1))]
    options += ["--threads", str(device["threads"])] if device.get("threads") else []
    return options + (["--fp16"] if device.get("fp16") else [])


def execute_local(experiments, args, device):
    """Each run in its own `alt_sweep.py run-one` process (log: RUN/run.log), len(slots) at a time;
    then `alt_sweep.py finalize` per experiment (log: EXPERIMENT/final.log)."""
    slots = gpu_slots(args) if args.gpus else [None] * args.jobs
    free, free_lock, failures = list(slots), threading.Lock(), []

    def child(command, slot, log, what):
        env = child_env(tool_env(device.get("threads"), {"CUDA_VISIBLE_DEVICES": slot} if slot else None))
        call([sys.executable, SCRIPT, *command, *child_options(device)], env, log, what)

    def work(run_dir, name):
        with free_lock:
            slot = free.pop()
        try:
            say(f"{name}: started" + (f" on GPU {slot}" if slot else ""))
            child(["run-one", run_dir], slot, os.path.join(run_dir, "run.log"), "run")
            result = read_json(os.path.join(run_dir, "run.json"))
            say(
                f"{name}: done, dev greedy BLEU {result['eval']['valid']['greedy']['bleu']:.2f}, beam "
                f"{result['eval']['valid']['beam']['bleu']:.2f} ({result['training']['num_updates']} updates, "
                f"{result['training']['stop_reason']})"
            )
        except RunFailed as e:
            failures.append(f"{name}: {e}")
            say(f"{name}: FAILED: {e}")
        finally:
            with free_lock:
                free.append(slot)

    todo = [
        (run_dir, f"{os.path.basename(exp_dir)}/{config['name']}")
        for exp_dir, _, runs in experiments
        for run_dir, config, state in runs
        if not state.startswith("done")
    ]
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(slots)) as pool:
        list(pool.map(lambda item: work(*item), todo))
    pending = [
        exp_dir
        for exp_dir, _, _ in experiments
        if not os.path.exists(os.path.join(exp_dir, "final", "final.json"))
    ]
    if pending and not args.no_finalize:
        try:  # one process for all experiments (logs: EXPERIMENT/final.log)
            child(
                ["finalize", *pending],
                slots[0].split(",")[0] if args.gpus else None,
                os.path.join(os.path.dirname(pending[0]), "finalize.log"),
                "finalize",
            )
        except RunFailed as e:
            failures.append(f"finalize: {e}")
        for exp_dir in pending:
            log = os.path.join(exp_dir, "final.log")
            lines = [line.rstrip() for line in open(log, encoding="utf-8")] if os.path.exists(log) else []
            lines = [line for line in lines if line.startswith(os.path.basename(exp_dir) + ":")]
            say(lines[-1] if lines else f"{os.path.basename(exp_dir)}: finalize did not finish")
    if failures:
        raise AltError(
            f"{len(failures)} step(s) failed (re-run the same command to retry):\n" + "\n".join(failures)
        )


def submit_slurm(experiments, args, device):
    stamp = f"{datetime.datetime.now():%Y%m%d-%H%M%S}"
    sdir = os.path.abspath(os.path.join(args.work, "sweep", "slurm", stamp))
    todo = [
        run_dir for _, _, runs in experiments for run_dir, _, state in runs if not state.startswith("done")
    ]
    run_options = child_options(device)
    resources = ([f"#SBATCH --gres=gpu:{args.gpus_per_run}"] if not device.get("cpu") else []) + [
        f"#SBATCH --cpus-per-task={args.slurm_cpus or (device.get('threads') or 1 if device.get('cpu') else 4 * args.gpus_per_run)}"
    ]
    head = ["#!/bin/bash"] + resources
    scripts = {}
    if todo:
        scripts["runs.txt"] = "".join(r + "\n" for r in todo)
        scripts["runs.sbatch"] = (
            "\n".join(
                head
                + [
                    "#SBATCH --job-name=alt-runs",
                    f"#SBATCH --array=0-{len(todo) - 1}",
                    f"#SBATCH --output={sdir}/run-%A_%a.out",
                    "set -euo pipefail",
                    f'run=$(sed -n "$((SLURM_ARRAY_TASK_ID + 1))p" {shlex.quote(sdir)}/runs.txt)',
                    f'exec {shlex.quote(sys.executable)} {shlex.quote(SCRIPT)} run-one "$run" '
                    + shlex.join(run_options),
                ]
            )
            + "\n"
        )
    if not args.no_finalize:
        scripts["finalize.sbatch"] = (
            "\n".join(
                head
                + [
                    "#SBATCH --job-name=alt-finalize",
                    f"#SBATCH --output={sdir}/finalize-%j.out",
                    "set -euo pipefail",
                ]
                + [
                    f"exec {shlex.quote(sys.executable)} {shlex.quote(SCRIPT)} finalize "
                    + shlex.join([exp_dir for exp_dir, _, _ in experiments] + run_options)
                ]
            )
            + "\n"
        )
    extra = shlex.split(args.slurm_args or "")
    if args.dry_run:
        for name, text in scripts.items():
            print(f"\n--- {sdir}/{name}\n{text}", end="")
        print(
            f"\nwould submit: sbatch --parsable {shlex.join(extra)} runs.sbatch; then "
            "sbatch --dependency=afterok:<its id> finalize.sbatch"
        )
        return
    os.makedirs(sdir)
    for name, text in scripts.items():
        with open(os.path.join(sdir, name), "w", encoding="utf-8") as f:
            f.write(text)
    sbatch = tool("sbatch")
    job = None
    if todo:
        job = (
            call([sbatch, "--parsable", *extra, os.path.join(sdir, "runs.sbatch")], tool_env(), what="sbatch")
            .strip()
            .split(";")[0]
        )
        print(f"submitted job array {job}: {len(todo)} runs ({sdir}/runs.txt)")
    if "finalize.sbatch" in scripts:
        dependency = [f"--dependency=afterok:{job}"] if job else []
        final = (
            call(
                [sbatch, "--parsable", *extra, *dependency, os.path.join(sdir, "finalize.sbatch")],
                tool_env(),
                what="sbatch",
            )
            .strip()
            .split(";")[0]
        )
        print(f"submitted finalize job {final}" + (f" (after {job})" if job else ""))


class Tee:
    def __init__(self, *streams):
        self.streams = streams

    def write(self, text):
        for stream in self.streams:
            stream.write(text)
            stream.flush()
        return len(text)

    def flush(self):
        for stream in self.streams:
            stream.flush()


def stop_children(signum, frame):
    with CHILDREN_LOCK:
        for proc in CHILDREN:
            if proc.poll() is None:
                proc.terminate()
    raise SystemExit(128 + signum)


# ----------------------------------------------------------------------------- commands


def fairseq_train(argv):
    """fairseq-train with the early-stopping state of a resumed run restored (single process;
    fairseq's own distributed training starts fresh processes, which count anew) and every
    validation's checkpoint kept under its interval name (save_epoch_end_validations)."""
    # isort: off
    from fairseq_cli import train  # first: it sets up fairseq's log format, which the recipes parse
    from fairseq import checkpoint_utils
    # isort: on

    save_epoch_end_validations(checkpoint_utils)
    if os.environ.get("ALT_PATIENCE_BEST"):
        train.should_stop_early.best = float(os.environ["ALT_PATIENCE_BEST"])
        train.should_stop_early.num_runs = int(os.environ["ALT_PATIENCE_RUNS"])
    sys.argv = ["fairseq-train"] + argv
    train.cli_main()


def save_epoch_end_validations(checkpoint_utils):
    """fairseq names a save at an epoch end checkpointE.pt (with --no-epoch-checkpoints: not at all)
    even when it is an interval save; copy it to checkpoint_E_U.pt like every other validation's,
    so that the last --average validations all have their checkpoint."""
    original = checkpoint_utils.save_checkpoint

    def save_checkpoint(cfg, trainer, epoch_itr, val_loss):
        result = original(cfg, trainer, epoch_itr, val_loss)
        updates, last = trainer.get_num_updates(), os.path.join(cfg.save_dir, "checkpoint_last.pt")
        if (
            epoch_itr.end_of_epoch()
            and cfg.save_interval_updates > 0
            and updates > 0
            and updates % cfg.save_interval_updates == 0
            and trainer.should_save_checkpoint_on_current_rank
            and not cfg.no_save
            and os.path.exists(last)
        ):
            target = os.path.join(cfg.save_dir, f"checkpoint_{epoch_itr.epoch}_{updates}.pt")
            shutil.copy2(last, target + ".part")  # same mtime: not "newer than checkpoint_last.pt"
            os.replace(target + ".part", target)
        return result

    checkpoint_utils.save_checkpoint = save_checkpoint


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["fairseq-train"], ["run-one"], ["finalize"]):
        die_with_parent()  # started by a sweep: stop with it
    if argv[:1] == ["fairseq-train"]:
        return fairseq_train(argv[1:])
    own, extra = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)

    def device_options(p):
        p.add_argument("--cpu", action="store_true", help="train and decode on CPU")
        p.add_argument("--threads", type=int, help="OMP/MKL threads per run (mini: 1)")
        p.add_argument("--fp16", action="store_true", help="fairseq --fp16 (GPUs)")

    p = commands.add_parser("run", help="plan, train, decode, finalize (or --dry-run / --slurm)")
    p.add_argument("directions", nargs="+", metavar="DIRECTION", help="e.g. en-vi vi-en")
    p.add_argument("--work", default=os.environ.get("ALT_WORK", "runs/alt"), help="(env ALT_WORK)")
    p.add_argument("--preset", choices=sorted(PRESETS), default="base")
    p.add_argument(
        "--temperatures", type=float_list, help="default: the paper's 1,1.2,...,2,3,4,5,10 (mini: 1,2,3,4,5)"
    )
    p.add_argument(
        "--label-smoothing", type=float_list, default=[0.1], help="e.g. 0,0.05,0.1,...,0.5 (default 0.1)"
    )
    p.add_argument("--sem-weights", type=float_list, default=[0.0], help="e.g. 0,0.1,0.3,0.5 (default 0)")
    p.add_argument(
        "--primary-label-smoothing",
        type=float,
        default=0.1,
        help="the LS of the Table 1 comparison (T_opt vs T=1; default 0.1)",
    )
    p.add_argument("--primary-sem-weight", type=float, default=0.0)
    p.add_argument("--subwords", choices=("spm", "bpe"), default="spm", help="which prepared data")
    p.add_argument("--vocab", type=int, default=8192, help="which prepared data")
    p.add_argument("--train-subset", type=int, help="which prepared data")
    p.add_argument("--seed", type=int, default=1)
    for name, kind, what in (
        ("interval", int, "validate (BLEU) and save every N updates"),
        ("patience", int, "stop after N validations without improvement"),
        ("average", int, "average the last N interval checkpoints"),
        ("max-update", int, "cap on updates (mini: 8000; 0: none)"),
        ("eval-beam", int, "beam of every run's beam decoding (4)"),
        ("log-interval", int, "fairseq --log-interval"),
        ("decode-batch", int, "fairseq-generate --batch-size"),
    ):
        p.add_argument(f"--{name}", type=kind, help=f"{what} (default: the preset's)")
    p.add_argument("--grid-beams", type=int_list, help="dev grid for T_opt and T=1 (base: 2,4,...,12)")
    p.add_argument("--grid-lenpens", type=float_list, help="(base: 0.6,0.7,...,1.4)")
    p.add_argument("--speed-beams", type=int_list, help="beams timed against greedy (4,10)")
    p.add_argument(
        "--decode-args", help=f"fairseq-generate options for every decoding (default: {shlex.join(MAX_LEN)})"
    )
    p.add_argument(
        "--sacrebleu-tokenize", help="default by target language: zh, ja-mecab/char, char (th lo km), 13a"
    )
    p.add_argument("--jobs", type=int, default=1, help="runs at a time on CPU")
    p.add_argument("--gpus", help="GPU ids for local runs, e.g. 0,1,2,3 (one run per --gpus-per-run GPUs)")
    p.add_argument(
        "--gpus-per-run", type=int, default=1, help="GPUs per run (> 1: fairseq's own distributed training)"
    )
    p.add_argument("--slurm", action="store_true", help="submit a job array (+ finalize job) with sbatch")
    p.add_argument("--slurm-args", help='extra sbatch options, e.g. "--partition gpu --time 24:00:00"')
    p.add_argument("--slurm-cpus", type=int, help="--cpus-per-task of each job")
    p.add_argument(
        "--slurm-cpu",
        dest="slurm_gpus",
        action="store_false",
        help="SLURM jobs on CPU nodes (default: one node's GPUs, --gpus-per-run)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the plan and commands; start nothing")
    p.add_argument("--no-finalize", action="store_true", help="runs only")
    device_options(p)
    p.set_defaults(slurm_gpus=None)
    p = commands.add_parser("run-one", help="one run (what the SLURM array tasks call)")
    p.add_argument("run_dir")
    p.add_argument("--gpus-per-run", type=int, default=1)
    device_options(p)
    p = commands.add_parser("finalize", help="T_opt, tuning, significance, speed of experiments")
    p.add_argument("exp_dirs", nargs="+", metavar="EXPERIMENT_DIR")
    p.add_argument("--gpus-per-run", type=int, default=1)
    device_options(p)
    args = parser.parse_args(own)
    if extra and args.command != "run":
        parser.error("options after -- (for fairseq-train) only go with `run`")
    signal.signal(signal.SIGTERM, stop_children)

    if args.command == "run-one":
        device = {
            "cpu": args.cpu,
            "threads": args.threads,
            "fp16": args.fp16,
            "gpus_per_run": args.gpus_per_run,
        }
        try:
            result = run_one(args.run_dir, device)
        except RunFailed as e:
            raise AltError(str(e)) from None
        print(json.dumps(result["eval"], indent=2))
        return
    if args.command == "finalize":
        device = {
            "cpu": args.cpu,
            "threads": args.threads,
            "fp16": args.fp16,
            "gpus_per_run": args.gpus_per_run,
        }
        failed = []
        for exp_dir in args.exp_dirs:  # all checked before any writes its final.log
            if not os.path.isfile(os.path.join(exp_dir, "experiment.json")):
                raise AltError(
                    f"EXPERIMENT_DIR {exp_dir} has no experiment.json: give a directory "
                    "WORK/sweep/<direction>.<preset>.<data> made by `alt_sweep.py run`"
                )
        for exp_dir in args.exp_dirs:
            with open(
                os.path.join(exp_dir, "final.log"), "a", encoding="utf-8"
            ) as log, contextlib.redirect_stderr(Tee(sys.stderr, log)):
                try:
                    finalize(exp_dir, device)
                except RunFailed as e:
                    failed.append(exp_dir)
                    say(f"{os.path.basename(os.path.abspath(exp_dir))}: finalize failed: {e}")
        if failed:
            raise AltError(f"finalize failed for {', '.join(failed)}")
        return

    args.fairseq_args = extra
    if args.slurm and args.gpus:
        parser.error("--gpus is for local runs; with --slurm each job gets --gpus-per-run GPUs from SLURM")
    preset = PRESETS[args.preset]
    on_cpu = args.cpu or (not args.gpus and not args.slurm) or (args.slurm and args.slurm_gpus is False)
    device = {
        "cpu": on_cpu,
        "threads": args.threads or (preset["threads"] if on_cpu else None),
        "fp16": args.fp16,
        "gpus_per_run": args.gpus_per_run,
    }
    experiments = plan(args)
    print_plan(experiments, args, device)
    if args.slurm:
        return submit_slurm(experiments, args, device)
    if args.dry_run:
        return
    execute_local(experiments, args, device)
    print("\nall runs done; tables and plots: examples/alt/results.sh --work " + args.work)


if __name__ == "__main__":
    run_main(main)
