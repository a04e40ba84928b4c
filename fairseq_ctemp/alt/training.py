"""Training one run with fairseq-train: its log read back (validations, patience, the update it
resumes from), its checkpoints (interval checkpoints, an interrupted copy repaired, those of the
last validations), and fairseq-train itself with the patience of a resumed run restored."""

import contextlib
import datetime
import glob
import logging
import os
import re
import shlex
import shutil
import sys
import traceback
import zipfile

from .. import logs, patches
from .children import die_with_parent
from .common import USER_DIR, RunFailed, device_args, say
from .records import TrainingSummary

SAVED = re.compile(r"Saved checkpoint \S+ \(epoch \d+ @ (\d+) updates")


def validations(run_dir):
    """The run's validations ("valid_bleu", "valid_num_updates", ...), one per update (the latest,
    after a resume), oldest first."""
    log = os.path.join(run_dir, "train.log")
    return logs.by_update(logs.read(log, "valid"), "valid_num_updates") if os.path.exists(log) else []


def training_steps(run_dir):
    """The run's per-update records ("nll_loss", "entropy", "gnorm", ...), as validations()."""
    log = os.path.join(run_dir, "train.log")
    return logs.by_update(logs.read(log, "train_inner"), "num_updates") if os.path.exists(log) else []


def read_log(path):
    """A log's text ("" where there is none yet), undecodable bytes replaced."""
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def training_summary(run_dir, patience):
    text = read_log(os.path.join(run_dir, "train.log"))
    valid = [r for r in validations(run_dir) if "valid_bleu" in r]
    reason = (
        "early stop"
        if logs.EARLY_STOP in text
        else "max update"
        if "Stopping training due to num_updates" in text
        else "stop time"  # fairseq-train --stop-time-hours: a wall-clock budget
        if "Stopping training due to cumulative_training_time" in text
        else "max epoch / other"
    )
    best = max(valid, key=lambda r: r["valid_bleu"]) if valid else None
    return TrainingSummary(
        num_updates=int(valid[-1]["valid_num_updates"]) if valid else 0,
        stop_reason=reason,
        patience=patience,
        validations=len(valid),
        best_valid_bleu=best["valid_bleu"] if best else None,
        best_valid_update=int(best["valid_num_updates"]) if best else None,
        valid_bleu=[[int(r["valid_num_updates"]), r["valid_bleu"]] for r in valid],
    )


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
    with open(os.path.join(run_dir, "train.log"), encoding="utf-8", errors="replace") as f:
        text = f.read()
    last = last_saved_update(run_dir, text)
    if last is None:
        return None
    best, since = None, 0
    for record in validations(run_dir):
        if record["valid_num_updates"] > last or "valid_bleu" not in record:
            continue
        if best is None or record["valid_bleu"] > best:
            best, since = record["valid_bleu"], 0
        else:
            since += 1
    return (last, best, since) if best is not None else None


SAVED_FILE = re.compile(r"Saved checkpoint (\S+) \(epoch \d+ @ (\d+) updates")


def last_validation_checkpoints(run_dir, n):
    """The checkpoints of the run's last n validations, oldest first: checkpoint_E_U.pt by its
    name; checkpointE.pt (fairseq's name for a save at an epoch end) and checkpoint_last.pt by the
    update their save was logged at. RunFailed, naming what is missing, if any has none."""
    log = os.path.join(run_dir, "train.log")
    updates = [int(r["valid_num_updates"]) for r in validations(run_dir)][-n:]
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


def train_argv(exp, run_dir, config, device):
    """fairseq-train's arguments for one run of experiment exp: what run-one trains with and what
    the sweep's plan prints, from this one place so that the plan shows the command that runs."""
    return [
        os.path.join(exp.data, "bin"),
        "--user-dir",
        USER_DIR,
        "--source-lang",
        exp.src,
        "--target-lang",
        exp.tgt,
        "--save-dir",
        run_dir,
        *config.train_args,
        *device_args(device, training=True),
    ]


def fairseq_train(argv, patience=None):
    """fairseq-train with the early-stopping state of a resumed run restored and every validation's
    checkpoint kept under its interval name (save_epoch_end_validations). The count is carried in
    the checkpoints (early_stopping, as ctemp-train does; also in the processes that fairseq's
    distributed training spawns); patience (best dev BLEU, validations without improvement; else
    read from ALT_PATIENCE_*), replayed from the log, only serves checkpoints written before they
    carried it (the log's BLEU has 2 decimals), and only in this process."""
    from fairseq import checkpoint_utils
    from fairseq_cli import train

    from .. import ctemp_train

    logs.use_fairseq_train_format()  # the recipes read the log back
    save_epoch_end_validations(checkpoint_utils)
    if patience is None and os.environ.get("ALT_PATIENCE_BEST"):
        patience = float(os.environ["ALT_PATIENCE_BEST"]), int(os.environ["ALT_PATIENCE_RUNS"])
    if patience is not None:
        train.should_stop_early.best, train.should_stop_early.num_runs = patience
    sys.argv = ["fairseq-train"] + argv
    with ctemp_train.changes():
        train.cli_main()


def train_in_this_process(argv, log_path, patience=None):
    """fairseq_train(argv) in this process (a run's own process, which then averages and decodes:
    no second Python, torch and fairseq start), its output appended to log_path under the command
    that does the same from a shell. Raises RunFailed with the log's tail if training fails."""
    root = logging.getLogger()
    handlers, level, argv0 = root.handlers[:], root.level, sys.argv
    with open(log_path, "a", encoding="utf-8", buffering=1) as log:
        command = shlex.join([sys.executable, "-m", __name__, *argv])  # the same, from a shell
        log.write(f"# {datetime.datetime.now():%Y-%m-%d %H:%M:%S} $ {command}\n")
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(log.fileno(), 1)  # what torch's C++ code prints
        os.dup2(log.fileno(), 2)
        error = None
        try:  # fairseq's log (sys.stdout), Python's warnings and errors (sys.stderr)
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                fairseq_train(argv, patience)
        except SystemExit as e:  # fairseq's option errors (its message is in the log already)
            error = e if e.code not in (None, 0) else None
        except Exception as e:  # (KeyboardInterrupt: this process stops as it would)
            traceback.print_exc(file=log)
            error = e
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in zip((1, 2), saved):
                os.dup2(copy, fd)
                os.close(copy)
            root.handlers[:], sys.argv = handlers, argv0
            root.setLevel(level)
    if error is not None:
        tail = "".join(read_log(log_path).splitlines(keepends=True)[-15:])
        raise RunFailed(f"fairseq-train failed:\n{tail.rstrip()}")


def save_epoch_end_validations(checkpoint_utils):
    """fairseq names a save at an epoch end checkpointE.pt (with --no-epoch-checkpoints: not at all)
    even when it is an interval save; copy it to checkpoint_E_U.pt like every other validation's,
    so that the last --average validations all have their checkpoint. (In the ALT runs' own
    fairseq-train processes only; once per process.)"""
    if patches.installed(checkpoint_utils, "save_checkpoint"):
        return
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

    why = "ALT runs: an epoch-end save that is also an interval save gets its checkpoint_E_U.pt"
    patches.replace(checkpoint_utils, "save_checkpoint", save_checkpoint, why)


if __name__ == "__main__":  # python -m fairseq_ctemp.alt.training FAIRSEQ-TRAIN-ARGS: what a run logs
    die_with_parent()  # started by a sweep: stop with it
    fairseq_train(sys.argv[1:])
