"""Shared helpers: run the real fairseq CLIs with --user-dir on tiny generated data."""

import contextlib
import fcntl
import importlib.util
import io
import logging
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from unittest import mock

import filelock
import pytest
import tomllib

# One thread per process unless OMP_NUM_THREADS says otherwise, in the tests and the commands they
# start (torch reads it when imported): the models are tiny, and with pytest-xdist's two workers on
# two cores a second thread per process only adds spin-waiting. torch is imported where it is used:
# pytest's own process, which runs no test under xdist, would import it (~2 s) before the workers
# start.
os.environ.setdefault("OMP_NUM_THREADS", "1")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUGIN_DIR = os.path.join(REPO, "fairseq_ctemp")
BIN_DIR = os.path.dirname(sys.executable)

# The test files of 4 s or more in decreasing order of their run time on a 2-core CPU (measured:
# benchmarks/suite_time.py's per-file test time; the others keep their order after these). `make
# test` runs files in parallel with pytest-xdist's --dist loadfile --no-loadscope-reorder, which
# hands them out in this order: the long ones start at once instead of being left for the end
# while the other worker idles.
LONGEST_FIRST = (
    "test_lm_recipes.py",
    "test_decoding_temperature.py",
    "test_alt_recipes.py",
    "test_hydra_configs.py",
    "test_lm_cli.py",
    "test_stock_stays_stock.py",
    "test_quickstart.py",
    "test_bad_inputs.py",
    "test_gpu_check.py",
    "test_benchmarks.py",
    "test_forkserver.py",
    "test_lm_heads.py",
    "test_compat.py",
    "test_early_stopping.py",
    "test_ct_transformer.py",
    "test_calibrate.py",
    "test_data_safety.py",
    "test_sact_transformer.py",
    "test_alt_variants.py",
    "test_distributed_and_install.py",
    "test_alt_paper_scale.py",
    "test_cli_end_to_end.py",
    "test_ngram_blocking.py",
    "test_sact.py",
    "test_alt_posthoc.py",
    "test_chunked_head_loss.py",
    "test_greedy_vs_beam.py",
    "test_ct_analysis.py",
    "test_save_dir_lock.py",
    "test_examples.py",
    "test_ct_loss_scale.py",
)


FORK_SERVER_DIR = os.path.join(REPO, "tests", "forkserver")
sys.path.insert(0, FORK_SERVER_DIR)
import ctemp_forkserver  # noqa: E402  (a test-only module, found through the line above)

FORK_SERVER = {}  # this process's fork server: its Popen and its directory


def pytest_configure(config):
    """In pytest's own process (xdist's workers inherit its environment), start a fork server
    (tests/forkserver) for the Python commands the tests start: each saves the ~5 s import of
    torch, SciPy, hydra and fairseq. CTEMP_TEST_FORK=0: every command starts for real. A pytest run
    by a test uses its parent's server."""
    worker = hasattr(config, "workerinput")
    if worker or os.environ.get("CTEMP_TEST_FORK") == "0" or ctemp_forkserver.SOCKET_VAR in os.environ:
        return
    directory = tempfile.mkdtemp(prefix="ctemp-fork-")
    path = os.path.join(directory, "server.sock")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [FORK_SERVER_DIR, os.environ.get("PYTHONPATH")]))
    log_path = os.environ.get("CTEMP_TEST_FORK_LOG") or os.path.join(directory, "server.log")
    with open(log_path, "a") as log:
        FORK_SERVER.update(
            directory=directory,
            proc=subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "import ctemp_forkserver, sys; ctemp_forkserver.serve(sys.argv[1])",
                    path,
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            ),
        )
    os.environ[ctemp_forkserver.SOCKET_VAR] = path


def pytest_unconfigure(config):
    if FORK_SERVER:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(FORK_SERVER["proc"].pid, signal.SIGKILL)  # the server and any worker left
        FORK_SERVER["proc"].wait()
        shutil.rmtree(FORK_SERVER.pop("directory"), ignore_errors=True)


def real_processes(env):
    """env for commands that must start as processes of their own, not in the fork server: those
    of a test that freezes or kills process groups (a stopped client cannot pass that on)."""
    return {k: v for k, v in env.items() if k != ctemp_forkserver.SOCKET_VAR}


def pythonpath_value(*directories):
    """PYTHONPATH for a command: these directories, then the fork server's where it runs."""
    fork = [FORK_SERVER_DIR] if ctemp_forkserver.SOCKET_VAR in os.environ else []
    return os.pathsep.join(map(str, [*directories, *fork]))


