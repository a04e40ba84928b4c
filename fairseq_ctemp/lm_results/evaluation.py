"""evaluate.sh's eval_<subset>[_checkpoint_last].json: one checkpoint's perplexity on a subset, as
examples/language_model/eval_checkpoint.py writes it and the results read it back."""

import dataclasses
import json
import os
from typing import Optional

from ..record_fields import known, missing
from . import ResultsError


@dataclasses.dataclass(kw_only=True)
class Evaluation:
    dataset: str
    subset: str
    checkpoint: str
    tokens_per_sample: int  # eval-lm's block
    context_window: int  # tokens of each block given as context, not scored
    evaluated_tokens: int  # scored, counted from the batches (lm_eval's guard)
    expected_tokens: int  # the subset's tokens + </s>: equal to evaluated_tokens, checked
    # the guards' counts (lm_eval.Perplexity); evaluations recorded before the guards lack them
    positions_checked: Optional[int] = None
    max_log_normalizer: Optional[float] = None  # nats
    tokens_not_finite: Optional[int] = None
    loss_base2: float
    ppl: float
    command: str  # the fairseq-eval-lm command line
    date: str  # UTC

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d):
        return cls(**known(cls, d))


def read_evaluation(path):
    """The Evaluation in path, or None where there is none; ResultsError naming the file where it
    is not one (not JSON, or a field without a default missing)."""
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        try:
            d = json.load(f)
        except json.JSONDecodeError as e:
            raise ResultsError(f"{path} is not valid JSON ({e})") from None
    lacks = missing(Evaluation, d if isinstance(d, dict) else {})
    if lacks:
        raise ResultsError(f"{path} lacks {', '.join(lacks)}: not an evaluation of evaluate.sh")
    return Evaluation.from_dict(d)
