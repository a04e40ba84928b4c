"""The typed records of the ALT pipeline: what a data directory's prepare.json holds, what an
experiment's experiment.json holds, what a run's config.json, train.json and run.json hold, what an
experiment's final/final.json, final/compare-<run>.json and final/posthoc.json hold, and an
experiment as ctemp-alt-results loads it; one definition each, written with their field names
(dataclasses.asdict) and read back through the same definition (files of older versions lack the
fields added since: they get the defaults, except in experiment.json, whose settings the runs were
planned with)."""

import dataclasses
import glob
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ..calibration import Calibration
from ..record_fields import known, missing
from .common import AltError, RunFailed, check_data_location, read_json
from .presets import DEFAULT_VARIANT


@dataclass
class CorpusStats:
    """A data directory's raw/stats.json, written with its raw text: what the corpus gave the pair."""

    source: Dict[str, Any]  # the corpus it was read from (sources.py's describe())
    sizes: Dict[str, int]  # sentence pairs per split
    dropped: Dict[str, int]  # pairs with an empty or missing side, per split (--drop-incomplete)
    unassigned: int  # sentences in no split's URL list
    test_source: Optional[str] = None  # how the test split was carved (None: the corpus's own, or none)
    # per split but train: its pairs whose a side, b side, or both ("pair") also occur in train
    in_train: Optional[Dict[str, Dict[str, int]]] = None  # (older files lack it)

    @classmethod
    def read(cls, path):
        d = read_json(path)
        if d is None:
            raise AltError(f"{path}: no such file; not a raw directory of `ctemp-alt-data prepare`")
        complete(cls, d, path, "a stats.json of `ctemp-alt-data prepare`")
        return cls(**known(cls, d))


@dataclass(frozen=True)
class DataOptions:
    """The options that make a data directory: its options.json (written before the first step) and
    its prepare.json's options. A resumed prepare must have the same ones."""

    pair: str  # "a-b", the pair's languages in the order the corpus gives them
    subwords: str
    vocab: int
    train_subset: Optional[int]
    drop_incomplete: bool
    spm_model_type: Optional[str]  # None unless subwords is spm
    carve_test: Optional[int] = None  # None: not carved (older directories lack the field)

    def to_dict(self):
        d = dataclasses.asdict(self)
        if self.carve_test is None:
            del d["carve_test"]  # as directories made before --carve-test wrote it
        return d

    @classmethod
    def from_dict(cls, d, path):
        complete(cls, d, path, "the options of `ctemp-alt-data prepare`")
        return cls(**known(cls, d))

    def differences(self, other):
        """'field: theirs, now ours' for each field in which other differs from self."""
        ours, theirs = dataclasses.asdict(self), dataclasses.asdict(other)
        return [f"{k}: {theirs[k]!r}, now {v!r}" for k, v in ours.items() if theirs[k] != v]


@dataclass(kw_only=True)
class Prepared:
    """A data directory's prepare.json, written by `ctemp-alt-data prepare` once the directory is
    ready."""

    options: Dict[str, Any]  # the DataOptions it was prepared with, as options.json holds them
    pair: List[str]
    source: Dict[str, Any]  # the corpus it was read from (sources.py's describe())
    sizes: Dict[str, int]  # sentence pairs per split
    has_test: bool
    test_source: Optional[str] = None  # the test split's, or how it was carved (older files lack it)
    dropped: Dict[str, int]  # pairs with an empty or missing side, per split (--drop-incomplete)
    unassigned: int  # sentences in no split's URL list
    in_train: Optional[Dict[str, Dict[str, int]]] = None  # CorpusStats.in_train (older files lack it)
    remove_bpe: str  # fairseq's --remove-bpe for its subwords
    subsets: Dict[str, str]  # split -> fairseq subset
    bin: str  # the binarized data: "bin" in the file, the path in this directory once read
    raw: str  # the raw text: likewise

    def to_dict(self):
        return dataclasses.asdict(self)


@dataclass
class Settings:
    """An experiment's experiment.json: the settings its runs share, written by `ctemp-alt-sweep
    run` (every field, always: a file that lacks one is refused, not given a default)."""

    src: str
    tgt: str
    preset: str
    data: str  # the data directory: relative to the experiment directory in the file, absolute once loaded
    data_tag: str  # the data directory's name after <src>-<tgt>.
    subsets: List[str]  # "valid", and "test" where the data has one
    bleu_tokenize: str  # sacrebleu's tokenizer
    decode_args: List[str]  # fairseq-generate options of every decoding
    primary: List[float]  # [label smoothing, SEM weight] of the variants other than the transformer's
    interval: int  # validate and save every `interval` updates
    patience: int
    average: int  # the last checkpoints averaged
    max_update: Optional[int]
    eval_beam: int
    grid_beams: List[int]
    grid_lenpens: List[float]
    speed_beams: List[int]
    log_interval: int
    decode_batch: int

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d, path, error):
        """The settings in d (read from path); `error` naming the file and what it lacks."""
        complete(
            cls, d, path, "an experiment.json of this version; plan the sweep again in another --work", error
        )
        return cls(**known(cls, d))


