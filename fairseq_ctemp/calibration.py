"""Post-hoc temperature scaling of a fairseq checkpoint and its calibration (Guo, Pleiss, Sun and
Weinberger, "On Calibration of Modern Neural Networks", ICML 2017), teacher forced over every target
token of a subset (EOS included, padding excluded). D is the log-probability the model gives at an
explicit t = 1: its logits up to a per-row constant (which softmax(D / t) ignores), or for a
temperature-head LM the log of its final distribution, so that t acts as the exponent p^(1/t)
renormalised, as ``--temperature`` does there.

    nll     mean -log softmax(D / t0)[y] in nats, t0 the temperature the checkpoint decodes at by
            default (the decoding rule: a recorded t*, else a tempered_ce T, else 1)
    ece     sum over 15 equal-width bins of |bin| / N * |accuracy - mean confidence| of the top-1
            prediction; bin m holds confidences in [m/15, (m+1)/15), the last bin also 1
    t*      argmin_t of mean -log softmax(D / t)[y]

The NLL is convex in beta = 1/t (the log-partition is convex in beta): its derivative is the mean of
E_q[D] - D_y and its second derivative the mean of Var_q[D], q = softmax(beta D). The first pass
evaluates a grid of beta (which brackets beta*) at the cost of a few softmaxes per batch; then each
pass is one Newton step on beta, kept inside the bracket, until the step is below 1e-6 beta.
Only one chunk of one batch is ever held as a tokens x vocabulary matrix; per token, the confidence
and whether the top-1 prediction is right are kept for the reliability bins.

``calibrate`` runs it on a checkpoint through fairseq's Python API; ``write_calibrated_checkpoint``
writes a copy that decodes at t* (``decoding.CALIBRATION_GROUP``).
"""

import dataclasses
import glob
import math
import os
from typing import List, Optional

import torch
from omegaconf import OmegaConf

from . import __version__, decoding

N_BINS = 15
# beta of the first pass: 0 (the uniform distribution) and 1/16 ... 16 in factors of sqrt(2)
GRID = (0.0, *(2.0 ** (k / 2) for k in range(-8, 9)))
TOLERANCE = 1e-6  # relative Newton step at which beta is taken as beta*
MAX_PASSES = 40
CHUNK_ELEMENTS = 1 << 22  # rows x vocabulary of one float64 chunk (32 MiB)


class CalibrationError(Exception):
    """Bad input, or a model that cannot be calibrated: one line naming the option or file."""


# ------------------------------------------------------------------------------------- the math
@dataclasses.dataclass
class Pass:
    """Sums over the tokens of one pass, at each inverse temperature of ``betas``."""

    betas: List[float]
    tokens: int
    nll: torch.Tensor  # sum of -log q(y)
    grad: torch.Tensor  # sum of E_q[D] - D_y: d nll / d beta
    curv: torch.Tensor  # sum of Var_q[D]: d2 nll / d beta2
    gap: float  # sum of max D - D_y: d nll / d beta as beta -> infinity
    confidence: torch.Tensor  # per token: top-1 probability at beta = confidence_at
    correct: torch.Tensor  # per token: the top-1 prediction is the target


def moments(D, beta):
    """Per row of D: logsumexp(beta D), and the mean and variance of D under softmax(beta D)."""
    z = beta * D
    lse = torch.logsumexp(z, dim=-1)
    q = torch.exp(z - lse[:, None])
    mean = (q * D).sum(-1)
    var = (q * (D - mean[:, None]) ** 2).sum(-1)
    return lse, mean, var


def scan(chunks, betas, confidence_at):
    """One pass over ``chunks`` of (D float64 (n, V), targets (n,)): a ``Pass``."""
    k = len(betas)
    nll, grad, curv = (torch.zeros(k, dtype=torch.float64) for _ in range(3))
    gap, tokens, confidence, correct = 0.0, 0, [], []
    for D, y in chunks:
        d_y = D.gather(1, y[:, None])[:, 0]
        top, best = D.max(-1)
        for i, beta in enumerate(betas):
            lse, mean, var = moments(D, beta)
            nll[i] += (lse - beta * d_y).sum().item()
            grad[i] += (mean - d_y).sum().item()
            curv[i] += var.sum().item()
        gap += (top - d_y).sum().item()
        confidence.append(torch.exp(confidence_at * top - torch.logsumexp(confidence_at * D, -1)).cpu())
        correct.append((best == y).cpu())
        tokens += len(y)
    return Pass(
        list(betas),
        tokens,
        nll,
        grad,
        curv,
        gap,
        torch.cat(confidence) if confidence else torch.zeros(0, dtype=torch.float64),
        torch.cat(correct) if correct else torch.zeros(0, dtype=torch.bool),
    )


