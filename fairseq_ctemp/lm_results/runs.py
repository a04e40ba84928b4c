"""One run of the language-model recipes read back from its directory (train.sh's train.log and
command.txt, evaluate.sh's eval_{valid,test}SUFFIX.json): the row of `lm_results.py table`."""

import os
import re
import statistics

from .. import logs
from .evaluation import read_evaluation

COLUMNS = [
    *("variant", "valid_ppl", "test_ppl", "valid_tokens", "test_tokens", "eval_protocol"),
    *("test_max_log_normalizer", "params", "stopped_by", "epochs", "best_epoch", "updates"),
    *("train_seconds", "trained_on", "resumed_at", "train_ppl", "tau_mean", "tau_min", "tau_max"),
    *("clipped_percent", "clip_norm", "ar_tar", "commit", "machines", "lr", "patience"),
    *("max_epoch", "max_update"),
]

# fairseq-train logs its configuration once at each start: a resumed run's log has one per process.
PROCESS_START = re.compile(r"(?m)^.*\| fairseq_cli\.train \| \{'_name'.*$")
ON_CPU = re.compile(r"'cpu': (True|False)")  # common.cpu in that configuration
# fairseq-train's line when it resumes: the epoch is the one it goes on with (the next one after a
# checkpoint saved at an epoch's end)
RESUMED = re.compile(r"Loaded checkpoint \S+ \(epoch (\d+) @ \d+ updates\)")
# fairseq's line when it writes checkpoint_best.pt (the epoch is the one just validated)
BEST_SAVED = re.compile(r"Saved checkpoint \S*checkpoint_best\.pt \(epoch (\d+) @")
STARTED_FROM = re.compile(r" # commit (\S+)$")  # the end of each start's line in command.txt
STARTED_ON = re.compile(r" # host (.+) # commit \S+$")  # before it, the machine (host.py)
CLIP_NORM = re.compile(r"'clip_norm': ([^,}]+)")
LR = re.compile(r"'optimization': \{[^}]*'lr': \[([^\]]+)\]")  # fairseq's --lr (a list: per epoch)
PATIENCE = re.compile(r"'patience': (-?\d+)")
# the training caps (--max-epoch, --max-update; 0: none): optimization's (a scheduler has its own)
MAX_EPOCH = re.compile(r"'optimization': \{[^}]*'max_epoch': (\d+)")
MAX_UPDATE = re.compile(r"'optimization': \{[^}]*'max_update': (\d+)")
AR_TAR_WEIGHTS = re.compile(
    r"'activation_regularization': ([^,}]+).*?'temporal_activation_regularization': ([^,}]+)"
)


def run_summary(run_dir, eval_suffix):
    """The table row (COLUMNS) of the run in run_dir; None where its files do not say."""
    row = dict.fromkeys(COLUMNS)
    row["variant"] = os.path.basename(run_dir)
    row.update(evaluations(run_dir, eval_suffix))
    row["commit"] = commits(run_dir)
    row["machines"] = machines(run_dir)
    log = os.path.join(run_dir, "train.log")
    if os.path.exists(log):
        row.update(training(log))
    return row


def evaluations(run_dir, eval_suffix):
    """Perplexities, evaluated tokens, the test protocol and its normalisation guard from evaluate.sh."""
    row = {}
    for subset in ("valid", "test"):
        result = read_evaluation(os.path.join(run_dir, f"eval_{subset}{eval_suffix}.json"))
        row[f"{subset}_ppl"] = round(result.ppl, 2) if result else None
        row[f"{subset}_tokens"] = result.evaluated_tokens if result else None
        if result and subset == "test":
            row["eval_protocol"] = f"{result.tokens_per_sample}/{result.context_window}"
            row["test_max_log_normalizer"] = result.max_log_normalizer
    return row


def training(log):
    """What a run's train.log says: parameters, how it stopped, epochs, time, updates, last statistics."""
    with open(log, errors="replace") as f:
        text = f.read()
    row = {"stopped_by": "early stop" if logs.EARLY_STOP in text else "not early-stopped"}
    params = re.findall(r"num\. (?:shared )?model params: ([\d,]+)", text)
    if params:
        row["params"] = int(params[-1].replace(",", ""))
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
    row["clip_norm"] = clip_norm(text)
    row["ar_tar"] = ar_tar_weights(text)
    found = latest_config(text, LR)
    row["lr"] = found.group(1).replace(" ", "") if found else None
    for column, pattern in (("patience", PATIENCE), ("max_epoch", MAX_EPOCH), ("max_update", MAX_UPDATE)):
        found = latest_config(text, pattern)  # the latest: a resumed run may have been given more
        row[column] = int(found.group(1)) if found else None
    return row