@dataclass
class RunConfig:
    """A run's config.json: what `ctemp-alt-sweep run` planned it with."""

    name: str  # its directory's name
    variant: str
    seed: int
    temperature: float
    label_smoothing: float
    sem_weight: float
    train_args: List[str]  # fairseq-train's options but the data and the save directory

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d, path):
        """The config in d (read from path) with what sweeps before model variants did not record:
        the variant (the preset's transformer) and the seed (from its fairseq-train --seed)."""
        options = d.get("train_args", [])
        seed = int(options[options.index("--seed") + 1]) if "--seed" in options else 1
        d = {"variant": DEFAULT_VARIANT, "seed": seed, **d}
        complete(cls, d, path, "a config.json of ctemp-alt-sweep")
        return cls(**known(cls, d))


@dataclass
class TrainingSummary:
    """How a run's training went (train.json; from its fairseq log)."""

    num_updates: int
    stop_reason: str  # "early stop", "max update", "stop time" or "max epoch / other"
    patience: Optional[int]
    validations: int
    best_valid_bleu: Optional[float]
    best_valid_update: Optional[int]
    valid_bleu: List[List[float]]  # [update, dev BLEU] of each validation
    finished: Optional[str] = None  # when training ended (local time)
    last_session_seconds: Optional[float] = None  # of the process that finished it
    code: Optional[str] = None  # the commit it finished from (provenance.code_commit)
    torch: Optional[str] = None  # the torch version it finished with

    @classmethod
    def from_dict(cls, d):
        return cls(**known(cls, d))


@dataclass
class SystemRow:
    """What a run keeps of one decoding (a greedy_vs_beam.System)."""

    beam: int
    lenpen: float
    bleu: float
    chrf: float
    decode_seconds: float
    sentences_per_second: float
    decoding_temperature: Optional[float]

    @classmethod
    def of(cls, system):
        return cls(**{f.name: getattr(system, f.name) for f in dataclasses.fields(cls)})

    @classmethod
    def from_dict(cls, d):
        return cls(**known(cls, d))


@dataclass
class CalibrationRow:
    """What a run keeps of its calibration on a subset (ctemp-calibrate at its training T)."""

    nll: float
    ece: float
    decoding_temperature: Optional[float]


@dataclass
class SubsetEval:
    """A run's averaged checkpoint on one subset: greedy and beam, and its calibration."""

    greedy: SystemRow
    beam: SystemRow
    signature: str  # sacrebleu's BLEU signature
    n_sentences: Optional[int] = None
    calibration: Optional[CalibrationRow] = None

    @classmethod
    def from_dict(cls, d):
        d = known(cls, d)
        calibration = d.get("calibration")
        return cls(
            **{
                **d,
                "greedy": SystemRow.from_dict(d["greedy"]),
                "beam": SystemRow.from_dict(d["beam"]),
                "calibration": CalibrationRow(**known(CalibrationRow, calibration)) if calibration else None,
            }
        )


@dataclass
class RunResult:
    """A finished run (run.json), or, with no eval yet, one still training (ctemp-alt-results)."""

    name: str
    direction: str
    variant: str
    seed: int
    temperature: float
    label_smoothing: float
    sem_weight: float
    training: TrainingSummary
    averaged: List[str] = field(default_factory=list)  # the checkpoints averaged (file names)
    eval: Dict[str, SubsetEval] = field(default_factory=dict)  # "valid", and "test" where there is one
    has_test: Optional[bool] = None
    dir: Optional[str] = field(default=None, metadata={"json": False})  # where it is (not in run.json)

    def to_dict(self):
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "dir"}

    @classmethod
    def from_dict(cls, d, run_dir=None):
        """run.json's RunResult, in run_dir."""
        d = known(cls, d)
        return cls(
            **{
                **d,
                "training": TrainingSummary.from_dict(d["training"]),
                "eval": {subset: SubsetEval.from_dict(e) for subset, e in d.get("eval", {}).items()},
                "dir": run_dir,
            }
        )


@dataclass
class PairedScores:
    """One metric of a paired test: the baseline's score, the system's, and the p-value."""

    baseline: float
    system: float
    p_value: float