def reliability_bins(confidence, correct, n_bins=N_BINS):
    """[{"range": [lo, hi], "count", "confidence" (mean), "accuracy"}] of n_bins equal-width bins on
    [0, 1]; bin m is [m / n_bins, (m + 1) / n_bins), the last one closed; an empty bin has None."""
    edges = torch.linspace(0, 1, n_bins + 1, dtype=torch.float64)
    index = (torch.bucketize(confidence, edges, right=True) - 1).clamp(0, n_bins - 1)
    count = torch.bincount(index, minlength=n_bins)
    conf_sum = torch.zeros(n_bins, dtype=torch.float64).index_add_(0, index, confidence.double())
    right = torch.zeros(n_bins, dtype=torch.float64).index_add_(0, index, correct.double())
    bins = []
    for m in range(n_bins):
        n = int(count[m])
        bins.append(
            {
                "range": [edges[m].item(), edges[m + 1].item()],
                "count": n,
                "confidence": conf_sum[m].item() / n if n else None,
                "accuracy": right[m].item() / n if n else None,
            }
        )
    return bins


def draw_reliability(ax, bins):
    """A reliability diagram on the matplotlib axes ``ax``: accuracy per filled bin against its mean
    confidence, and the diagonal of perfect calibration (the plots of ctemp-calibrate and the ALT
    post-hoc report draw their panels with it)."""
    filled = [b for b in bins if b["count"]]
    ax.bar(
        [b["range"][0] for b in filled],
        [b["accuracy"] for b in filled],
        [b["range"][1] - b["range"][0] for b in filled],
        align="edge",
        edgecolor="black",
        label="accuracy",
    )
    confidence = [b["confidence"] for b in filled]
    ax.plot(confidence, confidence, "o", color="tab:red", label="mean confidence")
    ax.plot([0, 1], [0, 1], "--", color="gray", linewidth=1)
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="confidence of the top-1 prediction")


def expected_calibration_error(bins):
    """sum over bins of |bin| / N * |accuracy - mean confidence| (Guo et al., eq. 3)."""
    total = sum(b["count"] for b in bins)
    return sum(b["count"] / total * abs(b["accuracy"] - b["confidence"]) for b in bins if b["count"])


def bracket(first):
    """(lo, hi) around beta* from the grid of the first pass (hi = inf when beyond the grid), or a
    CalibrationError when no finite t > 0 minimises the NLL."""
    betas, grad = first.betas, first.grad.tolist()
    if grad[betas.index(0.0)] >= 0:
        raise CalibrationError(
            "the NLL only falls as t grows: the model is no better than the uniform distribution "
            "on this subset, so no finite temperature minimises it"
        )
    if first.gap <= 0:
        raise CalibrationError(
            "every top-1 prediction of the subset is right: the NLL falls towards 0 as t -> 0, "
            "so no temperature > 0 minimises it"
        )
    below = [b for b, g in zip(betas, grad) if g < 0]
    above = [b for b, g in zip(betas, grad) if g >= 0]
    return max(below), min(above, default=math.inf)


def fit(first, evaluate, tolerance=TOLERANCE, max_passes=MAX_PASSES):
    """beta* and the ``Pass`` evaluated there: Newton steps on the convex NLL(beta), starting at the
    best grid point of ``first``, kept inside the bracket (bisection otherwise).
    ``evaluate(beta)`` is one pass at beta (with the confidences at beta)."""
    lo, hi = bracket(first)
    i = min(range(len(first.betas)), key=lambda j: first.nll[j].item())
    beta, grad, curv, at = first.betas[i], first.grad[i].item(), first.curv[i].item(), None
    for _ in range(max_passes):
        if at is not None and curv > 0 and abs(grad / curv) <= tolerance * beta:
            return beta, at
        candidate = beta - grad / curv if curv > 0 else math.nan
        if not lo < candidate < hi:  # Newton left the bracket, or has no curvature to go by
            candidate = split(lo, hi)
        at = evaluate(candidate)
        beta, grad, curv = candidate, at.grad[0].item(), at.curv[0].item()
        lo, hi = (beta, hi) if grad < 0 else (lo, beta)
    raise CalibrationError(f"the temperature fit did not converge in {max_passes} passes")


