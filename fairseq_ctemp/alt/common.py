"""Shared by the ALT pipeline (data, sweep, results): language codes, directory layout, tools,
atomic writes, locks, errors. Not a command itself."""

import fcntl
import json
import os
import shutil
import socket
import sys
from dataclasses import dataclass
from typing import Optional

from .. import USER_DIR  # the --user-dir of the runs it starts

# Our language codes -> the code in the release's file names (data_<code>.txt) and the name.
# The release calls Bengali "bg" (not Bulgarian) and Khmer "khm"; both spellings are accepted.
LANGUAGES = {
    "en": ("en", "English"),
    "bn": ("bg", "Bengali"),
    "fil": ("fil", "Filipino"),
    "hi": ("hi", "Hindi"),
    "id": ("id", "Indonesian"),
    "ja": ("ja", "Japanese"),
    "km": ("khm", "Khmer"),
    "lo": ("lo", "Lao"),
    "ms": ("ms", "Malay"),
    "my": ("my", "Burmese"),
    "th": ("th", "Thai"),
    "vi": ("vi", "Vietnamese"),
    "zh": ("zh", "Chinese"),
}
ALIASES = {"bg": "bn", "khm": "km"}
PAPER_LANGUAGES = ("bn", "fil", "id", "ja", "km", "lo", "ms", "my", "th", "vi", "zh")  # 22 directions with en
OFFICIAL_SIZES = {"train": 18088, "dev": 1000, "test": 1018}
SPLITS = ("train", "dev", "test")
FAIRSEQ_SUBSET = {"train": "train", "dev": "valid", "test": "test"}  # fairseq-preprocess names
NICT = "https://www2.nict.go.jp/astrec-att/member/mutiyama/ALT"
RELEASE_ZIP = "ALT-Parallel-Corpus-20191206.zip"


class AltError(Exception):
    """A user-facing error: the commands print it as one line and exit with status 2."""


class RunFailed(Exception):
    """A step of a run or of finalize failed (the sweep reports it and goes on with the others)."""


class RunHeld(RunFailed):
    """A run another process works on (its lock is held): left to that process, not failed."""


# the exit status of `run-one` refused a run that another process holds (EX_TEMPFAIL, as the shell
# recipes' SAVE_DIR lock): the sweep that started it tells it from a failure
HELD_STATUS = 75


def language(code):
    code = ALIASES.get(code, code)
    if code not in LANGUAGES:
        known = ", ".join(f"{c} ({LANGUAGES[c][1]})" for c in LANGUAGES)
        raise AltError(f"unknown language code {code!r}; ALT has: {known}")
    return code


def direction(text):
    """'en-vi' -> ('en', 'vi')."""
    parts = text.split("-")
    if len(parts) != 2 or not all(parts):
        raise AltError(f"a direction looks like en-vi or vi-en, got {text!r}")
    src, tgt = (language(p) for p in parts)
    if src == tgt:
        raise AltError(f"direction {text!r}: source and target are the same language")
    return src, tgt


def pair(src, tgt):
    """The data of en->vi and vi->en is one prepared pair, named with English (else the smaller
    code) first: ('vi', 'en') -> ('en', 'vi')."""
    a, b = sorted((src, tgt), key=lambda c: (c != "en", c))
    return a, b


def data_tag(subwords, vocab, train_subset=None, carve_test=None):
    """The data directory's name after its pair: spm8192, spm8192.test1000 (a test split carved from
    train), spm8192.test1000.n4000 (and the first 4,000 training pairs of the rest)."""
    return (
        f"{subwords}{vocab}"
        + (f".test{carve_test}" if carve_test else "")
        + (f".n{train_subset}" if train_subset else "")
    )


def remove_bpe_of(subwords):
    """fairseq's --remove-bpe for text in these subwords (--subwords spm or bpe)."""
    return "sentencepiece" if subwords == "spm" else "subword_nmt"


def data_dir(work, src, tgt, tag):
    a, b = pair(src, tgt)
    return os.path.join(work, "data", f"{a}-{b}.{tag}")


def bleu_tokenize(lang):
    """sacrebleu tokenizer for references in `lang` (printed in every signature): zh -> zh,
    ja -> ja-mecab (char when MeCab is not installed), th/lo/km (no spaces between words) -> char,
    otherwise 13a."""
    if lang == "zh":
        return "zh"
    if lang == "ja":
        try:
            import MeCab  # noqa: F401

            return "ja-mecab"
        except ImportError:
            return "char"
    return "char" if lang in ("th", "lo", "km") else "13a"


def tool(name, missing=None):
    """A console script next to this Python (the venv), else from PATH; AltError with `missing`
    (default: the venv's set-up) where there is none."""
    local = os.path.join(os.path.dirname(sys.executable), name)
    found = local if os.access(local, os.X_OK) else shutil.which(name)
    if not found:
        raise AltError(
            missing
            or f"{name} is neither next to {sys.executable} nor on PATH (activate the venv "
            "that has fairseq; see the README, Set-up)"
        )
    return found


