"""``calibrate``: NLL and ECE of a checkpoint on a subset at the temperature it decodes at, the fit
of t*, the same at t*, and optionally on a subset t* was not fitted on."""

import dataclasses
from typing import Optional

from .. import __version__, decoding
from ..record_fields import known
from . import CalibrationError
from .fitting import GRID, fit, scan
from .loading import batches, load_model, load_subset, teacher_forced
from .reliability import N_BINS, expected_calibration_error, reliability_bins


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

    @classmethod
    def from_dict(cls, d):
        """The record of ctemp-calibrate's JSON (held_out None where the file has none); a field
        it lacks raises TypeError."""
        d = known(cls, d)
        held_out = d.get("held_out")
        return cls(**{**d, "held_out": None if held_out is None else HeldOut(**held_out)})


def signature(subset, samples, tokens, skipped=0):
    """A sacrebleu-style signature of what was measured."""
    parts = [f"subset:{subset}", f"samples:{samples}", f"tokens:{tokens}"]
    parts += [f"skipped:{skipped}"] if skipped else []
    return "|".join(parts + [f"bins:{N_BINS}", "eos:yes", "fit:nll", f"version:{__version__}"])


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
        report_itr = batches(
            model, fairseq_task, report_dataset, max_tokens, batch_size, skip_invalid_size, report_subset
        )
    epoch_itr = batches(model, fairseq_task, dataset, max_tokens, batch_size, skip_invalid_size, subset)
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