@dataclass
class PairedTest:
    """Paired bootstrap of two hypothesis files (greedy_vs_beam.compare_systems, sacrebleu)."""

    bleu: PairedScores
    chrf: PairedScores
    test: str  # "bs": bootstrap resampling
    n_samples: int
    identical: bool  # the two files are the same
    signatures: Dict[str, str]  # sacrebleu's, of BLEU and chrF

    @classmethod
    def from_dict(cls, d):
        d = known(cls, d)
        metrics = {m: PairedScores(**known(PairedScores, d[m])) for m in ("bleu", "chrf")}
        return cls(**{**d, **metrics})


@dataclass
class Decodings:
    """One model's greedy and beam decoding of the scored subset."""

    greedy: SystemRow
    beam: SystemRow

    @classmethod
    def from_dict(cls, d):
        return with_greedy_and_beam(cls, d)


@dataclass
class TunedSystem:
    """T = 1 or T_opt in final.json: greedy, and the beam and length penalty tuned on dev."""

    greedy: SystemRow
    beam: SystemRow
    temperature: float
    files: Dict[str, str]  # ref, greedy.hyp, beam.hyp
    grid: List[Dict[str, Any]]  # the dev grid, one system per setting
    signature: str  # sacrebleu's BLEU signature

    @classmethod
    def from_dict(cls, d):
        return with_greedy_and_beam(cls, d)


@dataclass
class Tempering:
    """T_opt against T = 1 in an experiment's primary (LS, SEM) group (final/final.json)."""

    direction: str
    experiment: str
    preset: str
    label_smoothing: float
    sem_weight: float
    t_opt: float
    t_opt_chosen_by: str
    dev_greedy_bleu: Dict[str, float]  # of each T
    scored_subset: str  # "test", or "valid" without a test split
    tuned_on: str
    systems: Dict[str, TunedSystem]  # "untempered" (T = 1), "tempered" (T_opt)
    # per system: temperature, greedy_seconds, beam<k>_seconds, greedy_seconds_with_beam<k>
    speed: Dict[str, Dict[str, float]]
    significance: Dict[str, PairedTest]  # greedy, beam, tempered_greedy_vs_untempered_beam

    @classmethod
    def from_dict(cls, d):
        return with_systems_and_tests(cls, d, TunedSystem)


@dataclass
class Comparison:
    """A model variant's run against its baseline variant's T = 1 run (final/compare-<run>.json)."""

    direction: str
    experiment: str
    variant: str
    temperature: float
    run: str
    baseline: str  # the baseline's run
    scored_subset: str
    systems: Dict[str, Decodings]  # "baseline", "variant"
    significance: Dict[str, PairedTest]  # greedy, beam
    baseline_variant: str = "transformer"  # (comparisons written before each variant had its own)

    @classmethod
    def from_dict(cls, d):
        return with_systems_and_tests(cls, d, Decodings)


@dataclass
class CalibrationSummary:
    """What posthoc.json keeps of a ctemp-calibrate measurement on one subset, at the temperature
    the system decodes at."""

    tokens: int
    decoding_temperature: float
    accuracy: float
    nll: float  # nats per token
    ece: float  # a fraction
    signature: str
    bins: List[Dict[str, Any]]  # the reliability bins


@dataclass
class PosthocSystem:
    """T = 1, T_opt or T = 1 decoded at t* in posthoc.json: its calibration on each subset; the
    post-hoc system also its greedy and tuned beam decodings."""

    temperature: float
    run: str
    calibration: Dict[str, CalibrationSummary]
    greedy: Optional[SystemRow] = None
    beam: Optional[SystemRow] = None
    grid: List[Dict[str, Any]] = field(default_factory=list)
    signature: Optional[str] = None  # sacrebleu's BLEU signature

    @classmethod
    def from_dict(cls, d):
        d = known(cls, d)
        calibration = {
            s: CalibrationSummary(**known(CalibrationSummary, c)) for s, c in d["calibration"].items()
        }
        rows = {k: SystemRow.from_dict(d[k]) for k in ("greedy", "beam") if d.get(k)}
        return cls(**{**d, "calibration": calibration, **rows})


@dataclass
class Posthoc:
    """The row T = 1 + post-hoc t* of Table 1 (final/posthoc.json): the T = 1 model decoded at the
    t* that minimises its dev NLL, against T = 1 and T_opt."""

    direction: str
    experiment: str
    scored_subset: str
    tuned_on: str
    t_opt: float
    t_star: float
    t_star_fitted_on: str
    checkpoint: str  # the copy that decodes at t*, relative to the experiment
    systems: Dict[str, PosthocSystem]  # "untempered", "tempered", "posthoc"
    significance: Dict[str, PairedTest]  # the post-hoc system against T = 1 and T_opt

    @classmethod
    def from_dict(cls, d):
        return with_systems_and_tests(cls, d, PosthocSystem)