def fork_server_env():
    """For an environment a test builds from scratch: what its commands need to run in the fork
    server (nothing without one)."""
    if ctemp_forkserver.SOCKET_VAR not in os.environ:
        return {}
    socket_path = os.environ[ctemp_forkserver.SOCKET_VAR]
    return {
        **ctemp_forkserver.fixed_env(os.environ),
        ctemp_forkserver.SOCKET_VAR: socket_path,
        "PYTHONPATH": pythonpath_value(),
    }


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: a file's own order kept


# A transformer small enough that a few epochs on the toy corpus take seconds on 2 CPU cores.
TINY_DIMS = (
    "--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 32 --decoder-embed-dim 32 "
    "--encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64 --encoder-attention-heads 2 "
    "--decoder-attention-heads 2"
).split()
TINY_TRANSFORMER = ["--arch", "transformer", *TINY_DIMS, "--share-all-embeddings"]
# The language-model counterpart (fairseq's transformer_lm).
TINY_LM = (
    "--arch transformer_lm --decoder-layers 1 --decoder-embed-dim 32 --decoder-ffn-embed-dim 64 "
    "--decoder-attention-heads 2"
).split()
# The language models with a temperature head, one per head and normalisation (test_lm_heads,
# test_cuda): the tiny architectures of fairseq_ctemp/models.
LM_HEAD_ARCHES = {
    "transformer-adaptive-ct": ["--arch", "ct_transformer_lm_tiny"],
    "transformer-adaptive-plain": ["--arch", "ct_transformer_lm_tiny", "--ct-normalization", "none"],
    "transformer-softmax-ct": ["--arch", "ct_transformer_lm_tiny", "--output-head", "softmax"],
    "transformer-mos-ct-lambda": [
        "--arch",
        "ct_transformer_lm_tiny",
        "--output-head",
        "mos",
        "--mos-components",
        "3",
        "--ct-normalization",
        "lambda_tanh",
    ],
    "lstm-softmax": ["--arch", "lstm_lm_tiny"],
    "lstm-softmax-ct": ["--arch", "lstm_lm_tiny", "--ct-normalization", "softmax"],
    "lstm-mos-ct": ["--arch", "ct_mos_lstm_lm_tiny"],
    "lstm-mos-ct-learned": ["--arch", "ct_mos_lstm_lm_tiny", "--ct-learn-alpha-beta"],
    "lstm-softmax-constant": [
        "--arch",
        "lstm_lm_tiny",
        "--ct-normalization",
        "constant",
        "--ct-constant",
        "0.5",
    ],
}
TRAIN_DEFAULTS = (
    "--cpu --optimizer adam --lr 3e-3 --lr-scheduler inverse_sqrt --warmup-updates 10 "
    "--max-tokens 2000 --seed 1 --log-format json --log-interval 1 --num-workers 0"
).split()
# Training temperatures of the toy checkpoints (``toy_checkpoint``).
T_A, T_B, T_LM = 3.0, 1.5, 2.0
LM_COMMON = (
    "--task language_modeling --tokens-per-sample 32 --cpu --optimizer adam --lr 3e-3 --max-tokens 1024 "
    "--seed 1 --num-workers 0 --max-epoch 2 --no-epoch-checkpoints"
).split()
# name: (toy_data key, fairseq-train options), each trained for 2 epochs: two tempered_ce translators
# (A, B), a stock one (S), a tempered_ce LM (L) and a contextual-temperature MoS LM (H).
TOY_RUNS = {
    "A": (
        "bin",
        [*TINY_TRANSFORMER, "--criterion", "tempered_ce", "--softmax-temperature", str(T_A)]
        + ["--label-smoothing", "0.1"],
    ),
    "B": (
        "bin",
        [*TINY_TRANSFORMER, "--criterion", "tempered_ce", "--softmax-temperature", str(T_B), "--seed", "2"],
    ),
    "S": (
        "bin",
        [*TINY_TRANSFORMER, "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1"],
    ),
    "L": ("lm_bin", [*LM_COMMON, *TINY_LM, "--criterion", "tempered_ce", "--softmax-temperature", str(T_LM)]),
    "H": ("lm_bin", [*LM_COMMON, "--arch", "ct_mos_lstm_lm_tiny", "--criterion", "ct_cross_entropy"]),
}


