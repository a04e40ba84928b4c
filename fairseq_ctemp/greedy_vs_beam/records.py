"""The records of ctemp-greedy-vs-beam: the Request, each decoding's System, the GreedyVsBeam
written to --json."""

import dataclasses
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence


@dataclass
class Request:
    """What ctemp-greedy-vs-beam decodes and writes (its options; the command's help says more)."""

    data: str  # fairseq-preprocess directory (several: a:b)
    checkpoint: str  # one checkpoint, or an ensemble a.pt:b.pt
    beam: int = 5
    subset: str = "test"
    extra_args: Sequence[str] = ()  # fairseq-generate options after --
    lenpen: float = 1.0
    ref: Optional[str] = None  # raw references of `subset` (default: the T- lines)
    temperature: Optional[float] = None  # decode at this T (default: the checkpoint's)
    tokenize: Optional[str] = None  # sacrebleu's (default 13a with --ref, else none)
    grid_beams: Optional[List[int]] = None  # with grid_lenpens: beam x lenpen tuned on dev
    grid_lenpens: Optional[List[float]] = None
    dev_subset: str = "valid"
    dev_ref: Optional[str] = None
    save_dir: Optional[str] = None  # hypotheses and references written here
    json_path: Optional[str] = None  # the GreedyVsBeam written here

    @property
    def grid(self):
        return bool(self.grid_beams or self.grid_lenpens)

    def grid_points(self):
        if not self.grid:
            return []
        return [(b, lp) for b in self.grid_beams or [self.beam] for lp in self.grid_lenpens or [self.lenpen]]


@dataclass
class System:
    """One decoding of a subset, scored."""

    beam: int
    lenpen: float
    bleu: float
    chrf: float
    n_sentences: int
    n_tokens: int
    decode_seconds: float  # the model's time, batching and post-processing left out
    sentences_per_second: float
    tokens_per_second: float
    wall_seconds: float  # the whole decoding
    decoding_temperature: Optional[float]  # None when the models of an ensemble differ
    decoding_temperatures: List[float]  # per model


@dataclass
class GreedyVsBeam:
    """The result of run_greedy_vs_beam, as written to --json."""

    data: str
    checkpoint: str
    subset: str
    n_sentences: int
    references: str  # the --ref path, or "T- lines"
    tokenize: str
    signatures: Dict[str, str]  # sacrebleu's, "bleu" and "chrf"
    systems: Dict[str, System]  # "greedy" and "beam"
    speedup: float  # greedy / beam sentences per second (decode time)
    speedup_wall: float  # beam / greedy wall time
    grid: List[System] = field(default_factory=list)  # on dev_subset; [] without a grid
    grid_best: Optional[Dict[str, float]] = None  # {"beam", "lenpen"}
    dev_subset: Optional[str] = None
    dev_tokenize: Optional[str] = None
    extra_args: List[str] = field(default_factory=list)
    files: Dict[str, str] = field(default_factory=dict)  # name -> path written

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d):
        """From a --json file (older files: every field of today's)."""
        return cls(
            **{
                **d,
                "systems": {name: System(**s) for name, s in d["systems"].items()},
                "grid": [System(**s) for s in d["grid"]],
            }
        )


@dataclass
class Decoded:
    """A decoding's hypotheses and references, in sentence order, with its scored System."""

    hyps: List[str]
    refs: List[Optional[str]]
    system: System
    signatures: Dict[str, str]
