"""``ct_cross_entropy``: the contextual-temperature LM loss (Wang et al., AAAI 2021, Eq. 8).

    loss = sum_t s_t * CE_t  (+ AR/TAR from the model, per target token)
    s_t  = mean_v tau_t(v)   the papers' "loss scaling" (--no-loss-scaling: s_t = 1)
    CE_t = -log p_t(y_t), or fairseq's label-smoothed cross-entropy with --label-smoothing

for models with a temperature head (ct_transformer, ct_transformer_lm, ct_lstm_lm). Logged: ``loss`` (what is
trained, scaled), ``nll_loss`` (the unscaled NLL of the normalised distribution; ``ppl`` is derived
from it and only from it), ``loss_scale`` (mean s_t), ``tau_mean`` / ``tau_min`` / ``tau_max``
(mean over positions of mean_v tau; smallest and largest tau computed, averaged over batches) and
``regularization`` (AR + TAR per token). All in base 2 like fairseq's losses. ``--loss-chunk-tokens
N`` computes the same loss and gradients on whole sequences of at most N target tokens at a time
(chunked_head_loss.py), so that no vocabulary-sized tensor of the whole batch is held.

The scale is a weight, not an objective: it is detached from the graph. The papers introduce it to
rebalance the cross-entropy's gradients against the regularisers' once temperatures shrink them
(as Hinton et al. multiply a distillation loss by T^2); differentiated, it would instead reward
any parameter that lowers mean_v(tau) whatever the fit: with --ct-learn-alpha-beta its gradient
dominates and drives alpha -> 0, beta -> infinity. So tau learns from the cross-entropy alone (and
perplexity never uses the scale). With fixed alpha, beta it is the constant (alpha + 1/V)/beta.
"""

import functools
import math
from dataclasses import dataclass, field

import torch
from fairseq import metrics, utils
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.dataclass import FairseqDataclass
from omegaconf import II

from ..errors import OptionError
from ..modules import AdaptiveSoftmaxHead
from . import checks
from .chunked_head_loss import HeadLossSums, chunked_head_loss
from .host_values import host_floats
from .smoothed_nll import label_smoothed_nll_loss_sum


@dataclass
class ContextualTemperatureCrossEntropyConfig(FairseqDataclass):
    label_smoothing: float = field(
        default=0.0,
        metadata={"help": "epsilon for label smoothing, 0 means none (not with --output-head adaptive)"},
    )
    no_loss_scaling: bool = field(
        default=False,
        metadata={"help": "train on the plain cross-entropy instead of mean_v(tau) * cross-entropy"},
    )
    loss_chunk_tokens: int = field(
        default=0,
        metadata={
            "help": "run the output head and the loss on whole sequences of at most N target tokens at "
            "a time (at least one sequence), taking their gradients during the forward pass, so that "
            "the batch x vocabulary logits and temperatures never exist at once; the same loss and "
            "gradients. 0: off. Not with --output-head adaptive, which never holds them"
        },
    )
    sentence_avg: bool = II("optimization.sentence_avg")