def split(lo, hi):
    """A point inside the bracket (lo, hi): its geometric mean (a bracket may span decades of
    beta), or beyond lo while no upper end is known."""
    if math.isinf(hi):
        return 4 * lo
    return hi / 4 if lo == 0 else math.sqrt(lo * hi)


# -------------------------------------------------------------------------- the fairseq side
@dataclasses.dataclass
class HeldOut:
    """NLL and ECE on a subset that t* was not fitted on (--report-subset), at the decoding
    temperature and at t*: what post-hoc scaling does for text it has not seen."""

    subset: str
    samples: int
    samples_skipped: int
    tokens: int
    accuracy: float
    nll: float
    ece: float
    nll_fitted: float
    ece_fitted: float
    bins: list
    bins_fitted: list


@dataclasses.dataclass
class Calibration:
    """What ``ctemp-calibrate`` measures (its JSON, key for key)."""

    checkpoint: str
    data: str
    subset: str
    samples: int  # fairseq samples scored: sentences (translation), blocks of tokens (LM)
    samples_skipped: int  # too long for the model (--skip-invalid-size-inputs-valid-test)
    tokens: int  # target tokens scored, EOS included
    accuracy: float  # top-1 accuracy (the same at every t)
    decoding_temperature: float  # t the checkpoint decodes at by default: nll and ece are there
    temperature_trained: Optional[float]  # T of a tempered_ce checkpoint, else None
    temperature_calibrated: Optional[float]  # t* recorded in the checkpoint by ctemp-calibrate, else None
    nll: float  # nats per token
    ece: float  # a fraction
    fitted_temperature: float  # t*, absolute (replaces T)
    nll_fitted: float
    ece_fitted: float
    bins: list  # reliability bins at decoding_temperature
    bins_fitted: list  # at t*
    passes: int
    signature: str
    held_out: Optional[HeldOut] = None  # with report_subset: the same at t and t*, on unseen text

    def to_dict(self):
        return dataclasses.asdict(self)


def signature(subset, samples, tokens, skipped=0):
    """A sacrebleu-style signature of what was measured."""
    parts = [f"subset:{subset}", f"samples:{samples}", f"tokens:{tokens}"]
    parts += [f"skipped:{skipped}"] if skipped else []
    return "|".join(parts + [f"bins:{N_BINS}", "eos:yes", "fit:nll", f"version:{__version__}"])


def load_state(checkpoint):
    """A checkpoint's state (fairseq's loader, with its upgrades); CalibrationError naming --path."""
    from fairseq import checkpoint_utils

    from . import inputs
    from .checkpoint_files import CheckpointError

    inputs.check_checkpoint_option("--path", checkpoint, CalibrationError)
    try:
        state = checkpoint_utils.load_checkpoint_to_cpu(checkpoint)
    except CheckpointError as e:  # fairseq's loader, with the plugin: "checkpoint PATH what is wrong"
        raise CalibrationError(
            f"--path {checkpoint} {str(e).removeprefix(f'checkpoint {checkpoint} ')}"
        ) from None
    except KeyError as e:  # fairseq's upgrade of a state that lacks what fairseq-train saves
        raise CalibrationError(
            f"--path {checkpoint} is not a checkpoint of fairseq-train (it has no {e})"
        ) from None
    except Exception as e:  # a damaged archive or unexpected objects: one line, not a traceback
        raise CalibrationError(f"--path {checkpoint} cannot be loaded: {first_line(e)}") from None
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict) or not state.get("cfg"):
        raise CalibrationError(f"--path {checkpoint} is not a fairseq checkpoint (no model and cfg)")
    if task_of(state) is None:
        raise CalibrationError(
            f"--path {checkpoint} has no task in its cfg: not a checkpoint of fairseq-train"
        )
    return state


def task_of(state):
    return decoding._get(state["cfg"].get("task"), "_name")


def first_line(error):
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def subsets_in(data):
    """Names of the binarized subsets in a data directory (valid, test, ...)."""
    names = {os.path.basename(p).split(".")[0] for p in glob.glob(os.path.join(glob.escape(data), "*.idx"))}
    return ", ".join(sorted(names)) or "none"