def training_seconds_by_device(log_text):
    """fairseq's train_wall summed over the epochs a run kept, across resumes, per device ("cpu",
    "gpu", or None where the configuration does not say): {device: seconds}. train_wall counts from
    the start of each process (so a resumed run's "done training in" covers its last part only):
    within each process, an epoch took the difference to the one before. An epoch trained again
    after an interruption counts once, as its latest record."""
    starts = list(PROCESS_START.finditer(log_text))
    bounds = [0] + [m.start() for m in starts] + [len(log_text)]
    configs = [""] + [m.group(0) for m in starts]
    epochs = {}  # epoch -> (device, seconds)
    for config, begin, end in zip(configs, bounds, bounds[1:]):
        cpu = ON_CPU.search(config)
        device = None if cpu is None else "cpu" if cpu.group(1) == "True" else "gpu"
        previous = 0.0
        for record in logs.parse(log_text[begin:end], "train"):
            if "train_wall" in record:
                epochs[int(record["epoch"])] = device, float(record["train_wall"]) - previous
                previous = float(record["train_wall"])
    by_device = {}
    for device, seconds in epochs.values():
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


def resumed_at(log_text):
    """The epochs at which the processes of a resumed run went on, in order ("28 29"), or None."""
    return " ".join(RESUMED.findall(log_text)) or None


def best_epoch(log_text, valid):
    """The epoch of checkpoint_best.pt: the last one fairseq saved as best. fairseq compares the
    validation losses it logs, rounded to 3 decimals, and a tie counts as best (but not as an
    improvement for --patience), so among equal losses the latest is best. Without the save lines,
    that rule applied to valid ({epoch: logged valid loss})."""
    saved = BEST_SAVED.findall(log_text)
    if saved:
        return int(saved[-1])
    return min(valid, key=lambda epoch: (valid[epoch], -epoch))


def commits(run_dir):
    """The commits of the checkout that each start of a run trained from, in order, each once
    ("7b1843f", or "a1 b2" for a run resumed from another; "?" for a start from before train.sh
    recorded them), or None where no start recorded one (or there is no command.txt)."""
    return " ".join(recorded(run_dir, STARTED_FROM) or []) or None


def machines(run_dir):
    """The machines each start of a run trained on, in order, each once ("AMD EPYC (AVX512)", joined
    by " / "; "?" for a start from before train.sh recorded them), or None where none recorded one."""
    return " / ".join(recorded(run_dir, STARTED_ON) or []) or None


def recorded(run_dir, pattern):
    """pattern's group in each start's line of the run's command.txt, in order, each once ("?" where
    a line has none); None without command.txt or where no line has one."""
    path = os.path.join(run_dir, "command.txt")
    if not os.path.exists(path):
        return None
    with open(path, errors="replace") as f:
        found = [m.group(1) if (m := pattern.search(line)) else "?" for line in f if line.strip()]
    return list(dict.fromkeys(found)) if set(found) - {"?"} else None


def latest_config(log_text, pattern):
    """pattern's match in the configuration of a run's latest start in its log, or None."""
    configs = PROCESS_START.findall(log_text)
    return pattern.search(configs[-1]) if configs else None


def clip_norm(log_text):
    """--clip-norm of a run's latest configuration in its log (0: no clipping), or None."""
    found = latest_config(log_text, CLIP_NORM)
    return float(found.group(1)) if found else None


def ar_tar_weights(log_text):
    """The AR and TAR weights of a run's latest configuration in its log ("2.0/1.0"), or None."""
    found = latest_config(log_text, AR_TAR_WEIGHTS)
    return f"{found.group(1)}/{found.group(2)}" if found else None


def per_epoch(train, key):
    """{epoch: its value of `key`} from a log's end-of-epoch train records, e.g. train_lr (the
    learning rate it trained at) or train_clip (the % of its updates --clip-norm shortened); a resumed
    run's repeated epoch keeps the latest."""
    return {int(r["epoch"]): r[key] for r in train if key in r and "epoch" in r}


def clipped_percent(train):
    """The share of updates whose gradient --clip-norm shortened, in % over the epochs a run kept
    (fairseq's train_clip of each epoch, the latest record of an epoch trained again; the epochs of
    a language-modelling run have the same number of updates), or None without it. A loss scale
    other than 1 reaches the optimizer through this (Adam itself ignores a constant factor, but for
    its ε)."""
    clips = per_epoch(train, "train_clip")
    return round(statistics.fmean(clips.values()), 1) if clips else None
