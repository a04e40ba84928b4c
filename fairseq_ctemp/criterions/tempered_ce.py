"""Softmax tempering for training (Saxena/Dabre et al., "Investigating Softmax Tempering for Training
NMT Models"): cross-entropy of softmax(logits / T), label-smoothed, optionally mixed with softmax
entropy maximisation (SEM), and multiplied by T.

    P      = softmax(D / T)
    L_X    = fairseq's label-smoothed NLL of P (gold 1 - eps, others eps / (V - 1))
    L_NSE  = sum_v P_v log P_v                         (negative entropy; minimising it maximises H(P))
    loss   = T * ((1 - w) * L_X + w * L_NSE)           (the factor T can be switched off)

At T = 1, w = 0 this is exactly fairseq's ``label_smoothed_cross_entropy`` (same ops, same order).
The temperature is stored in the checkpoint's criterion config, and ``fairseq_ctemp.decoding`` makes
every fairseq decoding path use it.
"""
import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from fairseq import metrics, utils
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
    label_smoothed_nll_loss,
)

from .. import decoding

# Rows per chunk for the no-grad diagnostics, so they never hold a second batch x vocab tensor.
_DIAGNOSTIC_CHUNK_ROWS = 2048


@dataclass
class TemperedCrossEntropyConfig(LabelSmoothedCrossEntropyCriterionConfig):
    softmax_temperature: float = field(
        default=1.0,
        metadata={"help": "T > 0: train on softmax(logits / T); checkpoints then decode at this T. "
                          "The paper's best values on ALT are 3-5"},
    )
    sem_weight: float = field(
        default=0.0,
        metadata={"help": "weight w in [0, 1] of softmax-entropy maximisation: "
                          "loss = T * ((1 - w) * label-smoothed CE + w * sum_v P_v log P_v)"},
    )
    no_temperature_rescale: bool = field(
        default=False,
        metadata={"help": "do not multiply the loss by T (ablation of the paper's Eq. 2 re-scaling)"},
    )


def tempered_label_smoothed_nll_loss(lprobs, target, epsilon, temperature, sem_weight=0.0,
                                     ignore_index=None, reduce=True, rescale=True):
    """Loss of the module docstring, from ``lprobs`` = log softmax(D / T) (already tempered).

    Returns (loss, nll_loss, neg_entropy); nll_loss = -log P_y of the tempered distribution and
    neg_entropy = sum_v P_v log P_v (None when ``sem_weight`` is 0: it is then not needed for the
    gradient). Padding positions (target == ignore_index) contribute 0 to all three.
    """
    loss, nll_loss = label_smoothed_nll_loss(lprobs, target, epsilon, ignore_index=ignore_index,
                                             reduce=reduce)
    neg_entropy = None
    if sem_weight > 0:
        neg_entropy = (lprobs.exp() * lprobs).sum(dim=-1, keepdim=True)
        if ignore_index is not None:
            neg_entropy = neg_entropy.masked_fill(target.unsqueeze(-1).eq(ignore_index), 0.0)
        else:
            neg_entropy = neg_entropy.squeeze(-1)
        if reduce:
            neg_entropy = neg_entropy.sum()
        loss = (1.0 - sem_weight) * loss + sem_weight * neg_entropy
    if rescale:
        loss = loss * temperature
    return loss, nll_loss, neg_entropy


def check_options(softmax_temperature, label_smoothing, sem_weight):
    """One clear error per bad option, raised when the criterion is built (before any step)."""
    if not (math.isfinite(softmax_temperature) and softmax_temperature > 0):
        raise ValueError(f"--softmax-temperature must be a finite number > 0, got {softmax_temperature}")
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"--label-smoothing must be in [0, 1), got {label_smoothing}")
    if not 0.0 <= sem_weight <= 1.0:
        raise ValueError(f"--sem-weight must be in [0, 1], got {sem_weight}")