def check_not_empty(data, subset, option="--gen-subset"):
    """fairseq-preprocess writes an empty subset as empty .bin files, which fairseq cannot map."""
    prefix = os.path.join(glob.escape(data.split(":")[0]), glob.escape(subset))
    files = glob.glob(prefix + ".bin") + glob.glob(prefix + ".*.bin")
    if files and all(os.path.getsize(f) == 0 for f in files):
        raise CalibrationError(f"{option} {subset} of {data} is empty: nothing to calibrate on")


def load_model(checkpoint, data, task=None, overrides=None, state=None, cpu=False):
    """(model, fairseq task, checkpoint cfg) by fairseq's loader (the plugin's: it sets the
    model's own temperature), with ``overrides`` of the checkpoint's options."""
    from fairseq import checkpoint_utils
    from fairseq.dataclass.utils import overwrite_args_by_name

    if not os.path.isdir(data.split(":")[0]):
        raise CalibrationError(f"DATA {data}: no such directory")
    state = state if state is not None else load_state(checkpoint)
    trained_for = task_of(state)
    if task is not None and task != trained_for:
        raise CalibrationError(
            f"--task {task}, but --path {checkpoint} is a checkpoint of task {trained_for}"
        )
    # fairseq's upgrade already converted an argparse-era Namespace into cfg; without it the loader
    # reads that cfg, which the overrides change, instead of converting the Namespace again
    state["args"] = None
    overwrite_args_by_name(state["cfg"], {**(overrides or {}), "data": data})
    try:
        models, cfg, fairseq_task = checkpoint_utils.load_model_ensemble_and_task([checkpoint], state=state)
    except Exception as e:  # dictionaries of other data, a model the task cannot build, ...
        raise CalibrationError(
            f"--path {checkpoint} cannot be loaded with DATA {data} (task {trained_for}): {first_line(e)}"
        ) from None
    model = models[0].eval()
    if torch.cuda.is_available() and not cpu:
        model.cuda()
    return model, fairseq_task, cfg


def load_subset(fairseq_task, data, subset, option="--gen-subset"):
    """The subset's dataset; CalibrationError (naming ``option``) if it is missing or empty."""
    check_not_empty(data, subset, option)
    try:
        fairseq_task.load_dataset(subset, combine=False, epoch=1)
    except FileNotFoundError:
        raise CalibrationError(
            f"{option} {subset}: no such subset in {data} (found: {subsets_in(data)})"
        ) from None
    except Exception as e:
        raise CalibrationError(f"{option} {subset} of {data} cannot be loaded: {first_line(e)}") from None
    dataset = fairseq_task.dataset(subset)
    if len(dataset) == 0:
        raise CalibrationError(f"{option} {subset} of {data} is empty: nothing to calibrate on")
    return dataset


def batches(model, task, dataset, max_tokens=None, batch_size=None, skip_invalid_size=False):
    """fairseq's epoch iterator over the subset (each pass takes its next epoch, in the same order)."""
    from fairseq import utils

    try:
        return task.get_batch_iterator(
            dataset=dataset,
            max_tokens=max_tokens if max_tokens or batch_size else 4096,
            max_sentences=batch_size,
            max_positions=utils.resolve_max_positions(task.max_positions(), model.max_positions()),
            ignore_invalid_inputs=skip_invalid_size,
            disable_iterator_cache=True,
        )
    except Exception as e:  # a sentence longer than the model takes
        raise CalibrationError(first_line(e)) from None