# Untrained models decode up to 200 tokens per sentence; bound it so generation stays fast. No
# data-loader processes: one per decode costs time and changes nothing.
def experiment_json(**settings):
    """An experiment.json as `ctemp-alt-sweep run` writes it (the mini preset's settings, en-vi on
    the data directory en-vi.spm20, dev only), with `settings` changed."""
    return {
        "src": "en",
        "tgt": "vi",
        "preset": "mini",
        "data": "../../data/en-vi.spm20",
        "data_tag": "spm20",
        "subsets": ["valid"],
        "bleu_tokenize": "13a",
        "decode_args": ["--max-len-a", "2", "--max-len-b", "20"],
        "primary": [0.1, 0.0],
        "interval": 100,
        "patience": 10,
        "average": 3,
        "max_update": None,
        "eval_beam": 4,
        "grid_beams": [2, 4],
        "grid_lenpens": [0.6, 1.0],
        "speed_beams": [4],
        "log_interval": 10,
        "decode_batch": 64,
        **settings,
    }


def calibration_json(**fields):
    """A calibration JSON as ctemp-calibrate writes it (a T = 1 checkpoint on 100 dev tokens; no
    held-out subset), with `fields` changed."""
    return {
        "checkpoint": "checkpoint_avg.pt",
        "data": "bin",
        "subset": "valid",
        "samples": 10,
        "samples_skipped": 0,
        "tokens": 100,
        "accuracy": 0.5,
        "decoding_temperature": 1.0,
        "temperature_trained": None,
        "temperature_calibrated": None,
        "nll": 2.0,
        "ece": 0.1,
        "fitted_temperature": 1.2,
        "nll_fitted": 1.9,
        "ece_fitted": 0.05,
        "bins": [],
        "bins_fitted": [],
        "passes": 1,
        "signature": "subset:valid|samples:10|tokens:100",
        **fields,
    }


FAST_DECODE = ["--cpu", "--batch-size", "64", "--max-len-a", "1.2", "--max-len-b", "10", "--num-workers", "0"]


def cli(name):
    path = os.path.join(BIN_DIR, name)
    return path if os.path.exists(path) else name


def console_scripts():
    """{console script: its module} of this package (pyproject.toml's [project.scripts])."""
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    return {name: target.split(":")[0] for name, target in scripts.items()}


def command(name):
    """The argv start of a console command: the installed script, else for this package's
    commands `python -m` their module (a venv installed before a command was added lacks it)."""
    path = os.path.join(BIN_DIR, name)
    if os.path.exists(path):
        return [path]
    module = console_scripts().get(name)
    return [sys.executable, "-m", module] if module else [name]


def run_cli(name, *args, cwd=None, env=None, check=True, input=None, timeout=None):
    """Run a console command (`input`: its stdin; `timeout`: seconds, where a fault would hang it);
    returns its CompletedProcess with stdout+stderr merged in .stdout."""
    full_env = dict(os.environ, **(env or {}))
    proc = subprocess.run(
        [*command(name), *map(str, args)],
        cwd=cwd,
        env=full_env,
        input=input,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"{name} failed ({proc.returncode}):\n{proc.stdout[-6000:]}")
    return proc


def run_main(main, *args, env=None, check=True):
    """A command's main(argv) run in this process, as its console script would run it (without the
    ~4 s start-up of Python, torch and fairseq): a CompletedProcess with the exit status and the
    stdout and stderr text. env: the whole environment during the call (default: unchanged)."""
    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.ExitStack() as stack:
        if env is not None:
            stack.enter_context(mock.patch.dict(os.environ, env, clear=True))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        try:
            main([str(a) for a in args])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) or e.code is None else 1
            if not isinstance(e.code, int) and e.code is not None:
                print(e.code, file=sys.stderr)  # what the interpreter prints for SystemExit("text")
    proc = subprocess.CompletedProcess(args, code or 0, out.getvalue(), err.getvalue())
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{main.__module__} {args[:2]} failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
        )
    return proc


# fairseq's console scripts: the module whose cli_main() each one calls
FAIRSEQ_MAINS = {
    "fairseq-preprocess": "fairseq_cli.preprocess",
    "fairseq-train": "fairseq_cli.train",
    "fairseq-generate": "fairseq_cli.generate",
    "fairseq-interactive": "fairseq_cli.interactive",
    "fairseq-eval-lm": "fairseq_cli.eval_lm",
    "fairseq-validate": "fairseq_cli.validate",
    "ctemp-train": "fairseq_ctemp.cli.train",
}
FAIRSEQ_LOG_FORMAT = logging.Formatter(  # fairseq_cli's logging.basicConfig
    "%(asctime)s | %(levelname)s | %(name)s | %(message)s", datefmt="%Y-%m-%d %H:%M:%S"
)