@dataclass
class Experiment:
    """An experiment of a working directory as ctemp-alt-results loads it."""

    name: str
    dir: str
    exp: Settings  # its experiment.json
    runs: List[RunResult]  # finished
    pending: List[RunResult]  # still training: their training so far, no eval
    test: str = "test"  # what its tables call the test split ("carved test")
    in_train: Optional[str] = None  # its dev and test sentences also in train (overlap.in_train_line)
    final: Optional[Tempering] = None
    posthoc: Optional[Posthoc] = None
    compare: List[Comparison] = field(default_factory=list)


def with_greedy_and_beam(cls, d):
    """cls from d, whose "greedy" and "beam" are SystemRows."""
    d = known(cls, d)
    return cls(**{**d, "greedy": SystemRow.from_dict(d["greedy"]), "beam": SystemRow.from_dict(d["beam"])})


def with_systems_and_tests(cls, d, system):
    """cls from d, whose "systems" are `system` records and "significance" PairedTests."""
    d = known(cls, d)
    systems = {k: system.from_dict(v) for k, v in d["systems"].items()}
    tests = {k: PairedTest.from_dict(v) for k, v in d["significance"].items()}
    return cls(**{**d, "systems": systems, "significance": tests})


def complete(cls, d, path, what, error=AltError):
    """Refuses d (read from path) in one line when it lacks a field of cls that has no default:
    `what` the file should have been."""
    lacks = missing(cls, d)
    if lacks:
        raise error(f"{path} lacks {', '.join(lacks)}: not {what}")


def prepared(path):
    """The Prepared record of the data directory path (None if it is not prepared), with bin and raw
    in that directory, where prepare wrote them: a moved or copied work directory uses its own data,
    never the directory it was copied from (older prepare.json files store cwd-relative paths)."""
    path = os.path.normpath(path)
    file = os.path.join(path, "prepare.json")
    d = read_json(file)
    if d is None:
        return None
    complete(Prepared, d, file, "a prepare.json of `ctemp-alt-data prepare`")
    return dataclasses.replace(
        Prepared(**known(Prepared, d)), bin=os.path.join(path, "bin"), raw=os.path.join(path, "raw")
    )


@dataclass
class NotCalibrated:
    """A run's calibration.json where ctemp-calibrate could not measure the run: why (kept, so
    that it is not tried again)."""

    error: str


def read_calibration(path):
    """A run's calibration.json: ctemp-calibrate's Calibration, NotCalibrated, or None while
    there is none."""
    d = read_json(path)
    if d is None:
        return None
    if "error" in d:
        return NotCalibrated(d["error"])
    complete(Calibration, d, path, "a calibration JSON of ctemp-calibrate")
    return Calibration.from_dict(d)


def read_settings(exp_dir, error):
    """An experiment's experiment.json (Settings, "data" as written: relative to exp_dir), or None
    while there is none; `error` where it is not one."""
    path = os.path.join(exp_dir, "experiment.json")
    d = read_json(path)
    return None if d is None else Settings.from_dict(d, path, error)


def load_experiment(exp_dir):
    """An experiment's Settings with "data" resolved to the data directory of the work directory
    exp_dir is in (stored relative to exp_dir). Older files store it absolute: a moved or copied
    work directory would then train on the original's data, so that is refused."""
    exp = read_settings(exp_dir, RunFailed)
    if exp is None:
        raise RunFailed(f"{exp_dir} has no experiment.json: plan it with `ctemp-alt-sweep run` first")
    return dataclasses.replace(exp, data=check_data_location(exp_dir, exp, RunFailed))


def read_config(path):
    """A run's config.json (RunConfig), or None while there is none."""
    d = read_json(path)
    return None if d is None else RunConfig.from_dict(d, path)


def read_run(run_dir):
    """The RunResult of a run directory; None while it has no run.json."""
    path = os.path.join(run_dir, "run.json")
    d = read_json(path)
    if d is None:
        return None
    config = read_config(os.path.join(run_dir, "config.json"))  # fills what older run.json files lack
    filled = {**({"variant": config.variant, "seed": config.seed} if config else {}), **d}
    complete(RunResult, filled, path, "a run.json of ctemp-alt-sweep")
    return RunResult.from_dict(filled, run_dir)


def read_tempering(exp_dir):
    """An experiment's final/final.json (Tempering), or None while there is none."""
    path = os.path.join(exp_dir, "final", "final.json")
    d = read_json(path)
    if d is None:
        return None
    complete(Tempering, d, path, "a final.json of `ctemp-alt-sweep finalize`")
    return Tempering.from_dict(d)


def read_comparisons(exp_dir):
    """An experiment's final/compare-<run>.json (Comparison), by file name."""
    comparisons = []
    for path in sorted(glob.glob(os.path.join(exp_dir, "final", "compare-*.json"))):
        d = read_json(path)
        complete(Comparison, d, path, "a comparison of `ctemp-alt-sweep finalize`")
        comparisons.append(Comparison.from_dict(d))
    return comparisons