def read_cpu_allocator_env():
    """{name: value} of cpu_allocator.env: the CPU allocator settings of the processes the recipes
    start (why: that file)."""
    with open(os.path.join(USER_DIR, "cpu_allocator.env"), encoding="utf-8") as f:
        lines = [line.strip() for line in f]
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


CPU_ALLOCATOR_ENV = read_cpu_allocator_env()


def tool_env(threads=None, extra=None):
    """The environment of a child process: it imports this very package (e.g. a checkout's)."""
    env = dict(os.environ)
    here = os.path.dirname(USER_DIR)
    env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONIOENCODING"] = "utf-8"
    env["PYTHONUNBUFFERED"] = "1"  # logs complete up to the moment a run is killed
    for name, value in CPU_ALLOCATOR_ENV.items():  # read at the child's start: set here
        env.setdefault(name, value)
    if threads:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    env.update(extra or {})
    return env


def read_json(path, default=None):
    """The JSON in path (default where there is none); AltError naming the file where it is not
    JSON (truncated by a disk that filled, say): the files of the recipes are written whole, so
    such a file was damaged outside them."""
    if not os.path.exists(path):
        return default
    with open(path, encoding="utf-8", errors="replace") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as e:
            raise AltError(
                f"{path} is not valid JSON ({e.msg} at line {e.lineno}, column {e.colno}): damaged or "
                "truncated; restore it, or move it away to have its step done again"
            ) from None


def fresh_dir(path):
    """An empty directory for a step's temporary outputs (whatever an interrupted try left goes)."""
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)
    os.makedirs(path)
    return path


def fmt(x):
    """1.0 -> '1', 0.05 -> '0.05' (run names, tables)."""
    return f"{x:g}"


def say(text):
    sys.stderr.write(text + "\n")  # one write: lines from the sweep's threads do not interleave
    sys.stderr.flush()


class Lock:
    """An exclusive, non-blocking lock on DIR/.lock while the `with` block runs. The kernel releases
    it when its holder dies, however it dies, so a lock file left by a dead process never blocks;
    the file names the holder for the error message."""

    def __init__(self, directory, error=AltError):
        self.directory, self.error = directory, error
        self.path = os.path.join(directory, ".lock")

    def __enter__(self):
        os.makedirs(self.directory, exist_ok=True)
        self.file = open(self.path, "a+", encoding="utf-8")
        try:
            fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.file.seek(0)
            holder = self.file.read().strip() or "another process"
            self.file.close()
            raise self.error(
                f"{self.directory} is being worked on by {holder}: wait for it to finish, "
                "or stop it and run again"
            ) from None
        self.file.seek(0)
        self.file.truncate()
        self.file.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        self.file.flush()
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.file, fcntl.LOCK_UN)
        self.file.close()


def run_main(main, argv=None):
    """A command's main(argv): AltError -> 'error: ...' on stderr and exit status 2."""
    try:
        return main(argv)
    except AltError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


@dataclass(frozen=True)
class Device:
    """Where a sweep's runs train and decode (ctemp-alt-sweep --cpu / --threads / --fp16 /
    --gpus-per-run)."""

    cpu: bool = False
    threads: Optional[int] = None  # OMP/MKL threads per run; None: torch's default
    fp16: bool = False
    gpus_per_run: int = 1

    def sweep_options(self):
        """The same device as options of ctemp-alt-sweep run-one / finalize."""
        options = ["--cpu"] if self.cpu else ["--gpus-per-run", str(self.gpus_per_run)]
        options += ["--threads", str(self.threads)] if self.threads else []
        return options + (["--fp16"] if self.fp16 else [])


def device_args(device, training):
    """fairseq options for where a run goes: CPU, or the GPUs it was given (several: fairseq's own
    distributed training, one process per GPU)."""
    args = ["--cpu"] if device.cpu else []
    if device.fp16 and not device.cpu:
        args.append("--fp16")
    if training and not device.cpu and device.gpus_per_run > 1:
        args += ["--distributed-world-size", str(device.gpus_per_run)]
    return args


def check_data_location(exp_dir, exp, error):
    """The data directory of an experiment (exp: its records.Settings as written); `error` if
    experiment.json names another one."""
    here = os.path.normpath(
        os.path.join(exp_dir, "..", "..", "data", f"{'-'.join(pair(exp.src, exp.tgt))}.{exp.data_tag}")
    )
    named = os.path.normpath(os.path.join(exp_dir, exp.data))
    if os.path.realpath(named) != os.path.realpath(here):
        raise error(
            f"{exp_dir}/experiment.json names the data {named}, not this work directory's {here} "
            f'(moved or copied?): set its "data" to "{os.path.relpath(here, exp_dir)}" if '
            "that is the data it was trained on"
        )
    return here
