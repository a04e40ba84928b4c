"""The typed records of a run of the ALT pipeline: what its train.json and run.json hold, one
definition each, written with their field names (dataclasses.asdict) and read back with from_dict
(files of older sweeps lack the fields added since: they get the defaults)."""

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from .common import read_config, read_json


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
                "greedy": SystemRow(**known(SystemRow, d["greedy"])),
                "beam": SystemRow(**known(SystemRow, d["beam"])),
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
    def from_dict(cls, d, run_dir=None, config=None):
        """run.json's RunResult; config (its config.json) fills what older run.json files lack."""
        d = {**{k: config[k] for k in ("variant", "seed") if config and k in config}, **known(cls, d)}
        return cls(
            **{
                **d,
                "training": TrainingSummary.from_dict(d["training"]),
                "eval": {subset: SubsetEval.from_dict(e) for subset, e in d.get("eval", {}).items()},
                "dir": run_dir,
            }
        )


def known(cls, d):
    """The entries of d that are fields of cls (files written by newer versions may hold more)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in d.items() if k in names}


def read_run(run_dir):
    """The RunResult of a run directory; None while it has no run.json."""
    d = read_json(os.path.join(run_dir, "run.json"))
    if d is None:
        return None
    return RunResult.from_dict(d, run_dir, read_config(os.path.join(run_dir, "config.json")))