def reset_fairseq_train_state():
    """fairseq-train keeps the best validation so far on functions (checkpoint_utils.save_checkpoint,
    fairseq_cli.train.should_stop_early): a fresh process starts without it."""
    from fairseq import checkpoint_utils
    from fairseq_cli import train

    for function, names in (
        (checkpoint_utils.save_checkpoint, ("best",)),
        (train.should_stop_early, ("best", "num_runs")),
    ):
        for name in names:
            if hasattr(function, name):
                delattr(function, name)


def run_fairseq(name, *args, input=None, env=None, check=True):
    """A fairseq console script run in this process through the cli_main() it calls, with its
    arguments in sys.argv and `input` as stdin (a subprocess costs a Python + torch + fairseq start,
    ~4 s): a CompletedProcess with the exit status and, as run_cli merges them, stdout, stderr and
    the log in .stdout. An uncaught exception is reported as the interpreter reports it, through
    sys.excepthook (the plugin's prints an option error as one line), with exit status 1. env:
    variables set in os.environ during the run. Torch runs on as many threads as run_cli's
    subprocess would (OMP_NUM_THREADS). Where the process itself is what a test is about (the
    installed script, its environment, its exit), use run_cli."""
    with mock.patch.dict(os.environ, env or {}):
        return _run_fairseq(name, args, input, check)


def _run_fairseq(name, args, input, check):
    import torch

    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(FAIRSEQ_LOG_FORMAT)
    root = logging.getLogger()
    loggers = [logging.getLogger(n) for n in list(logging.root.manager.loggerDict)]
    saved_handlers = {logger: logger.handlers[:] for logger in loggers}
    saved = (root.handlers[:], root.level, sys.argv, sys.stdin, torch.get_num_threads())
    root.handlers, code = [handler], 0
    root.setLevel(os.environ.get("LOGLEVEL", "INFO").upper())
    sys.argv, sys.stdin = [name, *map(str, args)], io.StringIO(input or "")
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    if name in ("fairseq-train", "ctemp-train"):
        reset_fairseq_train_state()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:  # imported with the handler in place: fairseq_cli's logging.basicConfig does nothing
                importlib.import_module(FAIRSEQ_MAINS[name]).cli_main()
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) or e.code is None else 1
                if not isinstance(e.code, int) and e.code is not None:
                    print(e.code, file=sys.stderr)
            except Exception as e:  # what the interpreter does with it
                sys.excepthook(type(e), e, e.__traceback__)
                code = 1
    finally:
        root.handlers, level, sys.argv, sys.stdin, threads = saved
        root.setLevel(level)
        torch.set_num_threads(threads)
        for logger in [logging.getLogger(n) for n in list(logging.root.manager.loggerDict)]:
            for added in set(logger.handlers) - set(saved_handlers.get(logger, [])):
                logger.removeHandler(added)  # fairseq-preprocess logs to a file in its --destdir
                added.close()
    proc = subprocess.CompletedProcess([name, *map(str, args)], code or 0, out.getvalue())
    if check and proc.returncode != 0:
        raise AssertionError(f"{name} failed ({proc.returncode}):\n{proc.stdout[-6000:]}")
    return proc


def python_script(directory, name, code):
    """[python, SCRIPT]: the command that runs `code` from DIRECTORY/ctemp-NAME. Named as this
    package's console scripts are, it runs in the fork server (a `python -c` command starts for real:
    ~5 s of imports)."""
    path = os.path.join(directory, f"ctemp-{name}")
    with open(path, "x", encoding="utf-8") as f:
        f.write(code)
    return [sys.executable, path]


def example_script(path):
    """A script of scripts/, examples/ or benchmarks/ (not a package) as a module, loaded from its file."""
    spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def json_log_records(output, kind):
    """fairseq --log-format json records of one kind ("train", "valid", "train_inner"), numbers as
    floats (fairseq_ctemp.logs, tested in test_cli_end_to_end)."""
    from fairseq_ctemp import logs

    return logs.parse(output, kind)


def hypotheses(generate_output):
    """{sentence id: (score, hypothesis)} from fairseq-generate's H- lines."""
    result = {}
    for line in generate_output.splitlines():
        if line.startswith("H-"):
            key, score, text = line.split("\t")
            result[int(key[2:])] = (float(score), text)
    return result