@register_criterion("tempered_ce", dataclass=TemperedCrossEntropyConfig)
class TemperedCrossEntropyCriterion(LabelSmoothedCrossEntropyCriterion):
    def __init__(self, task, sentence_avg, label_smoothing, softmax_temperature=1.0, sem_weight=0.0,
                 no_temperature_rescale=False, ignore_prefix_size=0, report_accuracy=False):
        check_options(softmax_temperature, label_smoothing, sem_weight)
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size=ignore_prefix_size,
                         report_accuracy=report_accuracy)
        self.temperature = float(softmax_temperature)
        self.sem_weight = float(sem_weight)
        self.rescale = not no_temperature_rescale
        self._checked_model = False
        # --eval-bleu's generator was built with the model, before this criterion existed.
        decoding.use_training_temperature_for_validation(task, self.temperature)

    def forward(self, model, sample, reduce=True):
        if not self._checked_model:
            check_model_output(model)
            self._checked_model = True
        net_output = model(**sample["net_input"])
        loss, nll_loss, neg_entropy, lprobs, target = self._loss_and_lprobs(
            model, net_output, sample, reduce)
        sample_size = sample["target"].size(0) if self.sentence_avg else sample["ntokens"]
        logging_output = {
            "loss": loss.data,
            "nll_loss": nll_loss.data,
            "ntokens": sample["ntokens"],
            "nsentences": sample["target"].size(0),
            "sample_size": sample_size,
        }
        logging_output.update(self._diagnostics(net_output, lprobs, target))
        if self.report_accuracy:
            n_correct, total = self.compute_accuracy(model, net_output, sample)
            logging_output["n_correct"] = n_correct.data
            logging_output["total"] = total.data
        return loss, sample_size, logging_output

    def get_lprobs_and_target(self, model, net_output, sample):
        if self.temperature != 1.0:
            net_output = (net_output[0].float() / self.temperature, *net_output[1:])
        return super().get_lprobs_and_target(model, net_output, sample)

    def compute_loss(self, model, net_output, sample, reduce=True):
        loss, nll_loss, _, _, _ = self._loss_and_lprobs(model, net_output, sample, reduce)
        return loss, nll_loss

    def _loss_and_lprobs(self, model, net_output, sample, reduce):
        lprobs, target = self.get_lprobs_and_target(model, net_output, sample)
        loss, nll_loss, neg_entropy = tempered_label_smoothed_nll_loss(
            lprobs, target, self.eps, self.temperature, self.sem_weight,
            ignore_index=self.padding_idx, reduce=reduce, rescale=self.rescale)
        return loss, nll_loss, neg_entropy, lprobs, target

    @torch.no_grad()
    def _diagnostics(self, net_output, lprobs, target):
        """Sums over non-padding targets: entropy of the tempered P and of the untempered softmax(D),
        and -log softmax(D)_y (the paper's Figure 4 quantities), computed in fp32 row chunks."""
        logits = net_output[0]
        if self.ignore_prefix_size > 0:
            logits = logits[:, self.ignore_prefix_size:, :]
        logits = logits.reshape(-1, logits.size(-1))
        keep = target.ne(self.padding_idx).nonzero().squeeze(-1)
        stats = torch.zeros(3, dtype=torch.float32, device=logits.device)
        for rows in keep.split(_DIAGNOSTIC_CHUNK_ROWS):
            tempered = lprobs.index_select(0, rows).float()
            untempered = (tempered if self.temperature == 1.0
                          else F.log_softmax(logits.index_select(0, rows).float(), dim=-1))
            stats[0] -= (tempered.exp() * tempered).sum()
            stats[1] -= (untempered.exp() * untempered).sum()
            stats[2] -= untempered.gather(1, target.index_select(0, rows).unsqueeze(-1)).sum()
        return {"entropy": stats[0], "entropy_untempered": stats[1], "nll_loss_untempered": stats[2]}

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)
        ntokens = sum(log.get("ntokens", 0) for log in logging_outputs)
        if ntokens == 0:
            return
        # Base 2 like fairseq's loss / nll_loss, so ppl_untempered = 2 ** nll_loss_untempered.
        for key in ("nll_loss_untempered", "entropy", "entropy_untempered"):
            total = sum(log.get(key, 0) for log in logging_outputs)
            metrics.log_scalar(key, total / ntokens / math.log(2), ntokens, round=3)
        metrics.log_derived(
            "ppl_untempered", lambda meters: utils.get_perplexity(meters["nll_loss_untempered"].avg))


def check_model_output(model):
    """tempered_ce divides the logits returned in net_output[0]; an adaptive softmax returns features
    there and normalises them itself, so tempering would silently do the wrong thing."""
    decoder = getattr(model, "decoder", model)
    if getattr(decoder, "adaptive_softmax", None) is not None:
        raise ValueError(
            "--criterion tempered_ce needs a full softmax output layer; this model has an adaptive "
            "softmax (--adaptive-softmax-cutoff). Train without --adaptive-softmax-cutoff, or use "
            "the contextual-temperature LM heads of fairseq_ctemp for adaptive softmax."
        )