def teacher_forced(model, epoch_itr, pad, where, seen=None, progress=None):
    """(D float64 (n, V), targets (n,)) of every non-pad target token, one chunk at a time; D is
    checked finite (a CalibrationError naming ``where`` and the sentence id otherwise)."""
    from fairseq import utils

    itr = epoch_itr.next_epoch_itr(shuffle=False)
    for sample in progress(itr) if progress else itr:
        if next(model.parameters()).is_cuda:
            sample = utils.move_to_cuda(sample)
        with torch.no_grad():
            net_output = model(**sample["net_input"])
            with decoding.explicit_temperature(1.0):  # D: the raw scores the rule divides by t
                lprobs = model.get_normalized_probs(net_output, log_probs=True, sample=sample)
        target = sample["target"]
        keep = target.ne(pad)
        ids = sample["id"][:, None].expand_as(target)[keep]
        D, y = lprobs[keep], target[keep]
        finite = torch.isfinite(D).all(-1)
        if not finite.all():
            kind = "sentence" if "prev_output_tokens" in sample["net_input"] else "sample"
            raise CalibrationError(
                f"{where}: the model's output is not finite (NaN or inf) for {kind} id "
                f"{ids[~finite][0].item()}: a diverged checkpoint cannot be calibrated"
            )
        if seen is not None:
            seen.update(sample["id"].tolist())
        rows = max(1, CHUNK_ELEMENTS // D.shape[-1])
        for start in range(0, len(y), rows):
            yield D[start : start + rows].double(), y[start : start + rows]


def calibrate(
    checkpoint,
    data,
    subset="valid",
    task=None,
    overrides=None,
    max_tokens=None,
    batch_size=None,
    skip_invalid_size=False,
    cpu=False,
    progress=False,
    state=None,
    report_subset=None,
):
    """Measure NLL and ECE of ``checkpoint`` on ``subset`` of ``data`` at its own temperature, fit t*
    and measure them again there: a ``Calibration``. ``task``: the task the checkpoint must have;
    ``overrides``: fairseq options replacing those of the checkpoint's cfg ({"source_lang": ...});
    ``progress``: tqdm bars on stderr; ``report_subset``: also measure both on this subset, which
    t* is not fitted on (Calibration.held_out). Raises CalibrationError."""
    if report_subset is not None and report_subset == subset:
        raise CalibrationError(
            f"--report-subset {report_subset} is the subset t* is fitted on (--gen-subset): give "
            "another, so that the reported numbers come from text t* has not seen"
        )
    model, fairseq_task, cfg = load_model(checkpoint, data, task, overrides, state, cpu)
    dataset = load_subset(fairseq_task, data, subset)
    if report_subset is not None:  # (checked now, not after the fit)
        report_dataset = load_subset(fairseq_task, data, report_subset, "--report-subset")
        report_itr = batches(model, fairseq_task, report_dataset, max_tokens, batch_size, skip_invalid_size)
    epoch_itr = batches(model, fairseq_task, dataset, max_tokens, batch_size, skip_invalid_size)
    run = _Passes(model, epoch_itr, fairseq_task.target_dictionary.pad(), checkpoint, progress)
    own = decoding.own_temperature(model)
    first = run([1 / own, *GRID], 1 / own, f"NLL at t={own:g} and {len(GRID)} temperatures")
    try:
        beta, fitted = fit(first, lambda b: run([b], b, f"Newton step, t={1 / b:.6g}"))
    except CalibrationError as e:  # the fit speaks of the model: say which one, on which data
        raise CalibrationError(f"--path {checkpoint} on {subset} of {data}: {e}") from None
    n, samples = first.tokens, len(run.seen)
    bins, bins_fitted = (reliability_bins(p.confidence, p.correct) for p in (first, fitted))
    held_out = None
    if report_subset is not None:
        where = f"--path {checkpoint} on {report_subset}"
        held_out = measure_held_out(model, fairseq_task, report_subset, report_itr, (1 / own, beta), where)
    return Calibration(
        checkpoint=checkpoint,
        data=data,
        subset=subset,
        samples=samples,
        samples_skipped=len(dataset) - samples,
        tokens=n,
        accuracy=first.correct.double().mean().item(),
        decoding_temperature=own,
        temperature_trained=decoding.training_temperature(cfg),
        temperature_calibrated=decoding.calibrated_temperature(cfg),
        nll=first.nll[0].item() / n,
        ece=expected_calibration_error(bins),
        fitted_temperature=1 / beta,
        nll_fitted=fitted.nll[0].item() / n,
        ece_fitted=expected_calibration_error(bins_fitted),
        bins=bins,
        bins_fitted=bins_fitted,
        passes=run.count,
        signature=signature(subset, samples, n, len(dataset) - samples),
        held_out=held_out,
    )


class _Passes:
    """Teacher-forced passes over one subset, each scanned at some inverse temperatures: the first
    pass measures the grid, each Newton step of the fit one more."""

    def __init__(self, model, epoch_itr, pad, checkpoint, progress):
        self.model, self.epoch_itr, self.pad = model, epoch_itr, pad
        self.where, self.progress = f"--path {checkpoint}", progress
        self.seen, self.count = set(), 0  # the sample ids scored (the same in every pass)

    def __call__(self, betas, confidence_at, description):
        self.count += 1
        bar = None
        if self.progress:
            from tqdm import tqdm

            desc = f"pass {self.count}: {description}"
            # disable=None: no bars when stderr is not a terminal
            bar = lambda itr: tqdm(itr, desc=desc, leave=False, disable=None)  # noqa: E731
        chunks = teacher_forced(self.model, self.epoch_itr, self.pad, self.where, self.seen, bar)
        return scan(chunks, betas, confidence_at)


def measure_held_out(model, fairseq_task, subset, epoch_itr, betas, where):
    """A HeldOut: one pass over ``subset`` (its batches: ``epoch_itr``) at each inverse temperature
    of ``betas`` (the decoding one, then t*'s)."""
    pad, seen = fairseq_task.target_dictionary.pad(), set()
    at = [scan(teacher_forced(model, epoch_itr, pad, where, seen), [beta], beta) for beta in betas]
    bins = [reliability_bins(p.confidence, p.correct) for p in at]
    n = at[0].tokens
    return HeldOut(
        subset=subset,
        samples=len(seen),
        samples_skipped=len(fairseq_task.dataset(subset)) - len(seen),
        tokens=n,
        accuracy=at[0].correct.double().mean().item(),
        nll=at[0].nll[0].item() / n,
        ece=expected_calibration_error(bins[0]),
        nll_fitted=at[1].nll[0].item() / n,
        ece_fitted=expected_calibration_error(bins[1]),
        bins=bins[0],
        bins_fitted=bins[1],
    )


# ------------------------------------------------------------------ the calibrated checkpoint
def check_output(path, option):
    """CalibrationError unless ``path`` can be created: it does not exist, its directory does."""
    if os.path.lexists(path):
        raise CalibrationError(f"{option} {path} already exists; refusing to overwrite it")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise CalibrationError(f"{option} {path}: directory {directory} does not exist")


def check_writable(state, checkpoint):
    """t* goes into the cfg, which the loader ignores when an argparse-era Namespace is there."""
    if state.get("args") is not None or state.get("cfg") is None:
        raise CalibrationError(
            f"--write-checkpoint: --path {checkpoint} is an argparse-era checkpoint (no cfg) where "
            "t* cannot be recorded; load and save it with fairseq >= 0.10 first"
        )


def write_calibrated_checkpoint(checkpoint, output, temperature, signature):
    """A copy of ``checkpoint`` at ``output`` (which must not exist) whose cfg records t*, so every
    decoding path decodes it at t* by default; written under a temporary name, then linked into
    place (never replacing a file). The input is only read."""
    check_output(output, "--write-checkpoint")
    if os.path.realpath(output) == os.path.realpath(checkpoint):
        raise CalibrationError(f"--write-checkpoint {output} is --path itself")
    state = torch.load(checkpoint, map_location="cpu")  # as saved: no fairseq upgrade
    check_writable(state, checkpoint)
    cfg = state["cfg"]
    cfg = OmegaConf.to_container(cfg) if OmegaConf.is_config(cfg) else dict(cfg)
    cfg[decoding.CALIBRATION_GROUP] = {"temperature": float(temperature), "signature": signature}
    state["cfg"] = cfg
    tmp = os.path.join(
        os.path.dirname(os.path.abspath(output)), f".{os.path.basename(output)}.{os.getpid()}.tmp"
    )
    f = open(tmp, "xb")
    try:
        with f:
            torch.save(state, f)
        link_into_place(tmp, output)
    finally:
        if os.path.exists(tmp):  # ours (opened "x"); renamed away on a file system without links
            os.remove(tmp)


def link_into_place(tmp, output):
    """Give the finished file ``tmp`` its name ``output`` without ever replacing a file."""
    try:
        os.link(tmp, output)  # fails if output appeared meanwhile
    except FileExistsError:
        raise CalibrationError(f"--write-checkpoint {output} appeared meanwhile; not replacing it") from None
    except OSError:  # a file system without hard links: check, then rename
        if os.path.lexists(output):
            raise CalibrationError(
                f"--write-checkpoint {output} appeared meanwhile; not replacing it"
            ) from None
        os.replace(tmp, output)