@register_criterion("ct_cross_entropy", dataclass=ContextualTemperatureCrossEntropyConfig)
class ContextualTemperatureCrossEntropy(FairseqCriterion):
    def __init__(
        self, task, label_smoothing=0.0, no_loss_scaling=False, loss_chunk_tokens=0, sentence_avg=False
    ):
        super().__init__(task)
        if not 0.0 <= label_smoothing < 1.0:
            raise OptionError(f"--label-smoothing must be in [0, 1), got {label_smoothing}")
        if int(loss_chunk_tokens) != loss_chunk_tokens or loss_chunk_tokens < 0:
            raise OptionError(
                f"--loss-chunk-tokens must be an integer >= 0 (0: off), got {loss_chunk_tokens}"
            )
        self.eps = float(label_smoothing)
        self.loss_scaling = not no_loss_scaling
        self.chunk = int(loss_chunk_tokens)
        self.sentence_avg = sentence_avg
        self._checked_model = False

    @classmethod
    def build_criterion(cls, cfg, task):
        model = checks.model_options(cfg)  # a degenerate fixed tau: refused now, not as ppl inf
        if checks.builds_temperature_head(model) is False:
            raise OptionError(NO_TEMPERATURE_HEAD)  # now, not in the first step (which leaves crash.pt)
        if checks.option(model, "ct_normalization") == "constant":
            checks.check_temperature("--ct-constant", checks.option(model, "ct_constant", 1.0))
        if checks.option(cfg, "loss_chunk_tokens") and checks.option(model, "output_head") == "adaptive":
            raise OptionError(CHUNKS_NEED_A_FULL_HEAD)
        return super().build_criterion(cfg, task)

    def forward(self, model, sample, reduce=True):
        if not self._checked_model:
            check_model(model, self.eps, self.chunk)
            self._checked_model = True
        net_output = model(**sample["net_input"])
        head = model.decoder.output_head
        target = model.get_targets(sample, net_output)
        keep = target.ne(self.padding_idx)
        if self.chunk:
            params = [p for p in model.parameters() if p.requires_grad]  # a tied embedding too
            rows = max(1, self.chunk // target.size(1))
            head_loss = functools.partial(self.head_loss, head)
            loss, sums = chunked_head_loss(head_loss, net_output[0], target, keep, params, rows)
        else:
            loss, sums = self.head_loss(head, net_output[0], target, keep)
        sample_size = sample["target"].size(0) if self.sentence_avg else sample["ntokens"]
        regularization = net_output[1].get("regularization") if isinstance(net_output[1], dict) else None
        if regularization is not None:
            loss = loss + regularization * sample["ntokens"]
        positions = keep.sum()
        logging_output = {
            "loss": loss.data,
            "nll_loss": sums.nll,
            "loss_scale": sums.scale,
            "tau_mean": sums.tau,
            "tau_min": sums.tau_min * positions,  # weighted by positions, averaged in reduce_metrics
            "tau_max": sums.tau_max * positions,
            "ntokens": sample["ntokens"],
            "nsentences": sample["target"].size(0),
            "sample_size": sample_size,
        }
        if regularization is not None:
            logging_output["regularization"] = regularization.data * sample["ntokens"]
        return loss, sample_size, logging_output

    def position_weights(self, tau):
        """s_t of the module docstring: the detached scale of each position's temperature, or 1
        (--no-loss-scaling)."""
        return tau.scale.detach() if self.loss_scaling else torch.ones_like(tau.scale)

    def head_loss(self, head, features, target, keep):
        """(sum_t s_t CE_t over the positions where keep, HeadLossSums) of the module docstring."""
        if self.eps > 0:  # fairseq's label smoothing, its backward in one pass (smoothed_nll.py)
            lprobs, tau = head(features)
            scale = self.position_weights(tau)
            loss, nll_sum = label_smoothed_nll_loss_sum(
                lprobs.view(-1, lprobs.size(-1)), target.reshape(-1), self.eps, self.padding_idx,
                weights=scale.reshape(-1),
            )  # fmt: skip
        else:
            target_lprobs, tau = head.score(features, target)
            scale = self.position_weights(tau)
            nll = -target_lprobs.masked_fill(~keep, 0.0)
            loss, nll_sum = (nll * scale.masked_fill(~keep, 0.0)).sum(), nll.sum()
        sums = HeadLossSums(
            nll_sum.detach(),
            (scale * keep).sum().detach(),
            (tau.scale.detach() * keep).sum(),
            tau.min.detach(),
            tau.max.detach(),
        )
        return loss, sums

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        values = host_floats([log.get(key, 0) for log in logging_outputs for key in LOGGED])

        def total(key):
            return sum(values[LOGGED.index(key) :: len(LOGGED)])

        ntokens, sample_size = total("ntokens"), total("sample_size")
        if ntokens == 0:
            return
        metrics.log_scalar("loss", total("loss") / sample_size / math.log(2), sample_size, round=3)
        metrics.log_scalar("nll_loss", total("nll_loss") / ntokens / math.log(2), ntokens, round=3)
        metrics.log_derived("ppl", lambda meters: utils.get_perplexity(meters["nll_loss"].avg))
        for key in ("loss_scale", "tau_mean", "tau_min", "tau_max"):
            metrics.log_scalar(key, total(key) / ntokens, ntokens, round=4)
        if any("regularization" in log for log in logging_outputs):
            metrics.log_scalar(
                "regularization", total("regularization") / ntokens / math.log(2), ntokens, round=4
            )

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True


# what forward logs (summed over workers in reduce_metrics); a missing key counts 0
LOGGED = (
    "ntokens",
    "sample_size",
    "loss",
    "nll_loss",
    "loss_scale",
    "tau_mean",
    "tau_min",
    "tau_max",
    "regularization",
)
NO_TEMPERATURE_HEAD = (
    "--criterion ct_cross_entropy needs a model with a temperature head: --arch ct_transformer* "
    "(translation), ct_transformer_lm*, ct_lstm_lm, *mos_lstm_lm* (see README)"
)


CHUNKS_NEED_A_FULL_HEAD = (
    "--loss-chunk-tokens needs a head with the full distribution (--output-head softmax or mos); "
    "the adaptive softmax never holds the batch x vocabulary logits: use --loss-chunk-tokens 0"
)


def check_model(model, label_smoothing, chunk=0):
    """A clear error on the first forward (before any update) for a model without a temperature
    head, or with one the options ask too much of, that ``build_criterion`` could not recognise
    from its options."""
    head = getattr(getattr(model, "decoder", None), "output_head", None)
    if head is None:
        raise OptionError(NO_TEMPERATURE_HEAD)
    if chunk and isinstance(head, AdaptiveSoftmaxHead):
        raise OptionError(CHUNKS_NEED_A_FULL_HEAD)
    if label_smoothing > 0 and isinstance(head, AdaptiveSoftmaxHead):
        raise OptionError(
            "--label-smoothing needs the full distribution at every position; it is "
            "not supported with --output-head adaptive (use --label-smoothing 0)"
        )