class RawModel:
    """A checkpoint loaded by fairseq's own loader (not the plugin's), scored teacher-forced from
    its raw outputs: logits, or the log of a temperature head's final distribution."""

    def __init__(self, checkpoint, data, **overrides):
        models, _, self.task = fairseq_loader(
            [str(checkpoint)], arg_overrides={"data": str(data), **overrides}
        )
        self.model = models[0].eval()
        self.dictionary = self.task.target_dictionary

    def log_probs(self, prev, src=None):
        """D of every position, float64, (len(prev), V)."""
        import torch

        with torch.no_grad():
            if src is None:
                out = self.model(prev[None])
            else:
                out = self.model(src[None], torch.tensor([len(src)]), prev[None])
            head = getattr(self.model.decoder, "output_head", None)
            raw = out[0] if head is None else head(out[0])[0]
            return raw[0].double()

    def lm_nll(self, subset, t=1.0, max_tokens=1024):
        """(mean -log2 p of every target token of an LM subset at temperature t, token count),
        in the blocks fairseq-eval-lm scores (same --tokens-per-sample, no context window)."""
        import torch

        task, pad = self.task, self.dictionary.pad()
        task.load_dataset(subset)
        total, count = 0.0, 0
        batches = task.get_batch_iterator(task.dataset(subset), max_tokens=max_tokens)
        for sample in batches.next_epoch_itr(shuffle=False):
            for prev, target in zip(sample["net_input"]["src_tokens"], sample["target"]):
                keep = target.ne(pad)
                lp = torch.log_softmax(self.log_probs(prev[keep]) / t, dim=-1)
                total -= lp.gather(1, target[keep][:, None]).sum().item()
                count += int(keep.sum())
        return total / count / math.log(2), count


def fairseq_loader(*args, **kwargs):
    """fairseq's own checkpoint loader, not the plugin's (which sets the decoding temperature)."""
    from fairseq_ctemp import decoding

    return decoding._load_model_ensemble_and_task(*args, **kwargs)


# ----------------------------------------------- decoding scores against the independent reference
ATOL = 1e-4  # full-precision scores (Python API) vs the float64 reference


def reference_scores(refs_and_t, tokens, src=None):
    """log of the ensemble's mean of softmax(D / t) at each token of ``tokens`` (teacher forced),
    for [(RawModel, t)]."""
    import torch

    eos = refs_and_t[0][0].dictionary.eos()
    prev = torch.cat([torch.tensor([eos]), tokens[:-1]])
    per_model = [
        torch.log_softmax(ref.log_probs(prev, src) / t, dim=-1).gather(1, tokens[:, None])[:, 0]
        for ref, t in refs_and_t
    ]
    return torch.logsumexp(torch.stack(per_model), dim=0) - math.log(len(per_model))


def assert_scored_at(scores, refs_and_t, tokens, src=None, atol=ATOL, base=math.e):
    """``scores`` are the reference at the given temperatures, and measurably not at T*X or 1."""
    import torch

    expected = reference_scores(refs_and_t, tokens, src) / math.log(base)
    torch.testing.assert_close(torch.as_tensor(scores, dtype=torch.float64), expected, atol=atol, rtol=0)
    for wrong in ({t * 1.5 for _, t in refs_and_t} | {1.0}) - {t for _, t in refs_and_t}:
        other = reference_scores([(r, wrong) for r, _ in refs_and_t], tokens, src) / math.log(base)
        assert (other - expected).abs().max() > 20 * atol, "the check cannot tell t apart"


def cli_hypotheses(output, dictionary):
    """[(id, source tokens or None, hypothesis tokens, positional scores in base 2)] from the
    S-/H-/P- lines of fairseq-generate or fairseq-interactive."""
    sources, result, pending = {}, [], None
    for line in output.splitlines():
        key, _, rest = line.partition("\t")
        if key.startswith("S-"):
            sources[int(key[2:])] = rest
        elif key.startswith("H-"):
            pending = (int(key[2:]), rest.split("\t")[-1])
        elif key.startswith("P-") and pending is not None:
            i, text = pending
            encode = lambda s: dictionary.encode_line(s, add_if_not_exist=False).long()  # noqa: E731
            src = encode(sources[i]) if i in sources else None
            result.append((i, src, encode(text), [float(x) for x in rest.split()]))
            pending = None
    return result


def built_once(tmp_path_factory, name, build):
    """The directory `name` made by build(directory) once per test session: with pytest-xdist, the
    first worker that needs it builds it (under a lock) in the session's directory, which all the
    workers share, and the others reuse it (a session fixture is otherwise built by every worker).
    Tests only read it."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        path = tmp_path_factory.mktemp(name)
        build(path)
        return path
    path = tmp_path_factory.getbasetemp().parent / name
    with filelock.FileLock(f"{path}.lock"):
        if not (path / ".built").exists():
            shutil.rmtree(path, ignore_errors=True)  # a build that failed
            path.mkdir()
            build(path)
            (path / ".built").touch()
    return path


def make_toy_data(root):
    from fairseq_ctemp.toy_data import write_corpus

    raw = root / "raw"
    write_corpus(str(raw), (("train", 800), ("valid", 80), ("test", 80)), vocab=150)
    splits = ("train", "valid", "test")
    run_fairseq(
        "fairseq-preprocess",
        *("--source-lang", "src", "--target-lang", "tgt", "--joined-dictionary", "--workers", "1"),
        *(a for split in splits for a in (f"--{split}pref", raw / split)),
        *("--destdir", root / "bin"),
    )
    run_fairseq(
        "fairseq-preprocess",
        *("--only-source", "--workers", "1"),
        *(a for split in splits for a in (f"--{split}pref", raw / f"{split}.tgt")),
        *("--destdir", root / "lm-bin"),
    )


@pytest.fixture(scope="session")
def toy_data(tmp_path_factory):
    """A binarized toy translation corpus (src -> tgt) and an LM corpus on its target side."""
    root = built_once(tmp_path_factory, "toy", make_toy_data)
    return {"raw": root / "raw", "bin": root / "bin", "lm_bin": root / "lm-bin"}


@pytest.fixture(scope="session")
def toy_checkpoint(toy_data, tmp_path_factory):
    """toy_checkpoint(name): the checkpoint_last.pt of TOY_RUNS[name], trained on first use only,
    so that the test files of one session share them (fairseq-train in this process: the
    end-to-end tests run it as a process)."""

    def train(name, save_dir):
        data, args = TOY_RUNS[name]
        defaults = [] if data == "lm_bin" else [*TRAIN_DEFAULTS, "--max-epoch", "2", "--no-epoch-checkpoints"]
        run_fairseq(
            "fairseq-train",
            toy_data[data],
            "--user-dir",
            PLUGIN_DIR,
            *defaults,
            *args,
            "--save-dir",
            save_dir,
        )

    trained = {}

    def get(name):
        if name not in trained:
            trained[name] = built_once(tmp_path_factory, f"toy-{name}", lambda path: train(name, path))
        return trained[name] / "checkpoint_last.pt"

    return get


def checkout_commit():
    """This checkout's short commit as git tells it, "+changes" when tracked files were edited."""

    def git(*args):
        return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, check=True).stdout

    edited = git("status", "--porcelain", "--untracked-files=no").strip()
    return git("rev-parse", "--short", "HEAD").strip() + ("+changes" if edited else "")


def wait_until_free(path, seconds=30):
    """Until no process holds PATH's lock (a killed process closes its files as it ends)."""
    deadline = time.monotonic() + seconds
    with open(path) as lock:
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fcntl.flock(lock, fcntl.LOCK_UN)
            except BlockingIOError:
                assert time.monotonic() < deadline, f"{path} still held"
                time.sleep(0.1)


DOC_FOLDERS = (
    "",
    "docs",
    "benchmarks",
    *(f"examples/{e}" for e in ("alt", "language_model", "quickstart", "sact")),
)


def doc_pages():
    """[(file, text)] of the docs and READMEs, continuation lines ("\\" at the end) joined."""
    pages = []
    for folder in DOC_FOLDERS:
        for name in sorted(os.listdir(os.path.join(REPO, folder))):
            if name.endswith(".md"):
                path = os.path.join(folder, name)
                with open(os.path.join(REPO, path), encoding="utf-8") as f:
                    pages.append((path, f.read().replace("\\\n", " ")))
    return pages


def code_block_lines():
    """[(file, line)] of the code blocks of the docs and READMEs (continuation lines joined,
    stripped): where the commands a user copies are."""
    return [
        (path, line.strip())
        for path, text in doc_pages()
        for block in text.split("```")[1::2]
        for line in block.splitlines()
    ]


def inline_code(text):
    """The inline code spans (`...`) of a page's text outside its code blocks."""
    prose = "".join(text.split("```")[0::2])
    return re.findall(r"`([^`\n]+)`", prose)
